// moe_plan.cpp: moe's routing and group plan (moe.hpp): which expert each
// (token, slot) goes to, the group tiles each physical core runs, and the
// resources they need, checked as a compiler would.
#include "../emit.hpp"
#include "moe.hpp"

#include <tessel/random.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <memory>
#include <numeric>

namespace tessel::sim::moe_detail {
namespace {

using emit::ceil_div;

/// Which core runs the rows of expert `e` for token `t` (see core_split).
struct core_map {
  std::vector<int> of_expert;
  std::int64_t token_split = 0;  ///< tokens below it on core 0 (split = tokens)
  bool by_tokens = false;
  [[nodiscard]] int core(std::int64_t t, std::int32_t e) const {
    if (by_tokens) return t < token_split ? 0 : 1;
    return of_expert[static_cast<std::size_t>(e)];
  }
};

/// experts: whole experts per core, the largest groups first onto the core
/// with the fewest 128-row sub-tiles so far (the TensorE work of a group).
core_map assign_cores(const plan& pl) {
  const auto& p = pl.p;
  core_map map;
  map.of_expert.assign(static_cast<std::size_t>(p.experts), 0);
  if (pl.cores < 2) return map;
  if (p.split == core_split::tokens) {
    map.by_tokens = true;
    map.token_split = std::min(p.tokens, ceil_div(ceil_div(p.tokens, 2), 128) * 128);
    return map;
  }
  std::vector<std::int32_t> order(static_cast<std::size_t>(p.experts));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](std::int32_t a, std::int32_t b) {
    return pl.group_size[static_cast<std::size_t>(a)] > pl.group_size[static_cast<std::size_t>(b)];
  });
  std::vector<std::int64_t> load(static_cast<std::size_t>(pl.cores), 0);
  for (const auto e : order) {
    const auto least =
        static_cast<std::size_t>(std::min_element(load.begin(), load.end()) - load.begin());
    map.of_expert[static_cast<std::size_t>(e)] = static_cast<int>(least);
    load[least] += ceil_div(pl.group_size[static_cast<std::size_t>(e)], 128);
  }
  return map;
}

/// Cuts `rows` of expert `e` into tiles of token_tile rows onto `out`.
void add_tiles(std::int32_t e, const std::vector<route>& rows, std::int64_t tile,
               std::vector<group_tile>& out) {
  for (std::size_t i = 0; i < rows.size(); i += static_cast<std::size_t>(tile)) {
    group_tile g;
    g.expert = e;
    const auto end = std::min(rows.size(), i + static_cast<std::size_t>(tile));
    g.rows.assign(rows.begin() + static_cast<std::ptrdiff_t>(i),
                  rows.begin() + static_cast<std::ptrdiff_t>(end));
    g.tail = end == rows.size() && static_cast<std::int64_t>(g.rows.size()) < tile;
    out.push_back(std::move(g));
  }
}

/// The group tiles of every core, and their heights.
grouped_tiles group_rows(const plan& pl) {
  const auto& p = pl.p;
  const core_map map = assign_cores(pl);
  const auto& share = pl.share;
  const auto mine = [&](std::int32_t e) { return share.holds(e, p.experts); };
  grouped_tiles out;
  auto& tiles = out.of_core;
  tiles.resize(static_cast<std::size_t>(pl.cores));
  if (p.group == grouping::token) {
    for (std::int32_t t = 0; t < p.tokens; ++t)
      for (std::int32_t j = 0; j < p.top_k; ++j) {
        const auto e = pl.expert_of[static_cast<std::size_t>(t * p.top_k + j)];
        if (mine(e)) add_tiles(e, {{t, j}}, 1, tiles[static_cast<std::size_t>(map.core(t, e))]);
      }
  } else {
    // per core, each expert's rows in token order
    std::vector<std::vector<std::vector<route>>> rows(
        static_cast<std::size_t>(pl.cores),
        std::vector<std::vector<route>>(static_cast<std::size_t>(p.experts)));
    for (std::int32_t t = 0; t < p.tokens; ++t)
      for (std::int32_t j = 0; j < p.top_k; ++j) {
        const auto e = pl.expert_of[static_cast<std::size_t>(t * p.top_k + j)];
        if (mine(e))
          rows[static_cast<std::size_t>(map.core(t, e))][static_cast<std::size_t>(e)].push_back(
              {t, j});
      }
    for (std::size_t c = 0; c < rows.size(); ++c)
      for (std::size_t e = 0; e < rows[c].size(); ++e)
        if (!rows[c][e].empty())
          add_tiles(static_cast<std::int32_t>(e), rows[c][e], p.token_tile, tiles[c]);
  }
  for (const auto& core : tiles) {
    std::map<std::int64_t, double> count;
    for (const auto& g : core) count[static_cast<std::int64_t>(g.rows.size())] += 1;
    out.heights.emplace_back(count.begin(), count.end());
  }
  return out;
}

