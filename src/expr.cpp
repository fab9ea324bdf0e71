#include <tessel/expr.hpp>

#include <tessel/error.hpp>

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

}  // namespace tessel
