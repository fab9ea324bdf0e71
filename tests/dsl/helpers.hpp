// tests/dsl/helpers.hpp: parsing shortcuts and a printer that shows a lowered
// expression as an S-expression, so golden tests compare structure.
#pragma once

#include <tessel/dsl.hpp>
#include <tessel/error.hpp>

#include <doctest/doctest.h>

#include <fstream>
#include <sstream>
#include <string>
#include <string_view>

namespace tessel::testing {

/// The text of examples/NAME.
inline std::string read_example(std::string_view name) {
  std::ifstream in(std::string(TESSEL_SOURCE_DIR) + "/examples/" + std::string(name));
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

inline parse_options options(std::string target = "trn2") {
  parse_options o;
  o.file = "test.tsl";
  o.target = std::move(target);
  return o;
}

/// The first space of `text`; fails the test on a space_error.
inline space::definition definition_of(std::string_view text, const parse_options& o = options()) {
  try {
    auto defs = parse_definitions(text, o);
    REQUIRE(!defs.empty());
    return defs.front();
  } catch (const space_error& e) {
    FAIL_CHECK(e.what());
    throw;
  }
}

/// Every diagnostic of `text`, rendered, or "" when it has none.
inline std::string errors_of(std::string_view text, const parse_options& o = options()) {
  try {
    (void)parse_definitions(text, o);
  } catch (const space_error& e) {
    return e.what();
  }
  return "";
}

/// The messages only, one per line.
inline std::string messages_of(std::string_view text, const parse_options& o = options()) {
  try {
    (void)parse_definitions(text, o);
  } catch (const space_error& e) {
    std::string all;
    for (const auto& d : e.diagnostics()) all += d.message + "\n";
    return all;
  }
  return "";
}

inline std::string show_value(std::int64_t value, value_type type, const space::definition& def) {
  if (type == value_type::boolean) return value != 0 ? "true" : "false";
  if (type == value_type::symbol && value >= 0 &&
      static_cast<std::size_t>(value) < def.symbols.size()) {
    return def.symbols[static_cast<std::size_t>(value)];
  }
  return std::to_string(value);
}

/// The operator's name in show()'s prefix form: the library's
/// (to_string), but "neg" for negation and "at" for element_at, whose
/// symbols ("-", "[]") read ambiguously there.
inline std::string op_name(expr_op op) {
  if (op == expr_op::negate) return "neg";
  if (op == expr_op::element_at) return "at";
  return std::string(to_string(op));
}

/// `(and (== (% 4096 tile_m) 0) prefetch)`; literals print by type.
inline std::string show(const expr& e, const space::definition& def) {
  if (!e) return "null";
  switch (e->op) {
    case expr_op::literal: return show_value(e->value, e->type, def);
    case expr_op::param: return def.parameters.at(static_cast<std::size_t>(e->value)).name;
    case expr_op::let: return def.lets.at(static_cast<std::size_t>(e->value)).name;
    default: break;
  }
  std::string text = std::string("(") + op_name(e->op);
  for (const auto& arg : e->args) text += " " + show(arg, def);
  if (e->op == expr_op::in_set) {
    std::string set;
    for (auto m : e->set) set += (set.empty() ? "" : " ") + show_value(m, e->args[0]->type, def);
    text += " {" + set + "}";
  }
  if (e->op == expr_op::position || e->op == expr_op::before) {
    const auto& labels = def.parameters.at(static_cast<std::size_t>(e->args[0]->value)).dom.labels;
    if (e->op == expr_op::position) text += " " + labels.at(static_cast<std::size_t>(e->value));
    for (auto m : e->set) text += " " + labels.at(static_cast<std::size_t>(m));
  }
  return text + ")";
}

/// The expression a space's let `name` lowers to, shown.
inline std::string show_let(const space::definition& def, std::string_view name) {
  for (const auto& l : def.lets) {
    if (l.name == name) return show(l.value, def);
  }
  return "no let " + std::string(name);
}

/// Constraint i, shown.
inline std::string show_constraint(const space::definition& def, std::size_t i) {
  REQUIRE(i < def.constraints.size());
  return show(def.constraints[i].condition, def);
}

}  // namespace tessel::testing
