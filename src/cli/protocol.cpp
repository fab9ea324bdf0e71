#include "protocol.hpp"

#include <tessel/error.hpp>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <functional>
#include <limits>
#include <map>

namespace tessel::cli {
namespace {

using json = nlohmann::json;

json trial_json(const space& s, const trial& t) {
  json out = {{"trial_id", t.id},
              {"config", json::parse(s.to_json(t.config))},
              {"source", t.provenance.source},
              {"tokens", t.provenance.tokens}};
  out["state"] = t.state == trial_state::finished  ? "finished"
                 : t.state == trial_state::running ? "running"
                                                   : "proposed";
  if (t.state == trial_state::finished) {
    out["status"] = to_string(t.result.status);
    out["objective"] = t.result.ok() ? json(t.result.objective) : json(nullptr);
    out["cost"] = {{"compile_s", t.result.cost.compile_s},
                   {"gate_s", t.result.cost.gate_s},
                   {"run_s", t.result.cost.run_s}};
    if (!t.result.message.empty()) out["message"] = t.result.message;
    if (!t.result.metrics.empty()) out["metrics"] = t.result.metrics;
  }
  if (t.prediction) {
    const auto& p = *t.prediction;
    out["prediction"] = {{"mean", p.mean},
                         {"sigma", p.sigma},
                         {"p_feasible", p.p_feasible},
                         {"expected_gain", p.expected_gain},
                         {"cost_s", p.cost_s},
                         {"utility", p.utility}};
  }
  return out;
}

/// The one-line answer: user text in it (messages, constraint texts, an
/// echoed bad byte) may be invalid UTF-8; it is replaced, never thrown.
std::string one_line(const json& answer) {
  return answer.dump(-1, ' ', false, json::error_handler_t::replace);
}

/// Field `name` of `req` as a whole number in [low, high], or `fallback` when
/// absent. 1.5, -1, "7" and 1e400 are errors, not 1, 2^64-1, 7 or a crash.
std::uint64_t whole_number(const json& req, const char* name, std::uint64_t fallback,
                           std::uint64_t low, std::uint64_t high) {
  if (!req.contains(name)) return fallback;
  const auto& v = req[name];
  std::uint64_t n = 0;
  if (v.is_number_unsigned()) {
    n = v.get<std::uint64_t>();
  } else if (v.is_number_float() && std::trunc(v.get<double>()) == v.get<double>() &&
             v.get<double>() >= 0 && v.get<double>() < 1e18) {
    n = static_cast<std::uint64_t>(v.get<double>());  // 2.0 is 2
  } else {
    throw error(fmt::format("\"{}\" must be a whole number from {} to {}, not {}", name, low, high,
                            one_line(v)));
  }
  if (n < low || n > high)
    throw error(fmt::format("\"{}\" must be from {} to {}, not {}", name, low, high, n));
  return n;
}

/// Field `name` of `obj` as a finite number >= 0 (seconds, tokens), or 0 when absent.
double non_negative(const json& obj, const char* name) {
  if (!obj.contains(name)) return 0.0;
  const auto& v = obj[name];
  if (!v.is_number() || !(v.get<double>() >= 0) || !std::isfinite(v.get<double>()))
    throw error(fmt::format("\"{}\" must be a number >= 0, not {}", name, one_line(v)));
  return v.get<double>();
}

measurement measurement_from(const json& req) {
  measurement m;
  const auto name = req.value("status", std::string("ok"));
  const auto st = parse_status(name);
  if (!st)
    throw error(
        fmt::format("unknown status '{}' (one of ok, invalid, compile_error, runtime_error, "
                    "timeout, incorrect, suspicious)",
                    name));
  m.status = *st;
  if (m.ok()) {
    if (!req.contains("objective") || !req["objective"].is_number())
      throw error("tell with status ok needs a numeric \"objective\"");
    m.objective = req["objective"].get<double>();
  }
  m.message = req.value("message", std::string());
  if (req.contains("samples")) m.samples = req["samples"].get<std::vector<double>>();
  if (req.contains("cost")) {
    const auto& c = req["cost"];
    if (!c.is_object()) throw error(R"("cost" must be an object {"compile_s", "gate_s", "run_s"})");
    m.cost.compile_s = non_negative(c, "compile_s");
    m.cost.gate_s = non_negative(c, "gate_s");
    m.cost.run_s = non_negative(c, "run_s");
  }
  if (req.contains("metrics")) m.metrics = req["metrics"].get<std::map<std::string, double>>();
  return m;
}

provenance provenance_from(const json& req, std::string fallback) {
  return {req.value("source", std::move(fallback)), non_negative(req, "tokens"),
          req.value("note", std::string())};
}

json summary_json(const summary& s) {
  json by_status = json::object();
  for (const auto& [st, n] : s.by_status) by_status[std::string(to_string(st))] = n;
  return {{"evaluations", s.evaluations},
          {"by_status", by_status},
          {"evaluations_to_best", s.evaluations_to_best},
          {"best_objective", s.best ? json(s.best->result.objective) : json(nullptr)},
          {"best_config", s.best_config_text},
          {"seed", s.seed},
          {"cost_s", s.cost_s}};
}

}  // namespace

std::string protocol::handle(std::string_view line) {
  try {
    return answer(line);
  } catch (const std::exception& e) {  // e.g. bad_alloc: still one line, and the session goes on
    return one_line({{"ok", false}, {"error", fmt::format("internal error: {}", e.what())}});
  }
}

std::string protocol::answer(std::string_view line) {
  json response = {{"ok", true}};
  json req;
  bool too_deep = false;
  try {
    req = json::parse(line, [&](int depth, json::parse_event_t, json&) {
      too_deep = too_deep || depth > max_depth;
      return !too_deep;
    });
  } catch (const json::exception& e) {  // a syntax error, bad UTF-8, a number overflow
    return one_line({{"ok", false}, {"error", fmt::format("not a JSON object: {}", e.what())}});
  }
  if (too_deep)
    return one_line({{"ok", false},
                     {"error", fmt::format("a request nests at most {} levels deep", max_depth)}});
  if (req.is_object() && req.contains("id")) response["id"] = req["id"];
  try {
    if (!req.is_object() || !req.contains("op") || !req["op"].is_string())
      throw error(
          R"(each request is a JSON object with an "op": ask, tell, enqueue, evaluate, run, best, trials, summary, space or quit)");
    const auto op = req["op"].get<std::string>();
    const auto& s = study_.space();
    if (op == "ask") {
      json out = json::array();
      for (const auto& sug : study_.ask(whole_number(req, "n", 1, 0, max_ask)))
        out.push_back(trial_json(s, study_.trials().at(sug.trial_id - 1)));
      response["suggestions"] = out;
    } else if (op == "tell") {
      if (!req.contains("trial_id")) throw error("tell needs \"trial_id\"");
      const auto id =
          whole_number(req, "trial_id", 0, 1, std::numeric_limits<std::uint64_t>::max());
      const auto& t = study_.tell(id, measurement_from(req));
      response["trial"] = trial_json(s, t);
      response["best"] = study_.best() ? trial_json(s, *study_.best()) : json(nullptr);
    } else if (op == "enqueue") {
      if (!req.contains("config")) throw error("enqueue needs \"config\"");
      const auto id =
          study_.enqueue(s.from_json(req["config"].dump()), provenance_from(req, "agent"));
      response["trial_id"] = id ? json(*id) : json(nullptr);
      response["duplicate"] = !id.has_value();
    } else if (op == "evaluate") {
      if (!evaluates_)
        throw error(
            "this session has no backend: evaluate the config yourself and use enqueue, ask and "
            "tell");
      if (!req.contains("config")) throw error("evaluate needs \"config\"");
      response["trial"] = trial_json(
          s, study_.evaluate(s.from_json(req["config"].dump()), provenance_from(req, "agent")));
    } else if (op == "run") {
      if (!evaluates_)
        throw error("this session has no backend: run needs one (tessel serve ... --backend SPEC)");
      const auto n = whole_number(req, "evaluations", 1, 0, max_run);
      const auto sum = study_.run(stop::evaluations(study_.current_summary().evaluations + n));
      response["summary"] = summary_json(sum);
    } else if (op == "best") {
      response["best"] = study_.best() ? trial_json(s, *study_.best()) : json(nullptr);
    } else if (op == "trials") {
      json out = json::array();
      for (const auto& t : study_.trials()) out.push_back(trial_json(s, t));
      response["trials"] = out;
    } else if (op == "summary") {
      const auto sum = study_.current_summary();
      response["summary"] = summary_json(sum);
      response["report"] = sum.full_report();
    } else if (op == "space") {
      json params = json::array();
      for (const auto& p : s.parameters()) {
        json values = json::array();
        for (std::size_t i = 0; i < p.dom.size(); ++i) values.push_back(p.dom.label(i));
        params.push_back(
            {{"name", p.name}, {"values", values}, {"conditional", static_cast<bool>(p.when)}});
      }
      json constraints = json::array();
      for (const auto& c : s.def().constraints)
        constraints.push_back({{"text", c.text}, {"message", c.message}});
      response["space"] = {{"name", s.name()},
                           {"parameters", params},
                           {"constraints", constraints},
                           {"valid_configs", s.count()}};
    } else if (op == "quit") {
      done_ = true;
    } else {
      throw error(
          fmt::format("unknown op '{}': use ask, tell, enqueue, evaluate, run, best, trials, "
                      "summary, space or quit",
                      op));
    }
  } catch (const std::exception& e) {
    response["ok"] = false;
    response["error"] = e.what();
    response.erase("suggestions");
  }
  return one_line(response);
}

}  // namespace tessel::cli