/// The plan's group tiles, kept per thread for the next plans of the same
/// routing and grouping (a search's configs share a few).
void build_tiles(plan& pl) {
  const auto& p = pl.p;
  using key_type = std::array<std::int64_t, 11>;
  thread_local std::map<key_type, std::shared_ptr<const grouped_tiles>> cache;
  const key_type key{p.tokens,
                     p.experts,
                     p.top_k,
                     p.route_seed,
                     p.route_skew,
                     p.group == grouping::token ? 0 : p.token_tile,
                     static_cast<std::int64_t>(p.group),
                     static_cast<std::int64_t>(p.split),
                     pl.cores,
                     pl.share.first_expert,
                     pl.share.end_expert};
  auto it = cache.find(key);
  if (it == cache.end()) {
    if (cache.size() >= 16) cache.clear();
    it = cache.emplace(key, std::make_shared<const grouped_tiles>(group_rows(pl))).first;
  }
  pl.tiles = core_tiles(it->second);
  pl.combine.assign(static_cast<std::size_t>(pl.cores), {});
  // the combine: 128-token tiles of the share's tokens, the first half of them on core 0
  const auto& share = pl.share;
  const std::int64_t t0 = share.first_token, t1 = share.end_token < 0 ? p.tokens : share.end_token;
  const std::int64_t tiles = ceil_div(t1 - t0, 128);
  const std::int64_t first = pl.cores > 1 ? ceil_div(tiles, 2) : tiles;
  for (std::int64_t i = 0; i < tiles; ++i)
    pl.combine[i < first ? 0 : 1].emplace_back(t0 + i * 128, std::min(t1, t0 + (i + 1) * 128));
}

/// A routing and its group sizes.
struct routed {
  std::vector<std::int32_t> expert_of;
  std::vector<std::int64_t> group_size;
};

/// route_tokens(p) and its group sizes into `pl`, kept for the next plan on
/// this thread: the routing depends only on constants of a space (tokens,
/// experts, top_k, the seed and the skew), so the configs of a search, and
/// the per-core plans of each, share it (a plan copies two pointers).
void share_routing(const params& p, plan& pl) {
  thread_local std::array<std::int64_t, 5> key{-1};
  thread_local std::shared_ptr<const routed> routes;
  const std::array<std::int64_t, 5> now{p.tokens, p.experts, p.top_k, p.route_seed, p.route_skew};
  if (now != key) {
    auto r = std::make_shared<routed>();
    r->expert_of = route_tokens(p);
    r->group_size.assign(static_cast<std::size_t>(p.experts), 0);
    for (const auto e : r->expert_of) ++r->group_size[static_cast<std::size_t>(e)];
    routes = std::move(r);
    key = now;
  }
  // views of the one routing (shared_ptr's aliasing constructor)
  pl.expert_of = shared_list<std::int32_t>({routes, &routes->expert_of});
  pl.group_size = shared_list<std::int64_t>({routes, &routes->group_size});
}

}  // namespace

void restrict_plan(plan& pl, const rank_share& share) {
  pl.share = share;
  build_tiles(pl);
}

