#include <tessel/expr.hpp>

#include "expr/evaluator.hpp"

#include <tessel/error.hpp>
#include <tessel/space.hpp>

#include <algorithm>
#include <string>

namespace tessel {
namespace {

value_type result_type(expr_op op) {
  switch (op) {
    case expr_op::logical_not:
    case expr_op::equal:
    case expr_op::not_equal:
    case expr_op::less:
    case expr_op::less_equal:
    case expr_op::greater:
    case expr_op::greater_equal:
    case expr_op::logical_and:
    case expr_op::logical_or:
    case expr_op::is_pow2:
    case expr_op::in_set:
    case expr_op::before: return value_type::boolean;
    case expr_op::element_at: return value_type::symbol;
    default: return value_type::integer;
  }
}

expr make(expr_op op, std::vector<expr> args, std::int64_t value = 0,
          std::vector<std::int64_t> set = {}) {
  for (const auto& a : args)
    if (!a) throw error("tessel::make_op: null operand");
  auto node = std::make_shared<expr_node>();
  node->op = op;
  node->type = result_type(op);
  node->value = value;
  node->set = std::move(set);
  node->args = std::move(args);
  return node;
}

}  // namespace

expr make_literal(std::int64_t value, value_type type) {
  auto node = std::make_shared<expr_node>();
  node->op = expr_op::literal;
  node->type = type;
  node->value = value;
  return node;
}

expr make_param(std::size_t index, value_type type) {
  auto node = std::make_shared<expr_node>();
  node->op = expr_op::param;
  node->type = type;
  node->value = static_cast<std::int64_t>(index);
  return node;
}

expr make_let(std::size_t index, value_type type) {
  auto node = std::make_shared<expr_node>();
  node->op = expr_op::let;
  node->type = type;
  node->value = static_cast<std::int64_t>(index);
  return node;
}

expr make_op(expr_op op, std::vector<expr> args) {
  if (op == expr_op::literal || op == expr_op::param || op == expr_op::let)
    throw error("tessel::make_op: use make_literal, make_param or make_let");
  return make(op, std::move(args));
}

expr make_in_set(expr operand, std::vector<std::int64_t> members) {
  return make(expr_op::in_set, {std::move(operand)}, 0, std::move(members));
}

expr make_position(expr permutation, std::size_t element) {
  return make(expr_op::position, {std::move(permutation)}, static_cast<std::int64_t>(element));
}

expr make_before(expr permutation, std::size_t first, std::size_t second) {
  return make(expr_op::before, {std::move(permutation)}, 0,
              {static_cast<std::int64_t>(first), static_cast<std::int64_t>(second)});
}

expr make_element_at(expr permutation, expr position) {
  return make(expr_op::element_at, {std::move(permutation), std::move(position)});
}

std::string_view to_string(expr_op op) noexcept {
  switch (op) {
    case expr_op::literal: return "literal";
    case expr_op::param: return "param";
    case expr_op::let: return "let";
    case expr_op::negate: return "-";
    case expr_op::logical_not: return "not";
    case expr_op::add: return "+";
    case expr_op::subtract: return "-";
    case expr_op::multiply: return "*";
    case expr_op::divide: return "/";
    case expr_op::modulo: return "%";
    case expr_op::equal: return "==";
    case expr_op::not_equal: return "!=";
    case expr_op::less: return "<";
    case expr_op::less_equal: return "<=";
    case expr_op::greater: return ">";
    case expr_op::greater_equal: return ">=";
    case expr_op::logical_and: return "and";
    case expr_op::logical_or: return "or";
    case expr_op::min: return "min";
    case expr_op::max: return "max";
    case expr_op::ceil_div: return "ceil_div";
    case expr_op::log2: return "log2";
    case expr_op::pow2: return "pow2";
    case expr_op::is_pow2: return "is_pow2";
    case expr_op::in_set: return "in";
    case expr_op::position: return "pos";
    case expr_op::before: return "before";
    case expr_op::element_at: return "[]";
  }
  return "?";
}

std::string_view to_string(eval_status status) noexcept {
  switch (status) {
    case eval_status::ok: return "ok";
    case eval_status::division_by_zero: return "division by zero";
    case eval_status::overflow: return "integer overflow";
    case eval_status::log2_domain: return "log2 of a value <= 0";
    case eval_status::pow2_domain: return "pow2 of a value outside 0 .. 62";
    case eval_status::index_out_of_range: return "permutation index out of range";
  }
  return "?";
}

namespace {

bool reads_inputs(const expr& e) {
  if (!e) return false;
  if (e->op == expr_op::param || e->op == expr_op::let) return true;
  return std::any_of(e->args.begin(), e->args.end(), reads_inputs);
}

/// The evaluator of expressions that read no parameter: nothing to refer to.
const detail::evaluator& constant_evaluator() {
  static const std::vector<parameter> no_parameters;
  static const std::vector<let_value> no_lets;
  static const detail::evaluator instance(no_parameters, no_lets);
  return instance;
}

}  // namespace

eval_result evaluate(const expr& e) {
  if (reads_inputs(e))
    throw error(
        "tessel::evaluate: the expression reads a parameter or let; evaluate it through "
        "a space (space::evaluate)");
  const auto& eval = constant_evaluator();
  return eval.run(eval.compile(e), nullptr);
}

expr fold(expr e) {
  if (!e || e->op == expr_op::literal) return e;
  const bool constant = std::all_of(e->args.begin(), e->args.end(),
                                    [](const expr& a) { return a && a->op == expr_op::literal; });
  if (!constant || e->op == expr_op::param || e->op == expr_op::let) return e;
  const auto result = evaluate(e);
  return result.ok() ? make_literal(result.value, e->type) : e;
}

}  // namespace tessel
