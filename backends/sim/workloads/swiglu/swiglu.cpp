// swiglu.cpp: the SwiGLU MLP of a transformer block on one NeuronCore,
// y = (silu(x W_gate) * (x W_up)) W_down, with x given transposed
// ([d_model, tokens]), W_gate and W_up as [d_model, d_ff], W_down as
// [d_ff, d_model] and y as [tokens, d_model].
//
// Per token tile (its x^T tile resident in SBUF):
//   1. gate/up: for each block of ff_tile columns of W_gate and W_up
//      (streamed, `bufs` slots) and each 128-column sub-tile of it, the gate
//      and the up projections accumulate over d_model into two PSUM banks,
//      giving h^T = silu(g) * u directly with d_ff on the partitions (the
//      layout the down projection contracts over): SiLU on `silu_engine`
//      from PSUM, the multiply on `mul_engine` into the resident h tile;
//   2. down: for each block of d_tile output columns, the W_down blocks
//      (ff_tile rows, streamed) accumulate the token tile's y block over d_ff
//      in PSUM; the `evict` engine drains it and y is stored.
// The weights are read once per token tile. docs/simulator.md has the table.
#include "swiglu.hpp"
#include "../../nki/nki.hpp"
#include "../../timing.hpp"
#include "../../typed_workload.hpp"
#include "../emit.hpp"

