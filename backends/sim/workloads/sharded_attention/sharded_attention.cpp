// sharded_attention.cpp: multi-head attention split by heads over `tp`
// ranks of a multi-core target (head parallel, docs/topology.md). Each rank
// runs heads/tp heads one after another, each head the attention workload's
// plan (its lowering, analytic model and executor, unchanged); the heads'
// outputs are left sharded (each rank keeps its heads' O) or all-gathered
// so every rank holds the whole O. The all-gather is timed by
// collectives.hpp over the target's topology, after the compute or, with
// overlap, head by head while the next head computes.
#include "../../collectives.hpp"
#include "../../functional.hpp"
#include "../attention/attention_plan.hpp"
#include "../overlap.hpp"

#include <tessel/error.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace tessel::sim {
namespace {

struct sharded_plan {
  std::unique_ptr<workload_plan> core;  ///< the attention plan of one head
  const attn::params* head = nullptr;   ///< inside `core`
  int tp = 1;
  std::int64_t heads = 1, per_rank = 1;
  bool gather = true;
  collective_algorithm algorithm = collective_algorithm::ring;
  bool overlap = false;
  double bytes = 0;              ///< the all-gather's output per rank: every head's O
  collective_time whole, chunk;  ///< chunk: one head's share (overlap)
};

class plan_box final : public workload_plan {
 public:
  sharded_plan value;
};

/// Appends `times - 1` copies of `p`'s instructions, each copy's first
/// instructions (those without dependencies) waiting for the previous
/// copy's last one (attention's: its final store): a rank's heads run back
/// to back in the same buffers, one head's loads never overtaking the
/// previous head's use of them; only the previous head's other stores
/// drain while the next one starts.
void repeat_program(program& p, std::int64_t times) {
  const std::vector<instruction> once = p.instructions();
  const std::vector<instruction_id> deps = p.deps();
  const auto n = static_cast<instruction_id>(once.size());
  if (n == 0) return;
  p.reserve(static_cast<std::size_t>(times) * n);
  std::vector<instruction_id> d;
  for (std::int64_t copy = 1; copy < times; ++copy) {
    const auto base = static_cast<instruction_id>(copy) * n;
    for (const auto& in : once) {
      d.clear();
      for (auto k = in.dep_begin; k < in.dep_end; ++k) d.push_back(deps[k] + base);
      if (d.empty()) d.push_back(base - 1);
      p.add(in, d);
    }
  }
  p.totals.flops *= static_cast<double>(times);
  p.totals.min_hbm_bytes *= static_cast<double>(times);
}

std::vector<knob> knobs_of_sharded() {
  std::vector<knob> out = attention_workload().knobs().all();
  out.push_back(knob::integer("heads", 1, "attention heads, each of seq x head_dim", ">= 1"));
  out.push_back(knob::integer("tp", 1, "ranks the heads are split over (head parallel degree)",
                              "1..target.ranks, dividing heads"));
  out.push_back(knob::symbol("output", {"gathered", "sharded"}, "gathered",
                             "gathered: all-gather O so every rank holds every head's output; "
                             "sharded: each rank keeps its own heads' O (no collective)"));
  out.push_back(knob::symbol("collective", {"ring", "tree", "hierarchical"}, "ring",
                             "the all-gather's algorithm (docs/topology.md)"));
  out.push_back(knob::flag("overlap", false,
                           "gather each head's O while the rank's next head computes (one "
                           "all-gather per head) instead of once after the compute"));
  return out;
}

class sharded_attention final : public workload {
 public:
  sharded_attention() : knobs_("sharded_attention", knobs_of_sharded()) {}

  [[nodiscard]] std::string_view name() const override { return "sharded_attention"; }
  [[nodiscard]] std::string_view summary() const override {
    return "multi-head attention split by heads over tp ranks, O left sharded or all-gathered";
  }
  [[nodiscard]] const knob_table& knobs() const override { return knobs_; }
  /// A logical core of two runs half of the rank's heads on each core.
  [[nodiscard]] std::string core_split_dimension() const override { return "heads"; }

  [[nodiscard]] std::unique_ptr<workload_plan> plan_config(const space& s, const config& c,
                                                           const machine& m) const override {
    auto box = std::make_unique<plan_box>();
    box->error = read(s, c, m, box->value);
    return box;
  }

