// sharded_attention.cpp: multi-head attention split by heads over `tp`
// ranks of a multi-core target (head parallel, docs/topology.md). Each rank
// runs heads/tp heads one after another, each head the attention workload's
// plan (its lowering, analytic model and executor, unchanged); the heads'
// outputs are left sharded (each rank keeps its heads' O) or all-gathered
// so every rank holds the whole O. The all-gather is timed by
// collectives.hpp over the target's topology, after the compute or, with
// overlap, head by head while the next head computes.
#include "../../functional.hpp"
#include "../../nki/ranks.hpp"
#include "../attention/attention_plan.hpp"
#include "../sharded.hpp"

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
  cloning_ptr<workload_plan> core;  ///< the attention plan of one head
  std::int64_t heads = 1, per_rank = 1;
  rank_split split;  ///< tp; the all-gather of every head's O, one per head (overlap)

  /// One head's parameters, inside `core` (read without error).
  [[nodiscard]] const attn::params& head() const { return value_of<attn::params>(*core); }
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
  for (auto& k : split_knobs("the all-gather's",
                             "gather each head's O while the rank's next head computes (one "
                             "all-gather per head) instead of once after the compute"))
    out.push_back(std::move(k));
  return out;
}

/// A logical core of two runs half of the rank's heads on each core.
class sharded_attention final : public sharded_workload<sharded_plan> {
 public:
  sharded_attention()
      : sharded_workload({"sharded_attention",
                          "multi-head attention split by heads over tp ranks, O left sharded or "
                          "all-gathered",
                          knobs_of_sharded(), "heads"},
                         attention_workload()) {}

  [[nodiscard]] double estimated_instructions(const space& s, const config& c,
                                              const machine& m) const override {
    sharded_plan p;
    const double one = inner().estimated_instructions(s, c, m);
    return read_plan(reader(s, c), m, p).empty() ? one * static_cast<double>(p.per_rank) : one;
  }

  [[nodiscard]] std::vector<std::string> suggest(const bottleneck& b, const space& s,
                                                 const config& c) const override {
    if (b.phase != "collective") return inner().suggest(b, s, c);
    std::vector<std::string> out{
        "set output = sharded if the next layer reads only its own heads: no all-gather at all"};
    for (auto& hint : split_suggestions(
             reader(s, c), "set overlap = true to send each head's O while the next head computes",
             "lower tp: fewer ranks each compute more heads, but gather over fewer ranks"))
      out.push_back(std::move(hint));
    return out;
  }

 private:
  [[nodiscard]] std::string lower_program(const sharded_plan& p, const machine& m,
                                          program& out) const override {
    auto e = inner().lower_plan(*p.core, m, out);
    if (e.empty()) repeat_program(out, p.per_rank);
    return e;
  }
  [[nodiscard]] std::unique_ptr<functional_kernel> executor(const sharded_plan& p,
                                                            const machine& m) const override {
    return attn::make_functional(p.head(), m.partitions, {p.heads, p.per_rank});
  }
  [[nodiscard]] std::string write_nki(const sharded_plan& p, const nki::context& ctx,
                                      std::string& out) const override {
    if (p.split.ranks > 1) return write_ranks(p, ctx, out);
    return attn::emit_nki(p.head(), ctx, out, p.heads, true);
  }