#include <tessel/gate.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace tessel::sim {
namespace {

using emit::ceil_div;
using swiglu_detail::params;
using swiglu_detail::plan;

/// What NKI can run: SiLU is a ScalarE activation (the others have no function unit, and
/// GpSimdE cannot read PSUM), the evict engine reads PSUM (vector or scalar), and a GpSimdE
/// multiply reads u from SBUF after the evict engine copies it out of PSUM.
std::string read_engines(const knob_reader& v, params& p) {
  p.silu_engine = emit::read_engine(v, "silu_engine");
  p.mul_engine = emit::read_engine(v, "mul_engine");
  p.evict = emit::read_engine(v, "evict");
  if (p.silu_engine != scalar_engine)
    return "swiglu: silu_engine must be scalar (SiLU is a ScalarE activation)";
  if (p.evict == gpsimd_engine)
    return "swiglu: evict = gpsimd cannot drain PSUM (GpSimdE cannot access PSUM)";
  return "";
}

std::string read(const knob_reader& v, const machine& m, params& p) {
  p.tokens = v.integer("tokens");
  p.d_model = v.integer("d_model");
  p.d_ff = v.integer("d_ff");
  if (p.tokens <= 0 || p.d_model <= 0 || p.d_ff <= 0)
    return "swiglu: tokens, d_model and d_ff must be positive";
  if (auto e = emit::read_dtype(v, "swiglu", p.type); !e.empty()) return e;
  p.mm_k = v.integer("mm_k", m.max_contraction);
  p.mm_n = v.integer("mm_n", m.max_moving_free);
  if (auto e = emit::check_instruction_tile(p.mm_k, p.mm_n, m); !e.empty()) return e;
  if (m.psum_bank_bytes / 4 % p.mm_n != 0)
    return fmt::format("swiglu: mm_n = {} must divide a PSUM bank's {} fp32 columns", p.mm_n,
                       m.psum_bank_bytes / 4);
  p.token_tile = std::min(v.integer("token_tile"), p.tokens);
  p.ff_tile = std::min(v.integer("ff_tile"), p.d_ff);
  p.d_tile = std::min(v.integer("d_tile"), p.d_model);
  if (p.token_tile <= 0 || p.ff_tile <= 0 || p.d_tile <= 0)
    return "swiglu: token_tile, ff_tile and d_tile must be positive";
  for (const auto& [name, value] :
       {std::pair{"token_tile", p.token_tile}, std::pair{"ff_tile", p.ff_tile}})
    if (value > m.partitions && value % m.partitions != 0)
      return fmt::format("swiglu: {} = {} is over {} partitions and not a multiple of {}", name,
                         value, m.partitions, m.partitions);
  p.bufs = static_cast<int>(v.integer("bufs"));
  p.x_bufs = static_cast<int>(v.integer("x_bufs"));
  p.psum_sets = static_cast<int>(v.integer("psum_sets"));
  if (p.bufs < 1 || p.x_bufs < 1 || p.psum_sets < 1)
    return "swiglu: bufs, x_bufs and psum_sets must be at least 1";
  p.fuse_gate_up = v.flag("fuse_gate_up");
  p.fuse_down = v.flag("fuse_down");
  p.queues = static_cast<int>(std::clamp<std::int64_t>(v.integer("dma_queues"), 1, 4));
  return read_engines(v, p);
}

std::string check_psum(const plan& pl, const machine& m) {
  const auto& p = pl.p;
  const std::int64_t free = m.psum_banks - 2LL * p.psum_sets;
  if (pl.down_groups <= free) return "";
  return fmt::format(
      "PSUM overflow: {} accumulation groups outstanding for the down projection (token_tile {} "
      "= {} row tiles x d_tile {} = {} banks each) and {} banks for gate/up (psum_sets = {}); the "
      "target has {} banks (over by {})",
      pl.down_groups, p.token_tile, pl.t_subs, p.d_tile, pl.down_banks, 2 * p.psum_sets,
      p.psum_sets, m.psum_banks, pl.down_groups - free);
}

std::string make_plan(const params& p, const machine& m, plan& pl) {
  pl.p = p;
  const std::int64_t b = dtype_bytes(p.type), parts = m.partitions;
  pl.k_slabs = ceil_div(p.d_model, p.mm_k);
  pl.subs_per_block = ceil_div(p.ff_tile, parts);
  pl.f_subs = p.d_ff / p.ff_tile * pl.subs_per_block + ceil_div(p.d_ff % p.ff_tile, parts);
  pl.t_subs = ceil_div(p.token_tile, parts);
  pl.n_tiles = ceil_div(p.token_tile, p.mm_n);
  pl.down_banks = ceil_div(p.d_tile * 4, m.psum_bank_bytes);
  pl.down_groups = pl.t_subs * pl.down_banks;
  pl.token_tiles = ceil_div(p.tokens, p.token_tile);
  pl.f_blocks = ceil_div(p.d_ff, p.ff_tile);
  pl.d_blocks = ceil_div(p.d_model, p.d_tile);
  if (auto e = check_psum(pl, m); !e.empty()) return e;
  pl.x_bytes = p.x_bufs * pl.k_slabs * p.token_tile * b;
  pl.gu_bytes = p.bufs * pl.k_slabs * 2 * p.ff_tile * b;
  // fuse_down: h holds two ff blocks and y accumulates in fp32 across them
  pl.h_bytes = (p.fuse_down ? 2 * pl.subs_per_block : pl.f_subs) * p.token_tile * b;
  pl.acc_bytes = p.fuse_down ? pl.t_subs * p.d_model * 4 : 0;
  pl.down_sets = std::max<std::int64_t>(
      1, (m.psum_banks - 2LL * p.psum_sets) / std::max<std::int64_t>(1, pl.down_groups));
  pl.wd_bytes = p.bufs * ceil_div(p.ff_tile, parts) * p.d_tile * b;
  // SiLU's two fp32 slots, and u's when GpSimdE multiplies (it cannot read PSUM)
  pl.scratch_bytes = 2 * p.mm_n * 4 * (p.mul_engine == gpsimd_engine ? 2 : 1);
  pl.stage_bytes = 2 * p.d_tile * b;
  if (auto e = emit::check_sbuf({{"x tiles", pl.x_bytes},
                                 {"W_gate/W_up blocks", pl.gu_bytes},
                                 {"h tile", pl.h_bytes},
                                 {"y accumulator", pl.acc_bytes},
                                 {"W_down blocks", pl.wd_bytes},
                                 {"SiLU scratch", pl.scratch_bytes},
                                 {"output staging", pl.stage_bytes}},
                                m.sbuf_bytes_per_partition,
                                fmt::format("token_tile={}, ff_tile={}, d_tile={}, bufs={}, "
                                            "x_bufs={}",
                                            p.token_tile, p.ff_tile, p.d_tile, p.bufs, p.x_bufs));
      !e.empty())
    return e;
  const double matmuls = static_cast<double>(ceil_div(p.tokens, parts)) *
                         static_cast<double>(pl.f_subs) *
                         static_cast<double>(pl.k_slabs + ceil_div(p.d_model, p.mm_n));
  if (matmuls > 5e7)
    return fmt::format("swiglu: {:.3g} matmul instructions is more than the simulator lowers",
                       matmuls);
  return "";
}

class lowerer : emit::lowering<plan> {
 public:
  lowerer(const plan& pl, const machine& m, program& out) : lowering(pl, m, out, 4, pl.p.queues) {}

