#include "space_fixtures.hpp"

#include <bit>

namespace tessel::testing {

std::optional<std::int64_t> reference_eval(const space::definition& def, const expr& e,
                                           const std::vector<std::int64_t>& values) {
  auto arg = [&](std::size_t i) { return reference_eval(def, e->args[i], values); };
  auto order_of = [&](std::size_t param, std::int64_t rank) {
    return def.parameters[param].dom.permutation(static_cast<std::size_t>(rank));
  };
  switch (e->op) {
    case expr_op::literal: return e->value;
    case expr_op::param: return values[static_cast<std::size_t>(e->value)];
    case expr_op::let:
      return reference_eval(def, def.lets[static_cast<std::size_t>(e->value)].value, values);
    case expr_op::logical_and: {
      auto a = arg(0);
      if (!a) return std::nullopt;
      if (*a == 0) return 0;
      auto b = arg(1);
      if (!b) return std::nullopt;
      return *b != 0;
    }
    case expr_op::logical_or: {
      auto a = arg(0);
      if (!a) return std::nullopt;
      if (*a != 0) return 1;
      auto b = arg(1);
      if (!b) return std::nullopt;
      return *b != 0;
    }
    case expr_op::in_set: {
      auto a = arg(0);
      if (!a) return std::nullopt;
      return std::find(e->set.begin(), e->set.end(), *a) != e->set.end();
    }
    case expr_op::position:
    case expr_op::before: {
      const auto param = static_cast<std::size_t>(e->args[0]->value);
      const auto order = order_of(param, values[param]);
      auto pos = [&](std::int64_t element) {
        return static_cast<std::int64_t>(std::find(order.begin(), order.end(), element) -
                                         order.begin());
      };
      if (e->op == expr_op::position) return pos(e->value);
      return pos(e->set[0]) < pos(e->set[1]);
    }
    case expr_op::element_at: {
      const auto param = static_cast<std::size_t>(e->args[0]->value);
      auto at = arg(1);
      const auto order = order_of(param, values[param]);
      if (!at || *at < 0 || *at >= static_cast<std::int64_t>(order.size())) return std::nullopt;
      return def.parameters[param].dom.element_ids[order[static_cast<std::size_t>(*at)]];
    }
    default: break;
  }
  std::vector<std::int64_t> a;
  for (std::size_t i = 0; i < e->args.size(); ++i) {
    auto v = arg(i);
    if (!v) return std::nullopt;
    a.push_back(*v);
  }
  switch (e->op) {
    case expr_op::negate: return -a[0];
    case expr_op::logical_not: return a[0] == 0;
    case expr_op::add: return a[0] + a[1];
    case expr_op::subtract: return a[0] - a[1];
    case expr_op::multiply: return a[0] * a[1];
    case expr_op::divide: return ref_div(a[0], a[1], false);
    case expr_op::modulo: return ref_div(a[0], a[1], true);
    case expr_op::equal: return a[0] == a[1];
    case expr_op::not_equal: return a[0] != a[1];
    case expr_op::less: return a[0] < a[1];
    case expr_op::less_equal: return a[0] <= a[1];
    case expr_op::greater: return a[0] > a[1];
    case expr_op::greater_equal: return a[0] >= a[1];
    case expr_op::min: return *std::min_element(a.begin(), a.end());
    case expr_op::max: return *std::max_element(a.begin(), a.end());
    case expr_op::ceil_div: {
      if (a[1] == 0) return std::nullopt;
      return -*ref_div(-a[0], a[1], false);
    }
    case expr_op::log2:
      if (a[0] <= 0) return std::nullopt;
      return 63 - std::countl_zero(static_cast<std::uint64_t>(a[0]));
    case expr_op::pow2:
      if (a[0] < 0 || a[0] > 62) return std::nullopt;
      return std::int64_t{1} << a[0];
    case expr_op::is_pow2: return a[0] > 0 && std::has_single_bit(static_cast<std::uint64_t>(a[0]));
    default: return std::nullopt;
  }
}

bool reference_valid(const space::definition& def, const config& c) {
  std::vector<std::int64_t> values(def.parameters.size(), 0);
  for (std::size_t p = 0; p < values.size(); ++p)
    if (c[p] != config::inactive) values[p] = def.parameters[p].dom.values[c[p]];
  for (std::size_t p = 0; p < values.size(); ++p) {
    if (!def.parameters[p].when) continue;
    const auto on = reference_eval(def, def.parameters[p].when, values);
    if ((on && *on != 0) == (c[p] == config::inactive)) return false;
  }
  for (const auto& con : def.constraints) {
    const auto v = reference_eval(def, con.condition, values);
    if (!v || *v == 0) return false;
  }
  return true;
}

std::vector<config> cartesian(const space::definition& def) {
  std::vector<config> out;
  const auto n = def.parameters.size();
  std::vector<std::uint32_t> limit(n);
  for (std::size_t p = 0; p < n; ++p)
    limit[p] =
        static_cast<std::uint32_t>(def.parameters[p].dom.size() + (def.parameters[p].when ? 1 : 0));
  std::vector<std::uint32_t> odometer(n, 0);
  while (true) {
    config c{std::vector<config::index_type>(n)};
    for (std::size_t p = 0; p < n; ++p)
      c[p] = odometer[p] == def.parameters[p].dom.size() ? config::inactive : odometer[p];
    out.push_back(c);
    std::size_t p = n;
    while (p > 0 && ++odometer[p - 1] == limit[p - 1]) odometer[--p] = 0;
    if (p == 0) break;
  }
  return out;
}

}  // namespace tessel::testing
