// knobs.cpp: knob declarations, the review of a space against a workload's
// knobs, and the checked reading of a config (knobs.hpp).
#include "knobs.hpp"

#include <tessel/did_you_mean.hpp>
#include <tessel/error.hpp>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <optional>

namespace tessel::sim {

// --- declarations ----------------------------------------------------------------------

knob knob::required_integer(std::string name, std::string meaning) {
  knob k;
  k.name = std::move(name);
  k.meaning = std::move(meaning);
  k.required = true;
  return k;
}

knob knob::integer(std::string name, std::int64_t fallback, std::string meaning,
                   std::string range) {
  knob k;
  k.name = std::move(name);
  k.integer_default = fallback;
  k.meaning = std::move(meaning);
  k.range = std::move(range);
  return k;
}

knob knob::integer(std::string name, derived fallback, std::string meaning, std::string range) {
  knob k = integer(std::move(name), 0, std::move(meaning), std::move(range));
  k.derived_text = std::move(fallback.text);
  return k;
}

knob knob::flag(std::string name, bool fallback, std::string meaning) {
  knob k = integer(std::move(name), fallback ? 1 : 0, std::move(meaning));
  k.kind = knob_kind::flag;
  return k;
}

knob knob::symbol(std::string name, std::vector<std::string> choices, std::string fallback,
                  std::string meaning) {
  knob k;
  k.name = std::move(name);
  k.kind = knob_kind::symbol;
  k.choices = std::move(choices);
  k.symbol_default = std::move(fallback);
  k.meaning = std::move(meaning);
  return k;
}

knob knob::symbol(std::string name, std::vector<std::string> choices, derived fallback,
                  std::string meaning) {
  knob k = symbol(std::move(name), std::move(choices), "", std::move(meaning));
  k.derived_text = std::move(fallback.text);
  return k;
}

knob knob::order(std::string name, std::vector<std::string> elements, std::string meaning) {
  knob k;
  k.name = std::move(name);
  k.kind = knob_kind::order;
  k.choices = std::move(elements);
  k.meaning = std::move(meaning);
  return k;
}

std::string knob::values() const {
  switch (kind) {
    case knob_kind::integer: return range.empty() ? "integer" : "integer " + range;
    case knob_kind::flag: return "bool";
    case knob_kind::symbol: return fmt::format("{}", fmt::join(choices, " | "));
    case knob_kind::order: return fmt::format("perm({})", fmt::join(choices, ", "));
  }
  return "";
}

std::string knob::default_text() const {
  if (required) return "";
  if (!derived_text.empty()) return derived_text;
  switch (kind) {
    case knob_kind::integer: return std::to_string(integer_default);
    case knob_kind::flag: return integer_default != 0 ? "true" : "false";
    case knob_kind::symbol: return symbol_default;
    case knob_kind::order: return fmt::format("({})", fmt::join(choices, ", "));
  }
  return "";
}

namespace {

const char* kind_words(knob_kind kind) {
  switch (kind) {
    case knob_kind::integer: return "an integer";
    case knob_kind::flag: return "a bool";
    case knob_kind::symbol: return "a symbol";
    case knob_kind::order: return "a permutation";
  }
  return "";
}

const char* kind_words(param_kind kind) {
  switch (kind) {
    case param_kind::integer: return "an integer";
    case param_kind::boolean: return "a bool";
    case param_kind::symbol: return "a symbol";
    case param_kind::permutation: return "a permutation";
  }
  return "";
}

const char* kind_words(value_type type) {
  switch (type) {
    case value_type::integer: return "an integer";
    case value_type::boolean: return "a bool";
    case value_type::symbol: return "a symbol";
    case value_type::permutation: return "a permutation";
  }
  return "";
}

bool fits(knob_kind k, param_kind p) {
  switch (k) {
    case knob_kind::integer: return p == param_kind::integer;
    case knob_kind::flag: return p == param_kind::boolean;
    case knob_kind::symbol: return p == param_kind::symbol;
    case knob_kind::order: return p == param_kind::permutation;
  }
  return false;
}

bool fits(knob_kind k, value_type t) {
  switch (k) {
    case knob_kind::integer: return t == value_type::integer;
    case knob_kind::flag: return t == value_type::boolean;
    case knob_kind::symbol: return t == value_type::symbol;
    case knob_kind::order: return false;
  }
  return false;
}

/// The open-addressed index's size (knobs.hpp, knob_table::index_).
constexpr std::size_t index_slots = 128;

/// The first slot of `name` in the index: a hash of its length and ends.
std::size_t slot_of(std::string_view name) {
  const auto first = static_cast<unsigned char>(name.front());
  const auto last = static_cast<unsigned char>(name.back());
  return (name.size() * 7 + first * 3 + last * 5) % index_slots;
}

const constant* find_constant(const space& s, std::string_view name) {
  for (const auto& k : s.def().constants)
    if (k.name == name) return &k;
  return nullptr;
}

bool has_let(const space& s, std::string_view name) {
  return std::any_of(s.def().lets.begin(), s.def().lets.end(),
                     [&](const let_value& l) { return l.name == name; });
}

std::string symbol_of(const space& s, const constant& k) {
  const auto& symbols = s.def().symbols;
  return k.value >= 0 && static_cast<std::size_t>(k.value) < symbols.size()
             ? symbols[static_cast<std::size_t>(k.value)]
             : std::string();
}

std::string quoted_list(const std::vector<std::string>& names) {
  std::vector<std::string> q;
  for (const auto& n : names) q.push_back("'" + n + "'");
  return fmt::format("{}", fmt::join(q, ", "));
}

/// The problems of a parameter named like knob `k` (values of a symbol, elements of an order).
void review_parameter(const knob& k, const parameter& p, std::vector<std::string>& errors) {
  if (!fits(k.kind, p.dom.kind)) {
    errors.push_back(fmt::format("parameter '{}' is {}; the workload reads it as {}", p.name,
                                 kind_words(p.dom.kind), k.values()));
    return;
  }
  if (k.kind == knob_kind::symbol) {
    std::vector<std::string> unknown;
    for (const auto& label : p.dom.labels)
      if (std::find(k.choices.begin(), k.choices.end(), label) == k.choices.end())
        unknown.push_back(label);
    if (!unknown.empty())
      errors.push_back(fmt::format("parameter '{}' takes {}, which the workload does not know ({})",
                                   p.name, quoted_list(unknown), k.values()));
  }
  if (k.kind == knob_kind::order) {
    auto given = p.dom.labels, wanted = k.choices;
    std::sort(given.begin(), given.end());
    std::sort(wanted.begin(), wanted.end());
    if (given != wanted)
      errors.push_back(fmt::format("parameter '{}' permutes ({}); the workload reads {}", p.name,
                                   fmt::join(p.dom.labels, ", "), k.values()));
  }
}

void review_constant(const space& s, const knob& k, const constant& c,
                     std::vector<std::string>& errors) {
  if (!fits(k.kind, c.type)) {
    errors.push_back(fmt::format("const {} is {}; the workload reads it as {}", c.name,
                                 kind_words(c.type), k.values()));
    return;
  }
  if (k.kind != knob_kind::symbol) return;
  const std::string value = symbol_of(s, c);
  if (std::find(k.choices.begin(), k.choices.end(), value) == k.choices.end())
    errors.push_back(fmt::format("const {} = {}, which the workload does not know ({})", c.name,
                                 value, k.values()));
}

}  // namespace

// --- the table ---------------------------------------------------------------------------

knob_table::knob_table(std::string workload, std::vector<knob> knobs)
    : workload_(std::move(workload)), knobs_(std::move(knobs)) {
  if (knobs_.size() > index_slots / 2)
    throw error(
        fmt::format("sim workload '{}' declares over {} knobs", workload_, index_slots / 2));
  index_.assign(index_slots, {std::string_view(), 0});
  for (std::size_t i = 0; i < knobs_.size(); ++i) {
    const std::string_view name = knobs_[i].name;
    if (name.empty())
      throw error(fmt::format("sim workload '{}' declares a knob without a name", workload_));
    if (find(name))
      throw error(fmt::format("sim workload '{}' declares '{}' twice", workload_, name));
    std::size_t slot = slot_of(name);
    while (!index_[slot].first.empty()) slot = (slot + 1) % index_slots;
    index_[slot] = {name, i};
  }
  for (const auto& k : knobs_)
    if (k.kind == knob_kind::symbol && k.derived_text.empty() &&
        std::find(k.choices.begin(), k.choices.end(), k.symbol_default) == k.choices.end())
      throw error(fmt::format("sim workload '{}': the default of '{}' is not one of {}", workload_,
                              k.name, k.values()));
}

const knob* knob_table::find(std::string_view name) const {
  if (name.empty()) return nullptr;
  for (std::size_t slot = slot_of(name);; slot = (slot + 1) % index_slots) {
    const auto& [key, i] = index_[slot];
    if (key.empty()) return nullptr;
    if (key == name) return &knobs_[i];
  }
}

const knob& knob_table::at(std::string_view name, knob_kind kind) const {
  const knob* k = find(name);
  if (!k)
    throw error(
        fmt::format("sim workload '{}' reads '{}', which it does not declare", workload_, name));
  if (k->kind != kind)
    throw error(fmt::format("sim workload '{}' reads '{}' as {}, but declares it {} ({})",
                            workload_, name, kind_words(kind), kind_words(k->kind), k->values()));
  return *k;
}

knob_review knob_table::review(const space& s) const {
  knob_review out;
  std::vector<std::string> names;
  for (const auto& k : knobs_) names.push_back(k.name);
  const auto unread = [&](const std::string& name, const char* what) {
    if (name == "workload") return;  // the space's choice of workload (sim_backend)
    if (const auto close = closest_name(name, names); !close.empty())
      out.errors.push_back(fmt::format(
          "{} '{}' is not a name the workload reads: did you mean '{}'?", what, name, close));
    else
      out.unread.push_back(name);
  };
  for (const auto& p : s.parameters()) {
    if (const knob* k = find(p.name))
      review_parameter(*k, p, out.errors);
    else
      unread(p.name, "parameter");
  }
  for (const auto& c : s.def().constants) {
    if (const knob* k = find(c.name))
      review_constant(s, *k, c, out.errors);
    else
      unread(c.name, "const");
  }
  for (const auto& l : s.def().lets)
    if (const knob* k = find(l.name); k && k->kind != knob_kind::integer)
      out.errors.push_back(
          fmt::format("let {} is an integer; the workload reads it as {}", l.name, k->values()));
  for (const auto& k : knobs_) {
    if (s.parameter_index(k.name) || find_constant(s, k.name) || has_let(s, k.name)) continue;
    if (k.required)
      out.errors.push_back(
          fmt::format("needs '{}' as a constant or parameter: {}", k.name, k.meaning));
    else
      out.defaulted.push_back(&k);
  }
  return out;
}

// --- reading -----------------------------------------------------------------------------

/// Where a knob's value comes from in one config.
struct knob_reader::found {
  const parameter* param = nullptr;  ///< an active parameter
  std::size_t position = 0;          ///< its index in the space
  std::size_t index = 0;             ///< its value's index in its domain
  const constant* fixed = nullptr;   ///< else a constant
  bool let = false;                  ///< else a let
};

knob_reader::found knob_reader::lookup(const knob& k) const {
  found f;
  if (const auto i = s_.parameter_index(k.name);
      i && *i < c_.size() && c_[*i] != config::inactive) {
    f.param = &s_.parameters()[*i];
    f.position = *i;
    f.index = c_[*i];
    if (!fits(k.kind, f.param->dom.kind))
      throw error(fmt::format("sim workload '{}': parameter '{}' is {}, not {}", knobs_.workload(),
                              k.name, kind_words(f.param->dom.kind), kind_words(k.kind)));
    return f;
  }
  if ((f.fixed = find_constant(s_, k.name))) {
    if (!fits(k.kind, f.fixed->type))
      throw error(fmt::format("sim workload '{}': const {} is {}, not {}", knobs_.workload(),
                              k.name, kind_words(f.fixed->type), kind_words(k.kind)));
    return f;
  }
  f.let = k.kind == knob_kind::integer && has_let(s_, k.name);
  if (!f.let && k.required)
    throw error(fmt::format("sim workload '{}' needs '{}' as a constant or parameter: {}",
                            knobs_.workload(), k.name, k.meaning));
  return f;
}

const knob& knob_reader::declared(std::string_view name, knob_kind kind, bool with_fallback) const {
  const knob& k = knobs_.at(name, kind);
  if (with_fallback && k.derived_text.empty())
    throw error(
        fmt::format("sim workload '{}' reads '{}' with a fallback, but declares its default",
                    knobs_.workload(), name));
  if (!with_fallback && !k.derived_text.empty())
    throw error(
        fmt::format("sim workload '{}' reads '{}' without the fallback its declaration derives",
                    knobs_.workload(), name));
  return k;
}

bool knob_reader::has(std::string_view name) const {
  const knob* k = knobs_.find(name);
  if (!k)
    throw error(fmt::format("sim workload '{}' reads '{}', which it does not declare",
                            knobs_.workload(), name));
  if (k->required) return true;
  const found f = lookup(*k);
  return f.param || f.fixed || f.let;
}

std::int64_t knob_reader::integer(std::string_view name) const {
  const knob& k = declared(name, knob_kind::integer, false);
  const found f = lookup(k);
  if (f.param) return f.param->dom.values[f.index];
  if (f.fixed) return f.fixed->value;
  if (f.let) return s_.evaluate(c_, k.name).value_or(k.integer_default);
  return k.integer_default;
}

std::int64_t knob_reader::integer(std::string_view name, std::int64_t fallback) const {
  const knob& k = declared(name, knob_kind::integer, true);
  const found f = lookup(k);
  if (f.param) return f.param->dom.values[f.index];
  if (f.fixed) return f.fixed->value;
  if (f.let) return s_.evaluate(c_, k.name).value_or(fallback);
  return fallback;
}

bool knob_reader::flag(std::string_view name) const {
  const knob& k = declared(name, knob_kind::flag, false);
  const found f = lookup(k);
  if (f.param) return f.param->dom.values[f.index] != 0;
  if (f.fixed) return f.fixed->value != 0;
  return k.integer_default != 0;
}

std::string knob_reader::symbol(std::string_view name) const {
  const knob& k = declared(name, knob_kind::symbol, false);
  return given_symbol(k).value_or(k.symbol_default);
}

std::string knob_reader::symbol(std::string_view name, std::string_view fallback) const {
  const knob& k = declared(name, knob_kind::symbol, true);
  return given_symbol(k).value_or(std::string(fallback));
}

std::optional<std::string> knob_reader::given_symbol(const knob& k) const {
  const found f = lookup(k);
  if (!f.param && !f.fixed) return std::nullopt;
  std::string value = f.param ? f.param->dom.labels[f.index] : symbol_of(s_, *f.fixed);
  if (std::find(k.choices.begin(), k.choices.end(), value) == k.choices.end())
    throw error(fmt::format("sim workload '{}': '{}' = {} is not one of {}", knobs_.workload(),
                            k.name, value, k.values()));
  return value;
}

std::vector<std::string> knob_reader::order(std::string_view name) const {
  const knob& k = declared(name, knob_kind::order, false);
  const found f = lookup(k);
  if (!f.param) return k.choices;
  auto given = s_.value_of(c_, f.position).order;
  if (!std::is_permutation(given.begin(), given.end(), k.choices.begin(), k.choices.end()))
    throw error(fmt::format("sim workload '{}': '{}' = ({}) is not a {}", knobs_.workload(), k.name,
                            fmt::join(given, ", "), k.values()));
  return given;
}

}  // namespace tessel::sim