  void run() {
    setup();
    for (std::int64_t ti = 0; ti < pl_.token_tiles; ++ti) {
      const std::int64_t rows_t = std::min(p_.token_tile, p_.tokens - ti * p_.token_tile);
      load_x(rows_t);
      if (p_.fuse_down) {
        for (std::int64_t fb = 0; fb < pl_.f_blocks; ++fb) {
          gate_up(fb, rows_t);
          for (std::int64_t db = 0; db < pl_.d_blocks; ++db) down(db, rows_t, fb, fb + 1);
        }
        continue;
      }
      for (std::int64_t fb = 0; fb < pl_.f_blocks; ++fb) gate_up(fb, rows_t);
      for (std::int64_t db = 0; db < pl_.d_blocks; ++db) down(db, rows_t, 0, pl_.f_blocks);
    }
  }

 private:
  enum tag_index : std::size_t {
    t_x,
    t_gu,
    t_wd,
    t_gate,
    t_up,
    t_silu,
    t_mul,
    t_down,
    t_evict,
    t_store,
    t_acc
  };

  void setup() {
    const std::int64_t b = dtype_bytes(p_.type);
    hbm_x_ = out_.add_buffer({"x^T (HBM)", memory::hbm, 0, 1, p_.d_model * p_.tokens * b});
    hbm_w_ = out_.add_buffer(
        {"W_gate, W_up, W_down (HBM)", memory::hbm, 0, 1, 3 * p_.d_model * p_.d_ff * b});
    hbm_y_ = out_.add_buffer({"y (HBM)", memory::hbm, 0, 1, p_.tokens * p_.d_model * b});
    sb_x_ = out_.add_buffer({"x tiles", memory::sbuf, pl_.x_bytes / p_.x_bufs, p_.x_bufs, 0});
    sb_gu_ =
        out_.add_buffer({"W_gate/W_up blocks", memory::sbuf, pl_.gu_bytes / p_.bufs, p_.bufs, 0});
    sb_h_ = out_.add_buffer({"h tile", memory::sbuf, pl_.h_bytes, 1, 0});
    sb_acc_ = out_.add_buffer({"y accumulator", memory::sbuf, pl_.acc_bytes, 1, 0});
    sb_wd_ = out_.add_buffer({"W_down blocks", memory::sbuf, pl_.wd_bytes / p_.bufs, p_.bufs, 0});
    sb_scratch_ = out_.add_buffer({"SiLU scratch", memory::sbuf, pl_.scratch_bytes / 2, 2, 0});
    sb_stage_ = out_.add_buffer({"output staging", memory::sbuf, pl_.stage_bytes / 2, 2, 0});
    psum_ = emit::psum_banks(out_, m_, m_.psum_banks);
    b_.tags({"load x", "load W_gate/W_up", "load W_down", "gate", "up", "silu", "multiply", "down",
             "evict", "store y", "accumulate y"});
    x_.init(p_.x_bufs, pl_.k_slabs);
    gu_.init(p_.bufs, pl_.k_slabs * 2);
    wd_.init(p_.bufs, ceil_div(p_.ff_tile, m_.partitions));
    const auto h_pieces = static_cast<std::size_t>(pl_.f_subs * pl_.n_tiles);
    h_write_.assign(h_pieces, program::none);
    h_consumed_.assign(h_pieces, 1);
    h_reader_.assign(static_cast<std::size_t>(pl_.f_subs), program::none);
    h_slot_reader_.assign(static_cast<std::size_t>(2 * pl_.subs_per_block), program::none);
    max_n_ = ceil_div(p_.d_tile, p_.mm_n);
    y_last_.assign(static_cast<std::size_t>(pl_.d_blocks * pl_.t_subs * max_n_), program::none);
    bank_reader_.assign(static_cast<std::size_t>(m_.psum_banks), program::none);
    scratch_reader_.assign(2, program::none);
    stage_store_.assign(2, program::none);
    out_.totals = swiglu_detail::totals_of(p_);
  }

