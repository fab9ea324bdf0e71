// codec.cpp: the JSON forms of tessel's values (tessel/codec.hpp).
#include <tessel/codec.hpp>
#include <tessel/error.hpp>
#include <tessel/space.hpp>
#include <tessel/study.hpp>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <array>
#include <cmath>
#include <utility>

namespace tessel {
namespace {

using json = nlohmann::json;

constexpr std::array<std::pair<trial_state, std::string_view>, 3> state_names{{
    {trial_state::proposed, "proposed"},
    {trial_state::running, "running"},
    {trial_state::finished, "finished"},
}};

/// A number, or null when it is not finite (JSON has no NaN or infinity).
json number(double v) { return std::isfinite(v) ? json(v) : json(nullptr); }

json cost_json(const cost& c) {
  return {{"compile_s", c.compile_s}, {"gate_s", c.gate_s}, {"run_s", c.run_s}};
}

/// Field `name` of `object` as a number, if present (null counts as absent).
std::optional<double> number_field(const json& object, const char* name, const char* where) {
  const auto it = object.find(name);
  if (it == object.end() || it->is_null()) return std::nullopt;
  if (!it->is_number()) throw error(fmt::format("'{}{}' must be a number", where, name));
  return it->get<double>();
}

}  // namespace

std::string_view to_string(trial_state s) noexcept {
  for (const auto& [value, name] : state_names)
    if (value == s) return name;
  return "?";
}

std::optional<trial_state> parse_trial_state(std::string_view name) noexcept {
  for (const auto& [value, text] : state_names)
    if (text == name) return value;
  return std::nullopt;
}

std::string_view to_string(prediction::basis b) noexcept {
  return b == prediction::basis::model ? "model" : "prior";
}

std::string_view to_string(param_kind k) noexcept {
  switch (k) {
    case param_kind::integer: return "integer";
    case param_kind::symbol: return "symbol";
    case param_kind::boolean: return "boolean";
    case param_kind::permutation: return "permutation";
  }
  return "?";
}

namespace codec {

json value_json(const domain& d, std::size_t index) {
  switch (d.kind) {
    case param_kind::integer: return d.values[index];
    case param_kind::boolean: return d.values[index] != 0;
    case param_kind::symbol: return d.labels[index];
    case param_kind::permutation: {
      json order = json::array();
      for (auto e : d.permutation(index)) order.push_back(d.labels[e]);
      return order;
    }
  }
  return nullptr;
}

json config_json(const space& s, const config& c) { return json::parse(s.to_json(c)); }

json to_json(const measurement& m) {
  json metrics = json::object();
  for (const auto& [name, v] : m.metrics) metrics[name] = number(v);
  json samples = json::array();
  for (double v : m.samples) samples.push_back(number(v));
  return {
      {"status", to_string(m.status)}, {"objective", m.ok() ? number(m.objective) : json(nullptr)},
      {"samples", std::move(samples)}, {"cost", cost_json(m.cost)},
      {"metrics", std::move(metrics)}, {"message", m.message}};
}

json to_json(const prediction& p) {
  return {{"basis", to_string(p.from)},
          {"mean", number(p.mean)},
          {"sigma", number(p.sigma)},
          {"p_feasible", number(p.p_feasible)},
          {"expected_gain", number(p.expected_gain)},
          {"cost_s", number(p.cost_s)},
          {"tokens", p.tokens},
          {"utility", number(p.utility)}};
}

std::string reason_of(const trial& t) {
  std::string why = t.provenance.source == "baseline"
                        ? std::string("the space's default config, measured first as the baseline")
                        : fmt::format("proposed by {}", t.provenance.source);
  if (!t.provenance.note.empty() && t.provenance.source != "baseline")
    why += fmt::format(" ({})", t.provenance.note);
  if (!t.prediction) return why;
  if (t.prediction->from == prediction::basis::model)
    return why + fmt::format(
                     "; ranked by the model: expected gain {:.3g}, cost {:.3g} s, "
                     "utility {:.3g}",
                     t.prediction->expected_gain, t.prediction->cost_s, t.prediction->utility);
  return why + "; no model is fitted yet, so proposals go in order and the prediction is the prior";
}

json to_json(const space& s, const trial& t) {
  json out = {{"trial_id", t.id},
              {"key", fmt::format("{:016x}", t.key)},
              {"config", config_json(s, t.config)},
              {"source", t.provenance.source},
              {"tokens", t.provenance.tokens},
              {"note", t.provenance.note},
              {"state", to_string(t.state)},
              {"proposed_at", t.proposed_at}};
  if (t.state == trial_state::finished) {
    out["finished_at"] = t.finished_at;
    out["reported"] = t.reported;
    const json result = to_json(t.result);
    for (const auto& [key, value] : result.items()) out[key] = value;
  } else {
    out["reason"] = reason_of(t);
  }
  if (t.prediction) out["prediction"] = to_json(*t.prediction);
  return out;
}

json counts_json(const std::map<status, std::size_t>& by_status) {
  json out = json::object();
  for (const auto& [st, n] : by_status) out[std::string(to_string(st))] = n;
  return out;
}

json to_json(const summary& sum, const space& s) {
  json tokens_by_source = json::object();
  for (const auto& [source, spent] : sum.tokens_by_source)
    tokens_by_source[source] = {{"tokens", spent.first}, {"proposals", spent.second}};
  return {{"termination", to_string(sum.reason)},
          {"message", sum.message},
          {"evaluations", sum.evaluations},
          {"evaluations_to_best", sum.evaluations_to_best},
          {"by_status", counts_json(sum.by_status)},
          {"seed", sum.seed},
          {"space", sum.space_name},
          {"backend", sum.backend_name},
          {"strategy", sum.strategy_name},
          {"jobs", {{"given", sum.jobs_given}, {"used", sum.jobs_used}}},
          {"wall_s", sum.wall_s},
          {"propose_s", sum.propose_s},
          {"evaluate_s", sum.evaluate_s},
          {"overhead_s", sum.overhead_s},
          {"cost_s", sum.cost_s},
          {"tokens", sum.tokens},
          {"tokens_by_source", std::move(tokens_by_source)},
          {"reported", sum.reported},
          {"verified", sum.verified},
          {"best_objective", sum.best ? number(sum.best->result.objective) : json(nullptr)},
          {"best", sum.best ? to_json(s, *sum.best) : json(nullptr)}};
}

std::string status_names() {
  std::string out;
  for (const auto st : all_statuses())
    out += (out.empty() ? "" : ", ") + std::string(to_string(st));
  return out;
}

measurement_report read_measurement(const json& j) {
  measurement_report r;
  if (j.is_number()) {
    r.objective = j.get<double>();
    return r;
  }
  if (!j.is_object()) throw error("a result is a JSON object (or a number: the objective)");
  if (const auto it = j.find("status"); it != j.end() && !it->is_null()) {
    if (!it->is_string()) throw error("'status' must be a string");
    r.status = parse_status(it->get<std::string>());
    if (!r.status)
      throw error(
          fmt::format("unknown status '{}' (one of {})", it->get<std::string>(), status_names()));
  }
  r.objective = number_field(j, "objective", "");
  if (!r.objective) r.objective = number_field(j, "time", "");
  if (const auto it = j.find("samples"); it != j.end() && !it->is_null()) {
    if (!it->is_array()) throw error("'samples' must be an array of numbers");
    for (const auto& v : *it) {
      if (!v.is_number()) throw error("'samples' must be an array of numbers");
      r.samples.push_back(v.get<double>());
    }
  }
  if (const auto it = j.find("message"); it != j.end() && !it->is_null())
    r.message = it->is_string() ? it->get<std::string>()
                                : it->dump(-1, ' ', false, json::error_handler_t::replace);
  if (const auto it = j.find("cost"); it != j.end() && !it->is_null()) {
    if (!it->is_object()) throw error("'cost' must be an object {compile_s, gate_s, run_s}");
    for (auto [name, slot] : {std::pair{"compile_s", &r.compile_s}, std::pair{"gate_s", &r.gate_s},
                              std::pair{"run_s", &r.run_s}}) {
      *slot = number_field(*it, name, "cost.");
      if (*slot && !(**slot >= 0 && std::isfinite(**slot)))
        throw error(fmt::format("'cost.{}' must be a number >= 0", name));
    }
  }
  if (const auto it = j.find("metrics"); it != j.end() && !it->is_null()) {
    if (!it->is_object()) throw error("'metrics' must be an object of numbers");
    for (const auto& [key, v] : it->items()) {
      if (v.is_number())
        r.metrics[key] = v.get<double>();
      else if (v.is_boolean())
        r.metrics[key] = v.get<bool>() ? 1.0 : 0.0;
      else
        throw error(fmt::format("metric '{}' must be a number", key));
    }
  }
  return r;
}

}  // namespace codec
}  // namespace tessel
