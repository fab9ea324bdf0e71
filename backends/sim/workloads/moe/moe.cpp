// moe.cpp: the expert matmul of a mixture-of-experts layer on one NeuronCore
// (Qwen3-30B-A3B-class inference): every token is routed to top_k of
// `experts` experts (a deterministic routing, moe_plan.cpp), the rows of each
// expert are gathered into tiles, multiplied by the expert's weight matrix
// [d_in, d_out] (a grouped GEMM with uneven group sizes), scaled by the
// router weight of each row and written to an fp32 partial per (token,
// slot); a combine pass sums each token's top_k partials into y.
//
// Per group tile (one expert, up to token_tile rows):
//   1. per 128-row sub-tile: load its routing indices and gather its router
//      weights through them; x: rows = gather the rows of x [tokens, d_in]
//      (one descriptor per row) and transpose each 128 x 128 piece on TensorE
//      into one of two PSUM banks, copied into the x^T tile by the evict
//      engine; transposed = each token's column of every 128-row slab of
//      x^T [d_in, tokens] in a transfer of its own;
//   2. for each block of out_tile columns of the expert's weights (loaded as
//      128-row slabs into one of `bufs` slots): for each 128-row sub-tile
//      and each mm_n columns, the product accumulates over d_in in a PSUM
//      bank of a rotating set (stationary: x^T, moving: the weights); the
//      evict engine multiplies it by the router weights (one per partition)
//      into staging, and the rows are scattered to the partials (one
//      indirect DMA into HBM, or one transfer per row into SBUF);
// then, per 128 tokens, the combine engine sums the top_k partials (loaded
// out_tile columns at a time) and y is stored. docs/simulator.md has the table.
#include "moe.hpp"
#include "../../nki/nki.hpp"
#include "../../typed_workload.hpp"
#include "../emit.hpp"

#include <tessel/error.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

namespace tessel::sim {
namespace {

using emit::ceil_div;
using moe_detail::params;
using moe_detail::plan;

void read_choices(const knob_reader& v, params& p) {
  p.group =
      v.symbol("grouping") == "token" ? moe_detail::grouping::token : moe_detail::grouping::sorted;
  p.sbuf_partials = v.symbol("partials") == "sbuf";
  p.x_rows = v.symbol("x_layout") == "rows";
  p.split = v.symbol("core_split") == "token" ? moe_detail::core_split::tokens
                                              : moe_detail::core_split::experts;
  p.evict = emit::read_engine(v, "evict");
  p.combine_engine = emit::read_engine(v, "combine_engine");
}

std::string read(const knob_reader& v, const machine& m, params& p) {
  p.tokens = v.integer("tokens");
  p.d_in = v.integer("d_in");
  p.d_out = v.integer("d_out");
  p.experts = v.integer("experts");
  p.top_k = v.integer("top_k");
  if (p.tokens <= 0 || p.d_in <= 0 || p.d_out <= 0 || p.experts <= 0 || p.top_k <= 0)
    return "moe: tokens, d_in, d_out, experts and top_k must be positive";
  if (p.top_k > p.experts)
    return fmt::format("moe: top_k = {} is more than the {} experts", p.top_k, p.experts);
  p.route_seed = v.integer("route_seed");
  p.route_skew = v.integer("route_skew");
  if (p.route_skew < 0 || p.route_skew > 400)
    return fmt::format("moe: route_skew = {} is not in 0 .. 400 (a Zipf exponent x 100)",
                       p.route_skew);
  if (auto e = emit::read_dtype(v, "moe", p.type); !e.empty()) return e;
  p.mm_n = v.integer("mm_n", m.max_moving_free);
  if (auto e = emit::check_instruction_tile(m.max_contraction, p.mm_n, m); !e.empty()) return e;
  p.token_tile = v.integer("token_tile");
  p.out_tile = std::min(v.integer("out_tile"), p.d_out);
  if (p.token_tile <= 0 || p.out_tile <= 0) return "moe: token_tile and out_tile must be positive";
  if (p.token_tile > m.partitions && p.token_tile % m.partitions != 0)
    return fmt::format("moe: token_tile = {} is over {} partitions and not a multiple of {}",
                       p.token_tile, m.partitions, m.partitions);
  p.bufs = static_cast<int>(v.integer("bufs"));
  p.x_bufs = static_cast<int>(v.integer("x_bufs"));
  if (p.bufs < 1 || p.x_bufs < 1) return "moe: bufs and x_bufs must be at least 1";
  p.queues = static_cast<int>(std::clamp<std::int64_t>(v.integer("dma_queues"), 1, 4));
  read_choices(v, p);
  if (p.evict == gpsimd_engine)
    return "moe: evict = gpsimd cannot drain PSUM (GpSimdE cannot access PSUM)";
  return "";
}

class lowerer : emit::lowering<plan> {
 public:
  lowerer(const plan& pl, const machine& m, program& out) : lowering(pl, m, out, 4, pl.p.queues) {}