  void load_x(std::int64_t rows_t) {
    const auto war = x_.next();
    for (std::int64_t k = 0; k < pl_.k_slabs; ++k) {
      const std::int64_t rows = std::min(p_.mm_k, p_.d_model - k * p_.mm_k);
      x_.fill(k,
              b_.dma(q_.next(0), hbm_x_, sb_x_, rows, rows_t * dtype_bytes(p_.type), t_x, {war}));
    }
  }

  /// Loads block fb of W_gate and W_up: per contraction slab one transfer of
  /// the concatenated [gate | up] rows (fuse_gate_up) or one of each.
  void load_gate_up(std::int64_t cols) {
    const auto war = gu_.next();
    const std::int64_t b = dtype_bytes(p_.type);
    for (std::int64_t k = 0; k < pl_.k_slabs; ++k) {
      const std::int64_t rows = std::min(p_.mm_k, p_.d_model - k * p_.mm_k);
      if (p_.fuse_gate_up) {  // [rows, 2, cols] of W_gate_up: two contiguous runs per row
        const auto id =
            b_.dma(q_.next(1), hbm_w_, sb_gu_, rows, 2 * cols * b, t_gu, {war}, cols * b);
        gu_.fill(2 * k, id);
        gu_.fill(2 * k + 1, id);
        continue;
      }
      gu_.fill(2 * k, b_.dma(q_.next(1), hbm_w_, sb_gu_, rows, cols * b, t_gu, {war}));
      gu_.fill(2 * k + 1, b_.dma(q_.next(1), hbm_w_, sb_gu_, rows, cols * b, t_gu, {war}));
    }
  }

  /// One accumulation group of gate (which = 0) or up (1) over d_model.
  instruction_id projection(int which, std::int64_t f_rows, std::int64_t cols, std::size_t bank) {
    instruction_id last = program::none;
    for (std::int64_t k = 0; k < pl_.k_slabs; ++k) {
      deps_.clear();
      if (k == 0 && bank_reader_[bank] != program::none) deps_.push_back(bank_reader_[bank]);
      x_.need(k, deps_);
      gu_.need(2 * k + which, deps_);
      last = b_.matmul(p_.type, std::min(p_.mm_k, p_.d_model - k * p_.mm_k), f_rows, cols, true,
                       k > 0, sb_gu_, psum_[bank], which == 0 ? t_gate : t_up, deps_);
    }
    return last;
  }

  void gate_up(std::int64_t fb, std::int64_t rows_t) {
    const std::int64_t parts = m_.partitions;
    const std::int64_t cols = std::min(p_.ff_tile, p_.d_ff - fb * p_.ff_tile);
    load_gate_up(cols);
    instruction_id last = program::none;
    for (std::int64_t fs = 0; fs < ceil_div(cols, parts); ++fs) {
      const std::int64_t f_rows = std::min(parts, cols - fs * parts);
      const std::int64_t f_sub = fb * pl_.subs_per_block + fs;
      for (std::int64_t n = 0; n < ceil_div(rows_t, p_.mm_n); ++n) {
        const std::int64_t width = std::min(p_.mm_n, rows_t - n * p_.mm_n);
        const auto set = static_cast<std::size_t>(sets_++ % p_.psum_sets);
        const auto gate = projection(0, f_rows, width, 2 * set);
        last = projection(1, f_rows, width, 2 * set + 1);
        const auto slot = static_cast<std::size_t>(silus_++ % 2);
        const auto silu = b_.function(p_.silu_engine, f_rows, width, psum_[2 * set], sb_scratch_,
                                      t_silu, {gate, scratch_reader_[slot]});
        instruction_id u = last, u_read = last;
        if (p_.mul_engine == gpsimd_engine)  // GpSimdE reads u from SBUF: the evict engine copies
          u = u_read = b_.compute(p_.evict, p_.evict == scalar_engine ? op::activation : op::copy,
                                  f_rows, width, psum_[2 * set + 1], sb_scratch_, t_mul,
                                  {last, scratch_reader_[slot]});
        const auto mul =
            b_.compute(p_.mul_engine, op::tensor_tensor, f_rows, width,
                       p_.mul_engine == gpsimd_engine ? sb_scratch_ : psum_[2 * set + 1], sb_h_,
                       t_mul, {silu, u, h_war(fb, fs, f_sub)});
        if (p_.mul_engine != gpsimd_engine) u_read = mul;
        bank_reader_[2 * set] = silu;
        bank_reader_[2 * set + 1] = u_read;
        scratch_reader_[slot] = mul;
        const auto piece = static_cast<std::size_t>(f_sub * pl_.n_tiles + n);
        h_write_[piece] = mul;
        h_consumed_[piece] = 0;
      }
    }
    gu_.read_by(last);
    x_.read_by(last);
  }

