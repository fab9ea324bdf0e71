#include "lower.hpp"

#include "fold.hpp"

#include <tessel/did_you_mean.hpp>

#include <algorithm>
#include <array>
#include <charconv>

namespace tessel::dsl {

namespace {

namespace x3 = boost::spirit::x3;

const char* op_text(ast::binary_op op) {
  using ast::binary_op;
  switch (op) {
    case binary_op::add: return "+";
    case binary_op::subtract: return "-";
    case binary_op::multiply: return "*";
    case binary_op::divide: return "/";
    case binary_op::modulo: return "%";
    case binary_op::equal: return "==";
    case binary_op::not_equal: return "!=";
    case binary_op::less: return "<";
    case binary_op::less_equal: return "<=";
    case binary_op::greater: return ">";
    case binary_op::greater_equal: return ">=";
    case binary_op::logical_and: return "and";
    case binary_op::logical_or: return "or";
    case binary_op::in: return "in";
  }
  return "?";
}

expr_op to_expr_op(ast::binary_op op) {
  using ast::binary_op;
  switch (op) {
    case binary_op::add: return expr_op::add;
    case binary_op::subtract: return expr_op::subtract;
    case binary_op::multiply: return expr_op::multiply;
    case binary_op::divide: return expr_op::divide;
    case binary_op::modulo: return expr_op::modulo;
    case binary_op::equal: return expr_op::equal;
    case binary_op::not_equal: return expr_op::not_equal;
    case binary_op::less: return expr_op::less;
    case binary_op::less_equal: return expr_op::less_equal;
    case binary_op::greater: return expr_op::greater;
    case binary_op::greater_equal: return expr_op::greater_equal;
    case binary_op::logical_and: return expr_op::logical_and;
    case binary_op::logical_or: return expr_op::logical_or;
    case binary_op::in: return expr_op::in_set;
  }
  return expr_op::literal;
}

bool is_literal(const expr& e) { return e && e->op == expr_op::literal; }

struct function_info {
  std::string_view name;
  expr_op op;
  std::size_t min_args;
  std::size_t max_args;
};

constexpr std::size_t any_number = 1000;

constexpr std::array<function_info, 8> functions = {{
    {"min", expr_op::min, 2, any_number},
    {"max", expr_op::max, 2, any_number},
    {"ceil_div", expr_op::ceil_div, 2, 2},
    {"log2", expr_op::log2, 1, 1},
    {"pow2", expr_op::pow2, 1, 1},
    {"is_pow2", expr_op::is_pow2, 1, 1},
    {"pos", expr_op::position, 2, 2},
    {"before", expr_op::before, 3, 3},
}};

std::vector<std::string> function_names() {
  std::vector<std::string> names;
  names.reserve(functions.size());
  for (const auto& f : functions) names.emplace_back(f.name);
  return names;
}

std::string arity_text(std::size_t count) {
  return std::to_string(count) + (count == 1 ? " argument" : " arguments");
}

/// "'tile_m' is" for a bare name, "this operand is" otherwise.
std::string subject(const ast::operand& node) {
  ast::expression wrapper;
  wrapper.first = node;
  if (const auto* id = as_identifier(wrapper)) return "'" + id->name + "' is";
  return "this operand is";
}

std::string join_labels(const std::vector<std::string>& labels) {
  std::string text;
  for (const auto& label : labels) text += (text.empty() ? "" : ", ") + label;
  return text;
}

/// The span of whichever node an operand holds.
struct operand_span {
  using result_type = span;
  const parse_tree& tree;
  span operator()(const ast::nil&) const { return {}; }
  template <typename T>
  span operator()(const x3::forward_ast<T>& node) const {
    return tree.span_of(node.get());
  }
  template <typename T>
  span operator()(const T& node) const {
    return tree.span_of(node);
  }
};

}  // namespace

const char* type_name(value_type type) {
  switch (type) {
    case value_type::integer: return "an integer";
    case value_type::boolean: return "a boolean";
    case value_type::symbol: return "a symbol";
    case value_type::permutation: return "a permutation";
  }
  return "a value";
}

span span_of(const parse_tree& tree, const ast::operand& operand) {
  return boost::apply_visitor(operand_span{tree}, operand.get());
}

const ast::identifier* as_identifier(const ast::expression& e) {
  if (!e.rest.empty()) return nullptr;
  if (const auto* id = boost::get<ast::identifier>(&e.first.get())) return id;
  if (const auto* inner = boost::get<x3::forward_ast<ast::expression>>(&e.first.get())) {
    return as_identifier(inner->get());
  }
  return nullptr;
}

expr lowerer::lower(const ast::expression& e) {
  auto where = tree_.span_of(e);
  if (where.end - where.begin > max_expression_bytes) {
    out_.error(where.begin,
               "expression longer than " + std::to_string(max_expression_bytes) + " bytes",
               "split it with let");
    return nullptr;
  }
  expr result = operand(e.first);
  const ast::operand* lhs_node = &e.first;
  for (const auto& op : e.rest) {
    if (!result) {
      report_only(op.rhs);
      continue;
    }
    result = step(result, *lhs_node, op);
    lhs_node = &op.rhs;
  }
  return result;
}

void lowerer::report_only(const ast::operand& node) {
  const auto* set = boost::get<x3::forward_ast<ast::set_literal>>(&node.get());
  if (set == nullptr) {
    (void)operand(node);
    return;
  }
  for (const auto& element : set->get().elements) (void)lower(element);
}

std::optional<constant_value> lowerer::constant(const ast::expression& e, std::string_view what) {
  expr value = lower(e);
  if (!value) return std::nullopt;
  if (!is_literal(value)) {
    out_.error(tree_.offset_of(e), std::string(what) + " must be a constant expression",
               "only literals, consts and target.NAME fold to constants");
    return std::nullopt;
  }
  return constant_value{value->type, value->value};
}

expr lowerer::condition(const ast::expression& e, std::string_view what) {
  expr value = lower(e);
  if (!value || value->type == value_type::boolean) return value;
  out_.error(tree_.offset_of(e), std::string(what) +
                                     " must be a condition (a boolean), but this is " +
                                     type_name(value->type));
  return nullptr;
}

expr lowerer::operand(const ast::operand& node) { return boost::apply_visitor(*this, node.get()); }

expr lowerer::operator()(const ast::integer_literal& node) {
  std::int64_t value = 0;
  const auto* first = node.digits.data();
  auto [end, code] = std::from_chars(first, first + node.digits.size(), value);
  if (code != std::errc() || end != first + node.digits.size()) {
    out_.error(tree_.offset_of(node), "integer literal " + node.digits + " is too large",
               "integers are 64-bit: at most 9223372036854775807");
    return nullptr;
  }
  return make_literal(value);
}

expr lowerer::operator()(const ast::bool_literal& node) {
  return make_literal(node.value ? 1 : 0, value_type::boolean);
}

expr lowerer::operator()(const ast::target_field& node) {
  if (auto value = target_.find(node.name)) return make_literal(*value);
  std::vector<std::string> fields;
  for (const auto& [name, value] : target_.constants) fields.push_back(name);
  out_.error(tree_.offset_of(node),
             "target '" + target_.name + "' has no field '" + node.name + "'",
             did_you_mean(node.name, fields));
  return nullptr;
}

expr lowerer::operator()(const ast::identifier& node) {
  const name_info* info = names_.resolve(node);
  if (info == nullptr) return nullptr;
  switch (info->what) {
    case name_info::kind::constant:
    case name_info::kind::symbol: return make_literal(info->value, info->type);
    case name_info::kind::parameter:
      return make_param(static_cast<std::size_t>(info->value), info->type);
    case name_info::kind::let: return make_let(static_cast<std::size_t>(info->value), info->type);
  }
  return nullptr;
}

expr lowerer::operator()(const ast::unary& node) {
  expr arg = operand(node.rhs);
  if (!arg) return nullptr;
  bool negate = node.op == ast::unary_op::negate;
  auto type = negate ? value_type::integer : value_type::boolean;
  if (!expect(arg, type, node.rhs, negate ? "unary '-'" : "'not'")) return nullptr;
  return build(negate ? expr_op::negate : expr_op::logical_not, {arg}, tree_.offset_of(node));
}

expr lowerer::operator()(const ast::set_literal& node) {
  out_.error(tree_.offset_of(node), "a set {...} is only allowed after 'in'");
  return nullptr;
}

expr lowerer::operator()(const ast::call& node) {
  const auto& name = node.function.name;
  auto it = std::find_if(functions.begin(), functions.end(),
                         [&](const auto& f) { return f.name == name; });
  if (it == functions.end()) {
    out_.error(tree_.offset_of(node.function), "unknown function '" + name + "'",
               did_you_mean(name, function_names()));
    return nullptr;
  }
  if (node.args.size() < it->min_args || node.args.size() > it->max_args) {
    auto expected = it->min_args == it->max_args ? arity_text(it->min_args)
                                                 : "at least " + arity_text(it->min_args);
    out_.error(tree_.offset_of(node.function),
               "'" + name + "' takes " + expected + ", got " + std::to_string(node.args.size()));
    return nullptr;
  }
  if (it->op == expr_op::position || it->op == expr_op::before) return permutation_query(node);
  return builtin(node, it->op);
}

expr lowerer::builtin(const ast::call& node, expr_op op) {
  std::vector<expr> args;
  bool ok = true;
  for (const auto& arg : node.args) {
    expr value = lower(arg);
    ast::operand wrapper{arg};
    ok = value && expect(value, value_type::integer, wrapper, "'" + node.function.name + "'") && ok;
    args.push_back(value);
  }
  if (!ok) return nullptr;
  return build(op, std::move(args), tree_.offset_of(node.function));
}

const name_info* lowerer::permutation(const ast::identifier& id, std::string_view use) {
  const name_info* info = names_.resolve(id);
  if (info == nullptr) return nullptr;
  if (info->what == name_info::kind::parameter && info->type == value_type::permutation)
    return info;
  out_.error(tree_.offset_of(id), std::string(use) + " needs a permutation parameter, but '" +
                                      id.name + "' is " + type_name(info->type));
  return nullptr;
}

std::optional<std::size_t> lowerer::element(const ast::expression& e, const name_info& perm,
                                            std::string_view use) {
  const auto& labels = names_.param(static_cast<std::size_t>(perm.value)).dom.labels;
  const ast::identifier* id = as_identifier(e);
  if (id != nullptr) {
    auto it = std::find(labels.begin(), labels.end(), id->name);
    if (it != labels.end()) return static_cast<std::size_t>(it - labels.begin());
  }
  std::string what = id != nullptr ? "'" + id->name + "'" : std::string("this");
  out_.error(tree_.offset_of(e),
             std::string(use) + ": " + what + " is not an element of '" + perm.name + "' (" +
                 join_labels(labels) + ")",
             id != nullptr ? did_you_mean(id->name, labels) : std::string());
  return std::nullopt;
}

expr lowerer::permutation_query(const ast::call& node) {
  const auto& name = node.function.name;
  const ast::identifier* base = as_identifier(node.args[0]);
  if (base == nullptr) {
    out_.error(tree_.offset_of(node.args[0]),
               "'" + name + "' needs a permutation parameter as its first argument");
    return nullptr;
  }
  const name_info* perm = permutation(*base, "'" + name + "'");
  if (perm == nullptr) return nullptr;
  expr p = make_param(static_cast<std::size_t>(perm->value), value_type::permutation);
  auto first = element(node.args[1], *perm, "'" + name + "'");
  if (name == "pos") return first ? make_position(p, *first) : nullptr;
  auto second = element(node.args[2], *perm, "'" + name + "'");
  if (!first || !second) return nullptr;
  return make_before(p, *first, *second);
}

expr lowerer::operator()(const ast::index& node) {
  const name_info* perm = permutation(node.base, "indexing with [ ]");
  expr position = lower(node.position);
  if (perm == nullptr || !position) return nullptr;
  ast::operand wrapper{node.position};
  if (!expect(position, value_type::integer, wrapper, "an index")) return nullptr;
  auto size = names_.param(static_cast<std::size_t>(perm->value)).dom.labels.size();
  if (is_literal(position) &&
      (position->value < 0 || static_cast<std::size_t>(position->value) >= size)) {
    out_.error(tree_.offset_of(node.position),
               "index " + std::to_string(position->value) + " is out of range for '" + perm->name +
                   "' (" + std::to_string(size) + " elements, indices 0 .. " +
                   std::to_string(size - 1) + ")");
    return nullptr;
  }
  return make_element_at(make_param(static_cast<std::size_t>(perm->value), value_type::permutation),
                         position);
}

expr lowerer::step(const expr& lhs, const ast::operand& lhs_node, const ast::operation& op) {
  using ast::binary_op;
  switch (op.op) {
    case binary_op::in: return membership(lhs, lhs_node, op);
    case binary_op::equal:
    case binary_op::not_equal: return comparison(lhs, lhs_node, op);
    default: return arithmetic(lhs, lhs_node, op);
  }
}

expr lowerer::arithmetic(const expr& lhs, const ast::operand& lhs_node, const ast::operation& op) {
  expr rhs = operand(op.rhs);
  if (!rhs) return nullptr;
  bool logical = op.op == ast::binary_op::logical_and || op.op == ast::binary_op::logical_or;
  auto type = logical ? value_type::boolean : value_type::integer;
  auto what = std::string("'") + op_text(op.op) + "'";
  bool ok = expect(lhs, type, lhs_node, what);
  ok = expect(rhs, type, op.rhs, what) && ok;
  if (!ok) return nullptr;
  bool divides = op.op == ast::binary_op::divide || op.op == ast::binary_op::modulo;
  if (divides && is_literal(rhs) && rhs->value == 0) {
    out_.error(tree_.offset_of(op),
               std::string("division by zero: '") + op_text(op.op) + "' by 0 always fails");
    return nullptr;
  }
  return build(to_expr_op(op.op), {lhs, rhs}, tree_.offset_of(op));
}

expr lowerer::comparison(const expr& lhs, const ast::operand& lhs_node, const ast::operation& op) {
  expr rhs = operand(op.rhs);
  if (!rhs) return nullptr;
  auto what = std::string("'") + op_text(op.op) + "'";
  if (lhs->type == value_type::permutation || rhs->type == value_type::permutation) {
    bool left = lhs->type == value_type::permutation;
    expect(left ? lhs : rhs, value_type::integer, left ? lhs_node : op.rhs, what);
    return nullptr;
  }
  if (lhs->type != rhs->type) {
    out_.error(tree_.offset_of(op), std::string("cannot compare ") + type_name(lhs->type) +
                                        " with " + type_name(rhs->type) + " using " + what);
    return nullptr;
  }
  check_symbol_value(lhs, rhs, span_of(tree_, op.rhs).begin);
  check_symbol_value(rhs, lhs, span_of(tree_, lhs_node).begin);
  return build(to_expr_op(op.op), {lhs, rhs}, tree_.offset_of(op));
}

expr lowerer::membership(const expr& lhs, const ast::operand& lhs_node, const ast::operation& op) {
  const auto* set = boost::get<x3::forward_ast<ast::set_literal>>(&op.rhs.get());
  if (set == nullptr) return nullptr;  // the grammar only puts a set after 'in'
  if (lhs->type == value_type::permutation) {
    expect(lhs, value_type::integer, lhs_node, "'in'");
    return nullptr;
  }
  std::vector<std::int64_t> members;
  bool ok = true;
  for (const auto& element : set->get().elements) {
    auto value = constant(element, "an element of a set after 'in'");
    if (!value) {
      ok = false;
    } else if (value->type != lhs->type) {
      out_.error(tree_.offset_of(element), std::string("this set element is ") +
                                               type_name(value->type) +
                                               ", but the value tested is " + type_name(lhs->type));
      ok = false;
    } else {
      check_symbol_value(lhs, make_literal(value->value, value->type), tree_.offset_of(element));
      members.push_back(value->value);
    }
  }
  if (!ok) return nullptr;
  if (is_literal(lhs)) {
    bool found = std::find(members.begin(), members.end(), lhs->value) != members.end();
    return make_literal(found ? 1 : 0, value_type::boolean);
  }
  return make_in_set(lhs, std::move(members));
}

expr lowerer::build(expr_op op, std::vector<expr> args, std::size_t at) {
  bool constant = std::all_of(args.begin(), args.end(), is_literal);
  if (!constant) return make_op(op, std::move(args));
  std::vector<std::int64_t> values;
  values.reserve(args.size());
  for (const auto& arg : args) values.push_back(arg->value);
  auto result = fold(op, values);
  if (result.status != fold_status::ok) {
    out_.error(at, std::string(describe(result.status)) + " in a constant expression");
    return nullptr;
  }
  return make_literal(result.value, make_op(op, std::move(args))->type);
}

bool lowerer::expect(const expr& e, value_type type, const ast::operand& node,
                     std::string_view op) {
  if (e->type == type) return true;
  std::string hint;
  ast::expression wrapper;
  wrapper.first = node;
  const auto* id = as_identifier(wrapper);
  if (e->type == value_type::permutation && id != nullptr) {
    hint = "use pos(" + id->name + ", x), before(" + id->name + ", x, y) or " + id->name + "[i]";
  }
  out_.error(span_of(tree_, node).begin,
             std::string(op) + " expects " + type_name(type) + ", but " + subject(node) + " " +
                 type_name(e->type),
             hint);
  return false;
}

void lowerer::check_symbol_value(const expr& subject_expr, const expr& literal, std::size_t at) {
  if (subject_expr->op != expr_op::param || subject_expr->type != value_type::symbol ||
      !is_literal(literal))
    return;
  const auto& p = names_.param(static_cast<std::size_t>(subject_expr->value));
  if (std::find(p.dom.values.begin(), p.dom.values.end(), literal->value) != p.dom.values.end())
    return;
  out_.error(at, "'" + names_.symbol_name(literal->value) + "' is not a value of '" + p.name +
                     "' {" + join_labels(p.dom.labels) + "}");
}

}  // namespace tessel::dsl