  void run() {
    setup();
    for (int c = 0; c < pl_.cores; ++c) {
      if (pl_.core >= 0 && c != pl_.core) continue;
      for (const auto& g : pl_.tiles[static_cast<std::size_t>(c)]) group(g);
    }
    if (pl_.core >= 0 && moe_detail::needs_barrier(pl_)) barrier();
    for (int c = 0; c < pl_.cores; ++c) {
      if (pl_.core >= 0 && c != pl_.core) continue;
      for (const auto& [t0, t1] : pl_.combine[static_cast<std::size_t>(c)]) combine(t1 - t0);
    }
  }

 private:
  enum tag_index : std::size_t {
    t_x,
    t_t,
    t_xc,
    t_w,
    t_mm,
    t_scale,
    t_scatter,
    t_part,
    t_sum,
    t_y
  };

  void setup() {
    const std::int64_t b = dtype_bytes(p_.type);
    hbm_x_ = out_.add_buffer({"x (HBM)", memory::hbm, 0, 1, p_.tokens * p_.d_in * b});
    hbm_w_ = out_.add_buffer(
        {"expert weights (HBM)", memory::hbm, 0, 1, p_.experts * p_.d_in * p_.d_out * b});
    hbm_route_ = out_.add_buffer(
        {"routing and router weights (HBM)", memory::hbm, 0, 1, p_.tokens * p_.top_k * 12});
    hbm_part_ =
        out_.add_buffer({"partials (HBM)", memory::hbm, 0, 1, p_.tokens * p_.top_k * p_.d_out * 4});
    hbm_y_ = out_.add_buffer({"y (HBM)", memory::hbm, 0, 1, p_.tokens * p_.d_out * b});
    sb_x_ = out_.add_buffer({"x^T tiles", memory::sbuf, pl_.x_bytes / p_.x_bufs, p_.x_bufs, 0});
    sb_raw_ = out_.add_buffer({"gathered x rows", memory::sbuf, pl_.raw_bytes / 2, 2, 0});
    sb_w_ =
        out_.add_buffer({"expert weight blocks", memory::sbuf, pl_.w_bytes / p_.bufs, p_.bufs, 0});
    sb_stage_ = out_.add_buffer({"output staging", memory::sbuf, pl_.stage_bytes / 2, 2, 0});
    sb_comb_ = out_.add_buffer({"combine tiles", memory::sbuf, pl_.combine_bytes / 2, 2, 0});
    sb_part_ = out_.add_buffer({"partials", memory::sbuf, pl_.part_bytes, 1, 0});
    psum_ = emit::psum_banks(out_, m_, m_.psum_banks);
    b_.tags({"gather x", "transpose x", "copy x^T", "load expert weights", "matmul",
             "scale by router weight", "scatter partials", "load partials", "combine", "store y"});
    x_.init(p_.x_bufs);
    route_.init(p_.x_bufs);
    raw_.init(2);
    w_.init(p_.bufs);
    stage_.init(2);
    comb_.init(2);
    bank_reader_.assign(static_cast<std::size_t>(m_.psum_banks), program::none);
    out_.totals = moe_detail::totals_of(pl_);
  }