ep_exchange exchange_of(const plan& pl, int ranks, bool by_expert) {
  const auto& p = pl.p;
  ep_exchange ex;
  ex.ranks = ranks;
  ex.rank_experts = p.experts / ranks;
  ex.rank_tokens = p.tokens / ranks;
  ex.chunks = by_expert ? static_cast<int>(ex.rank_experts) : 1;
  const auto n = static_cast<std::size_t>(ranks);
  ex.send.assign(n, std::vector<std::vector<std::vector<route>>>(
                        static_cast<std::size_t>(ex.chunks), std::vector<std::vector<route>>(n)));
  ex.cap = 1;
  for (std::int64_t t = 0; t < p.tokens; ++t)
    for (std::int64_t j = 0; j < p.top_k; ++j) {
      const std::int64_t e = pl.expert_of[static_cast<std::size_t>(t * p.top_k + j)];
      auto& to = ex.send[static_cast<std::size_t>(t / ex.rank_tokens)][static_cast<std::size_t>(
          by_expert ? e % ex.rank_experts : 0)][static_cast<std::size_t>(e / ex.rank_experts)];
      to.push_back({static_cast<std::int32_t>(t), static_cast<std::int32_t>(j)});
      ex.cap = std::max(ex.cap, static_cast<std::int64_t>(to.size()));
    }
  return ex;
}

std::vector<std::int32_t> route_tokens(const params& p) {
  std::vector<double> weight(static_cast<std::size_t>(p.experts));
  for (std::size_t e = 0; e < weight.size(); ++e)
    weight[e] = std::pow(static_cast<double>(e + 1), -static_cast<double>(p.route_skew) / 100.0);
  std::vector<std::int32_t> out;
  out.reserve(static_cast<std::size_t>(p.tokens * p.top_k));
  std::vector<double> w;
  for (std::int64_t t = 0; t < p.tokens; ++t) {
    rng r(static_cast<std::uint64_t>(p.route_seed) * 0x9e3779b97f4a7c15ULL +
          static_cast<std::uint64_t>(t));
    w = weight;
    for (std::int64_t j = 0; j < p.top_k; ++j) {
      const double total = std::accumulate(w.begin(), w.end(), 0.0);
      double x = static_cast<double>(r() >> 11) * 0x1.0p-53 * total;
      std::size_t e = 0;
      while (e + 1 < w.size() && (w[e] == 0 || x >= w[e])) {
        x -= w[e];
        ++e;
      }
      while (w[e] == 0) e = (e + 1) % w.size();  // rounding past the last live expert
      out.push_back(static_cast<std::int32_t>(e));
      w[e] = 0;
    }
  }
  return out;
}

