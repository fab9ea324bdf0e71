// tessel/expr.hpp: the expression tree of constraints, derived values and
// conditions: the one representation of an expression in tessel. The DSL
// lowers its checked syntax tree to this form (its own tree keeps only
// syntax: positions and unresolved names); a space built in C++ uses the
// make_* helpers. Every value is a 64-bit integer at evaluation time:
// booleans are 0/1, symbols their id in the space's symbol table,
// permutations their rank among the domain's orders.
//
// One evaluator gives these trees their meaning: the space engine's
// (src/expr/evaluator.cpp), which evaluate() and fold() below also use, so
// the DSL's constant folding and the engine cannot disagree.
// Semantics (fixed, documented in docs/language.md):
// - `/` is floor division and `%` the matching modulo (result has the sign of
//   the divisor), as in Python; ceil_div(a, b) is a / b rounded up.
// - division or modulo by zero, log2 of a value <= 0, pow2 of a negative
//   value or > 62, p[i] with i outside the permutation, and overflow make
//   the expression fail (eval_status), and a config whose constraint fails
//   to evaluate is invalid.
// - `and` / `or` short-circuit and give 0/1; `log2` is floor(log2(x)).
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>
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

/// The operator as the language writes it: "+", "==", "and", "not", "in",
/// "min", "pos", "before", "[]"; "-" for both negate and subtract; the
/// leaves are "literal", "param" and "let".
[[nodiscard]] std::string_view to_string(expr_op op) noexcept;

/// How an evaluation ended; anything but ok is a failure.
enum class eval_status : std::uint8_t {
  ok,
  division_by_zero,    ///< `/`, `%` or ceil_div by 0
  overflow,            ///< a result outside the 64-bit signed range
  log2_domain,         ///< log2 of a value <= 0
  pow2_domain,         ///< pow2 of a value outside 0 .. 62
  index_out_of_range,  ///< p[i] with i outside 0 .. n-1
};

/// For a message: "ok", "division by zero", "integer overflow", ...
[[nodiscard]] std::string_view to_string(eval_status status) noexcept;

struct eval_result {
  eval_status status = eval_status::ok;
  std::int64_t value = 0;  ///< the value when ok, else 0
  [[nodiscard]] bool ok() const noexcept { return status == eval_status::ok; }
};

/// The value of `e`, an expression that reads no parameter or let, by the
/// space engine's evaluator. Throws tessel::error when `e` reads one or is
/// malformed.
[[nodiscard]] eval_result evaluate(const expr& e);

/// Constant folding, one node at a time: a literal of `e`'s value and type
/// when every operand of `e` is a literal and `e` evaluates; otherwise `e`
/// itself (a failing constant stays, and fails where it is evaluated).
/// Building bottom-up through fold folds every constant subtree.
[[nodiscard]] expr fold(expr e);

}  // namespace tessel
