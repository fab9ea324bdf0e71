// sharded_moe.cpp: the MoE layer split by experts over `ep` ranks of a
// multi-core target (expert parallel, docs/topology.md). Rank q holds
// experts [q E/ep, (q + 1) E/ep) and tokens [q T/ep, (q + 1) T/ep): an
// all-to-all dispatch sends each routed (token, slot) row of x to the rank
// of its expert, each rank runs the moe workload's group tiles of its
// experts (moe's plan and lowering, unchanged, restricted to the rank), an
// all-to-all combine returns the scaled fp32 rows to their tokens' ranks,
// and each rank sums its tokens' top_k rows (moe's combine, each slot
// gathered through an index tile from where the combine left it). The ranks
// differ by the routing: the one timed is the straggler, the rank with the
// most group tiles (each reads its expert's weights), then the most rows.
// The all-to-alls move equal blocks (what NKI's all_to_all takes): CAP rows
// per (source, destination) pair, the most any pair routes, padded; with
// overlap one dispatch and one combine per expert of a rank (CAP the most
// of any pair and expert), dispatched and combined expert by expert while
// the rank's next expert computes. The emitted kernel (ep > 1) is one per
// rank, joined by those all-to-alls (moe_nki.cpp emit_ep_nki).
#include "../moe/moe.hpp"
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
  cloning_ptr<workload_plan> core;  ///< moe's plan, restricted to the straggler rank
  std::int64_t per_rank = 1;        ///< experts per rank
  int straggler = 0;
  double dispatch_bytes = 0, combine_bytes = 0;  ///< per rank: CHUNKS x RANKS x CAP rows
  std::int64_t cap = 1;                          ///< rows of an all-to-all block
  rank_split split;  ///< ep; the dispatch and the combine, one of each per expert (overlap)

  /// Whether `core` holds moe's plan (read without error).
  [[nodiscard]] bool has_rank() const { return core && core->error.empty(); }
  /// moe's plan of the straggler rank, inside `core` (has_rank()).
  [[nodiscard]] moe_detail::plan& rank() { return value_of<moe_detail::plan>(*core); }
  [[nodiscard]] const moe_detail::plan& rank() const { return value_of<moe_detail::plan>(*core); }
};

std::vector<knob> knobs_of_sharded() {
  std::vector<knob> out = moe_workload().knobs().all();
  out.push_back(knob::integer("ep", 1, "ranks the experts are split over (expert parallel degree)",
                              "1..target.ranks, dividing experts and tokens"));
  for (auto& k : split_knobs("the all-to-alls'",
                             "dispatch and combine each expert's rows while the rank's next "
                             "expert computes (one all-to-all pair per expert) instead of all "
                             "rows before and after the compute"))
    out.push_back(std::move(k));
  return out;
}

/// Per rank of `ep`: the group tiles and rows of its experts.
struct rank_load {
  std::int64_t tiles = 0, rows = 0;
  auto operator<=>(const rank_load&) const = default;
};

std::vector<rank_load> loads(const moe_detail::plan& pl, int ep) {
  const auto& p = pl.p;
  const std::int64_t per = p.experts / ep;
  std::vector<rank_load> out(static_cast<std::size_t>(ep));
  for (std::int64_t e = 0; e < p.experts; ++e) {
    const std::int64_t n = pl.group_size[static_cast<std::size_t>(e)];
    auto& l = out[static_cast<std::size_t>(e / per)];
    l.rows += n;
    l.tiles += p.group == moe_detail::grouping::token ? n : (n + p.token_tile - 1) / p.token_tile;
  }
  return out;
}

class sharded_moe final : public sharded_workload<sharded_plan> {
 public:
  sharded_moe()
      : sharded_workload({"sharded_moe",
                          "the MoE layer split by experts over ep ranks, its rows dispatched and "
                          "combined by all-to-alls",
                          knobs_of_sharded(), ""},
                         moe_workload()) {}

  /// One plan per physical core of the straggler rank, as moe splits it.
  [[nodiscard]] std::vector<std::unique_ptr<workload_plan>> plan_cores(
      const space& s, const config& c, const machine& m,
      const workload_plan* whole = nullptr) const override {
    std::vector<std::unique_ptr<workload_plan>> out;
    for (int core = 0; core < std::max(1, m.cores); ++core) {
      auto p = whole ? whole->clone() : plan_config(s, c, m);  // the whole plan copied when given
      if (auto& v = value_of<sharded_plan>(*p); v.has_rank()) v.rank().core = core;
      out.push_back(std::move(p));
    }
    return out;
  }

  [[nodiscard]] double estimated_instructions(const space& s, const config& c,
                                              const machine& m) const override {
    const auto ep = std::max<std::int64_t>(1, reader(s, c).integer("ep"));
    return inner().estimated_instructions(s, c, m) / static_cast<double>(ep);
  }

  [[nodiscard]] std::vector<std::string> suggest(const bottleneck& b, const space& s,
                                                 const config& c) const override {
    if (b.phase != "collective") return inner().suggest(b, s, c);
    return split_suggestions(
        reader(s, c),
        "set overlap = true to dispatch and combine each expert's rows while the next expert "
        "computes",
        "lower ep: each rank runs more experts, and the all-to-alls take fewer steps");
  }