  /// The x^T tile of a group tile, a 128-row sub-tile at a time: its routing
  /// (token, row) indices and router weights (an indirect gather through the
  /// indices), then the rows of x gathered the same way and transposed on
  /// TensorE, or (x given transposed) each token's column of every slab in a
  /// transfer of its own; returns what the matmuls of each slab wait for.
  std::vector<instruction_id> load_x(const moe_detail::group_tile& g) {
    const std::int64_t parts = m_.partitions, b = dtype_bytes(p_.type);
    const auto n = static_cast<std::int64_t>(g.rows.size());
    const auto war = x_.next();
    // the group tile's index and weight tiles rotate with its x^T tile: a slot is
    // rewritten once the last scatter of the group tile x_bufs before read it
    const auto route_war = route_.next();
    std::vector<instruction_id> ready(static_cast<std::size_t>(pl_.k_slabs), program::none);
    for (std::int64_t r0 = 0; r0 < n; r0 += parts) {
      const std::int64_t rows = std::min(parts, n - r0);
      const auto index = b_.dma(q_.next(0), hbm_route_, sb_stage_, rows, 8, t_x, {route_war});
      weights_ = b_.dma(q_.next(0), hbm_route_, sb_stage_, rows, 4, t_x, {index});
      if (!p_.x_rows) {  // x^T [d_in, tokens]: a token is a column, one transfer per slab
        for (std::int64_t i = 0; i < rows; ++i)
          for (std::int64_t s = 0; s < pl_.k_slabs; ++s)
            ready[static_cast<std::size_t>(s)] = b_.dma(
                q_.next(0), hbm_x_, sb_x_, std::min(parts, p_.d_in - s * parts), b, t_x, {war});
        continue;
      }
      const auto raw_war = raw_.next();
      const auto gathered =
          b_.dma(q_.next(0), hbm_x_, sb_raw_, rows, p_.d_in * b, t_x, {raw_war, index},
                 p_.d_in * b);  // a descriptor per row
      instruction_id last = program::none;
      for (std::int64_t s = 0; s < pl_.k_slabs; ++s) {
        const auto bank = static_cast<std::size_t>(transposes_++ % 2);
        const std::int64_t cols = std::min(parts, p_.d_in - s * parts);
        const auto tid = b_.transpose(p_.type, rows, cols, sb_raw_, psum_[bank], t_t,
                                      {gathered, bank_reader_[bank]});
        last = b_.compute(p_.evict, copy_op(), cols, rows, psum_[bank], sb_x_, t_xc,
                          {tid, r0 == 0 ? war : program::none});
        bank_reader_[bank] = last;
        ready[static_cast<std::size_t>(s)] = last;
      }
      raw_.read_by(last);
    }
    return ready;
  }

  [[nodiscard]] op copy_op() const { return p_.evict == scalar_engine ? op::activation : op::copy; }

  void group(const moe_detail::group_tile& g) {
    const std::int64_t parts = m_.partitions, b = dtype_bytes(p_.type);
    const auto n = static_cast<std::int64_t>(g.rows.size());
    const auto x_ready = load_x(g);
    instruction_id last_mm = program::none;
    for (std::int64_t ob = 0; ob < pl_.out_blocks; ++ob) {
      const std::int64_t cols = std::min(p_.out_tile, p_.d_out - ob * p_.out_tile);
      const auto w_war = w_.next();
      std::vector<instruction_id> w_ready(static_cast<std::size_t>(pl_.k_slabs));
      for (std::int64_t s = 0; s < pl_.k_slabs; ++s)
        w_ready[static_cast<std::size_t>(s)] =
            b_.dma(q_.next(1), hbm_w_, sb_w_, std::min(parts, p_.d_in - s * parts), cols * b, t_w,
                   {w_war});
      const std::int64_t set = sets_++ % pl_.psum_sets;
      for (std::int64_t r0 = 0, ts = 0; r0 < n; r0 += parts, ++ts) {
        const std::int64_t rows = std::min(parts, n - r0);
        std::vector<instruction_id> banks;
        for (std::int64_t c0 = 0, ci = 0; c0 < cols; c0 += p_.mm_n, ++ci) {
          const auto bank = static_cast<std::size_t>((p_.x_rows ? 2 : 0) +
                                                     (set * pl_.t_subs + ts) * pl_.out_banks + ci);
          banks.push_back(static_cast<instruction_id>(bank));
          for (std::int64_t s = 0; s < pl_.k_slabs; ++s) {
            std::vector<instruction_id> deps;
            if (s == 0 && bank_reader_[bank] != program::none) deps.push_back(bank_reader_[bank]);
            if (ob == 0 && ts == 0 && ci == 0) deps.push_back(x_ready[static_cast<std::size_t>(s)]);
            if (ts == 0 && ci == 0) deps.push_back(w_ready[static_cast<std::size_t>(s)]);
            last_mm = b_.matmul(p_.type, std::min(parts, p_.d_in - s * parts), rows,
                                std::min(p_.mm_n, cols - c0), true, s > 0, sb_x_, psum_[bank], t_mm,
                                deps);
          }
        }
        scale_and_scatter(rows, cols, last_mm, banks);
      }
      w_.read_by(last_mm);
    }
    x_.read_by(last_mm);
  }

