// The compiled evaluator against the documented semantics, through spaces.
#include "space_fixtures.hpp"

#include <tessel/error.hpp>
#include <tessel/space.hpp>

#include <doctest/doctest.h>

#include <functional>
#include <limits>

using namespace tessel;
using namespace tessel::testing;

namespace {

/// Valid values of `x` in -6..6 under constraint `make(x)`.
std::vector<std::int64_t> solutions(const std::function<expr(expr)>& make) {
  space::definition def;
  def.parameters.push_back(param("x", integers({-6, -5, -4, -3, -2, -1, 0, 1, 2, 3, 4, 5, 6})));
  require(def, make(ref(def, "x")), "test");
  std::vector<std::int64_t> out;
  try {
    const space s(def);
    for (const auto& c : s.configs()) out.push_back(s.integer(c, "x"));
  } catch (const empty_space_error&) {
  }
  return out;
}

}  // namespace

TEST_CASE("division floors and modulo takes the divisor's sign, as in Python") {
  // -7 // 2 == -4, 7 // -2 == -4, -7 % 3 == 2, 7 % -3 == -2
  CHECK(solutions([](expr x) {
          return op(expr_op::equal, op(expr_op::divide, lit(-7), x), lit(-4));
        }) == std::vector<std::int64_t>{2});
  CHECK(solutions([](expr x) {
          return op(expr_op::equal, op(expr_op::modulo, lit(-7), x), lit(2));
        }) == std::vector<std::int64_t>{3});
  CHECK(solutions([](expr x) {
          return op(expr_op::equal, op(expr_op::modulo, lit(7), x), lit(-2));
        }) == std::vector<std::int64_t>{-3});
  CHECK(solutions([](expr x) {
          return op(expr_op::equal, make_op(expr_op::ceil_div, {lit(7), x}), lit(4));
        }) == std::vector<std::int64_t>{2});
}

TEST_CASE("division by zero makes a config invalid, not the space") {
  const auto valid = solutions(
      [](expr x) { return op(expr_op::greater_equal, op(expr_op::divide, lit(6), x), lit(-100)); });
  CHECK(valid.size() == 12);
  CHECK(std::find(valid.begin(), valid.end(), 0) == valid.end());
}

TEST_CASE("and/or short-circuit past failing operands") {
  // x == 0 or 6 / x > 0: the division is never evaluated for x == 0.
  const auto valid = solutions([](expr x) {
    return op(expr_op::logical_or, op(expr_op::equal, x, lit(0)),
              op(expr_op::greater, op(expr_op::divide, lit(6), x), lit(0)));
  });
  CHECK(valid == std::vector<std::int64_t>{0, 1, 2, 3, 4, 5, 6});
}

TEST_CASE("log2, pow2, is_pow2, min, max, in") {
  CHECK(solutions([](expr x) { return op(expr_op::equal, make_op(expr_op::log2, {x}), lit(2)); }) ==
        std::vector<std::int64_t>{4, 5, 6});
  CHECK(solutions([](expr x) { return make_op(expr_op::is_pow2, {x}); }) ==
        std::vector<std::int64_t>{1, 2, 4});
  CHECK(solutions([](expr x) { return op(expr_op::equal, make_op(expr_op::pow2, {x}), lit(8)); }) ==
        std::vector<std::int64_t>{3});
  CHECK(solutions([](expr x) {
          return op(expr_op::equal, make_op(expr_op::max, {x, lit(2), lit(-1)}), lit(2));
        }).size() == 9);
  CHECK(solutions([](expr x) {
          return op(expr_op::equal, make_op(expr_op::min, {x, lit(0)}), x);
        }).size() == 7);
  CHECK(solutions([](expr x) {
          return make_in_set(x, {-6, 6, 9});
        }) == std::vector<std::int64_t>{-6, 6});
}

TEST_CASE("permutation queries") {
  space::definition def;
  def.parameters.push_back(param("order", permutation(def, {"m", "n", "k"})));
  const auto order = ref(def, "order");
  require(def, make_before(order, 2, 0), "before(order, k, m)");  // k before m
  require(def,
          op(expr_op::equal, make_element_at(order, lit(2)),
             make_literal(def.intern("n"), value_type::symbol)),
          "order[2] == n");
  const space s(def);
  REQUIRE(s.count() == 1);
  CHECK(s.value_of(s.at(0), "order").to_string() == "[k, m, n]");
}