  void load_down(std::int64_t f_rows, std::int64_t cols) {
    const auto war = wd_.next();
    for (std::int64_t s = 0; s < ceil_div(f_rows, m_.partitions); ++s)
      wd_.fill(s, b_.dma(q_.next(2), hbm_w_, sb_wd_,
                         std::min<std::int64_t>(m_.partitions, f_rows - s * m_.partitions),
                         cols * dtype_bytes(p_.type), t_wd, {war}));
  }

  /// What the multiply writing h sub-tile `f_sub` (sub-tile fs of block fb)
  /// waits for: the last down matmul that read its h slot.
  instruction_id h_war(std::int64_t fb, std::int64_t fs, std::int64_t f_sub) const {
    if (!p_.fuse_down) return h_reader_[static_cast<std::size_t>(f_sub)];
    return h_slot_reader_[static_cast<std::size_t>((fb % 2) * pl_.subs_per_block + fs)];
  }

  /// y[token tile, block db] (+)= h[:, ff blocks fb0..fb1) W_down[those rows, block db],
  /// accumulated in PSUM; drained to staging and stored (all of d_ff) or added
  /// into the fp32 y accumulator (fuse_down: one ff block at a time).
  void down(std::int64_t db, std::int64_t rows_t, std::int64_t fb0, std::int64_t fb1) {
    const std::int64_t parts = m_.partitions;
    const std::int64_t cols = std::min(p_.d_tile, p_.d_model - db * p_.d_tile);
    const std::int64_t t_subs = ceil_div(rows_t, parts), n_tiles = ceil_div(cols, p_.mm_n);
    std::int64_t base = 2LL * p_.psum_sets;
    if (p_.fuse_down)
      base += static_cast<std::int64_t>(passes_++ % pl_.down_sets) * pl_.down_groups;
    const auto bank_of = [&](std::int64_t ts, std::int64_t n) {
      return static_cast<std::size_t>(base + ts * pl_.down_banks +
                                      n * p_.mm_n * 4 / m_.psum_bank_bytes);
    };
    instruction_id last = program::none;
    for (std::int64_t fb = fb0; fb < fb1; ++fb) {
      const std::int64_t f_cols = std::min(p_.ff_tile, p_.d_ff - fb * p_.ff_tile);
      load_down(f_cols, cols);
      for (std::int64_t fs = 0; fs < ceil_div(f_cols, parts); ++fs) {
        const std::int64_t f_rows = std::min(parts, f_cols - fs * parts);
        const std::int64_t f_sub = fb * pl_.subs_per_block + fs;
        const bool opens = fb == fb0 && fs == 0;
        for (std::int64_t ts = 0; ts < t_subs; ++ts) {
          const std::int64_t rows = std::min(parts, rows_t - ts * parts);
          for (std::int64_t n = 0; n < n_tiles; ++n) {
            deps_.clear();
            if (opens && bank_reader_[bank_of(ts, n)] != program::none)
              deps_.push_back(bank_reader_[bank_of(ts, n)]);
            wd_.need(fs, deps_);
            for (std::int64_t hn = ts * parts / p_.mm_n; hn <= (ts * parts + rows - 1) / p_.mm_n;
                 ++hn) {
              const auto piece = static_cast<std::size_t>(f_sub * pl_.n_tiles + hn);
              if (h_consumed_[piece]) continue;
              deps_.push_back(h_write_[piece]);
              h_consumed_[piece] = 1;
            }
            last = b_.matmul(p_.type, f_rows, rows, std::min(p_.mm_n, cols - n * p_.mm_n), n == 0,
                             !opens, sb_h_, psum_[bank_of(ts, n)], t_down, deps_);
          }
        }
        h_reader_[static_cast<std::size_t>(f_sub)] = last;
        h_slot_reader_[static_cast<std::size_t>((fb % 2) * pl_.subs_per_block + fs)] = last;
      }
      wd_.read_by(last);
    }
    if (p_.fuse_down)
      accumulate(db, rows_t, cols, last, bank_of, fb0 == 0, fb1 == pl_.f_blocks);
    else
      evict(rows_t, cols, last, bank_of);
  }