  [[nodiscard]] std::string lower_plan(const workload_plan& p, const machine& m,
                                       program& out) const override {
    const auto& sp = typed(p);
    auto e = attention_workload().lower_plan(*sp.core, m, out);
    if (e.empty()) repeat_program(out, sp.per_rank);
    return e;
  }
  [[nodiscard]] std::unique_ptr<functional_kernel> functional_plan(
      const workload_plan& p, const machine& m) const override {
    const auto& sp = typed(p);
    return attn::make_functional(*sp.head, m.partitions, {sp.heads, sp.per_rank});
  }
  [[nodiscard]] std::string emit_nki_plan(const workload_plan& p, const nki::context& ctx,
                                          std::string& out) const override {
    const auto& sp = typed(p);
    if (sp.tp > 1)
      return fmt::format(
          "sharded_attention: NKI emission of collectives is not implemented (tp = {} splits "
          "the heads{}); the simulator times it, but only tp = 1 emits a kernel (docs/nki.md)",
          sp.tp, sp.gather ? " and needs an all-gather of O" : "");
    return attn::emit_nki(*sp.head, ctx, out, sp.heads);
  }
  /// Attention's estimate of one head, times the rank's heads (they run
  /// back to back).
  [[nodiscard]] std::optional<steady_estimate> steady_plan(const workload_plan& p,
                                                           const machine& m) const override {
    const auto& sp = typed(p);
    auto e = attention_workload().steady_plan(*sp.core, m);
    if (!e) return e;
    const auto k = static_cast<double>(sp.per_rank);
    e->latency_ns *= k;
    for (auto& b : e->busy_ns) b *= k;
    e->dma_data_ns *= k;
    e->hbm_read_bytes *= k;
    e->hbm_write_bytes *= k;
    e->instructions *= k;
    e->totals.flops *= k;
    e->totals.min_hbm_bytes *= k;
    return e;
  }
  [[nodiscard]] double estimated_instructions(const space& s, const config& c,
                                              const machine& m) const override {
    sharded_plan p;
    const double one = attention_workload().estimated_instructions(s, c, m);
    return read(s, c, m, p).empty() ? one * static_cast<double>(p.per_rank) : one;
  }

  [[nodiscard]] std::optional<communication> communicate(const workload_plan& p,
                                                         double compute_ns) const override {
    const auto& sp = typed(p);
    if (sp.tp == 1 || !sp.gather) return std::nullopt;
    // overlapped: head i's O is gathered while head i + 1 computes
    return communication_of(
        fmt::format("all-gather of O ({}, {} ranks, {:.2f} MiB{})", to_string(sp.algorithm), sp.tp,
                    sp.bytes / (1 << 20),
                    sp.overlap ? fmt::format(", {} heads overlapped", sp.per_rank) : ""),
        sp.whole.ns, sp.chunk.ns, sp.per_rank, sp.overlap, compute_ns);
  }

  [[nodiscard]] std::vector<std::string> suggest(const bottleneck& b, const space& s,
                                                 const config& c) const override {
    if (b.phase != "collective") return attention_workload().suggest(b, s, c);
    const knob_reader v(knobs_, s, c);
    std::vector<std::string> out;
    out.emplace_back(
        "set output = sharded if the next layer reads only its own heads: no all-gather at all");
    if (!v.flag("overlap"))
      out.emplace_back("set overlap = true to send each head's O while the next head computes");
    if (v.symbol("collective") != "hierarchical")
      out.emplace_back(
          "try collective = hierarchical: within each chip first, so fewer transfers cross "
          "NeuronLink");
    out.emplace_back("lower tp: fewer ranks each compute more heads, but gather over fewer ranks");
    return out;
  }

 private:
  [[nodiscard]] const sharded_plan& typed(const workload_plan& p) const {
    if (const auto* mine = dynamic_cast<const plan_box*>(&p)) return mine->value;
    throw error("sim workload 'sharded_attention' was given a plan of another type");
  }

  /// Reads (s, c) into `p`: the split, one head's attention plan and the
  /// all-gather's times. "" or why it does not compile.
  std::string read(const space& s, const config& c, const machine& m, sharded_plan& p) const {
    const knob_reader v(knobs_, s, c);
    p.tp = static_cast<int>(v.integer("tp"));
    p.heads = v.integer("heads");
    p.gather = v.symbol("output") == "gathered";
    p.algorithm = *parse_collective_algorithm(v.symbol("collective"));
    p.overlap = v.flag("overlap");
    if (p.heads < 1) return fmt::format("heads = {} must be at least 1", p.heads);
    if (p.tp < 1) return fmt::format("tp = {} must be at least 1", p.tp);
    if (p.tp > m.topo.ranks())
      return fmt::format("tp = {} exceeds the {} ranks of target '{}'", p.tp, m.topo.ranks(),
                         m.target_name);
    if (p.heads % p.tp != 0)
      return fmt::format("heads = {} is not a multiple of tp = {}", p.heads, p.tp);
    p.per_rank = p.heads / p.tp;
    p.core = attention_workload().plan_config(s, c, m);
    if (!p.core->error.empty()) return p.core->error;
    p.head = &dynamic_cast<const plan_of<attn::params>&>(*p.core).value;
    p.bytes = static_cast<double>(p.heads * p.head->seq * p.head->d * dtype_bytes(p.head->type));
    try {
      p.whole = time_collective(collective::all_gather, p.algorithm, p.bytes, p.tp, m.topo);
      p.chunk = time_collective(collective::all_gather, p.algorithm,
                                p.bytes / static_cast<double>(p.per_rank), p.tp, m.topo);
    } catch (const error& e) {
      return e.what();
    }
    return "";
  }

  knob_table knobs_;
};

}  // namespace

const workload& sharded_attention_workload() {
  static const sharded_attention instance;
  return instance;
}

}  // namespace tessel::sim