 private:
  /// moe's executor of the whole layer: a row is computed by its expert's
  /// rank exactly as moe computes it (the combine moves fp32 rows, added in
  /// slot order), so the gate compares the combined y with the unsharded
  /// reference. drop_tail: each rank's loop over its experts stops before
  /// its last expert with rows (those rows are lost).
  [[nodiscard]] std::unique_ptr<functional_kernel> executor(const sharded_plan& p,
                                                            const machine& m) const override {
    (void)m;
    moe_detail::plan whole = p.rank();
    moe_detail::restrict_plan(whole, {});
    whole.core = -1;
    std::vector<std::int32_t> last(static_cast<std::size_t>(p.split.ranks), -1);
    for (std::int64_t e = 0; e < whole.p.experts; ++e)
      if (whole.group_size[static_cast<std::size_t>(e)] > 0)
        last[static_cast<std::size_t>(e / p.per_rank)] = static_cast<std::int32_t>(e);
    std::vector<std::uint8_t> lost(whole.expert_of.size(), 0);
    for (std::size_t i = 0; i < lost.size(); ++i)
      lost[i] =
          whole.expert_of[i] == last[static_cast<std::size_t>(whole.expert_of[i] / p.per_rank)];
    return moe_detail::make_kernel(whole, std::move(lost));
  }

  [[nodiscard]] std::string write_nki(const sharded_plan& p, const nki::context& ctx,
                                      std::string& out) const override {
    if (p.split.ranks == 1) return inner().emit_nki_plan(*p.core, ctx, out);
    // ep > 1 (docs/nki.md, "Expert parallel"): a kernel per rank, each of its
    // share of the plan; STRUCTURE the straggler's lowering and the all-to-alls
    program timed;
    if (auto e = lower_program(p, ctx.m, timed); !e.empty()) return e;
    nki::structure s = nki::structure_of(timed);
    count_collectives(p.split, {p.dispatch_bytes, p.combine_bytes}, s);
    const moe_detail::plan& rank_plan = p.rank();
    std::vector<moe_detail::plan> ranks;
    for (int q = 0; q < p.split.ranks; ++q) {
      ranks.push_back(rank_plan);
      ranks.back().core = -1;
      moe_detail::restrict_plan(ranks.back(), share_of(rank_plan, p.split.ranks, q));
    }
    const auto ex = moe_detail::exchange_of(rank_plan, p.split.ranks, p.split.overlap);
    return moe_detail::emit_ep_nki(ranks, ex, p.straggler, nki::to_python(s), ctx, out);
  }

  /// Rank q's share of `pl`'s layer among `ep`: its experts and tokens, its
  /// partials exchanged.
  static moe_detail::rank_share share_of(const moe_detail::plan& pl, int ep, int q) {
    const std::int64_t experts = pl.p.experts / ep, tokens = pl.p.tokens / ep;
    moe_detail::rank_share out{static_cast<std::int32_t>(q * experts),
                               static_cast<std::int32_t>((q + 1) * experts), q * tokens,
                               (q + 1) * tokens};
    out.exchanged = true;
    return out;
  }

  /// Reads (s, c) into `p`: the split, moe's plan of the straggler rank and
  /// the all-to-alls' times. "" or why it does not compile.
  [[nodiscard]] std::string read_plan(const knob_reader& v, const machine& m,
                                      sharded_plan& p) const override {
    rank_split& r = p.split;
    r.kind = collective::all_to_all;
    r.what = "all-to-all dispatch and combine";
    r.chunk_noun = "experts";
    if (auto e = read_split(v, m, "ep", r); !e.empty()) return e;
    const std::int64_t experts = v.integer("experts"), tokens = v.integer("tokens");
    if (experts % r.ranks != 0)
      return fmt::format("experts = {} is not a multiple of ep = {}", experts, r.ranks);
    if (tokens % r.ranks != 0)
      return fmt::format("tokens = {} is not a multiple of ep = {}", tokens, r.ranks);
    p.core = inner().plan_config(v.source(), v.values(), m);
    if (!p.core->error.empty()) return p.core->error;
    moe_detail::plan& rank = p.rank();
    p.per_rank = experts / r.ranks;
    const auto load = loads(rank, r.ranks);
    const auto busiest = std::max_element(load.begin(), load.end());
    p.straggler = static_cast<int>(busiest - load.begin());
    if (r.ranks > 1 && rank.p.sbuf_partials)
      return fmt::format(
          "partials = sbuf with ep = {}: a rank's combine needs the rows other ranks computed, "
          "which the combine all-to-all returns into HBM (a rank cannot read another's SBUF); "
          "use partials = hbm",
          r.ranks);
    if (r.ranks > 1) moe_detail::restrict_plan(rank, share_of(rank, r.ranks, p.straggler));
    // every all-to-all moves RANKS blocks of CAP rows per rank, one exchange
    // or one per expert of a rank (overlap): x rows there, fp32 rows back
    const auto& mp = rank.p;
    const int chunks = r.overlap ? static_cast<int>(p.per_rank) : 1;
    p.cap = r.ranks > 1 ? moe_detail::exchange_of(rank, r.ranks, r.overlap).cap : tokens * mp.top_k;
    const auto rows = static_cast<double>(chunks * r.ranks * p.cap);
    p.dispatch_bytes = rows * static_cast<double>(mp.d_in * dtype_bytes(mp.type));
    p.combine_bytes = rows * static_cast<double>(mp.d_out * 4);
    r.bytes = p.dispatch_bytes + p.combine_bytes;
    r.chunks = p.per_rank;
    return time_split(m, r, {p.dispatch_bytes, p.combine_bytes});
  }
};

}  // namespace

const workload& sharded_moe_workload() {
  static const sharded_moe instance;
  return instance;
}

}  // namespace tessel::sim