  /// Evict: PSUM times the rows' router weights into staging; scatter the
  /// rows to their (token, slot) partials.
  void scale_and_scatter(std::int64_t rows, std::int64_t cols, instruction_id mm,
                         const std::vector<instruction_id>& banks) {
    const auto war = stage_.next();
    instruction_id e = program::none;
    for (std::size_t i = 0; i < banks.size(); ++i) {
      const std::int64_t width = std::min(p_.mm_n, cols - static_cast<std::int64_t>(i) * p_.mm_n);
      e = b_.compute(p_.evict, p_.evict == scalar_engine ? op::activation : op::tensor_scalar, rows,
                     width, psum_[banks[i]], sb_stage_, t_scale,
                     {mm, i == 0 ? war : program::none, weights_});
      bank_reader_[banks[i]] = e;
    }
    if (!p_.sbuf_partials) {  // one indirect scatter through the rows' (token, slot) indices
      stage_.read_by(b_.dma(q_.next(2), sb_stage_, hbm_part_, rows, cols * 4, t_scatter, {e}));
      scatters_.push_back(stage_.reader[static_cast<std::size_t>(stage_.slot)]);
      route_.read_by(scatters_.back());
      return;
    }
    // in SBUF a row goes to its token's partition: one transfer per row
    instruction_id last = program::none;
    for (std::int64_t i = 0; i < rows; ++i)
      last = b_.dma(q_.next(2), sb_stage_, sb_part_, 1, cols * 4, t_scatter, {e});
    stage_.read_by(last);
    scatters_.push_back(last);
    route_.read_by(last);
  }

  /// The core barrier between the scatters and the combine (needs_barrier):
  /// one GpSimdE instruction (nisa.core_barrier's engine) after this core's
  /// last scatter, before its first partial load, costed as GpSimdE's
  /// smallest instruction (a copy of nothing: its fixed cost), marked as the
  /// program's core barrier: sim_backend adds this core's wait there for the
  /// other core's scatters (wait_at_barrier; docs/nki.md, "Two physical cores").
  void barrier() {
    instruction in = instruction_on(gpsimd_engine, op::copy,
                                    {hbm_part_, hbm_part_, out_.add_tag("core barrier")});
    in.type = dtype::fp32;
    in.partitions = 1;
    scatters_ = {out_.add(in, scatters_)};
    out_.barrier(scatters_.front());
  }

  /// y for `rows` tokens: per out block, load their top_k partials, sum them
  /// on the combine engine in fp32 (the last add writes dtype), store.
  void combine(std::int64_t rows) {
    const std::int64_t b = dtype_bytes(p_.type);
    for (std::int64_t ob = 0; ob < pl_.out_blocks; ++ob) {
      const std::int64_t cols = std::min(p_.out_tile, p_.d_out - ob * p_.out_tile);
      const auto war = comb_.next();
      std::vector<instruction_id> deps = scatters_;  // every partial of this core is written
      deps.push_back(war);
      instruction_id last = program::none;
      buffer_id src = sb_part_;  // partials in SBUF: summed where they are
      if (!p_.sbuf_partials && pl_.share.exchanged) {
        // the token tile's top_k row indices, then one gather per slot through them
        const auto index =
            b_.dma(q_.next(3), hbm_route_, sb_comb_, rows, p_.top_k * 4, t_part, deps);
        for (std::int64_t j = 0; j < p_.top_k; ++j) {
          last = b_.dma(q_.next(3), hbm_part_, sb_comb_, rows, cols * 4, t_part, {index}, cols * 4);
          deps.push_back(last);
        }
        deps = {deps.begin() + static_cast<std::ptrdiff_t>(deps.size()) - p_.top_k, deps.end()};
        src = sb_comb_;
        scatters_ = {index};
      } else if (!p_.sbuf_partials) {
        last = b_.dma(q_.next(3), hbm_part_, sb_comb_, rows, p_.top_k * cols * 4, t_part, deps,
                      cols * 4);
        deps = {last};
        src = sb_comb_;
        scatters_ = {last};  // later loads: ordered after this one, which waited for all
      }
      // the first step copies (or, with top_k > 1, adds the first two slots)
      last = b_.compute(p_.combine_engine, p_.top_k == 1 ? op::copy : op::tensor_tensor, rows, cols,
                        src, sb_comb_, t_sum, deps);
      for (std::int64_t j = 2; j < p_.top_k; ++j)
        last = b_.compute(p_.combine_engine, op::tensor_tensor, rows, cols, src, sb_comb_, t_sum,
                          {last});
      comb_.read_by(b_.dma(q_.next(3), sb_comb_, hbm_y_, rows, cols * b, t_y, {last}));
    }
  }

