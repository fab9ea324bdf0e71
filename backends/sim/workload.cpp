// workload.cpp: the workload table and the value reader (workload.hpp).
#include "workload.hpp"

#include "functional.hpp"
#include "nki/nki.hpp"

#include <tessel/error.hpp>
#include <tessel/gate.hpp>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

namespace tessel::sim {

// --- value_reader --------------------------------------------------------------------

const constant* value_reader::find_constant(std::string_view name) const {
  for (const auto& k : s_.def().constants)
    if (k.name == name) return &k;
  return nullptr;
}

std::optional<std::size_t> value_reader::active_parameter(std::string_view name) const {
  const auto index = s_.parameter_index(name);
  if (!index || *index >= c_.size() || c_[*index] == config::inactive) return std::nullopt;
  return index;
}

bool value_reader::has(std::string_view name) const {
  if (active_parameter(name) || find_constant(name)) return true;
  return std::any_of(s_.def().lets.begin(), s_.def().lets.end(),
                     [&](const let_value& l) { return l.name == name; });
}

std::optional<std::int64_t> value_reader::integer(std::string_view name) const {
  if (const auto p = active_parameter(name)) {
    const auto& dom = s_.parameters()[*p].dom;
    if (dom.kind == param_kind::integer || dom.kind == param_kind::boolean)
      return dom.values.at(c_[*p]);
    return std::nullopt;
  }
  if (const auto* k = find_constant(name))
    return k->type == value_type::integer || k->type == value_type::boolean
               ? std::optional(k->value)
               : std::nullopt;
  if (std::any_of(s_.def().lets.begin(), s_.def().lets.end(),
                  [&](const let_value& l) { return l.name == name; }))
    return s_.evaluate(c_, name);
  return std::nullopt;
}

std::int64_t value_reader::integer(std::string_view name, std::int64_t fallback) const {
  return integer(name).value_or(fallback);
}

std::optional<std::string> value_reader::symbol(std::string_view name) const {
  if (const auto p = active_parameter(name)) {
    const auto& dom = s_.parameters()[*p].dom;
    if (dom.kind != param_kind::symbol) return std::nullopt;
    return dom.labels.at(c_[*p]);
  }
  if (const auto* k = find_constant(name)) {
    if (k->type != value_type::symbol) return std::nullopt;
    const auto& symbols = s_.def().symbols;
    if (k->value < 0 || static_cast<std::size_t>(k->value) >= symbols.size()) return std::nullopt;
    return symbols[static_cast<std::size_t>(k->value)];
  }
  return std::nullopt;
}

std::string value_reader::symbol(std::string_view name, std::string_view fallback) const {
  return symbol(name).value_or(std::string(fallback));
}

bool value_reader::flag(std::string_view name, bool fallback) const {
  const auto v = integer(name);
  return v ? *v != 0 : fallback;
}

std::optional<std::vector<std::string>> value_reader::order(std::string_view name) const {
  const auto p = active_parameter(name);
  if (!p || s_.parameters()[*p].dom.kind != param_kind::permutation) return std::nullopt;
  return s_.value_of(c_, *p).order;
}

// --- workload defaults ----------------------------------------------------------------

void workload::check_space(const space& s) const {
  for (const auto& n : names()) {
    if (!n.fallback.empty()) continue;
    const bool present = s.parameter_index(n.name).has_value() ||
                         std::any_of(s.def().constants.begin(), s.def().constants.end(),
                                     [&](const constant& k) { return k.name == n.name; });
    if (!present)
      throw error(
          fmt::format("sim workload '{}' needs '{}' ({}) as a constant or parameter of space '{}'",
                      name(), n.name, n.meaning, s.name()));
  }
}

std::unique_ptr<functional_kernel> workload::functional_plan(const workload_plan& p,
                                                             const machine& m) const {
  (void)p;
  (void)m;
  return nullptr;
}

std::string workload::lower(const space& s, const config& c, const machine& m, program& out) const {
  out.clear();
  const auto p = plan_config(s, c, m);
  if (!p->error.empty()) return p->error;
  return lower_plan(*p, m, out);
}

std::unique_ptr<functional_kernel> workload::functional(const space& s, const config& c,
                                                        const machine& m) const {
  const auto p = plan_config(s, c, m);
  if (!p->error.empty()) return nullptr;
  return functional_plan(*p, m);
}

std::string workload::emit_nki(const space& s, const config& c, const nki::context& ctx,
                               std::string& out) const {
  const auto p = plan_config(s, c, ctx.m);
  if (!p->error.empty()) return p->error;
  program timed;
  if (auto e = lower_plan(*p, ctx.m, timed); !e.empty()) return e;
  nki::context with_structure = ctx;
  with_structure.structure = nki::to_python(nki::structure_of(timed));
  return emit_nki_plan(*p, with_structure, out);
}

std::optional<steady_estimate> workload::steady_plan(const workload_plan& p,
                                                     const machine& m) const {
  (void)p;
  (void)m;
  return std::nullopt;
}

double workload::estimated_instructions(const space& s, const config& c, const machine& m) const {
  (void)s;
  (void)c;
  (void)m;
  return 1e4;
}

std::string workload::emit_nki_plan(const workload_plan& p, const nki::context& ctx,
                                    std::string& out) const {
  (void)p;
  (void)ctx;
  (void)out;
  return fmt::format("workload '{}' has no NKI emitter", name());
}

std::vector<std::string> workload::suggest(const bottleneck& b, const space& s,
                                           const config& c) const {
  (void)b;
  (void)s;
  (void)c;
  return {};
}

// --- the table ------------------------------------------------------------------------------

namespace {
const std::vector<const workload*>& all_workloads() {
  static const std::vector<const workload*> list{
#define TESSEL_SIM_WORKLOAD(name) &name##_workload(),
#include "workloads/workloads.def"
#undef TESSEL_SIM_WORKLOAD
  };
  return list;
}
}  // namespace

const workload* find_workload(std::string_view name) {
  for (const auto* w : all_workloads())
    if (w->name() == name) return w;
  return nullptr;
}

const workload* workload_for_space(const space& s, std::string_view name) {
  std::string chosen(name);
  if (chosen.empty())
    for (const auto& k : s.def().constants)
      if (k.name == "workload" && k.type == value_type::symbol && k.value >= 0 &&
          static_cast<std::size_t>(k.value) < s.def().symbols.size())
        chosen = s.def().symbols[static_cast<std::size_t>(k.value)];
  if (chosen.empty() && find_workload(s.name())) chosen = s.name();
  if (chosen.empty())
    throw error(fmt::format(
        "sim: which workload does space '{}' describe? Declare `const workload = NAME` in the "
        "space or name it (workloads: {})",
        s.name(), fmt::join(workload_names(), ", ")));
  const auto* w = find_workload(chosen);
  if (!w)
    throw error(fmt::format("sim: unknown workload '{}' (workloads: {})", chosen,
                            fmt::join(workload_names(), ", ")));
  return w;
}

std::vector<std::string> workload_names() {
  std::vector<std::string> names;
  for (const auto* w : all_workloads()) names.emplace_back(w->name());
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace tessel::sim
