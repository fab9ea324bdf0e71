// tessel/expr.hpp: the expression tree of constraints, derived values and
// conditions. The DSL lowers its checked syntax tree to this form; a space
// built in C++ uses the make_* helpers. Every value is a 64-bit integer at
// evaluation time: booleans are 0/1, symbols their id in the space's symbol
// table, permutations their rank among the domain's orders.
//
// Semantics (fixed, documented in docs/language.md):
// - `/` is floor division and `%` the matching modulo (result has the sign of
//   the divisor), as in Python; division or modulo by zero, log2 of a value
//   <= 0, pow2 of a negative value or > 62, and overflow make the expression
//   fail, and a config whose constraint fails to evaluate is invalid.
// - `and` / `or` short-circuit; `log2` is floor(log2(x)).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

namespace tessel {

enum class expr_op : std::uint8_t {
  literal,  ///< `value`
  param,    ///< the parameter whose index is `value`
  let,      ///< the derived value whose index is `value`
  negate,
  logical_not,
  add,
  subtract,
  multiply,
  divide,
  modulo,
  equal,
  not_equal,
  less,
  less_equal,
  greater,
  greater_equal,
  logical_and,
  logical_or,
  min,
  max,       ///< two or more args
  ceil_div,  ///< two args: ceil(a / b)
  log2,
  pow2,
  is_pow2,
  in_set,      ///< args[0] is one of `set`
  position,    ///< args[0] a permutation; 0-based position of element index `value`
  before,      ///< args[0] a permutation; element set[0] comes before element set[1]
  element_at,  ///< args[0] a permutation, args[1] a position: the element's symbol id
};

/// The static type of an expression, decided by the DSL's checks.
enum class value_type : std::uint8_t { integer, boolean, symbol, permutation };

struct expr_node;
using expr = std::shared_ptr<const expr_node>;

struct expr_node {
  expr_op op = expr_op::literal;
  value_type type = value_type::integer;
  std::int64_t value = 0;  ///< literal value, parameter/let/element index
  std::vector<expr> args;
  std::vector<std::int64_t> set;  ///< in_set members, before's two elements
};

[[nodiscard]] expr make_literal(std::int64_t value, value_type type = value_type::integer);
[[nodiscard]] expr make_param(std::size_t index, value_type type);
[[nodiscard]] expr make_let(std::size_t index, value_type type);
/// Unary (negate, logical_not, log2, pow2, is_pow2), binary and n-ary
/// (min, max) operators; the result type follows from the operator.
[[nodiscard]] expr make_op(expr_op op, std::vector<expr> args);
[[nodiscard]] expr make_in_set(expr operand, std::vector<std::int64_t> members);
[[nodiscard]] expr make_position(expr permutation, std::size_t element);
[[nodiscard]] expr make_before(expr permutation, std::size_t first, std::size_t second);
[[nodiscard]] expr make_element_at(expr permutation, expr position);

}  // namespace tessel
