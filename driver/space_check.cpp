// What `tessel check` learns about a space (tessel/space_check.hpp).
#include <tessel/space_check.hpp>

#include <tessel/backends.hpp>
#include <tessel/codec.hpp>
#include <tessel/random.hpp>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>

namespace tessel {
namespace {

/// JSON objects keep the order they are written in: "ok" first, parameters in order.
using json = nlohmann::ordered_json;

/// `first .. last` or `first .. last step s` when the values are evenly spaced.
std::string arithmetic_preview(const std::vector<std::int64_t>& v) {
  if (v.size() < 3) return {};
  const std::int64_t step = v[1] - v[0];
  for (std::size_t i = 2; i < v.size(); ++i)
    if (v[i] - v[i - 1] != step) return {};
  if (step == 1) return fmt::format("{} .. {}", v.front(), v.back());
  return fmt::format("{} .. {} step {}", v.front(), v.back(), step);
}

/// `pow2(first .. last)` when the values are consecutive powers of two.
std::string pow2_preview(const std::vector<std::int64_t>& v) {
  if (v.size() < 2 || v.front() <= 0) return {};
  for (std::size_t i = 1; i < v.size(); ++i)
    if (v[i] != v[i - 1] * 2) return {};
  if ((v.front() & (v.front() - 1)) != 0) return {};
  return fmt::format("pow2({} .. {})", v.front(), v.back());
}

/// `{a, b, c}`, or `{a, b, ..., z}` keeping the first max_items - 1 and the last.
std::string set_preview(const domain& dom, std::size_t max_items) {
  const std::size_t n = dom.size();
  std::string out = "{";
  const bool elide = n > max_items && max_items >= 2;
  const std::size_t head = elide ? max_items - 1 : n;
  for (std::size_t i = 0; i < head; ++i) {
    if (i > 0) out += ", ";
    out += dom.label(i);
  }
  if (elide) out += ", ..., " + dom.label(n - 1);
  return out + "}";
}

json parameter_json(const parameter& p) {
  return {{"name", p.name},
          {"kind", to_string(p.dom.kind)},
          {"size", p.dom.size()},
          {"domain", domain_preview(p.dom)},
          {"values", domain_values_json(p.dom, max_check_values)},
          {"values_truncated", p.dom.size() > max_check_values},
          {"conditional", static_cast<bool>(p.when)},
          {"default",
           p.default_index ? json(codec::value_json(p.dom, *p.default_index)) : json(nullptr)},
          {"line", p.line}};
}

json constants_json(const space::definition& def) {
  json constants = json::object();
  for (const auto& c : def.constants) {
    if (c.type == value_type::integer)
      constants[c.name] = c.value;
    else if (c.type == value_type::boolean)
      constants[c.name] = c.value != 0;
    else
      constants[c.name] = constant_text(def, c);
  }
  return constants;
}

json groups_json(const space& s) {
  json groups = json::array();
  for (const auto& g : s.groups()) {
    json names = json::array();
    for (auto p : g.parameters) names.push_back(parameter_name(s, p));
    groups.push_back({{"parameters", std::move(names)}, {"valid", g.valid}, {"nodes", g.nodes}});
  }
  return groups;
}

json constraints_json(const space& s) {
  json constraints = json::array();
  const auto& stats = s.constraint_stats();
  for (std::size_t i = 0; i < s.def().constraints.size(); ++i) {
    const auto& c = s.def().constraints[i];
    json entry = {{"text", c.text}, {"message", c.message}, {"line", c.line}};
    if (i < stats.size()) {
      entry["attached_to"] = parameter_name(s, stats[i].attached_to);
      entry["rejected"] = stats[i].rejected;
    }
    constraints.push_back(std::move(entry));
  }
  return constraints;
}

}  // namespace

double valid_fraction(const space& s) {
  if (s.count() == 0) return 0.0;
  if (auto raw = s.cartesian_size(); raw && *raw > 0)
    return static_cast<double>(s.count()) / static_cast<double>(*raw);
  return std::pow(10.0, std::log10(static_cast<double>(s.count())) - s.log10_cartesian_size());
}

double raw_fraction(const space& s, std::uint64_t rejected) {
  if (rejected == 0) return 0.0;
  return std::pow(10.0, std::log10(static_cast<double>(rejected)) - s.log10_cartesian_size());
}

std::string parameter_name(const space& s, std::size_t index) {
  return index < s.size() ? s.parameters()[index].name : fmt::format("#{}", index);
}

std::string constant_text(const space::definition& def, const constant& c) {
  if (c.type == value_type::symbol && c.value >= 0 &&
      static_cast<std::size_t>(c.value) < def.symbols.size())
    return def.symbols[static_cast<std::size_t>(c.value)];
  if (c.type == value_type::boolean) return c.value != 0 ? "true" : "false";
  return std::to_string(c.value);
}

std::string domain_preview(const domain& dom, std::size_t max_items) {
  if (dom.kind == param_kind::permutation)
    return fmt::format("perm({})", fmt::join(dom.labels, ", "));
  if (dom.kind == param_kind::integer) {
    if (dom.log_scale) {
      if (auto p = pow2_preview(dom.values); !p.empty()) return p;
    }
    if (auto a = arithmetic_preview(dom.values); !a.empty()) return a;
  }
  return set_preview(dom, max_items);
}

nlohmann::json domain_values_json(const domain& dom, std::size_t max_values) {
  auto values = nlohmann::json::array();
  for (std::size_t i = 0; i < std::min(dom.size(), max_values); ++i)
    values.push_back(codec::value_json(dom, i));
  return values;
}

std::vector<config> draw_samples(const space& s, std::size_t count, std::uint64_t seed) {
  rng random(seed);
  std::vector<config> samples;
  samples.reserve(count);
  for (std::size_t i = 0; i < count; ++i) samples.push_back(s.sample(random));
  return samples;
}

json sample_json(const space& s, const config& c) {
  const auto values = json::parse(s.to_json(c));
  json ordered = json::object();
  for (const auto& p : s.parameters()) {
    const auto it = values.find(p.name);
    ordered[p.name] = it == values.end() ? json(nullptr) : *it;
  }
  return ordered;
}

backend_review review_backend(const space& s, const std::string& spec,
                              const settings_map& settings) {
  const auto b = make_backend(spec, settings);
  b->prepare(s);
  return {b->name(), b->notes(s)};
}

json check_json(const loaded_space& loaded, const check_request& request) {
  const space& s = loaded.space;
  json parameters = json::array();
  for (const auto& p : s.parameters()) parameters.push_back(parameter_json(p));
  json samples = json::array();
  for (const auto& c : draw_samples(s, request.samples, request.seed))
    samples.push_back(sample_json(s, c));
  const auto raw = s.cartesian_size();
  json out = {
      {"ok", true},
      {"file", request.file},
      {"space", s.name()},
      {"spaces", loaded.space_names},
      {"target", s.def().target.name},
      {"target_base", s.def().target.base},
      {"constants", constants_json(s.def())},
      {"parameters", std::move(parameters)},
      {"cartesian_size", raw ? json(*raw) : json(nullptr)},
      {"log10_cartesian_size", s.log10_cartesian_size()},
      {"valid", s.count()},
      {"valid_fraction", valid_fraction(s)},
      {"construction_ms",
       {{"parse_check", loaded.parse_ms},
        {"engine", loaded.build_ms},
        {"total", loaded.parse_ms + loaded.build_ms}}},
      {"groups", groups_json(s)},
      {"constraints", constraints_json(s)},
      {"seed", request.seed},
      {"samples", std::move(samples)},
  };
  if (request.backend)
    out["backend"] = {{"name", request.backend->name}, {"notes", request.backend->notes}};
  return out;
}

}  // namespace tessel