  buffer_id hbm_x_ = 0, hbm_w_ = 0, hbm_route_ = 0, hbm_part_ = 0, hbm_y_ = 0, sb_x_ = 0,
            sb_raw_ = 0, sb_w_ = 0, sb_stage_ = 0, sb_comb_ = 0, sb_part_ = 0;
  std::vector<buffer_id> psum_;  ///< one per bank
  emit::slot_ring x_, route_, raw_, w_, stage_, comb_;
  std::vector<instruction_id> bank_reader_, scatters_;
  std::uint64_t transposes_ = 0, sets_ = 0;
  instruction_id weights_ = program::none;  ///< the current sub-tile's router weights
};

/// The group sizes of the config's routing: how many experts have more rows
/// than token_tile, and the share of the 128-row sub-tiles' rows that hold a
/// routed row (the rest is padding TensorE still streams past).
struct group_stats {
  std::int64_t over_tile = 0;
  double fill = 1;
};

class moe final : public planned_workload<plan, params, read, moe_detail::make_plan, lowerer> {
 public:
  moe()
      : planned_workload({
            "moe",
            "MoE expert matmul: tokens routed to top_k experts, gathered, a grouped GEMM per "
            "expert, scaled by the router weights and combined",
            {
                knob::required_integer("tokens", "tokens in the batch"),
                knob::required_integer("d_in",
                                       "columns of x (the contraction; the model's hidden size)"),
                knob::required_integer("d_out", "columns of each expert's output and of y"),
                knob::required_integer("experts", "experts of the layer"),
                knob::required_integer("top_k", "experts per token"),
                knob::integer("route_seed", 1, "seed of the deterministic routing"),
                knob::integer("route_skew", 0,
                              "expert e draws tokens with weight 1 / (e + 1)^(skew / 100): 0 "
                              "uniform, 100 Zipf",
                              "0 .. 400"),
                emit::dtype_knob("x, weights and y type"),
                emit::bytes_knob(),
                knob::symbol("grouping", {"sorted", "token"}, "sorted",
                             "sorted: each expert's rows gathered into tiles (a grouped GEMM); "
                             "token: each (token, expert) pair alone, the expert's weights loaded "
                             "per token"),
                knob::integer("token_tile", 128,
                              "rows per group tile (over 128: a multiple of 128); the expert's "
                              "weights are read once per group tile"),
                knob::integer("out_tile", 512,
                              "d_out columns per weight block and per combine step"),
                knob::integer("bufs", 2, "expert weight block slots", ">= 1"),
                knob::integer("x_bufs", 2, "x^T tile slots", ">= 1"),
                knob::symbol("x_layout", {"rows", "transposed"}, "rows",
                             "rows: x [tokens, d_in], gathered by rows and transposed on "
                             "TensorE; transposed: x^T [d_in, tokens], a token's column of each "
                             "128-row slab per transfer"),
                knob::symbol("evict", {"vector", "scalar", "gpsimd"}, "vector",
                             "drains PSUM, multiplying by the router weights (and copies the "
                             "transposes of x); gpsimd is a compile error: GpSimdE cannot access "
                             "PSUM"),
                knob::symbol("combine_engine", {"vector", "gpsimd"}, "vector",
                             "sums each token's top_k partials"),
                knob::symbol("core_split", {"expert", "token"}, "expert",
                             "with lnc = 2: whole experts per physical core, or half of the "
                             "tokens per core"),
                knob::symbol("partials", {"hbm", "sbuf"}, "hbm",
                             "where the scaled (token, slot) rows wait for the combine: an fp32 "
                             "tensor in HBM (written, then read back), or resident in SBUF (all "
                             "tokens' top_k rows)"),
                knob::integer("dma_queues", 1, "queues per stream (x, weights, partials, combine)",
                              "1..4"),
                knob::integer("mm_n", derived{"matmul_max_moving_free (512)"},
                              "moving free size of one matmul"),
            },
            "",
        }) {}