std::string make_plan(const params& p, const machine& m, plan& pl) {
  pl.p = p;
  pl.cores = std::max(1, m.cores);
  if (pl.cores > 1 && p.split == core_split::experts && p.sbuf_partials)
    return "moe: partials = sbuf with core_split = expert on two physical cores: each core's "
           "combine needs the partials of the other core's experts, and a core cannot read the "
           "other's SBUF; use partials = hbm (a core barrier orders the two) or core_split = token";
  const std::int64_t b = dtype_bytes(p.type), parts = m.partitions;
  const double rows = static_cast<double>(p.tokens) * static_cast<double>(p.top_k);
  if (rows > 1 << 20)
    return fmt::format("moe: {} routed rows is more than the simulator lowers", rows);
  share_routing(p, pl);
  pl.k_slabs = ceil_div(p.d_in, parts);
  pl.t_subs = ceil_div(p.token_tile, parts);
  pl.out_blocks = ceil_div(p.d_out, p.out_tile);
  pl.out_banks = ceil_div(p.out_tile, p.mm_n);  // one bank per mm_n columns (<= 512 fp32)
  // two banks for the transposes of x, the rest for the group tile's outputs
  const std::int64_t free = m.psum_banks - (p.x_rows ? 2 : 0);
  const std::int64_t groups = pl.t_subs * pl.out_banks;
  if (groups > free)
    return fmt::format(
        "PSUM overflow: {} accumulation groups outstanding (token_tile {} = {} row tiles x "
        "out_tile {} = {} banks each){}; the target has {} banks (over by {})",
        groups, p.token_tile, pl.t_subs, p.out_tile, pl.out_banks,
        p.x_rows ? " and 2 banks for the transposes of x" : "", m.psum_banks, groups - free);
  pl.psum_sets = std::max<std::int64_t>(1, free / groups);
  pl.x_bytes = p.x_bufs * pl.k_slabs * p.token_tile * b;
  pl.raw_bytes = p.x_rows ? 2 * p.d_in * b : 0;
  pl.w_bytes = p.bufs * pl.k_slabs * p.out_tile * b;
  // scaled rows (fp32), and per 128-row sub-tile of each x^T slot its (token, row) indices
  // and router weight
  pl.stage_bytes = 2 * p.out_tile * 4 + p.x_bufs * pl.t_subs * (8 + 4);
  // partials in SBUF: every 128-token tile's top_k rows of d_out, resident;
  // in HBM: the combine loads one token tile's top_k x out_tile at a time
  pl.part_bytes = p.sbuf_partials ? ceil_div(p.tokens, parts) * p.top_k * p.d_out * 4 : 0;
  pl.combine_bytes =
      (p.sbuf_partials ? 2 * p.out_tile * 4 : 2 * p.top_k * p.out_tile * 4) + 2 * p.out_tile * b;
  if (auto e = emit::check_sbuf({{"x^T tiles", pl.x_bytes},
                                 {"gathered x rows", pl.raw_bytes},
                                 {"expert weight blocks", pl.w_bytes},
                                 {"output staging", pl.stage_bytes},
                                 {"combine tiles", pl.combine_bytes},
                                 {"partials", pl.part_bytes}},
                                m.sbuf_bytes_per_partition,
                                fmt::format("token_tile={}, out_tile={}, bufs={}, x_bufs={}",
                                            p.token_tile, p.out_tile, p.bufs, p.x_bufs));
      !e.empty())
    return e;
  build_tiles(pl);
  std::size_t tiles = 0;
  for (const auto& c : pl.tiles) tiles += c.size();
  const double matmuls = static_cast<double>(tiles) * static_cast<double>(pl.t_subs) *
                         static_cast<double>(pl.k_slabs) *
                         static_cast<double>(ceil_div(p.d_out, p.mm_n));
  if (matmuls > 2e7)
    return fmt::format("moe: {:.3g} matmul instructions is more than the simulator lowers",
                       matmuls);
  return "";
}

workload_totals totals_of(const plan& pl) {
  const auto& p = pl.p;
  // the rows of the share's experts (all tokens x top_k, or an
  // expert-parallel rank's) and those this plan runs (one core's share with
  // core >= 0)
  double all = 0;
  std::int64_t used = 0;
  for (std::int64_t e = 0; e < p.experts; ++e)
    if (pl.share.holds(e, p.experts)) {
      all += static_cast<double>(pl.group_size[static_cast<std::size_t>(e)]);
      used += pl.group_size[static_cast<std::size_t>(e)] > 0;
    }
  double rows = 0;
  for (int c = 0; c < pl.cores; ++c)
    if (pl.core < 0 || c == pl.core)
      for (const auto& [height, count] : pl.tiles.heights(static_cast<std::size_t>(c)))
        rows += count * static_cast<double>(height);
  workload_totals t;
  t.flops = 2.0 * rows * static_cast<double>(p.d_in * p.d_out);
  // x, the weights of every expert some token uses, y (a core: its share)
  t.min_hbm_bytes =
      (all > 0 ? rows / all : 0.0) *
      static_cast<double>((p.tokens * p.d_in + used * p.d_in * p.d_out + p.tokens * p.d_out) *
                          dtype_bytes(p.type));
  t.compute_type = p.type;
  return t;
}

}  // namespace tessel::sim::moe_detail
