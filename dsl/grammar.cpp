// dsl/grammar.cpp: the .tsl grammar (Boost.Spirit X3) and the top-level
// driver that parses one block at a time and recovers after a syntax error.
// The language is described in docs/language.md; precedence, loosest first:
// or, and, not, comparisons and `in`, + -, * / %, unary -.
#include "parser.hpp"
#include "precheck.hpp"

#include <tessel/did_you_mean.hpp>

#include <boost/fusion/include/adapt_struct.hpp>
#include <boost/spirit/home/x3.hpp>

#include <cctype>
#include <functional>

BOOST_FUSION_ADAPT_STRUCT(tessel::dsl::ast::operation, op, rhs)
BOOST_FUSION_ADAPT_STRUCT(tessel::dsl::ast::expression, first, rest)
BOOST_FUSION_ADAPT_STRUCT(tessel::dsl::ast::unary, op, rhs)
BOOST_FUSION_ADAPT_STRUCT(tessel::dsl::ast::call, function, args)
BOOST_FUSION_ADAPT_STRUCT(tessel::dsl::ast::index, base, position)
BOOST_FUSION_ADAPT_STRUCT(tessel::dsl::ast::range_domain, low, high, step)
BOOST_FUSION_ADAPT_STRUCT(tessel::dsl::ast::pow2_domain, low, high)
BOOST_FUSION_ADAPT_STRUCT(tessel::dsl::ast::const_decl, name, value)
BOOST_FUSION_ADAPT_STRUCT(tessel::dsl::ast::let_decl, name, value)
BOOST_FUSION_ADAPT_STRUCT(tessel::dsl::ast::param_decl, name, dom, default_value)
BOOST_FUSION_ADAPT_STRUCT(tessel::dsl::ast::require_stmt, condition, message)
BOOST_FUSION_ADAPT_STRUCT(tessel::dsl::ast::when_block, condition, body)
BOOST_FUSION_ADAPT_STRUCT(tessel::dsl::ast::space_block, name, body)
BOOST_FUSION_ADAPT_STRUCT(tessel::dsl::ast::target_assignment, name, value)
BOOST_FUSION_ADAPT_STRUCT(tessel::dsl::ast::target_decl, name, base, assignments)
BOOST_FUSION_ADAPT_STRUCT(tessel::dsl::ast::space_file_ref, path, name)
BOOST_FUSION_ADAPT_STRUCT(tessel::dsl::ast::kernel_decl, name, fields)
BOOST_FUSION_ADAPT_STRUCT(tessel::dsl::ast::model_block, name, body)