  /// fuse_down: adds the PSUM partial of one ff block into the fp32 y
  /// accumulator (the first block copies; the evict engine, VectorE for the
  /// adds when it is ScalarE); after the last block, converts to dtype into
  /// staging and stores.
  template <class bank_fn>
  void accumulate(std::int64_t db, std::int64_t rows_t, std::int64_t cols, instruction_id last,
                  const bank_fn& bank_of, bool first, bool closes) {
    const std::int64_t parts = m_.partitions, n_tiles = ceil_div(cols, p_.mm_n);
    const auto key = [&](std::int64_t ts, std::int64_t n) {
      return static_cast<std::size_t>((db * pl_.t_subs + ts) * max_n_ + n);
    };
    for (std::int64_t ts = 0; ts < ceil_div(rows_t, parts); ++ts) {
      const std::int64_t rows = std::min(parts, rows_t - ts * parts);
      for (std::int64_t n = 0; n < n_tiles; ++n) {
        const std::int64_t width = std::min(p_.mm_n, cols - n * p_.mm_n);
        const engine_id e = !first && p_.evict == scalar_engine ? vector_engine : p_.evict;
        const op kind =
            first ? (e == scalar_engine ? op::activation : op::copy) : op::tensor_tensor;
        const auto id = b_.compute(e, kind, rows, width, psum_[bank_of(ts, n)], sb_acc_, t_acc,
                                   {last, y_last_[key(ts, n)]});
        bank_reader_[bank_of(ts, n)] = id;
        y_last_[key(ts, n)] = id;
      }
    }
    if (!closes) return;
    for (std::int64_t ts = 0; ts < ceil_div(rows_t, parts); ++ts) {
      const std::int64_t rows = std::min(parts, rows_t - ts * parts);
      const auto slot = static_cast<std::size_t>(stages_++ % 2);
      instruction_id e = program::none;
      for (std::int64_t n = 0; n < n_tiles; ++n) {
        const std::int64_t width = std::min(p_.mm_n, cols - n * p_.mm_n);
        e = b_.compute(p_.evict, p_.evict == scalar_engine ? op::activation : op::copy, rows, width,
                       sb_acc_, sb_stage_, t_evict,
                       {y_last_[key(ts, n)], n == 0 ? stage_store_[slot] : e});
        y_last_[key(ts, n)] = e;
      }
      stage_store_[slot] =
          b_.dma(q_.next(3), sb_stage_, hbm_y_, rows, cols * dtype_bytes(p_.type), t_store, {e});
    }
  }

  template <class bank_fn>
  void evict(std::int64_t rows_t, std::int64_t cols, instruction_id last, const bank_fn& bank_of) {
    const std::int64_t parts = m_.partitions;
    for (std::int64_t ts = 0; ts < ceil_div(rows_t, parts); ++ts) {
      const std::int64_t rows = std::min(parts, rows_t - ts * parts);
      const auto slot = static_cast<std::size_t>(stages_++ % 2);
      instruction_id e = program::none;
      for (std::int64_t n = 0; n < ceil_div(cols, p_.mm_n); ++n) {
        const std::int64_t width = std::min(p_.mm_n, cols - n * p_.mm_n);
        e = b_.compute(p_.evict, p_.evict == scalar_engine ? op::activation : op::copy, rows, width,
                       psum_[bank_of(ts, n)], sb_stage_, t_evict,
                       {last, n == 0 ? stage_store_[slot] : e});
        bank_reader_[bank_of(ts, n)] = e;
      }
      stage_store_[slot] =
          b_.dma(q_.next(3), sb_stage_, hbm_y_, rows, cols * dtype_bytes(p_.type), t_store, {e});
    }
  }

