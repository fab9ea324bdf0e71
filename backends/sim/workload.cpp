// workload.cpp: the workload table and the workload defaults (workload.hpp).
#include "workload.hpp"

#include "functional.hpp"
#include "nki/nki.hpp"

#include <tessel/error.hpp>
#include <tessel/gate.hpp>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

namespace tessel::sim {

// --- workload defaults ----------------------------------------------------------------

void workload::check_space(const space& s) const {
  const knob_review r = knobs().review(s);
  if (r.errors.empty()) return;
  throw error(fmt::format("sim workload '{}' cannot read space '{}':\n  {}", name(), s.name(),
                          fmt::join(r.errors, "\n  ")));
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
  if (ctx.m.cores > 1) {
    nki::kernel_file whole;
    nki::context gather = ctx;
    gather.capture = &whole;
    if (auto e = emit_nki_plan(*p, gather, out); !e.empty()) return e;
    // an SPMD kernel when the emitter declares its tensors and the split cuts one of them
    // (or there is no split: one program runs it all, or the workload splits its own work);
    // else refused: one instance would not be the program the simulator times per core
    const auto cut = [&](const std::vector<nki::hbm_tensor>& ts) {
      return std::any_of(ts.begin(), ts.end(), [](const auto& t) { return t.split_axis >= 0; });
    };
    if (!whole.inputs.empty() &&
        (core_split_dimension().empty() || cut(whole.inputs) || cut(whole.outputs)))
      return emit_spmd(s, c, ctx, whole, out);
    return fmt::format(
        "workload '{}' on {} physical cores: its kernel is not written as an SPMD kernel of "
        "the split the simulator times (docs/nki.md, \"Two physical cores\")",
        name(), ctx.m.cores);
  }
  program timed;
  if (auto e = lower_plan(*p, ctx.m, timed); !e.empty()) return e;
  nki::context with_structure = ctx;
  with_structure.structure = nki::to_python(nki::structure_of(timed));
  return emit_nki_plan(*p, with_structure, out);
}

std::string workload::emit_spmd(const space& s, const config& c, const nki::context& ctx,
                                const nki::kernel_file& whole, std::string& out) const {
  // each core's share as the simulator plans and times it (sim_backend: plan_cores)
  const auto shares = plan_cores(s, c, ctx.m);
  nki::spmd_split split{core_split_dimension(), core_shares(s, ctx.m)};
  // a workload that splits otherwise than by cutting its split dimension (its own
  // plan_cores) writes programs that take their shares themselves (kernel_file::share)
  const bool by_dimension =
      split.shares.size() == shares.size() || (split.shares.empty() && shares.size() == 1);
  std::vector<nki::structure> structures;
  std::vector<nki::kernel_file> programs(shares.size());
  for (std::size_t i = 0; i < shares.size(); ++i) {
    if (!shares[i]->error.empty()) return shares[i]->error;
    program timed;
    if (auto e = lower_plan(*shares[i], ctx.m, timed); !e.empty()) return e;
    structures.push_back(nki::structure_of(timed));
    nki::context share = ctx;
    share.program = static_cast<int>(i);
    share.capture = &programs[i];
    if (auto e = emit_nki_plan(*shares[i], share, out); !e.empty()) return e;
    if (!by_dimension && programs[i].share.empty())
      return fmt::format(
          "workload '{}' splits its work over the cores otherwise than by cutting its split "
          "dimension; its SPMD emission is not written",
          name());
  }
  structures.resize(static_cast<std::size_t>(ctx.m.cores));  // a core with no share idles
  out = nki::assemble_spmd(whole, programs, split, structures, ctx);
  return "";
}

std::optional<communication> workload::communicate(const workload_plan& p,
                                                   double compute_ns) const {
  (void)p;
  (void)compute_ns;
  return std::nullopt;
}

double workload::estimated_instructions(const space& s, const config& c, const machine& m) const {
  (void)s;
  (void)c;
  (void)m;
  return 1e4;
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
        "space, name the space after it or pass sim:NAME (workloads: {})",
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