  /// tp > 1 (docs/nki.md, "Ranks and collectives"): attention's kernel of
  /// the rank's heads (stacked, one after another), then with output =
  /// gathered the all-gather of O, one per head with overlap.
  [[nodiscard]] std::string write_ranks(const sharded_plan& p, const nki::context& ctx,
                                        std::string& out) const {
    nki::kernel_file whole, rank;
    if (auto e = attn::emit_nki(p.head(), nki::capturing(ctx, whole, -1), out, p.heads); !e.empty())
      return e;
    if (auto e = attn::emit_nki(p.head(), nki::capturing(ctx, rank, 0), out, p.per_rank);
        !e.empty())
      return e;
    program timed;
    if (auto e = lower_program(p, ctx.m, timed); !e.empty()) return e;
    nki::structure s = nki::structure_of(timed);
    const bool gathered = !p.split.what.empty();
    if (gathered) count_collectives(p.split, {p.split.bytes}, s);
    const std::int64_t ph = p.per_rank, d = p.head().d, seq = p.head().seq;
    nki::rank_emission e;
    e.workload = "sharded_attention";
    e.ranks = p.split.ranks;
    const auto rows = [](const char* name, std::int64_t n) {
      return fmt::format("\"{0}\": {0}[rank * {1}:(rank + 1) * {1}, :]", name, n);
    };
    e.shards = {rows("Q", ph * d), rows("K", ph * d), rows("V", ph * seq)};
    if (!gathered) {
      e.setup = {fmt::format("O = nl.ndarray(({}, D), dtype=DT, buffer=nl.shared_hbm)", ph * seq)};
      e.rank_call = "attention_rank(Q, K, V, O)";
      e.communicate = {"return O  # output = sharded: each rank keeps its heads' O"};
      e.sharded_outputs = {"O"};
      out = nki::assemble_ranks(whole, rank, e, s, ctx);
      return "";
    }
    e.setup = {
        "O = nl.ndarray((HEADS * SEQ, D), dtype=DT, buffer=nl.shared_hbm)",
        fmt::format("O_rank = nl.ndarray(({}, D), dtype=DT, buffer=nl.private_hbm)", ph * seq),
        "group = ncc.ReplicaGroup([list(range(RANKS))])"};
    e.rank_call = "attention_rank(Q, K, V, O_rank)";
    if (!p.split.overlap) {
      e.communicate = {
          "ncc.all_gather(srcs=[O_rank], dsts=[O], replica_group=group, collective_dim=0)"};
    } else {
      e.communicate = {"# overlap: one all-gather per head of the rank, in head order",
                       fmt::format("for h in nl.sequential_range({}):", ph),
                       fmt::format("    ncc.all_gather(srcs=[O_rank[h * SEQ:(h + 1) * SEQ, :]], "
                                   "dsts=[O.reshape((RANKS, {}, D))[:, h * SEQ:(h + 1) * SEQ, :]], "
                                   "replica_group=group, collective_dim=0)",
                                   ph * seq)};
      e.notes.push_back(
          "overlap: each head's all-gather is issued after the rank's heads, in head order; it "
          "depends only on its head's stores, so NKI's scheduler may start it while later heads "
          "compute, as the simulator times it (not checked on hardware)");
    }
    e.communicate.push_back("return O");
    out = nki::assemble_ranks(whole, rank, e, s, ctx);
    return "";
  }
  /// Attention's estimate of one head, times the rank's heads (they run
  /// back to back).
  [[nodiscard]] std::optional<steady_estimate> steady(const sharded_plan& p,
                                                      const machine& m) const override {
    auto e = inner().steady_plan(*p.core, m);
    if (!e) return e;
    const auto k = static_cast<double>(p.per_rank);
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

  /// Reads (s, c) into `p`: the split, one head's attention plan and the
  /// all-gather's times. "" or why it does not compile.
  [[nodiscard]] std::string read_plan(const knob_reader& v, const machine& m,
                                      sharded_plan& p) const override {
    rank_split& r = p.split;
    p.heads = v.integer("heads");
    if (v.symbol("output") == "gathered") r.what = "all-gather of O";
    r.chunk_noun = "heads";
    if (p.heads < 1) return fmt::format("heads = {} must be at least 1", p.heads);
    if (auto e = read_split(v, m, "tp", r); !e.empty()) return e;
    if (p.heads % r.ranks != 0)
      return fmt::format("heads = {} is not a multiple of tp = {}", p.heads, r.ranks);
    p.per_rank = p.heads / r.ranks;
    p.core = inner().plan_config(v.source(), v.values(), m);
    if (!p.core->error.empty()) return p.core->error;
    const attn::params& head = p.head();
    r.bytes = static_cast<double>(p.heads * head.seq * head.d * dtype_bytes(head.type));
    r.chunks = p.per_rank;
    return time_split(m, r, {r.bytes});
  }
};

}  // namespace

const workload& sharded_attention_workload() {
  static const sharded_attention instance;
  return instance;
}

}  // namespace tessel::sim
