// moe.hpp: what the moe workload's files share (docs/simulator.md, moe): the
// parameters, the deterministic routing and the group plan that moe.cpp
// (reading, lowering), moe_functional.cpp (the schedule on data for the
// gate) and moe_nki.cpp (the NKI kernel) all follow.
#pragma once

#include "../../functional.hpp"
#include "../../machine.hpp"
#include "../../program.hpp"
#include "../../workload.hpp"

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace tessel::sim {

namespace nki {
struct context;
}

namespace moe_detail {

/// How the routed (token, slot) rows are grouped for the expert GEMMs.
enum class grouping : std::uint8_t {
  sorted,  ///< each expert's rows gathered into dense tiles (a grouped GEMM)
  token,   ///< per token: each of its top_k experts applied to that token alone
};

/// How the work is split over the physical cores of a logical core (LNC=2).
enum class core_split : std::uint8_t {
  experts,  ///< whole experts per core, balanced by rows (each expert's weights read once)
  tokens,   ///< each core routes its half of the tokens through every expert it needs
};

/// The parameters moe reads (moe.cpp).
struct params {
  std::int64_t tokens = 0, d_in = 0, d_out = 0, experts = 0, top_k = 0;
  std::int64_t route_seed = 1, route_skew = 0;  ///< skew: Zipf exponent x 100 (0: uniform)
  dtype type = dtype::bf16;
  std::int64_t token_tile = 128, out_tile = 512, mm_n = 512;
  int bufs = 2, x_bufs = 2, queues = 1;
  bool x_rows = true;          ///< x given as [tokens, d_in] (gather rows, transpose on TensorE)
  bool sbuf_partials = false;  ///< the (token, slot) partials live in SBUF, not HBM
  grouping group = grouping::sorted;
  core_split split = core_split::experts;
  engine_id evict = vector_engine, combine_engine = vector_engine;
};

/// One (token, slot) row routed to an expert.
struct route {
  std::int32_t token = 0, slot = 0;
};

/// One tile of a group: up to token_tile rows of one expert.
struct group_tile {
  std::int32_t expert = 0;
  std::vector<route> rows;
  bool tail = false;  ///< the last, partial tile of its group
};

/// The group tiles of each physical core, built once per routing and
/// grouping (moe_plan.cpp) and shared by the plans that use them.
struct grouped_tiles {
  std::vector<std::vector<group_tile>> of_core;
  /// Per core: (rows, how many of its tiles have that many), by rows.
  std::vector<std::vector<std::pair<std::int64_t, double>>> heights;
};

/// A read-only list that the plans of one routing share (moe_plan.cpp keeps
/// it per thread): indexed, sized and iterated as the vector itself, copied
/// at the cost of a shared pointer.
template <class T>
class shared_list {
 public:
  shared_list() : all_(empty()) {}
  explicit shared_list(std::shared_ptr<const std::vector<T>> all) : all_(std::move(all)) {}
  [[nodiscard]] const T& operator[](std::size_t i) const { return (*all_)[i]; }
  [[nodiscard]] std::size_t size() const { return all_->size(); }
  [[nodiscard]] auto begin() const { return all_->begin(); }
  [[nodiscard]] auto end() const { return all_->end(); }

 private:
  static const std::shared_ptr<const std::vector<T>>& empty() {
    static const auto none = std::make_shared<const std::vector<T>>();
    return none;
  }
  std::shared_ptr<const std::vector<T>> all_;
};

/// A plan's view of its grouped_tiles: indexed and iterated by core as the
/// lists themselves, copied at the cost of a shared pointer.
class core_tiles {
 public:
  core_tiles() : all_(empty()) {}
  explicit core_tiles(std::shared_ptr<const grouped_tiles> all) : all_(std::move(all)) {}
  [[nodiscard]] const std::vector<group_tile>& operator[](std::size_t core) const {
    return all_->of_core[core];
  }
  [[nodiscard]] auto begin() const { return all_->of_core.begin(); }
  [[nodiscard]] auto end() const { return all_->of_core.end(); }
  [[nodiscard]] std::size_t size() const { return all_->of_core.size(); }
  [[nodiscard]] const std::vector<std::pair<std::int64_t, double>>& heights(
      std::size_t core) const {
    return all_->heights[core];
  }

 private:
  static const std::shared_ptr<const grouped_tiles>& empty() {
    static const auto none = std::make_shared<const grouped_tiles>();
    return none;
  }
  std::shared_ptr<const grouped_tiles> all_;
};

/// The part of the layer one expert-parallel rank runs (sharded_moe): the
/// group tiles of experts [first_expert, end_expert) and the combine of
/// tokens [first_token, end_token). The default (end < 0): all of it.
struct rank_share {
  std::int32_t first_expert = 0, end_expert = -1;
  std::int64_t first_token = 0, end_token = -1;
  /// The partials come back by an all-to-all (sharded_moe, ep > 1) in the
  /// order the rows were dispatched, not token order: per token tile and out
  /// block the combine loads an index tile (each token's top_k rows) and
  /// gathers each slot through it (top_k indirect transfers) instead of one
  /// load of the token tile's partials.
  bool exchanged = false;
  /// Whether expert `e` of `experts` is in the share.
  [[nodiscard]] bool holds(std::int64_t e, std::int64_t experts) const noexcept {
    return e >= first_expert && e < (end_expert < 0 ? experts : end_expert);
  }
};

/// The routing and the tiles a config runs, per physical core.
struct plan {
  params p;
  shared_list<std::int32_t> expert_of;   ///< [token * top_k + slot]
  shared_list<std::int64_t> group_size;  ///< rows routed to each expert
  /// The group tiles of each core (one list per physical core), in order.
  core_tiles tiles;
  /// The 128-token combine tiles of each core: [first token, end).
  std::vector<std::vector<std::pair<std::int64_t, std::int64_t>>> combine;
  std::int64_t k_slabs = 1, t_subs = 1, out_blocks = 1, out_banks = 1, psum_sets = 1;
  std::int64_t x_bytes = 0, raw_bytes = 0, w_bytes = 0, stage_bytes = 0, combine_bytes = 0,
               part_bytes = 0;  ///< per partition
  int cores = 1;
  int core = -1;     ///< the core a lowering times (-1: all, for the gate and NKI)
  rank_share share;  ///< the experts and tokens the tiles and the combine cover
};

/// The top_k distinct experts of every token: a weighted draw without
/// replacement, expert e weighing 1 / (e + 1)^(skew / 100), from an rng
/// seeded by (seed, token), so a token's experts do not depend on `tokens`.
[[nodiscard]] std::vector<std::int32_t> route_tokens(const params& p);

/// Routes, groups and checks the resources: "" or a compile error.
[[nodiscard]] std::string make_plan(const params& p, const machine& m, plan& pl);

/// Whether each core's combine waits at a core barrier (nisa.core_barrier)
/// for the other core's partials: whole experts per core on two cores, so a
/// token's top_k partials come from both (docs/nki.md, "Two physical cores").
[[nodiscard]] inline bool needs_barrier(const plan& pl) {
  return pl.cores > 1 && pl.p.split == core_split::experts;
}

/// How sharded_moe's ep ranks exchange the routed rows (docs/nki.md, "Expert
/// parallel"): rank s holds tokens [s T/ep, (s + 1) T/ep) and experts
/// [s E/ep, (s + 1) E/ep); each all-to-all moves equal blocks of `cap` rows
/// per (source, destination) pair, the routed counts padded; `chunks`
/// exchanges (one per expert of a rank with overlap, else one).
struct ep_exchange {
  int ranks = 1, chunks = 1;
  std::int64_t cap = 1, rank_experts = 1, rank_tokens = 0;
  /// send[s][k][d]: the (token, slot) rows rank s sends rank d in chunk k, in order
  std::vector<std::vector<std::vector<std::vector<route>>>> send;
};

/// The exchange of `pl`'s routing over `ranks` ranks (experts and tokens
/// divisible by it), one chunk per expert of a rank when `by_expert`.
[[nodiscard]] ep_exchange exchange_of(const plan& pl, int ranks, bool by_expert);

/// sharded_moe's kernel for ep > 1 (moe_nki.cpp): `ranks` are each rank's
/// plan (the routing restricted to its share, exchanged), `structure` the
/// STRUCTURE block (rank `straggler`'s, the one timed). "" or why not.
[[nodiscard]] std::string emit_ep_nki(const std::vector<plan>& ranks, const ep_exchange& ex,
                                      int straggler, const std::string& structure,
                                      const nki::context& ctx, std::string& out);

/// Rebuilds `pl`'s tiles and combine (the same routing) for `share` only.
void restrict_plan(plan& pl, const rank_share& share);

/// The roofline totals of the rows a plan runs (its core's share with core >= 0).
[[nodiscard]] workload_totals totals_of(const plan& pl);

/// The steady-state estimate of a plan without error, in closed form over
/// its group tiles (moe_steady.cpp).
[[nodiscard]] steady_estimate estimate_steady(const plan& pl, const machine& m);

/// The executor of the plan on data (moe_functional.cpp). `lost`, when not
/// empty, is what fault::drop_tail loses (one flag per (token, slot) row);
/// empty: the rows of each group's partial last tile.
[[nodiscard]] std::unique_ptr<functional_kernel> make_kernel(const plan& pl,
                                                             std::vector<std::uint8_t> lost = {});

/// The NKI kernel of the plan (moe_nki.cpp): "" or why not.
[[nodiscard]] std::string emit_nki(const plan& pl, const nki::context& ctx, std::string& out);

}  // namespace moe_detail
}  // namespace tessel::sim
