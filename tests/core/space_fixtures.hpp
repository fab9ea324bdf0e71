// Builders shared by the core tests: small spaces defined in C++ and an
// independent reference interpreter for expression trees (so brute-force
// checks do not reuse the engine's compiled evaluator).
#pragma once

#include <tessel/space.hpp>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <optional>
#include <string>
#include <vector>

namespace tessel::testing {

inline domain integers(std::vector<std::int64_t> values) {
  std::sort(values.begin(), values.end());
  values.erase(std::unique(values.begin(), values.end()), values.end());
  domain d;
  d.kind = param_kind::integer;
  d.values = std::move(values);
  return d;
}

inline domain booleans() {
  domain d;
  d.kind = param_kind::boolean;
  d.values = {0, 1};
  return d;
}

inline domain symbols(space::definition& def, const std::vector<std::string>& names) {
  domain d;
  d.kind = param_kind::symbol;
  for (const auto& n : names) {
    d.values.push_back(def.intern(n));
    d.labels.push_back(n);
  }
  return d;
}

inline domain permutation(space::definition& def, const std::vector<std::string>& elements) {
  domain d;
  d.kind = param_kind::permutation;
  d.labels = elements;
  std::int64_t count = 1;
  for (std::size_t i = 2; i <= elements.size(); ++i) count *= static_cast<std::int64_t>(i);
  d.values.resize(static_cast<std::size_t>(count));
  std::iota(d.values.begin(), d.values.end(), 0);
  for (const auto& e : elements) d.element_ids.push_back(def.intern(e));
  return d;
}

inline parameter param(std::string name, domain d) {
  parameter p;
  p.name = std::move(name);
  p.dom = std::move(d);
  return p;
}

inline value_type type_of(const domain& d) {
  switch (d.kind) {
    case param_kind::integer: return value_type::integer;
    case param_kind::boolean: return value_type::boolean;
    case param_kind::symbol: return value_type::symbol;
    case param_kind::permutation: return value_type::permutation;
  }
  return value_type::integer;
}

inline expr ref(const space::definition& def, const std::string& name) {
  for (std::size_t i = 0; i < def.parameters.size(); ++i)
    if (def.parameters[i].name == name) return make_param(i, type_of(def.parameters[i].dom));
  throw std::runtime_error("no parameter " + name);
}

inline expr lit(std::int64_t v) { return make_literal(v); }
inline expr op(expr_op o, expr a, expr b) { return make_op(o, {std::move(a), std::move(b)}); }

inline void require(space::definition& def, expr e, std::string text) {
  constraint c;
  c.condition = std::move(e);
  c.text = std::move(text);
  def.constraints.push_back(std::move(c));
}

/// Python-style floor division and modulo; nullopt on a zero divisor.
inline std::optional<std::int64_t> ref_div(std::int64_t a, std::int64_t b, bool mod) {
  if (b == 0) return std::nullopt;
  std::int64_t q = a / b, r = a % b;
  if (r != 0 && ((r < 0) != (b < 0))) {
    q -= 1;
    r += b;
  }
  return mod ? r : q;
}

/// Reference interpreter: plain recursion over the tree.
std::optional<std::int64_t> reference_eval(const space::definition& def, const expr& e,
                                           const std::vector<std::int64_t>& values);

/// Whether config `c` (indices, inactive allowed) is valid, by the reference interpreter.
bool reference_valid(const space::definition& def, const config& c);

/// Every config of the Cartesian product (inactive as one more value of a
/// conditional parameter), in odometer order.
std::vector<config> cartesian(const space::definition& def);

}  // namespace tessel::testing