namespace tessel::dsl {
namespace grammar {

namespace x3 = boost::spirit::x3;
using iterator = const char*;
using position_cache = x3::position_cache<std::vector<iterator>>;

struct position_cache_tag;

/// Rule ids derive from this: a successful rule records where its node is.
struct annotate_position {
  template <typename Iterator, typename Node, typename Context>
  void on_success(const Iterator& first, const Iterator& last, Node& node,
                  const Context& context) const {
    x3::get<position_cache_tag>(context).annotate(node, first, last);
  }
};

// --- lexical -------------------------------------------------------------------

const auto word_char = x3::alnum | x3::char_('_');

/// A keyword: the exact word, not the prefix of a longer name.
inline auto kw(const char* word) { return x3::lexeme[x3::lit(word) >> !word_char]; }

const auto reserved = kw("space") | kw("param") | kw("const") | kw("let") | kw("require") |
                      kw("when") | kw("target") | kw("and") | kw("or") | kw("not") | kw("in") |
                      kw("true") | kw("false");

const auto name_token = x3::rule<class name_token_id, std::string>{"name"} =
    x3::lexeme[(x3::alpha | x3::char_('_')) >> *word_char];

const auto skipper = x3::rule<class skipper_id>{"whitespace"} =
    x3::space | (x3::lit('#') >> *(x3::char_ - x3::eol));

const auto string_literal = x3::rule<class string_id, std::string>{"string"} =
    x3::lexeme['"' >> *(x3::char_ - '"' - x3::eol) > '"'];

/// The operators of one precedence level, spelt as tessel::to_string does.
struct operator_symbols : x3::symbols<expr_op> {
  operator_symbols(std::initializer_list<expr_op> ops) {
    for (const auto op : ops) add(std::string(to_string(op)), op);
  }
};

const operator_symbols compare_ops{expr_op::equal,      expr_op::not_equal, expr_op::less,
                                   expr_op::less_equal, expr_op::greater,   expr_op::greater_equal};
const operator_symbols additive_ops{expr_op::add, expr_op::subtract};
const operator_symbols multiplicative_ops{expr_op::multiply, expr_op::divide, expr_op::modulo};

// --- semantic actions for one-field nodes --------------------------------------
// X3 does not run on_success for a rule whose body is an action, so each such
// node is parsed by an untagged `*_action` rule and tagged by a rule that
// only forwards to it.

const auto set_name = [](auto& ctx) { x3::_val(ctx).name = x3::_attr(ctx); };
const auto set_digits = [](auto& ctx) { x3::_val(ctx).digits = x3::_attr(ctx); };
const auto set_true = [](auto& ctx) { x3::_val(ctx).value = true; };
const auto set_false = [](auto& ctx) { x3::_val(ctx).value = false; };
const auto set_bool_keyword = [](auto& ctx) { x3::_val(ctx).keyword = "bool"; };
const auto set_elements = [](auto& ctx) {
  if (auto& elements = x3::_attr(ctx)) x3::_val(ctx).elements = std::move(*elements);
};
const auto set_perm_elements = [](auto& ctx) {
  x3::_val(ctx).elements = std::move(x3::_attr(ctx));
};
const auto set_value = [](auto& ctx) { x3::_val(ctx).value = std::move(x3::_attr(ctx)); };
const auto set_assignments = [](auto& ctx) {
  x3::_val(ctx).assignments = std::move(x3::_attr(ctx));
};

// --- rules ---------------------------------------------------------------------

struct identifier_id : annotate_position {};
struct integer_id : annotate_position {};
struct bool_id : annotate_position {};
struct target_field_id : annotate_position {};
struct call_id : annotate_position {};
struct index_id : annotate_position {};
struct set_literal_id : annotate_position {};
struct negation_id : annotate_position {};
struct not_op_id : annotate_position {};
struct multiplicative_id : annotate_position {};
struct multiplicative_step_id : annotate_position {};
struct additive_id : annotate_position {};
struct additive_step_id : annotate_position {};
struct comparison_id : annotate_position {};
struct compare_step_id : annotate_position {};
struct in_step_id : annotate_position {};
struct and_expr_id : annotate_position {};
struct and_step_id : annotate_position {};
struct expression_id : annotate_position {};
struct or_step_id : annotate_position {};
struct set_domain_id : annotate_position {};
struct range_domain_id : annotate_position {};
struct pow2_domain_id : annotate_position {};
struct bool_domain_id : annotate_position {};
struct perm_domain_id : annotate_position {};
struct const_id : annotate_position {};
struct let_id : annotate_position {};
struct param_id : annotate_position {};
struct require_id : annotate_position {};
struct when_id : annotate_position {};
struct space_id : annotate_position {};
struct assignment_id : annotate_position {};
struct target_id : annotate_position {};
struct space_file_ref_id : annotate_position {};
struct space_name_ref_id : annotate_position {};
struct set_field_id : annotate_position {};
struct dtype_field_id : annotate_position {};
struct calls_field_id : annotate_position {};
struct group_field_id : annotate_position {};
struct kernel_id : annotate_position {};
struct model_id : annotate_position {};

const x3::rule<identifier_id, ast::identifier> identifier = "name";
const x3::rule<integer_id, ast::integer_literal> integer = "integer";
const x3::rule<bool_id, ast::bool_literal> boolean = "boolean";
const x3::rule<target_field_id, ast::target_field> target_field = "target field";
const x3::rule<call_id, ast::call> call = "call";
const x3::rule<index_id, ast::index> index = "index";
const x3::rule<set_literal_id, ast::set_literal> set_literal = "'{'";
const x3::rule<class primary_id, ast::operand> primary = "expression";
const x3::rule<negation_id, ast::unary> negation = "negation";
const x3::rule<class unary_expr_id, ast::operand> unary_expr = "expression";
const x3::rule<multiplicative_step_id, ast::operation> multiplicative_step = "operator";
const x3::rule<multiplicative_id, ast::expression> multiplicative = "expression";
const x3::rule<additive_step_id, ast::operation> additive_step = "operator";
const x3::rule<additive_id, ast::expression> additive = "expression";
const x3::rule<compare_step_id, ast::operation> compare_step = "comparison";
const x3::rule<in_step_id, ast::operation> in_step = "in";
const x3::rule<comparison_id, ast::expression> comparison = "expression";
const x3::rule<not_op_id, ast::unary> not_op = "not";
const x3::rule<class not_expr_id, ast::operand> not_expr = "expression";
const x3::rule<and_step_id, ast::operation> and_step = "and";
const x3::rule<and_expr_id, ast::expression> and_expr = "expression";
const x3::rule<or_step_id, ast::operation> or_step = "or";
const x3::rule<expression_id, ast::expression> expression = "expression";

const x3::rule<class identifier_action_id, ast::identifier> identifier_action = "name";
const auto identifier_action_def = (name_token - reserved)[set_name];
const auto identifier_def = identifier_action;
const x3::rule<class integer_action_id, ast::integer_literal> integer_action = "integer";
const auto integer_action_def = x3::lexeme[+x3::digit >> !word_char][set_digits];
const auto integer_def = integer_action;
const x3::rule<class boolean_action_id, ast::bool_literal> boolean_action = "boolean";
const auto boolean_action_def = kw("true")[set_true] | kw("false")[set_false];
const auto boolean_def = boolean_action;
const x3::rule<class target_field_action_id, ast::target_field> target_field_action =
    "target field";
const auto target_field_action_def = (kw("target") > '.' > name_token)[set_name];
const auto target_field_def = target_field_action;
const auto call_def = identifier >> '(' > -(expression % ',') > ')';
const auto index_def = identifier >> '[' > expression > ']';
const x3::rule<class set_literal_action_id, ast::set_literal> set_literal_action = "'{'";
const auto set_literal_action_def = ('{' > -(expression % ',') > '}')[set_elements];
const auto set_literal_def = set_literal_action;
const auto primary_def = integer | boolean | target_field | call | index | identifier |
                         ('(' > expression > ')') | set_literal;
const auto negation_def = x3::lit('-') >> x3::attr(expr_op::negate) > unary_expr;
const auto unary_expr_def = negation | primary;
const auto multiplicative_step_def = multiplicative_ops > unary_expr;
const auto multiplicative_def = unary_expr >> *multiplicative_step;
const auto additive_step_def = additive_ops > multiplicative;
const auto additive_def = multiplicative >> *additive_step;
const auto compare_step_def = compare_ops > additive;
const auto in_step_def = kw("in") >> x3::attr(expr_op::in_set) > set_literal;
const auto comparison_def = additive >> *(compare_step | in_step);
const auto not_op_def = kw("not") >> x3::attr(expr_op::logical_not) > not_expr;
const auto not_expr_def = not_op | comparison;
const auto and_step_def = kw("and") >> x3::attr(expr_op::logical_and) > not_expr;
const auto and_expr_def = not_expr >> *and_step;
const auto or_step_def = kw("or") >> x3::attr(expr_op::logical_or) > and_expr;
const auto expression_def = and_expr >> *or_step;

BOOST_SPIRIT_DEFINE(identifier_action, integer_action, boolean_action, target_field_action,
                    set_literal_action)
BOOST_SPIRIT_DEFINE(identifier, integer, boolean, target_field, call, index, set_literal, primary,
                    negation, unary_expr, multiplicative_step, multiplicative, additive_step,
                    additive, compare_step, in_step, comparison, not_op, not_expr, and_step,
                    and_expr, or_step, expression)

const x3::rule<set_domain_id, ast::set_domain> set_domain = "set domain";
const x3::rule<range_domain_id, ast::range_domain> range_domain = "range domain";
const x3::rule<pow2_domain_id, ast::pow2_domain> pow2_domain = "pow2 domain";
const x3::rule<bool_domain_id, ast::bool_domain> bool_domain = "bool";
const x3::rule<perm_domain_id, ast::perm_domain> perm_domain = "perm domain";
const x3::rule<class domain_id, ast::domain> domain =
    "domain ({...}, lo .. hi, pow2(lo .. hi), bool or perm(...))";

const x3::rule<class set_domain_action_id, ast::set_domain> set_domain_action = "set domain";
const auto set_domain_action_def = ('{' > -(expression % ',') > '}')[set_elements];
const auto set_domain_def = set_domain_action;
const auto range_domain_def = expression >> ".." > expression > -(kw("step") > expression);
const auto pow2_domain_def = kw("pow2") >> '(' >> expression >> ".." > expression > ')';
const x3::rule<class bool_domain_action_id, ast::bool_domain> bool_domain_action = "bool";
const auto bool_domain_action_def = kw("bool")[set_bool_keyword];
const auto bool_domain_def = bool_domain_action;
const x3::rule<class perm_domain_action_id, ast::perm_domain> perm_domain_action = "perm domain";
const auto perm_domain_action_def =
    (kw("perm") >> '(' > (identifier % ',') > ')')[set_perm_elements];
const auto perm_domain_def = perm_domain_action;
const auto domain_def = set_domain | pow2_domain | perm_domain | bool_domain | range_domain;

BOOST_SPIRIT_DEFINE(set_domain_action, bool_domain_action, perm_domain_action)
BOOST_SPIRIT_DEFINE(set_domain, range_domain, pow2_domain, bool_domain, perm_domain, domain)

const x3::rule<const_id, ast::const_decl> const_decl = "const";
const x3::rule<let_id, ast::let_decl> let_decl = "let";
const x3::rule<param_id, ast::param_decl> param_decl = "param";
const x3::rule<require_id, ast::require_stmt> require_stmt = "require";
const x3::rule<when_id, ast::when_block> when_block = "when";
const x3::rule<class statement_id, ast::statement> statement = "statement";
const x3::rule<class block_end_id> block_end =
    "a statement (param, const, let, require, when) or '}'";
const x3::rule<space_id, ast::space_block> space_block = "space";
const x3::rule<assignment_id, ast::target_assignment> assignment = "assignment";
const x3::rule<class assignment_end_id> assignment_end = "an assignment (NAME = VALUE) or '}'";
const x3::rule<target_id, ast::target_decl> target_decl = "target";

const auto const_decl_def = kw("const") > identifier > '=' > expression;
const auto let_decl_def = kw("let") > identifier > '=' > expression;
const auto param_decl_def = kw("param") > identifier > ':' > domain > -('=' > expression);
const auto require_stmt_def = kw("require") > expression > -string_literal;
const auto when_block_def = kw("when") > expression > '{' > *statement > block_end;
const auto statement_def = (const_decl | let_decl | param_decl | require_stmt | when_block) >>
                           -x3::lit(';');
const auto block_end_def = x3::lit('}');
const auto space_block_def = kw("space") > identifier > '{' > *statement > block_end;
const auto assignment_def = identifier > '=' > expression;
const auto assignment_end_def = x3::lit('}');
const auto target_decl_def = kw("target") > identifier > ':' > identifier > '{' >
                             *(assignment >> -x3::lit(';')) > assignment_end;

BOOST_SPIRIT_DEFINE(const_decl, let_decl, param_decl, require_stmt, when_block, statement,
                    block_end, space_block, assignment, assignment_end, target_decl)

// A model (docs/models.md): consts and kernel instances.
const x3::rule<space_file_ref_id, ast::space_file_ref> space_file_ref = "space";
const x3::rule<space_name_ref_id, ast::space_name_ref> space_name_ref = "space";
const x3::rule<set_field_id, ast::set_field> set_field = "set";
const x3::rule<dtype_field_id, ast::dtype_field> dtype_field = "dtype";
const x3::rule<calls_field_id, ast::calls_field> calls_field = "calls";
const x3::rule<group_field_id, ast::group_field> group_field = "group";
const x3::rule<class kernel_field_id, ast::kernel_field> kernel_field = "kernel field";
const x3::rule<class kernel_end_id> kernel_end =
    "a kernel field (space, set, dtype, calls, group) or '}'";
const x3::rule<kernel_id, ast::kernel_decl> kernel_decl = "kernel";
const x3::rule<class model_item_id, ast::model_item> model_item = "model item";
const x3::rule<class model_end_id> model_end = "a const, a kernel or '}'";
const x3::rule<model_id, ast::model_block> model_block = "model";

const x3::rule<class space_name_ref_action_id, ast::space_name_ref> space_name_ref_action = "space";
const x3::rule<class set_field_action_id, ast::set_field> set_field_action = "set";
const x3::rule<class dtype_field_action_id, ast::dtype_field> dtype_field_action = "dtype";
const x3::rule<class calls_field_action_id, ast::calls_field> calls_field_action = "calls";
const x3::rule<class group_field_action_id, ast::group_field> group_field_action = "group";

const auto space_file_ref_def = kw("space") >> string_literal >> -(':' > identifier);
const auto space_name_ref_action_def = (kw("space") > identifier)[set_name];
const auto space_name_ref_def = space_name_ref_action;
const auto set_field_action_def = (kw("set") > (assignment % ','))[set_assignments];
const auto set_field_def = set_field_action;
const auto dtype_field_action_def = (kw("dtype") > identifier)[set_value];
const auto dtype_field_def = dtype_field_action;
const auto calls_field_action_def = (kw("calls") > expression)[set_value];
const auto calls_field_def = calls_field_action;
const auto group_field_action_def = (kw("group") > identifier)[set_value];
const auto group_field_def = group_field_action;
const auto kernel_field_def =
    space_file_ref | space_name_ref | set_field | dtype_field | calls_field | group_field;
const auto kernel_end_def = x3::lit('}');
const auto kernel_decl_def = kw("kernel") > identifier > '{' >
                             *(kernel_field >> -x3::lit(';')) > kernel_end;
const auto model_item_def = const_decl | kernel_decl;
const auto model_end_def = x3::lit('}');
const auto model_block_def = kw("model") > identifier > '{' >
                             *(model_item >> -x3::lit(';')) > model_end;

BOOST_SPIRIT_DEFINE(space_name_ref_action, set_field_action, dtype_field_action, calls_field_action,
                    group_field_action)
BOOST_SPIRIT_DEFINE(space_file_ref, space_name_ref, set_field, dtype_field, calls_field,
                    group_field, kernel_field, kernel_end, kernel_decl, model_item, model_end,
                    model_block)

}  // namespace grammar

namespace {

namespace x3 = boost::spirit::x3;
using iterator = grammar::iterator;

bool is_word_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_'; }

/// The first position at or after `at` that is not whitespace or a comment.
iterator skip_blanks(iterator at, iterator end) {
  while (at != end) {
    if (std::isspace(static_cast<unsigned char>(*at)) != 0) {
      ++at;
    } else if (*at == '#') {
      while (at != end && *at != '\n') ++at;
    } else {
      break;
    }
  }
  return at;
}

/// The token starting at `at`, for "found 'X'": a word, a number, a
/// two-character operator or one character.
std::string token_at(iterator at, iterator end) {
  if (at == end) return {};
  iterator stop = at;
  if (is_word_char(*at)) {
    while (stop != end && is_word_char(*stop)) ++stop;
  } else {
    static constexpr std::string_view two_char[] = {"==", "!=", "<=", ">=", ".."};
    std::string_view rest(at, static_cast<std::size_t>(end - at));
    bool is_pair = false;
    for (auto op : two_char) is_pair = is_pair || rest.starts_with(op);
    stop = at + (is_pair ? 2 : 1);
    if (const auto byte = static_cast<unsigned char>(*at); byte < 0x20 || byte == 0x7f) {
      static constexpr char hex[] = "0123456789abcdef";
      return std::string("\\x") + hex[byte >> 4] + hex[byte & 15];  // a NUL is not written as is
    }
  }
  return std::string(at, stop);
}

/// x3 names literals with double quotes ("..") and rules by their name.
std::string expected_text(std::string which) {
  for (auto& c : which) {
    if (c == '"') c = '\'';
  }
  return which;
}

/// A hint when the found word is a misspelt keyword the parser could accept.
std::string keyword_hint(const std::string& which, const std::string& found) {
  static const std::vector<std::string> statements = {"param", "const", "let", "require", "when"};
  static const std::vector<std::string> top_level = {"space", "target", "model"};
  static const std::vector<std::string> kernel_fields = {"space", "set", "dtype", "calls", "group"};
  static const std::vector<std::string> model_items = {"const", "kernel"};
  static const std::vector<std::string> domain_words = {"bool", "perm", "pow2"};
  if (which.starts_with("a statement")) return did_you_mean(found, statements);
  if (which.starts_with("'space'")) return did_you_mean(found, top_level);
  if (which.starts_with("a kernel field")) return did_you_mean(found, kernel_fields);
  if (which.starts_with("a const, a kernel")) return did_you_mean(found, model_items);
  if (which.starts_with("domain")) return did_you_mean(found, domain_words);
  return {};
}

/// Where to resume after a syntax error in the block that starts at `start`:
/// just past the brace that closes the block's first '{', or the end.
iterator resume_point(iterator start, iterator end) {
  int depth = 0;
  bool opened = false;
  for (iterator at = start; at != end; ++at) {
    if (*at == '#') {
      while (at != end && *at != '\n') ++at;
      if (at == end) break;
    } else if (*at == '"') {
      ++at;
      while (at != end && *at != '"' && *at != '\n') ++at;
      if (at == end) break;
    } else if (*at == '{') {
      ++depth;
      opened = true;
    } else if (*at == '}' && opened && --depth == 0) {
      return at + 1;
    }
  }
  return end;
}

void report_syntax_error(const source& src, reporter& out, iterator where,
                         const std::string& which) {
  iterator begin = src.text().data();
  iterator end = begin + src.text().size();
  if (which == "'\"'") {  // a string's closing quote: point at its opening one, on this line
    iterator open = where;
    while (open != begin && *(open - 1) != '"') --open;
    out.error(static_cast<std::size_t>(open - begin) - (open == begin ? 0 : 1),
              "unterminated string: expected '\"' before the end of the line",
              "a string (a require message, a kernel's space file) is on one line");
    return;
  }
  where = skip_blanks(where, end);
  auto found = token_at(where, end);
  if (found.empty()) {  // point just after the last token, not at a blank last line
    iterator last = where;
    while (last != begin && std::isspace(static_cast<unsigned char>(*(last - 1))) != 0) --last;
    where = last;
  }
  auto expected = expected_text(which);
  auto what = found.empty() ? std::string("end of input") : "'" + found + "'";
  out.error(static_cast<std::size_t>(where - begin), "expected " + expected + ", found " + what,
            keyword_hint(expected, found));
}

/// Parses one top-level item at `at`; returns where parsing continues.
iterator parse_item(const source& src, reporter& out, grammar::position_cache& positions,
                    ast::file& file, iterator at, iterator end) {
  using grammar::skipper;
  auto with_positions = [&](const auto& rule) {
    return x3::with<grammar::position_cache_tag>(positions)[rule];
  };
  iterator start = at;
  try {
    ast::target_decl target;
    if (x3::phrase_parse(at, end, with_positions(grammar::target_decl), skipper, target)) {
      file.targets.push_back(std::move(target));
      return at;
    }
    at = start;
    ast::space_block space;
    if (x3::phrase_parse(at, end, with_positions(grammar::space_block), skipper, space)) {
      file.spaces.push_back(std::move(space));
      return at;
    }
    at = start;
    ast::model_block model;
    if (x3::phrase_parse(at, end, with_positions(grammar::model_block), skipper, model)) {
      file.models.push_back(std::move(model));
      return at;
    }
    report_syntax_error(src, out, start, "'space', 'target' or 'model'");
  } catch (const x3::expectation_failure<iterator>& failure) {
    report_syntax_error(src, out, failure.where(), failure.which());
  }
  return resume_point(start, end);
}

}  // namespace

span parse_tree::span_of(const boost::spirit::x3::position_tagged& node) const {
  auto first = static_cast<std::size_t>(node.id_first);
  auto last = static_cast<std::size_t>(node.id_last);
  if (node.id_first < 0 || last >= offsets.size()) return {};
  return {offsets[first], offsets[last]};
}

parse_tree parse(const source& src, reporter& out) {
  iterator begin = src.text().data();
  iterator end = begin + src.text().size();
  grammar::position_cache positions(begin, end);
  parse_tree tree;
  if (src.text().size() > max_source_bytes) {
    out.error("the text is " + std::to_string(src.text().size()) + " bytes; at most " +
                  std::to_string(max_source_bytes) + " are read (docs/limits.md)",
              "split it into files of one space each");
    return tree;
  }
  if (auto problem = precheck(src.text())) {
    out.error(problem->offset, problem->message, problem->hint);
    return tree;
  }
  for (iterator at = skip_blanks(begin, end); at != end; at = skip_blanks(at, end)) {
    at = parse_item(src, out, positions, tree.file, at, end);
  }
  for (auto position : positions.get_positions()) {
    tree.offsets.push_back(static_cast<std::size_t>(position - begin));
  }
  return tree;
}

}  // namespace tessel::dsl
