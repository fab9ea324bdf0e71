// swiglu_steady.cpp: swiglu's steady-state model in closed form
// (docs/simulator.md, "Speed"), without lowering the plan. The counts
// (instructions, HBM bytes) are the lowering's (swiglu.cpp), summed over the
// distinct tile sizes; every per-instruction cost is cost_rules.hpp's, the
// event model's. What is approximated is how the work overlaps: each token
// tile runs as two stretches, the gate/up projections (with the x tile) and
// the down projection (with the stores of y), or one with fuse_down; a
// stretch takes the largest of its resources (TensorE with the largest of
// its waits, for W_gate/W_up, W_down or PSUM banks, which overlap; the other
// engines, the DMA engines, each stream's queue).
// The first stretch waits for its x tile and first weight block (the fill),
// the last for its evicts and store (the drain).
#include "swiglu.hpp"

#include "../../cost_rules.hpp"
#include "../../steady_closed.hpp"
#include "../../steady_common.hpp"
#include "../emit.hpp"

#include <algorithm>
#include <array>

namespace tessel::sim::swiglu_detail {
namespace {

using steady::each;
using steady::split;

/// The lowering's DMA streams (x, W_gate/W_up, W_down, y), dma_queues queues each.
enum stream : std::size_t { s_x, s_gu, s_wd, s_y };

using work = steady::stretch;

class model : steady::closed_model<plan> {
 public:
  using closed_model::closed_model;

  steady_estimate run() {
    work all;
    double latency = 0;
    bool first = true;
    each(split(p_.tokens, p_.token_tile), [&](double tiles, std::int64_t rows_t) {
      work up, down;
      load_x(up, rows_t);
      if (p_.fuse_down) {
        fused(up, rows_t);
        close(up);
      } else {
        gate_up(up, rows_t);
        close(up);
        unfused_down(down, rows_t);
        close(down);
      }
      // the first tile's projections wait for the x tile and the first weight block
      const double fill = first ? fill_ns(rows_t) : 0;
      latency += span(up, fill) + (tiles - 1) * span(up, 0) + tiles * span(down, 0);
      all.add(up, tiles);
      all.add(down, tiles);
      drain_ = drain_ns(rows_t);
      first = false;
    });
    const double warm = steady::warmup_loss(all.busy[0], m_);
    steady_estimate e;
    e.latency_ns = latency + warm + drain_;
    e.busy_ns = all.busy;
    e.busy_ns[0] += warm;
    e.dma_data_ns = all.data;
    e.hbm_read_bytes = all.read;
    e.hbm_write_bytes = all.write;
    e.instructions = all.instructions;
    e.totals = totals_of(p_);
    steady::name_bound(e, {"gate", "multiply", "silu", "multiply"}, "load W_gate/W_up");
    return e;
  }

 private:
  /// A stretch's time: its busiest resource, TensorE after `fill`.
  [[nodiscard]] double span(const work& w, double fill) const {
    return std::max({fill + w.busy[0] + w.stall, w.busy[1], w.busy[2], w.busy[3], w.dma_ns(m_)});
  }

  /// `count` transfers of `rows` x `bytes` on stream s: from HBM but y's, to it.
  void transfer(work& w, stream s, double count, std::int64_t rows, std::int64_t bytes,
                std::int64_t chunk = 0) const {
    c_.transfer(w, s, count, rows, bytes, s != s_y, s == s_y, chunk);
  }

  [[nodiscard]] op evict_op() const {
    return p_.evict == scalar_engine ? op::activation : op::copy;
  }

  void load_x(work& w, std::int64_t rows_t) const {
    each(split(p_.d_model, p_.mm_k),
         [&](double nk, std::int64_t rows) { transfer(w, s_x, nk, rows, rows_t * b_); });
  }

  /// The loads of one W_gate/W_up block of `cols` columns.
  [[nodiscard]] work gu_block(std::int64_t cols) const {
    work w;
    each(split(p_.d_model, p_.mm_k), [&](double nk, std::int64_t rows) {
      if (p_.fuse_gate_up)
        transfer(w, s_gu, nk, rows, 2 * cols * b_, cols * b_);
      else
        transfer(w, s_gu, 2 * nk, rows, cols * b_);
    });
    return w;
  }

