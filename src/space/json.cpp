// Config <-> JSON: {"tile_m": 512, "order": ["k", "m", "n"], "evict": "vector"}.
#include "space/impl.hpp"

#include <tessel/codec.hpp>
#include <tessel/error.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdint>
#include <string>

namespace tessel {
namespace {

using json = nlohmann::json;

json to_json_value(const parameter& p, config::index_type index) {
  return index == config::inactive ? json(nullptr) : codec::value_json(p.dom, index);
}

/// How deep a config's JSON may nest (a permutation is one level below the
/// object): deeper input is refused before anything recursive touches it.
constexpr int max_config_depth = 16;

[[noreturn]] void bad_value(const parameter& p, const json& v, const std::string& expected) {
  auto shown = v.dump(-1, ' ', false, json::error_handler_t::replace);
  if (shown.size() > 200) shown = shown.substr(0, 200) + "...";
  throw error("parameter '" + p.name + "': " + shown + " is not " + expected);
}

std::string domain_preview(const domain& d) {
  std::string text;
  const auto shown = std::min<std::size_t>(d.size(), 8);
  for (std::size_t i = 0; i < shown; ++i) text += (i ? ", " : "") + d.label(i);
  if (shown < d.size()) text += ", ... (" + std::to_string(d.size()) + " values)";
  return "one of {" + text + "}";
}

config::index_type from_json_value(const parameter& p, const json& v) {
  const auto& d = p.dom;
  if (v.is_null()) {
    if (!p.when) bad_value(p, v, "allowed: the parameter is not conditional");
    return config::inactive;
  }
  auto find = [&](std::int64_t value) -> config::index_type {
    const auto it = std::find(d.values.begin(), d.values.end(), value);
    if (it == d.values.end()) bad_value(p, v, domain_preview(d));
    return static_cast<config::index_type>(it - d.values.begin());
  };
  switch (d.kind) {
    case param_kind::integer:
      if (!v.is_number_integer() ||
          (v.is_number_unsigned() && v.get<std::uint64_t>() > std::uint64_t{INT64_MAX}))
        bad_value(p, v, "an integer, " + domain_preview(d));
      return find(v.get<std::int64_t>());
    case param_kind::boolean:
      if (!v.is_boolean()) bad_value(p, v, "true or false");
      return v.get<bool>() ? 1 : 0;
    case param_kind::symbol: {
      if (!v.is_string()) bad_value(p, v, "a symbol, " + domain_preview(d));
      const auto it = std::find(d.labels.begin(), d.labels.end(), v.get<std::string>());
      if (it == d.labels.end()) bad_value(p, v, domain_preview(d));
      return static_cast<config::index_type>(it - d.labels.begin());
    }
    case param_kind::permutation: {
      for (config::index_type r = 0; r < d.size(); ++r)
        if (v == to_json_value(p, r)) return r;
      bad_value(p, v, "an order of " + domain_preview(d).substr(7));
    }
  }
  bad_value(p, v, "a value of its domain");
}

}  // namespace

std::string space::to_json(const config& c) const {
  json out = json::object();
  for (std::size_t p = 0; p < size(); ++p)
    out[parameters()[p].name] = to_json_value(parameters()[p], c[p]);
  return out.dump();
}

namespace {

/// `text` as a JSON object whose keys are all parameters of `s`.
json parse_config_object(const space& s, std::string_view text) {
  json in;
  bool too_deep = false;
  try {
    in = json::parse(text, [&](int depth, json::parse_event_t, json&) {
      too_deep = too_deep || depth > max_config_depth;
      return !too_deep;
    });
  } catch (const json::exception& e) {  // a syntax error, bad UTF-8, a number overflow
    throw error(std::string("config is not valid JSON: ") + e.what());
  }
  if (too_deep)
    throw error("config nests more than " + std::to_string(max_config_depth) + " levels deep");
  if (!in.is_object()) throw error("config must be a JSON object of parameter names to values");
  for (const auto& [name, v] : in.items())
    if (!s.parameter_index(name)) {
      std::string known;
      for (const auto& p : s.parameters()) known += (known.empty() ? "" : ", ") + p.name;
      throw error("unknown parameter '" + name + "' (the space has: " + known + ")");
    }
  return in;
}

}  // namespace

config space::from_partial_json(std::string_view text) const {
  const json in = parse_config_object(*this, text);
  config c(std::vector<config::index_type>(size(), 0));
  for (std::size_t p = 0; p < size(); ++p) {
    const auto& param = parameters()[p];
    const auto it = in.find(param.name);
    c[p] = it != in.end() ? from_json_value(param, *it)
                          : static_cast<config::index_type>(param.default_index.value_or(0));
  }
  // A conditional parameter left out follows its condition, in declaration order.
  for (std::size_t p = 0; p < size(); ++p) {
    if (!impl_->whens[p] || in.contains(parameters()[p].name)) continue;
    if (!impl_->active(p, impl_->values_of(c).data())) c[p] = config::inactive;
  }
  return c;
}

config space::from_json(std::string_view text) const {
  const json in = parse_config_object(*this, text);
  config c(std::vector<config::index_type>(size(), 0));
  for (std::size_t p = 0; p < size(); ++p) {
    const auto& param = parameters()[p];
    const auto it = in.find(param.name);
    if (it == in.end()) {
      if (!param.when) throw error("missing parameter '" + param.name + "'");
      c[p] = config::inactive;
      continue;
    }
    c[p] = from_json_value(param, *it);
  }
  return c;
}

}  // namespace tessel