  /// One plan per physical core: the same routing and tiles, each core
  /// lowering its own share (moe_plan.cpp splits them by core_split).
  [[nodiscard]] std::vector<std::unique_ptr<workload_plan>> plan_cores(
      const space& s, const config& c, const machine& m,
      const workload_plan* whole = nullptr) const override {
    std::vector<std::unique_ptr<workload_plan>> out;
    std::unique_ptr<workload_plan> planned;  // the whole problem's, when not given
    if (!whole) whole = (planned = plan_config(s, c, m)).get();
    for (int core = 0; core < std::max(1, m.cores); ++core) {
      auto p = std::make_unique<plan_of<plan>>(typed(*whole));
      p->error = whole->error;
      p->value.core = core;
      out.push_back(std::move(p));
    }
    return out;
  }

  [[nodiscard]] double estimated_instructions(const space& s, const config& c,
                                              const machine& m) const override {
    const knob_reader v = reader(s, c);
    const double rows = static_cast<double>(v.integer("tokens") * v.integer("top_k"));
    const double tiles =
        v.symbol("grouping") == "token"
            ? rows
            : rows / static_cast<double>(std::max<std::int64_t>(
                         1, std::min<std::int64_t>(v.integer("token_tile"), m.partitions))) +
                  static_cast<double>(v.integer("experts"));
    const double slabs = static_cast<double>(ceil_div(v.integer("d_in"), m.partitions));
    const double chunks = static_cast<double>(
        ceil_div(v.integer("d_out"), std::max<std::int64_t>(1, v.integer("mm_n", 512))));
    return tiles * slabs * (2 + chunks) + rows / 64;
  }

  [[nodiscard]] std::vector<std::string> suggest(const bottleneck& b, const space& s,
                                                 const config& c) const override;

 private:
  [[nodiscard]] std::unique_ptr<functional_kernel> executor(const plan& pl,
                                                            const machine& m) const override {
    (void)m;
    return moe_detail::make_kernel(pl);
  }

  /// The closed-form model over the plan's group tiles (moe_steady.cpp).
  [[nodiscard]] std::optional<steady_estimate> steady(const plan& pl,
                                                      const machine& m) const override {
    return moe_detail::estimate_steady(pl, m);
  }

  [[nodiscard]] std::string write_nki(const plan& pl, const nki::context& ctx,
                                      std::string& out) const override {
    return moe_detail::emit_nki(pl, ctx, out);
  }

