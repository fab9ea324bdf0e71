// dsl/lower.hpp: checked expressions. Lowers a syntax-tree expression to a
// typed tessel::expr, folding every constant subtree (consts, literals and
// `target.NAME` become literals) and reporting each type error, unknown
// function or field, and failing constant (division by zero, ...) it finds.
// A null result means errors were reported; callers then skip the statement.
#pragma once

#include "parser.hpp"

#include <tessel/space.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace tessel::dsl {

/// Longer expressions are an error: it bounds the depth of lowered trees.
inline constexpr std::size_t max_expression_bytes = 16384;

/// What a name in an expression stands for.
struct name_info {
  enum class kind : std::uint8_t { constant, parameter, let, symbol };
  kind what = kind::constant;
  value_type type = value_type::integer;
  std::int64_t value = 0;  ///< constant value or symbol id; parameter or let index
  std::string name;
};

/// The names an expression can see. Implemented by the space checker (and by
/// target declarations, which see none).
class name_table {
 public:
  virtual ~name_table() = default;
  /// The meaning of `id` at this point, or nullptr after reporting why it has
  /// none (unknown, used before its declaration, out of its when block).
  [[nodiscard]] virtual const name_info* resolve(const ast::identifier& id) = 0;
  /// Parameter `index`, already declared.
  [[nodiscard]] virtual const parameter& param(std::size_t index) const = 0;
  /// The name of symbol `id`.
  [[nodiscard]] virtual std::string symbol_name(std::int64_t id) const = 0;
};

/// A folded constant.
struct constant_value {
  value_type type = value_type::integer;
  std::int64_t value = 0;
};

[[nodiscard]] const char* type_name(value_type type);  ///< "an integer", "a symbol", ...
[[nodiscard]] span span_of(const parse_tree& tree, const ast::operand& operand);
/// The identifier `e` consists of, unwrapping parentheses; nullptr otherwise.
[[nodiscard]] const ast::identifier* as_identifier(const ast::expression& e);

class lowerer {
 public:
  lowerer(const parse_tree& tree, reporter& out, const target& tgt, name_table& names)
      : tree_(tree), out_(out), target_(tgt), names_(names) {}

  /// The typed, folded tree of `e`; nullptr after reporting errors.
  [[nodiscard]] expr lower(const ast::expression& e);
  /// `e`, which must fold to a literal; `what` names the context in the
  /// error ("a domain value"). nullopt after reporting errors.
  [[nodiscard]] std::optional<constant_value> constant(const ast::expression& e,
                                                       std::string_view what);
  /// `e`, which must be a boolean (a requirement or a when condition).
  [[nodiscard]] expr condition(const ast::expression& e, std::string_view what);

  // Operand visitors (public for boost::apply_visitor).
  using result_type = expr;
  expr operator()(const ast::nil&) const { return nullptr; }
  expr operator()(const ast::integer_literal& node);
  expr operator()(const ast::bool_literal& node);
  expr operator()(const ast::target_field& node);
  expr operator()(const ast::identifier& node);
  expr operator()(const ast::call& node);
  expr operator()(const ast::index& node);
  expr operator()(const ast::unary& node);
  expr operator()(const ast::set_literal& node);
  expr operator()(const ast::expression& node) { return lower(node); }
  template <typename T>
  expr operator()(const boost::spirit::x3::forward_ast<T>& node) {
    return (*this)(node.get());
  }

 private:
  expr operand(const ast::operand& node);
  /// Lowers `node` (the elements of a set) for its errors only, after the
  /// left operand failed.
  void report_only(const ast::operand& node);
  expr step(const expr& lhs, const ast::operand& lhs_node, const ast::operation& op);
  expr arithmetic(const expr& lhs, const ast::operand& lhs_node, const ast::operation& op);
  expr comparison(const expr& lhs, const ast::operand& lhs_node, const ast::operation& op);
  expr membership(const expr& lhs, const ast::operand& lhs_node, const ast::operation& op);
  expr builtin(const ast::call& node, expr_op op);
  expr permutation_query(const ast::call& node);
  const name_info* permutation(const ast::identifier& id, std::string_view use);
  std::optional<std::size_t> element(const ast::expression& e, const name_info& perm,
                                     std::string_view use);
  /// make_op, folded (tessel::evaluate) when every argument is a literal;
  /// reports a failing fold at `at`.
  expr build(expr_op op, std::vector<expr> args, std::size_t at);
  /// Reports and returns false unless `e` has `type`.
  bool expect(const expr& e, value_type type, const ast::operand& node, std::string_view op);
  void check_symbol_value(const expr& subject, const expr& literal, std::size_t at);

  const parse_tree& tree_;
  reporter& out_;
  const target& target_;
  name_table& names_;
};

}  // namespace tessel::dsl
