// dsl/ast.hpp: the syntax tree of a .tsl text, as the grammar (grammar.cpp)
// builds it. Nodes that diagnostics point at derive from x3::position_tagged;
// `source_map::span_of` turns their ids into byte offsets of the text.
// The tree is purely syntactic: names are unresolved, domains unevaluated.
// Operators are the core's (tessel::expr_op): the checker (lower.cpp) turns
// this tree into a tessel::expr, the one representation of an expression.
#pragma once

#include <tessel/expr.hpp>

#include <boost/spirit/home/x3/support/ast/position_tagged.hpp>
#include <boost/spirit/home/x3/support/ast/variant.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace tessel::dsl::ast {

namespace x3 = boost::spirit::x3;

struct nil {};
struct unary;
struct call;
struct index;
struct set_literal;
struct expression;

struct identifier : x3::position_tagged {
  std::string name;
};

/// The digits as written; the checker converts them (and reports overflow).
struct integer_literal : x3::position_tagged {
  std::string digits;
};

struct bool_literal : x3::position_tagged {
  bool value = false;
};

/// `target.NAME`
struct target_field : x3::position_tagged {
  std::string name;
};

struct operand : x3::variant<nil, integer_literal, bool_literal, target_field, identifier,
                             x3::forward_ast<call>, x3::forward_ast<index>, x3::forward_ast<unary>,
                             x3::forward_ast<set_literal>, x3::forward_ast<expression>> {
  using base_type::base_type;
  using base_type::operator=;
};

/// One `op rhs` step of a left-associative chain; tagged at the operator.
/// `op` is a binary expr_op; for in_set, `rhs` is a set_literal.
struct operation : x3::position_tagged {
  expr_op op = expr_op::add;
  operand rhs;
};

/// `first op rhs op rhs ...`, all operators of one precedence level.
struct expression : x3::position_tagged {
  operand first;
  std::vector<operation> rest;
};

/// `-x` (expr_op::negate) or `not x` (expr_op::logical_not).
struct unary : x3::position_tagged {
  expr_op op = expr_op::negate;
  operand rhs;
};

/// `NAME(args)`: min, max, ceil_div, log2, pow2, is_pow2, pos, before.
struct call : x3::position_tagged {
  identifier function;
  std::vector<expression> args;
};

/// `p[i]`: the element at position i of permutation p.
struct index : x3::position_tagged {
  identifier base;
  expression position;
};

/// `{a, b, c}`: only valid as the right operand of `in`.
struct set_literal : x3::position_tagged {
  std::vector<expression> elements;
};

// --- domains -----------------------------------------------------------------

/// `{128, 256}` or `{sbuf, hbm}`
struct set_domain : x3::position_tagged {
  std::vector<expression> elements;
};

/// `lo .. hi [step s]`
struct range_domain : x3::position_tagged {
  expression low;
  expression high;
  std::optional<expression> step;
};

/// `pow2(lo .. hi)`
struct pow2_domain : x3::position_tagged {
  expression low;
  expression high;
};

struct bool_domain : x3::position_tagged {
  std::string keyword;  ///< "bool"; kept so the node has an attribute
};

/// `perm(m, n, k)`
struct perm_domain : x3::position_tagged {
  std::vector<identifier> elements;
};

struct domain : x3::variant<set_domain, range_domain, pow2_domain, bool_domain, perm_domain> {
  using base_type::base_type;
  using base_type::operator=;
};

// --- statements ----------------------------------------------------------------

struct const_decl : x3::position_tagged {
  identifier name;
  expression value;
};

struct let_decl : x3::position_tagged {
  identifier name;
  expression value;
};

struct param_decl : x3::position_tagged {
  identifier name;
  domain dom;
  std::optional<expression> default_value;
};

struct require_stmt : x3::position_tagged {
  expression condition;
  std::optional<std::string> message;
};

struct when_block;

struct statement
    : x3::variant<const_decl, let_decl, param_decl, require_stmt, x3::forward_ast<when_block>> {
  using base_type::base_type;
  using base_type::operator=;
};

struct when_block : x3::position_tagged {
  expression condition;
  std::vector<statement> body;
};

struct space_block : x3::position_tagged {
  identifier name;
  std::vector<statement> body;
};

/// `NAME = EXPR` inside a target declaration.
struct target_assignment : x3::position_tagged {
  identifier name;
  expression value;
};

/// `target NAME : BASE { assignments }`
struct target_decl : x3::position_tagged {
  identifier name;
  identifier base;
  std::vector<target_assignment> assignments;
};

// --- models (docs/models.md) ---------------------------------------------------

/// `space "PATH"` or `space "PATH" : NAME`: a space of another file (PATH
/// relative to the model's file).
struct space_file_ref : x3::position_tagged {
  std::string path;
  std::optional<identifier> name;
};

/// `space NAME`: a space block of the model's own file.
struct space_name_ref : x3::position_tagged {
  identifier name;
};

/// `set NAME = EXPR, ...`: the kernel's `--set` shape constants.
struct set_field : x3::position_tagged {
  std::vector<target_assignment> assignments;
};

/// `dtype NAME`: sets the space's `dtype` const.
struct dtype_field : x3::position_tagged {
  identifier value;
};

/// `calls EXPR`: how many times the kernel runs per step.
struct calls_field : x3::position_tagged {
  expression value;
};

/// `group NAME`: the part of the model the kernel belongs to (the report sums each).
struct group_field : x3::position_tagged {
  identifier value;
};

struct kernel_field : x3::variant<space_file_ref, space_name_ref, set_field, dtype_field,
                                  calls_field, group_field> {
  using base_type::base_type;
  using base_type::operator=;
};

/// `kernel NAME { fields }`: one kernel instance of a model.
struct kernel_decl : x3::position_tagged {
  identifier name;
  std::vector<kernel_field> fields;
};

struct model_item : x3::variant<const_decl, kernel_decl> {
  using base_type::base_type;
  using base_type::operator=;
};

/// `model NAME { consts and kernels }`
struct model_block : x3::position_tagged {
  identifier name;
  std::vector<model_item> body;
};

/// A whole file: the top-level items in order.
struct file {
  std::vector<target_decl> targets;
  std::vector<space_block> spaces;
  std::vector<model_block> models;
};

}  // namespace tessel::dsl::ast