  /// The group sizes of the config's routing (for suggest).
  [[nodiscard]] group_stats routing_stats(const space& s, const config& c) const;
  /// "raise bufs (now 2) or dma_queues (now 4)" over the names the space can raise, or "".
  [[nodiscard]] std::string raise_any(const space& s, const config& c,
                                      const std::vector<std::string_view>& names) const;
};

group_stats moe::routing_stats(const space& s, const config& c) const {
  params p;
  try {
    if (!read(reader(s, c), resolve_machine(s.def().target), p).empty()) return {};
  } catch (const error&) {
    return {};  // not a NeuronCore target: no statistics of the routing
  }
  std::vector<std::int64_t> size(static_cast<std::size_t>(p.experts), 0);
  for (const auto e : moe_detail::route_tokens(p)) ++size[static_cast<std::size_t>(e)];
  group_stats g;
  double rows = 0, slots = 0;
  for (const auto n : size) {
    g.over_tile += n > p.token_tile;
    rows += static_cast<double>(n);
    slots +=
        static_cast<double>(p.group == moe_detail::grouping::token ? n : ceil_div(n, 128) * 128);
  }
  g.fill = slots > 0 ? rows / slots : 1;
  return g;
}

/// Whether the space has parameter `name` with a larger value than the config's.
bool can_raise(const space& s, const config& c, std::string_view name) {
  const auto i = s.parameter_index(name);
  if (!i || *i >= c.size() || c[*i] == config::inactive) return false;
  const auto& values = s.parameters()[*i].dom.values;
  const auto now = values.at(c[*i]);
  return std::any_of(values.begin(), values.end(), [&](std::int64_t x) { return x > now; });
}

std::string moe::raise_any(const space& s, const config& c,
                           const std::vector<std::string_view>& names) const {
  const knob_reader v = reader(s, c);
  std::string out;
  for (const auto n : names)
    if (can_raise(s, c, n))
      out += fmt::format("{}{} (now {})", out.empty() ? "raise " : " or ", n, v.integer(n));
  return out;
}

std::vector<std::string> moe::suggest(const bottleneck& b, const space& s, const config& c) const {
  const knob_reader v = reader(s, c);
  std::vector<std::string> out;
  const bool token = v.symbol("grouping") == "token";
  const bool dma = b.phase.rfind("dma", 0) == 0;
  if (b.tag == "load expert weights") {
    if (token)
      out.emplace_back(
          "grouping = sorted: each expert's weights are then read once per group tile, not once "
          "per routed token");
    else if (const auto over = routing_stats(s, c).over_tile; over > 0)
      out.push_back(fmt::format(
          "raise token_tile (now {}): {} experts have more rows than a tile and read their "
          "weights once per tile",
          v.integer("token_tile"), over));
    if (v.symbol("core_split") == "token")
      out.emplace_back(
          "core_split = expert: with half the tokens per core, both cores read most experts' "
          "weights; whole experts per core read each once");
    if (const auto r = raise_any(s, c, {"bufs", "dma_queues"}); !r.empty())
      out.push_back(r + ": the next expert's weights load while this one multiplies");
    else
      out.push_back(fmt::format(
          "bufs and dma_queues are at the space's maximum: the expert weights stream at the DMA "
          "rate in rows of {} bytes per partition (out_tile {}); a space with more queues or "
          "longer rows would unlock more",
          std::min(v.integer("out_tile"), v.integer("d_out")) *
              (v.symbol("dtype", "bf16") == "fp32" ? 4 : 2),
          v.integer("out_tile")));
  } else if (b.tag == "gather x") {
    if (v.symbol("x_layout") == "transposed")
      out.emplace_back(
          "x_layout = rows: gathering columns of x^T costs a transfer per token and 128-row "
          "slab; rows gather a sub-tile's rows in one and transpose on TensorE");
    if (const auto r = raise_any(s, c, {"x_bufs", "dma_queues"}); !r.empty())
      out.push_back(r + ": the next group tile's rows gather during this one");
  } else if (b.tag == "scatter partials" || b.tag == "load partials" || b.tag == "store y") {
    if (b.tag != "store y" && v.symbol("partials") == "hbm" && v.has("partials"))
      out.emplace_back("partials = sbuf: the scaled rows wait in SBUF, with no HBM round trip");
    if (const auto r = raise_any(s, c, {"out_tile", "dma_queues"}); !r.empty())
      out.push_back(r + ": longer rows per transfer, or more transfers in flight");
  } else if (dma) {
    if (const auto r = raise_any(s, c, {"dma_queues"}); !r.empty()) out.push_back(r);
  } else if (b.phase == "tensor") {
    out.push_back(fmt::format(
        "the groups fill {:.0f}% of the 128-row tiles TensorE streams each expert's weights "
        "past (a group of 5 rows costs as much as one of 128): fewer, larger groups (a lower "
        "top_k or more tokens per call) are what pays; keep mm_n = 512",
        100 * routing_stats(s, c).fill));
    if (b.tag == "transpose x")
      out.emplace_back("x_layout = transposed moves the transposes off TensorE (at a DMA cost)");
  } else if (b.tag == "combine") {
    out.push_back(fmt::format("combine_engine = {}: move the top_k sums",
                              v.symbol("combine_engine") == "vector" ? "gpsimd" : "vector"));
  } else if (b.tag == "scale by router weight" || b.tag == "copy x^T") {
    out.push_back(fmt::format("evict = {}: move the PSUM drains",
                              v.symbol("evict") == "scalar" ? "vector" : "scalar"));
  }
  return out;
}

}  // namespace

const workload& moe_workload() {
  static const moe instance;
  return instance;
}

}  // namespace tessel::sim