  buffer_id hbm_x_ = 0, hbm_w_ = 0, hbm_y_ = 0, sb_x_ = 0, sb_gu_ = 0, sb_h_ = 0, sb_wd_ = 0,
            sb_scratch_ = 0, sb_stage_ = 0, sb_acc_ = 0;
  std::vector<buffer_id> psum_;  ///< one per bank
  emit::piece_slots x_, gu_, wd_;
  std::vector<instruction_id> h_write_, h_reader_, bank_reader_, scratch_reader_, stage_store_,
      deps_;
  std::vector<std::uint8_t> h_consumed_;
  std::vector<instruction_id> h_slot_reader_, y_last_;
  std::int64_t max_n_ = 1;
  std::uint64_t sets_ = 0, silus_ = 0, stages_ = 0, passes_ = 0;
};

/// The executor of a plan: the schedule on data, shrunk for long reductions.
std::unique_ptr<functional_kernel> functional_of(const plan& pl) {
  params p = pl.p;  // shrunk below for long reductions
  // every output reads 2 x d_model x d_ff inputs: past the cap, check the
  // schedule on its first, an interior and its tail ff and d blocks
  if (2.0 * static_cast<double>(p.d_model) * static_cast<double>(p.d_ff) >
      emit::functional_reads_per_output) {
    p.d_ff = emit::shrink(p.d_ff, p.ff_tile);
    p.d_model = emit::shrink(p.d_model, p.d_tile);
  }
  return swiglu_detail::make_kernel(p);
}

class swiglu final : public planned_workload<plan, params, read, make_plan, lowerer> {
 public:
  swiglu()
      : planned_workload({
            "swiglu",
            "SwiGLU MLP: y = (silu(x W_gate) * (x W_up)) W_down, weights streamed per token tile",
            {
                knob::required_integer("tokens", "rows of x and y"),
                knob::required_integer("d_model", "columns of x and y (the gate/up contraction)"),
                knob::required_integer("d_ff",
                                       "the hidden width (the down projection's contraction)"),
                emit::dtype_knob("x, weights, h and y type"),
                emit::bytes_knob(),
                knob::integer("token_tile", 512,
                              "tokens per tile: its x^T and h tiles stay in SBUF; the weights are "
                              "read once per tile"),
                knob::integer("ff_tile", 128,
                              "d_ff columns per W_gate/W_up block (and rows per W_down block)"),
                knob::integer("d_tile", 512, "output columns per down-projection pass"),
                knob::integer("bufs", 2, "slots of the streamed weight blocks", ">= 1"),
                knob::integer("x_bufs", 2, "x tile slots (2: the next tile loads during this one)",
                              ">= 1"),
                knob::flag("fuse_gate_up", false,
                           "one transfer per slab for both W_gate and W_up (they are stacked as "
                           "W_gate_up [d_model, 2, d_ff]); false: one each"),
                knob::flag("fuse_down", false,
                           "true: each ff block's h goes through W_down at once, its partial y "
                           "added into an fp32 accumulator (h holds two blocks); false: h for all "
                           "of d_ff stays resident and the down projection accumulates in PSUM "
                           "after it"),
                knob::integer("psum_sets", 2,
                              "PSUM bank pairs (gate, up) in rotation; the down projection gets "
                              "the rest",
                              ">= 1"),
                knob::symbol("silu_engine", {"scalar", "vector", "gpsimd"}, "scalar",
                             "SiLU from PSUM: a ScalarE activation (vector and gpsimd are compile "
                             "errors: no function unit, no PSUM access)"),
                knob::symbol("mul_engine", {"vector", "gpsimd"}, "vector",
                             "silu(g) * u, written to the h tile (gpsimd: the evict engine first "
                             "copies u out of PSUM, which GpSimdE cannot read)"),
                knob::symbol("evict", {"vector", "scalar", "gpsimd"}, "vector",
                             "drains the down projection's PSUM (gpsimd is a compile error)"),
                knob::integer("dma_queues", 1, "queues per stream (x, gate/up, W_down, y)", "1..4"),
                knob::integer("mm_k", derived{"the partitions (128)"},
                              "contraction of one gate/up matmul"),
                knob::integer("mm_n", derived{"matmul_max_moving_free (512)"},
                              "moving free size of one matmul"),
            },
            "tokens",
        }) {}