  /// Every ff block's W_gate/W_up loads, projections, SiLU and multiply.
  void gate_up(work& w, std::int64_t rows_t) {
    each(split(p_.d_ff, p_.ff_tile), [&](double blocks, std::int64_t cols) {
      w.add(gu_block(cols), blocks);
      if (p_.bufs == 1) {
        // one slot: a block loads after the last projection of the one before;
        // the first group's projections stream with it, and with fuse_down
        // the block before's down passes hide it
        double hidden = projections_ns(std::min(parts_, cols), rows_t);
        if (p_.fuse_down) {  // the passes after the first wait on their own W_down loads
          bool first_d = true;
          each(split(p_.d_model, p_.d_tile), [&](double nd, std::int64_t d_cols) {
            hidden += nd * pass_ns(cols, rows_t, d_cols) +
                      (nd - (first_d ? 1 : 0)) * wd_wait(cols, rows_t, d_cols);
            first_d = false;
          });
        }
        waits_[wait_gate_up] += blocks * std::max(0.0, gu_block(cols).arrival_ns(m_) - hidden);
      }
      each(split(cols, parts_), [&](double subs, std::int64_t f_rows) {
        each(split(rows_t, p_.mm_n), [&](double tiles, std::int64_t width) {
          const double g = blocks * subs * tiles;
          each(split(p_.d_model, p_.mm_k),
               [&](double nk, std::int64_t k) { c_.tensor(w, 2 * g * nk, k, f_rows, width); });
          c_.compute(w, p_.silu_engine, op::activation, g, f_rows, width);
          if (p_.mul_engine == gpsimd_engine) c_.compute(w, p_.evict, evict_op(), g, f_rows, width);
          c_.compute(w, p_.mul_engine, op::tensor_tensor, g, f_rows, width);
        });
      });
    });
  }

  /// The gate and up projections of one group: `f_rows` rows of h, the
  /// first moving tile of the token tile.
  [[nodiscard]] double projections_ns(std::int64_t f_rows, std::int64_t rows_t) const {
    double ns = 0;
    each(split(p_.d_model, p_.mm_k), [&](double nk, std::int64_t k) {
      ns += 2 * nk * c_.tensor_ns(k, f_rows, std::min(p_.mm_n, rows_t));
    });
    return ns;
  }

  /// The down matmuls of one pass of an ff block of `f_cols` over a d block of `cols`.
  [[nodiscard]] double pass_ns(std::int64_t f_cols, std::int64_t rows_t, std::int64_t cols) const {
    double ns = 0;
    each(split(f_cols, parts_), [&](double subs, std::int64_t f_rows) {
      each(split(rows_t, parts_), [&](double ts, std::int64_t rows) {
        each(split(cols, p_.mm_n), [&](double nn, std::int64_t width) {
          ns += subs * ts * nn * c_.tensor_ns(f_rows, rows, width);
        });
      });
    });
    return ns;
  }

  /// bufs = 1: what a pass waits for its W_down block beyond its first
  /// sub-tile's matmuls (ns, may be negative).
  [[nodiscard]] double wd_wait(std::int64_t f_cols, std::int64_t rows_t, std::int64_t cols) const {
    work load;
    each(split(f_cols, parts_),
         [&](double subs, std::int64_t f_rows) { transfer(load, s_wd, subs, f_rows, cols * b_); });
    return load.arrival_ns(m_) - pass_ns(std::min(parts_, f_cols), rows_t, cols);
  }

  /// The W_down loads and the down matmuls of `passes` passes over one ff
  /// block of `f_cols` columns per d block, `after_gate_up` of them right
  /// after the ff block's gate/up projections (fuse_down, the first d block).
  void down_block(work& w, double passes, std::int64_t f_cols, std::int64_t rows_t,
                  std::int64_t cols, double after_gate_up = 0) {
    if (p_.bufs == 1) {
      // one slot: the block loads after the pass before it, streaming with
      // the first sub-tile's matmuls (and the gate/up projections before it)
      const double wait = wd_wait(f_cols, rows_t, cols);
      double gate_up = 0;
      each(split(f_cols, parts_), [&](double subs, std::int64_t f_rows) {
        each(split(rows_t, p_.mm_n), [&](double tiles, std::int64_t) {
          gate_up += subs * tiles * projections_ns(f_rows, rows_t);
        });
      });
      waits_[wait_down] += (passes - after_gate_up) * std::max(0.0, wait) +
                           after_gate_up * std::max(0.0, wait - gate_up);
    }
    each(split(f_cols, parts_), [&](double subs, std::int64_t f_rows) {
      transfer(w, s_wd, passes * subs, f_rows, cols * b_);
      each(split(rows_t, parts_), [&](double ts, std::int64_t rows) {
        each(split(cols, p_.mm_n), [&](double nn, std::int64_t width) {
          c_.tensor(w, passes * subs * ts * nn, f_rows, rows, width);
        });
      });
    });
  }

  /// Drains the y block [rows_t, cols] (`count` times) from `kind` on
  /// engine e, one instruction per row tile and mm_n columns; with `store`,
  /// stores each row tile.
  void drain(work& w, double count, engine_id e, op kind, std::int64_t rows_t, std::int64_t cols,
             bool store) const {
    each(split(rows_t, parts_), [&](double ts, std::int64_t rows) {
      each(split(cols, p_.mm_n), [&](double nn, std::int64_t width) {
        c_.compute(w, e, kind, count * ts * nn, rows, width);
      });
      if (store) transfer(w, s_y, count * ts, rows, cols * b_);
    });
  }

  /// The ns TensorE waits at the start of a pass whose banks the previous
  /// pass's drains (each `each_ns`) free one group at a time.
  [[nodiscard]] double bank_wait(std::int64_t rows_t, std::int64_t cols, double each_ns) const {
    const double groups =
        static_cast<double>(emit::ceil_div(rows_t, parts_) * emit::ceil_div(cols, p_.mm_n));
    const double mm =
        c_.tensor_ns(std::min(parts_, p_.d_ff), std::min(parts_, rows_t), std::min(p_.mm_n, cols));
    return each_ns + groups * std::max(0.0, each_ns - mm);
  }

