// The space's public operations; the trees live in tree.cpp, the encoding
// in encoding.cpp, JSON in json.cpp.
#include "space/impl.hpp"

#include <tessel/error.hpp>
#include <tessel/hash.hpp>
#include <tessel/space.hpp>

#include <algorithm>
#include <functional>
#include <numeric>
#include <set>
#include <string>

namespace tessel {
namespace {

[[noreturn]] void definition_error(const std::string& message, int line = 0) {
  diagnostic d;
  d.message = message;
  d.line = line;
  throw space_error({d});
}

std::uint64_t factorial(std::size_t n) {
  std::uint64_t f = 1;
  for (std::size_t i = 2; i <= n; ++i) f *= i;
  return f;
}

void check_domain(const parameter& p) {
  const auto& d = p.dom;
  const auto where = "parameter '" + p.name + "'";
  if (d.size() == 0) definition_error(where + " has an empty domain", p.line);
  if (d.size() >= config::inactive) definition_error(where + " has too many values", p.line);
  switch (d.kind) {
    case param_kind::integer:
      if (!std::is_sorted(d.values.begin(), d.values.end()) ||
          std::adjacent_find(d.values.begin(), d.values.end()) != d.values.end())
        definition_error(where + ": integer values must be sorted ascending without duplicates",
                         p.line);
      break;
    case param_kind::boolean:
      if (d.values != std::vector<std::int64_t>{0, 1})
        definition_error(where + ": boolean values must be {0, 1}", p.line);
      break;
    case param_kind::symbol:
      if (d.labels.size() != d.values.size())
        definition_error(where + ": one label per symbol value", p.line);
      break;
    case param_kind::permutation:
      if (d.labels.size() > 8 || d.labels.empty())
        definition_error(where + ": permutations have 1 to 8 elements", p.line);
      if (d.values.size() != factorial(d.labels.size()) || d.element_ids.size() != d.labels.size())
        definition_error(where + ": a permutation domain holds every order of its elements",
                         p.line);
      break;
  }
  if (p.default_index && *p.default_index >= d.size())
    definition_error(where + ": default out of domain", p.line);
}

void check_lets(const space::definition& def) {
  // A let may read only earlier lets: the order is the evaluation order.
  std::function<void(const expr&, std::size_t)> walk = [&](const expr& e, std::size_t self) {
    if (!e) return;
    if (e->op == expr_op::let && static_cast<std::size_t>(e->value) >= self)
      definition_error(
          "let '" + def.lets[self].name + "' reads a let that is not defined before it",
          def.lets[self].line);
    for (const auto& a : e->args) walk(a, self);
  };
  for (std::size_t i = 0; i < def.lets.size(); ++i) walk(def.lets[i].value, i);
}

void check_definition(const space::definition& def) {
  std::set<std::string, std::less<>> names;
  for (const auto& p : def.parameters) {
    if (p.name.empty()) definition_error("a parameter has no name", p.line);
    if (!names.insert(p.name).second)
      definition_error("duplicate parameter '" + p.name + "'", p.line);
    check_domain(p);
  }
  check_lets(def);
}

}  // namespace

// --- domain, value, definition -----------------------------------------------

std::vector<std::size_t> domain::permutation(std::size_t rank) const {
  // Lexicographic unranking through the factorial number system.
  std::vector<std::size_t> pool(labels.size());
  std::iota(pool.begin(), pool.end(), 0);
  std::vector<std::size_t> order;
  order.reserve(pool.size());
  for (std::size_t n = pool.size(); n > 0; --n) {
    const auto f = factorial(n - 1);
    const auto i = rank / f;
    rank %= f;
    order.push_back(pool[i]);
    pool.erase(pool.begin() + static_cast<std::ptrdiff_t>(i));
  }
  return order;
}

std::string domain::label(std::size_t i) const {
  if (i == config::inactive) return "-";
  switch (kind) {
    case param_kind::integer: return std::to_string(values[i]);
    case param_kind::boolean: return values[i] != 0 ? "true" : "false";
    case param_kind::symbol: return labels[i];
    case param_kind::permutation: {
      std::string text = "[";
      for (auto e : permutation(i)) text += (text.size() > 1 ? ", " : "") + labels[e];
      return text + "]";
    }
  }
  return {};
}

std::string value::to_string() const {
  if (!active) return "-";
  switch (kind) {
    case param_kind::integer: return std::to_string(integer);
    case param_kind::boolean: return integer != 0 ? "true" : "false";
    case param_kind::symbol: return symbol;
    case param_kind::permutation: {
      std::string text = "[";
      for (const auto& e : order) text += (text.size() > 1 ? ", " : "") + e;
      return text + "]";
    }
  }
  return {};
}

std::int64_t space::definition::intern(std::string_view text) {
  if (symbol_ids.size() != symbols.size()) {  // `symbols` was edited directly
    symbol_ids.clear();
    for (std::size_t i = 0; i < symbols.size(); ++i)
      symbol_ids.emplace(symbols[i], static_cast<std::int64_t>(i));
  }
  if (symbol_ids.size() != symbols.size()) {  // a duplicate name: the first id, as before
    const auto it = std::find(symbols.begin(), symbols.end(), text);
    if (it != symbols.end()) return it - symbols.begin();
  } else if (const auto it = symbol_ids.find(std::string(text)); it != symbol_ids.end()) {
    return it->second;
  }
  symbols.emplace_back(text);
  const auto id = static_cast<std::int64_t>(symbols.size() - 1);
  symbol_ids.emplace(symbols.back(), id);
  return id;
}

// --- construction -----------------------------------------------------------------

space::space(definition def) {
  check_definition(def);
  auto s = std::make_shared<impl>(std::move(def));
  for (const auto& c : s->def.constraints) s->constraints.push_back(s->eval.compile(c.condition));
  s->whens.resize(s->def.parameters.size());
  s->dependents.resize(s->def.parameters.size());
  for (std::size_t p = 0; p < s->def.parameters.size(); ++p) {
    const auto& when = s->def.parameters[p].when;
    if (!when) continue;
    s->whens[p] = s->eval.compile(when);
    for (auto input : s->whens[p]->inputs) {
      if (input == p)
        definition_error("the 'when' of parameter '" + s->def.parameters[p].name +
                         "' reads itself");
      s->dependents[input].push_back(p);
    }
  }
  for (const auto& l : s->def.lets) (void)s->eval.compile(l.value);  // reject malformed lets early
  detail::build_trees(*s);
  detail::build_encoding(*s);
  impl_ = std::move(s);
}

const space::definition& space::def() const noexcept { return impl_->def; }

std::optional<std::size_t> space::parameter_index(std::string_view name) const {
  const auto& ps = parameters();
  for (std::size_t i = 0; i < ps.size(); ++i)
    if (ps[i].name == name) return i;
  return std::nullopt;
}

std::uint64_t space::count() const noexcept { return impl_->count; }
std::optional<std::uint64_t> space::cartesian_size() const noexcept { return impl_->cartesian; }
double space::log10_cartesian_size() const noexcept { return impl_->log10_cartesian; }
const std::vector<constraint_stat>& space::constraint_stats() const noexcept {
  return impl_->stats;
}
const std::vector<group_info>& space::groups() const noexcept { return impl_->infos; }
const std::vector<encoded_dimension>& space::encoding() const noexcept { return impl_->encoding; }

// --- validity -----------------------------------------------------------------

std::vector<std::int64_t> space::impl::values_of(const config& c) const {
  std::vector<std::int64_t> values(def.parameters.size(), 0);
  for (std::size_t p = 0; p < values.size() && p < c.size(); ++p)
    if (c[p] != config::inactive && c[p] < def.parameters[p].dom.size())
      values[p] = def.parameters[p].dom.values[c[p]];
  return values;
}

bool space::impl::active(std::size_t p, const std::int64_t* values) const {
  if (!whens[p]) return true;
  const auto v = eval.run(*whens[p], values);
  return v.ok() && v.value != 0;
}

bool space::impl::valid(const config& c, std::string* why) const {
  auto fail = [&](std::string reason) {
    if (why) *why = std::move(reason);
    return false;
  };
  if (c.size() != def.parameters.size())
    return fail("config has " + std::to_string(c.size()) + " values; the space has " +
                std::to_string(def.parameters.size()) + " parameters");
  for (std::size_t p = 0; p < c.size(); ++p) {
    const auto& param = def.parameters[p];
    if (c[p] == config::inactive ? !param.when : c[p] >= param.dom.size())
      return fail(param.name + ": index " + std::to_string(c[p]) + " is outside its domain");
  }
  const auto values = values_of(c);
  for (std::size_t p = 0; p < c.size(); ++p) {
    if (!whens[p]) continue;
    const bool on = active(p, values.data());
    if (on == (c[p] == config::inactive))
      return fail(def.parameters[p].name +
                  (on ? " must be set: its 'when' condition holds"
                      : " must be inactive: its 'when' condition is false"));
  }
  for (std::size_t i = 0; i < constraints.size(); ++i) {
    const auto v = eval.run(constraints[i], values.data());
    if (v.ok() && v.value != 0) continue;
    const auto& con = def.constraints[i];
    std::string reason = con.message.empty() ? "" : con.message + ": ";
    return fail(reason + "violates '" + con.text + "'" +
                (v.ok() ? "" : " (evaluation failed: " + std::string(to_string(v.status)) + ")"));
  }
  return true;
}

bool space::is_valid(const config& c) const { return impl_->valid(c, nullptr); }

std::string space::why_invalid(const config& c) const {
  std::string why;
  return impl_->valid(c, &why) ? std::string() : why;
}

// --- ranks, sampling, enumeration -------------------------------------------------

config space::at(std::uint64_t rank) const {
  if (rank >= count())
    throw error("space::at: rank " + std::to_string(rank) +
                " is not below count() = " + std::to_string(count()));
  return impl_->unrank(rank);
}

std::uint64_t space::rank(const config& c) const {
  const auto r = impl_->rank_of(c);
  if (!r) throw error("space::rank: config is not valid: " + why_invalid(c));
  return *r;
}

config space::sample(rng& random) const { return impl_->unrank(random.uniform(count())); }

space::range space::configs() const { return range(this); }
space::iterator space::configs_begin() const { return iterator(this, 0); }
space::iterator space::configs_end() const { return iterator(this, count()); }

space::iterator::iterator(const space* s, std::uint64_t rank) : space_(s), rank_(rank) {
  if (rank_ < s->count()) current_ = s->impl_->unrank(rank_);
}

space::iterator& space::iterator::operator++() {
  if (++rank_ < space_->count()) current_ = space_->impl_->unrank(rank_);
  return *this;
}

// --- values ---------------------------------------------------------------------

value space::value_of(const config& c, std::size_t parameter) const {
  const auto& p = parameters().at(parameter);
  value v;
  v.kind = p.dom.kind;
  const auto index = c[parameter];
  if (index == config::inactive) {
    v.active = false;
    return v;
  }
  switch (p.dom.kind) {
    case param_kind::integer:
    case param_kind::boolean: v.integer = p.dom.values.at(index); break;
    case param_kind::symbol: v.symbol = p.dom.labels.at(index); break;
    case param_kind::permutation:
      for (auto e : p.dom.permutation(index)) v.order.push_back(p.dom.labels[e]);
      break;
  }
  return v;
}

value space::value_of(const config& c, std::string_view parameter) const {
  const auto index = parameter_index(parameter);
  if (!index) throw error("unknown parameter '" + std::string(parameter) + "'");
  return value_of(c, *index);
}

std::int64_t space::integer(const config& c, std::string_view parameter) const {
  const auto v = value_of(c, parameter);
  if (v.kind != param_kind::integer && v.kind != param_kind::boolean)
    throw error("parameter '" + std::string(parameter) + "' is not an integer or boolean");
  if (!v.active)
    throw error("parameter '" + std::string(parameter) + "' is inactive in this config");
  return v.integer;
}

std::optional<std::int64_t> space::evaluate(const config& c, std::string_view name) const {
  const auto& d = def();
  for (const auto& k : d.constants)
    if (k.name == name) return k.value;
  for (std::size_t i = 0; i < d.lets.size(); ++i) {
    if (d.lets[i].name != name) continue;
    const auto program = impl_->eval.compile(make_let(i, d.lets[i].value->type));
    const auto values = impl_->values_of(c);
    const auto v = impl_->eval.run(program, values.data());
    return v.ok() ? std::optional<std::int64_t>(v.value) : std::nullopt;
  }
  throw error("unknown let or constant '" + std::string(name) + "'");
}

std::optional<config> space::default_config() const {
  config c(std::vector<config::index_type>(size(), 0));
  for (std::size_t p = 0; p < size(); ++p)
    c[p] = static_cast<config::index_type>(parameters()[p].default_index.value_or(0));
  // Conditional parameters follow their conditions, in declaration order.
  for (std::size_t p = 0; p < size(); ++p) {
    if (!impl_->whens[p]) continue;
    const auto values = impl_->values_of(c);
    if (!impl_->active(p, values.data())) c[p] = config::inactive;
  }
  if (!is_valid(c)) return std::nullopt;
  return c;
}

std::uint64_t space::key(const config& c) const {
  std::uint64_t h = fnv1a_offset_basis;
  for (std::size_t p = 0; p < size() && p < c.size(); ++p) {
    h = fnv1a(parameters()[p].name, h);
    h = fnv1a("=", h);
    h = fnv1a(parameters()[p].dom.label(c[p]), h);
    h = fnv1a(";", h);
  }
  return h;
}

}  // namespace tessel