TEST_CASE("evaluate: constant trees, with the reason a failure fails") {
  constexpr auto min64 = std::numeric_limits<std::int64_t>::min();
  constexpr auto max64 = std::numeric_limits<std::int64_t>::max();
  auto eval = [](expr e) { return evaluate(e); };
  CHECK(eval(op(expr_op::divide, lit(-7), lit(2))).value == -4);
  CHECK(eval(op(expr_op::modulo, lit(7), lit(-3))).value == -2);
  // ceil_div is the floor plus one, so it is defined wherever the floor is
  CHECK(eval(make_op(expr_op::ceil_div, {lit(min64), lit(2)})).value == min64 / 2);
  CHECK(eval(make_op(expr_op::ceil_div, {lit(-7), lit(-2)})).value == 4);
  CHECK(eval(make_op(expr_op::ceil_div, {lit(min64), lit(-1)})).status == eval_status::overflow);
  CHECK(eval(op(expr_op::modulo, lit(min64), lit(-1))).value == 0);
  CHECK(eval(op(expr_op::divide, lit(1), lit(0))).status == eval_status::division_by_zero);
  CHECK(eval(op(expr_op::add, lit(max64), lit(1))).status == eval_status::overflow);
  CHECK(eval(make_op(expr_op::negate, {lit(min64)})).status == eval_status::overflow);
  CHECK(eval(make_op(expr_op::log2, {lit(0)})).status == eval_status::log2_domain);
  CHECK(eval(make_op(expr_op::pow2, {lit(63)})).status == eval_status::pow2_domain);
  CHECK(eval(make_op(expr_op::log2, {lit(max64)})).value == 62);
  // and/or give 0/1 whatever their operands, and skip a failing right operand
  CHECK(eval(op(expr_op::logical_and, lit(5), lit(7))).value == 1);
  CHECK(eval(op(expr_op::logical_or, lit(0), lit(-3))).value == 1);
  CHECK(eval(op(expr_op::logical_or, lit(2), op(expr_op::divide, lit(1), lit(0)))).value == 1);
  CHECK(eval(op(expr_op::logical_and, lit(0), op(expr_op::divide, lit(1), lit(0)))).value == 0);
  CHECK(to_string(eval_status::division_by_zero) == "division by zero");
  CHECK_THROWS_WITH_AS((void)evaluate(op(expr_op::add, make_param(0, value_type::integer), lit(1))),
                       doctest::Contains("reads a parameter"), error);
}

TEST_CASE("fold: a node whose operands are literals becomes a literal of its type") {
  const auto folded = fold(op(expr_op::less, lit(2), lit(3)));
  CHECK(folded->op == expr_op::literal);
  CHECK(folded->type == value_type::boolean);
  CHECK(folded->value == 1);
  CHECK(fold(make_in_set(lit(4), {1, 4}))->value == 1);
  // a failing constant stays as it is; so does a node that reads a parameter
  const auto failing = op(expr_op::divide, lit(1), lit(0));
  CHECK(fold(failing) == failing);
  const auto x = make_param(0, value_type::integer);
  CHECK(fold(op(expr_op::add, x, lit(1)))->op == expr_op::add);
  CHECK(to_string(expr_op::ceil_div) == "ceil_div");
  CHECK(to_string(expr_op::logical_and) == "and");
}

TEST_CASE("a failing constraint names why in why_invalid; p[i] out of range fails") {
  space::definition def;
  def.parameters.push_back(param("x", integers({0, 1, 2})));
  def.parameters.push_back(param("order", permutation(def, {"m", "n"})));
  const auto x = ref(def, "x");
  require(def, op(expr_op::greater, op(expr_op::divide, lit(6), x), lit(0)), "6 / x > 0");
  require(def,
          op(expr_op::equal, make_element_at(ref(def, "order"), x),
             make_literal(def.intern("m"), value_type::symbol)),
          "order[x] == m");
  const space s(def);
  CHECK(s.count() == 1);  // x = 1 with order [n, m]; x = 2 indexes past the end
  CHECK(s.why_invalid(config({0, 0})) ==
        "violates '6 / x > 0' (evaluation failed: division by zero)");
  CHECK(s.why_invalid(config({2, 0})) ==
        "violates 'order[x] == m' (evaluation failed: permutation index out of range)");
}
