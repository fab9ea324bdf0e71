#include "check.hpp"

#include "domain.hpp"
#include "scope.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>

namespace tessel::dsl {

namespace {

namespace x3 = boost::spirit::x3;

value_type type_of(param_kind kind) {
  switch (kind) {
    case param_kind::integer: return value_type::integer;
    case param_kind::symbol: return value_type::symbol;
    case param_kind::boolean: return value_type::boolean;
    case param_kind::permutation: return value_type::permutation;
  }
  return value_type::integer;
}

bool is_name(std::string_view text) {
  auto word = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_'; };
  return !text.empty() && std::isdigit(static_cast<unsigned char>(text[0])) == 0 &&
         std::all_of(text.begin(), text.end(), word);
}

}  // namespace

std::optional<constant_value> parse_override(std::string_view text, space::definition& def) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.front())) != 0)
    text.remove_prefix(1);
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back())) != 0)
    text.remove_suffix(1);
  if (text == "true" || text == "false")
    return constant_value{value_type::boolean, text == "true" ? 1 : 0};
  if (is_name(text)) return constant_value{value_type::symbol, def.intern(text)};
  auto digits = text.starts_with('+') ? text.substr(1) : text;
  std::int64_t value = 0;
  auto [end, code] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
  if (code != std::errc() || end != digits.data() + digits.size() || digits.empty())
    return std::nullopt;
  return constant_value{value_type::integer, value};
}

namespace {

class space_checker {
 public:
  space_checker(const parse_tree& tree, reporter& out, const target& tgt,
                const override_map& overrides)
      : tree_(tree),
        out_(out),
        overrides_(overrides),
        scope_(tree, out, def_),
        lower_(tree, out, tgt, scope_) {}

  space::definition run(const ast::space_block& block) {
    scope_.collect(block);
    body(block.body);
    return std::move(def_);
  }

  using result_type = void;
  void operator()(const ast::const_decl& node);
  void operator()(const ast::let_decl& node);
  void operator()(const ast::param_decl& node);
  void operator()(const ast::require_stmt& node);
  void operator()(const x3::forward_ast<ast::when_block>& node);

 private:
  void body(const std::vector<ast::statement>& statements) {
    for (const auto& statement : statements) boost::apply_visitor(*this, statement.get());
  }
  /// The conjunction of the enclosing when conditions; nullptr outside any.
  [[nodiscard]] expr guard() const { return conditions_.empty() ? nullptr : conditions_.back(); }
  [[nodiscard]] int line_of(const x3::position_tagged& node) const {
    return out_.src().line_of(tree_.offset_of(node));
  }
  std::optional<constant_value> overridden(const ast::const_decl& node, constant_value declared);
  std::optional<std::size_t> default_index(const ast::param_decl& node, const domain& dom);