  /// fuse_down = false: every d block accumulates over all of d_ff in PSUM,
  /// then drains to staging and is stored.
  void unfused_down(work& w, std::int64_t rows_t) {
    each(split(p_.d_model, p_.d_tile), [&](double blocks, std::int64_t cols) {
      each(split(p_.d_ff, p_.ff_tile), [&](double fb, std::int64_t f_cols) {
        down_block(w, blocks * fb, f_cols, rows_t, cols);
      });
      drain(w, blocks, p_.evict, evict_op(), rows_t, cols, true);
      waits_[wait_banks] +=
          blocks * bank_wait(rows_t, cols,
                             c_.elementwise_ns(p_.evict, evict_op(), std::min(parts_, rows_t),
                                               std::min(p_.mm_n, cols)));
    });
  }

  /// fuse_down = true: each ff block's gate/up, then its down pass per d
  /// block added into the fp32 accumulator; the last converts and stores.
  void fused(work& w, std::int64_t rows_t) {
    gate_up(w, rows_t);
    const auto f_blocks = static_cast<double>(pl_.f_blocks);
    const engine_id add_engine = p_.evict == scalar_engine ? vector_engine : p_.evict;
    bool first_d = true;
    each(split(p_.d_model, p_.d_tile), [&](double blocks, std::int64_t cols) {
      each(split(p_.d_ff, p_.ff_tile), [&](double fb, std::int64_t f_cols) {
        down_block(w, blocks * fb, f_cols, rows_t, cols, first_d ? fb : 0);
      });
      first_d = false;
      drain(w, blocks, p_.evict, evict_op(), rows_t, cols, false);
      drain(w, blocks * (f_blocks - 1), add_engine, op::tensor_tensor, rows_t, cols, false);
      drain(w, blocks, p_.evict, evict_op(), rows_t, cols, true);
      if (pl_.down_sets == 1)
        waits_[wait_banks] +=
            blocks * f_blocks *
            bank_wait(rows_t, cols,
                      c_.elementwise_ns(add_engine, op::tensor_tensor, std::min(parts_, rows_t),
                                        std::min(p_.mm_n, cols)));
    });
  }

  /// Until the first projection can run: the x tile and the first W_gate/W_up
  /// block, loaded together on their two queues.
  [[nodiscard]] double fill_ns(std::int64_t rows_t) const {
    work w = gu_block(std::min(p_.ff_tile, p_.d_ff));
    load_x(w, rows_t);
    return w.arrival_ns(m_);
  }

  /// After the last matmul: the last d block's drains and its last store.
  [[nodiscard]] double drain_ns(std::int64_t rows_t) const {
    work w;
    const std::int64_t cols = p_.d_model - (pl_.d_blocks - 1) * p_.d_tile;
    if (p_.fuse_down) {
      const engine_id e = pl_.f_blocks > 1 && p_.evict == scalar_engine ? vector_engine : p_.evict;
      drain(w, 1, e, pl_.f_blocks > 1 ? op::tensor_tensor : evict_op(), rows_t, cols, false);
    }
    drain(w, 1, p_.evict, evict_op(), rows_t, cols, true);
    const double store =
        w.data / std::max(1.0, static_cast<double>(emit::ceil_div(rows_t, parts_)));
    return w.busy[1] + w.busy[2] + w.busy[3] + store + m_.dma_fixed_latency_ns;
  }

  /// The stretch's TensorE stalls: the largest of the waits gathered since
  /// the last close. The event model overlaps them (a W_gate/W_up block, a
  /// W_down block and a PSUM bank are awaited on different queues and
  /// engines at once), so their sum over-counts: bufs = 1 with fuse_down
  /// was up to 49% high with the sum.
  void close(work& w) {
    w.stall = *std::max_element(waits_.begin(), waits_.end());
    waits_ = {};
  }

  double drain_ = 0;
  /// What TensorE waits for, by cause: W_gate/W_up (bufs = 1), W_down
  /// (bufs = 1), PSUM banks freed by the drains.
  enum wait_cause : std::size_t { wait_gate_up, wait_down, wait_banks };
  std::array<double, 3> waits_{};
};

}  // namespace

workload_totals totals_of(const params& p) {
  const auto t = static_cast<double>(p.tokens);
  const auto d = static_cast<double>(p.d_model);
  const auto f = static_cast<double>(p.d_ff);
  workload_totals out;
  out.flops = 6.0 * t * d * f;
  out.min_hbm_bytes = (2.0 * t * d + 3.0 * d * f) * static_cast<double>(dtype_bytes(p.type));
  out.compute_type = p.type;
  return out;
}

steady_estimate estimate_steady(const plan& pl, const machine& m) { return model(pl, m).run(); }

}  // namespace tessel::sim::swiglu_detail