  [[nodiscard]] double estimated_instructions(const space& s, const config& c,
                                              const machine& m) const override {
    plan pl;
    if (!read_plan(reader(s, c), m, pl).empty()) return 1;
    const auto tiles = static_cast<double>(pl.token_tiles);
    const auto gate_up =
        static_cast<double>(pl.f_blocks * pl.k_slabs * 4 + pl.f_subs * pl.n_tiles * 6);
    const auto down = static_cast<double>(pl.d_blocks * pl.f_subs * (pl.t_subs + 2));
    return tiles * (gate_up + down);
  }

  [[nodiscard]] std::vector<std::string> suggest(const bottleneck& b, const space& s,
                                                 const config& c) const override;

 private:
  [[nodiscard]] std::unique_ptr<functional_kernel> executor(const plan& pl,
                                                            const machine& m) const override {
    (void)m;
    return functional_of(pl);
  }

  /// The closed-form model (swiglu_steady.cpp).
  [[nodiscard]] std::optional<steady_estimate> steady(const plan& pl,
                                                      const machine& m) const override {
    return swiglu_detail::estimate_steady(pl, m);
  }

  [[nodiscard]] std::string write_nki(const plan& pl, const nki::context& ctx,
                                      std::string& out) const override {
    return swiglu_detail::emit_nki(pl.p, ctx, out);
  }
};

std::vector<std::string> swiglu::suggest(const bottleneck& b, const space& s,
                                         const config& c) const {
  const knob_reader v = reader(s, c);
  std::vector<std::string> out;
  const auto tokens = v.integer("tokens");
  const auto tile = std::max<std::int64_t>(1, v.integer("token_tile"));
  const bool dma = b.phase.rfind("dma", 0) == 0;
  emit::suggest_queues_for_issue(b, v, out);
  if (dma && (b.tag == "load W_gate/W_up" || b.tag == "load W_down")) {
    out.push_back(fmt::format(
        "raise token_tile (now {}): the weights are read from HBM once per token tile ({} times "
        "now); lower x_bufs or ff_tile to make room in SBUF",
        tile, ceil_div(tokens, tile)));
    if (b.tag == "load W_gate/W_up") {
      if (!v.flag("fuse_gate_up"))
        out.emplace_back("fuse_gate_up = true: one transfer per slab for W_gate and W_up");
      out.emplace_back("raise ff_tile: longer rows per transfer move W_gate/W_up faster");
    }
    out.push_back(fmt::format("raise bufs (now {}) or dma_queues (now {})", v.integer("bufs"),
                              v.integer("dma_queues")));
  } else if (dma) {
    out.push_back(fmt::format("raise dma_queues (now {}) or x_bufs (now {})",
                              v.integer("dma_queues"), v.integer("x_bufs")));
  } else if (b.phase == "tensor") {
    out.emplace_back(
        "TensorE carries the three projections: keep mm_n = 512, token_tile a multiple of 512 "
        "and d_tile a multiple of 512");
    if (v.integer("psum_sets") < 2)
      out.emplace_back("psum_sets = 2: the next gate/up pair accumulates while SiLU drains");
  } else if (b.tag == "accumulate y") {
    out.emplace_back(
        "fuse_down = false: keep h for all of d_ff resident so y accumulates in PSUM instead of "
        "an fp32 add per ff block (lower token_tile or x_bufs if it does not fit)");
    out.emplace_back("raise ff_tile: fewer, larger ff blocks mean fewer partial-y adds");
  } else if (b.tag == "multiply") {
    out.push_back(fmt::format("mul_engine = {}: move the multiply",
                              v.symbol("mul_engine") == "vector" ? "gpsimd" : "vector"));
  } else if (b.tag == "evict") {
    out.emplace_back("evict = scalar when VectorE is busy with the multiply, or raise d_tile");
  }
  return out;
}

}  // namespace

std::unique_ptr<functional_kernel> swiglu_functional(const space& s, const config& c,
                                                     const machine& m) {
  return swiglu_workload().functional(s, c, m);
}

const workload& swiglu_workload() {
  static const swiglu instance;
  return instance;
}

}  // namespace tessel::sim