  const parse_tree& tree_;
  reporter& out_;
  const override_map& overrides_;
  space::definition def_;  // before scope_ and lower_, which refer to it
  space_scope scope_;
  lowerer lower_;
  std::vector<expr> conditions_;  ///< per open when block: the conjunction so far
};

void space_checker::operator()(const ast::const_decl& node) {
  const auto& name = node.name.name;
  if (!conditions_.empty()) {
    out_.error(tree_.offset_of(node), "const '" + name + "' is declared inside a 'when' block",
               "declare consts at the top level of the space");
    return;
  }
  if (!scope_.owns(node.name)) return;
  scope_.begin_declaration(&node.name);
  auto value = lower_.constant(node.value, "the value of const '" + name + "'");
  scope_.begin_declaration(nullptr);
  if (value && overrides_.contains(name)) value = overridden(node, *value);
  if (!value) return;
  def_.constants.push_back({name, value->type, value->value});
  scope_.define(node.name, {name_info::kind::constant, value->type, value->value, name});
}

std::optional<constant_value> space_checker::overridden(const ast::const_decl& node,
                                                        constant_value declared) {
  const auto& name = node.name.name;
  const auto& text = overrides_.find(name)->second;
  auto prefix = "--set " + name + "=" + text + ": ";
  auto value = parse_override(text, def_);
  if (!value) {
    out_.error(tree_.offset_of(node.name),
               prefix + "'" + text + "' is not an integer, true, false or a name");
    return std::nullopt;
  }
  if (value->type != declared.type) {
    out_.error(tree_.offset_of(node.name), prefix + "const '" + name + "' is " +
                                               type_name(declared.type) + ", but '" + text +
                                               "' is " + type_name(value->type));
    return std::nullopt;
  }
  return value;
}

void space_checker::operator()(const ast::let_decl& node) {
  const auto& name = node.name.name;
  if (!scope_.owns(node.name)) return;
  scope_.begin_declaration(&node.name);
  expr value = lower_.lower(node.value);
  scope_.begin_declaration(nullptr);
  if (!value) return;
  if (value->type == value_type::permutation) {
    out_.error(tree_.offset_of(node.value), "let '" + name + "' cannot hold a permutation",
               "use pos(p, x), before(p, x, y) or p[i]");
    return;
  }
  auto index = def_.lets.size();
  def_.lets.push_back({name, value, line_of(node)});
  // A let that folds to a literal is used as that literal, so uses fold too.
  bool literal = value->op == expr_op::literal;
  scope_.define(node.name, {literal ? name_info::kind::constant : name_info::kind::let, value->type,
                            literal ? value->value : static_cast<std::int64_t>(index), name});
}

void space_checker::operator()(const ast::param_decl& node) {
  const auto& name = node.name.name;
  if (!scope_.owns(node.name)) return;
  scope_.begin_declaration(&node.name);
  auto dom = build_domain(node.dom, name, lower_, tree_, out_, def_);
  std::optional<std::size_t> initial;
  if (dom && node.default_value) initial = default_index(node, *dom);
  scope_.begin_declaration(nullptr);
  if (!dom || (node.default_value && !initial)) return;
  auto index = def_.parameters.size();
  auto type = type_of(dom->kind);
  def_.parameters.push_back({name, std::move(*dom), guard(), initial, line_of(node)});
  scope_.define(node.name,
                {name_info::kind::parameter, type, static_cast<std::int64_t>(index), name});
}

std::optional<std::size_t> space_checker::default_index(const ast::param_decl& node,
                                                        const domain& dom) {
  const auto& name = node.name.name;
  auto at = tree_.offset_of(*node.default_value);
  if (dom.kind == param_kind::permutation) {
    out_.error(at, "perm parameter '" + name + "' takes no default",
               "its first order is the baseline");
    return std::nullopt;
  }
  auto value = lower_.constant(*node.default_value, "the default of '" + name + "'");
  if (!value) return std::nullopt;
  if (value->type != type_of(dom.kind)) {
    out_.error(at, "the default of '" + name + "' is " + type_name(value->type) + ", but '" + name +
                       "' is " + type_name(type_of(dom.kind)));
    return std::nullopt;
  }
  auto it = std::find(dom.values.begin(), dom.values.end(), value->value);
  if (it == dom.values.end()) {
    auto shown = value->type == value_type::symbol
                     ? def_.symbols[static_cast<std::size_t>(value->value)]
                     : std::to_string(value->value);
    out_.error(at, "the default " + shown + " is not in the domain of '" + name + "'");
    return std::nullopt;
  }
  return static_cast<std::size_t>(it - dom.values.begin());
}

void space_checker::operator()(const ast::require_stmt& node) {
  expr condition = lower_.condition(node.condition, "a requirement");
  if (!condition) return;
  auto text = out_.src().normalized(tree_.span_of(node.condition));
  if (!guard() && condition->op == expr_op::literal && condition->value == 0) {
    out_.error(tree_.offset_of(node.condition), "this requirement is always false: " + text,
               "it depends on constants only; check the consts and the target");
    return;
  }
  if (auto g = guard()) {
    condition =
        fold(make_op(expr_op::logical_or, {fold(make_op(expr_op::logical_not, {g})), condition}));
  }
  def_.constraints.push_back({condition, text, node.message.value_or(""), line_of(node)});
}

void space_checker::operator()(const x3::forward_ast<ast::when_block>& node) {
  const auto& block = node.get();
  expr condition = lower_.condition(block.condition, "a 'when' condition");
  if (!condition) condition = make_literal(1, value_type::boolean);  // errors already reported
  if (auto g = guard()) condition = fold(make_op(expr_op::logical_and, {g, condition}));
  scope_.open_when();
  conditions_.push_back(condition);
  body(block.body);
  conditions_.pop_back();
  scope_.close_when();
}

void collect_names(const std::vector<ast::statement>& body, bool consts_only,
                   std::vector<std::string>& out) {
  for (const auto& statement : body) {
    const auto& s = statement.get();
    if (const auto* c = boost::get<ast::const_decl>(&s)) out.push_back(c->name.name);
    if (consts_only) continue;
    if (const auto* l = boost::get<ast::let_decl>(&s)) out.push_back(l->name.name);
    if (const auto* p = boost::get<ast::param_decl>(&s)) out.push_back(p->name.name);
    if (const auto* w = boost::get<x3::forward_ast<ast::when_block>>(&s)) {
      collect_names(w->get().body, consts_only, out);
    }
  }
}

}  // namespace

space::definition check_space(const ast::space_block& block, const parse_tree& tree, reporter& out,
                              const target& tgt, const override_map& overrides) {
  return space_checker(tree, out, tgt, overrides).run(block);
}

std::vector<std::string> declared_consts(const ast::space_block& block) {
  std::vector<std::string> names;
  collect_names(block.body, true, names);
  return names;
}

std::vector<std::string> declared_names(const ast::space_block& block) {
  std::vector<std::string> names;
  collect_names(block.body, false, names);
  return names;
}

}  // namespace tessel::dsl
