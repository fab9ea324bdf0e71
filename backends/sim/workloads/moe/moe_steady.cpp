// moe_steady.cpp: moe's steady-state model in closed form (docs/simulator.md,
// "Speed"), from the plan's group tiles without lowering them. The counts
// (instructions, HBM bytes) are the lowering's (moe.cpp), summed per distinct
// tile height; every per-instruction cost is cost_rules.hpp's. The group
// tiles run as one stretch that takes its busiest resource: TensorE (each
// slab's transpose paced by its copy out of PSUM, the matmuls) plus its
// stalls, the evict engine, the DMA engines, or one stream's queues (x and
// routing, expert weights, scatters: issues and data, pipelined on trn2). The
// stalls: with bufs = 1 a weight block loads after the last matmul of the
// block before, streaming only with its first PSUM group's matmuls (and the
// tile's transposes); with x_bufs = 1 a tile's routing and rows load after
// the last matmul of the tile before; and the x_bufs tiles in flight share
// the chain from a tile's routing load to its last scatter (which frees its
// routing slot). The combine waits for every scatter; its steps run one
// after the other on their queue (load, sums, store).
#include "moe.hpp"

#include "../../cost_rules.hpp"
#include "../../steady_closed.hpp"
#include "../../steady_common.hpp"
#include "../emit.hpp"

#include <algorithm>
#include <array>
#include <map>

namespace tessel::sim::moe_detail {
namespace {

using steady::each;
using steady::split;

/// The lowering's DMA streams (x, weights, scatters, combine), dma_queues queues each.
enum stream : std::size_t { s_x, s_w, s_scatter, s_combine };

using work = steady::stretch;

class model : steady::closed_model<plan> {
 public:
  using closed_model::closed_model;

  steady_estimate run() {
    // the group tiles of the cores this plan times, by height
    // (one core's list as it is; the cores' merged for a plan of all of them)
    const bool one = pl_.core >= 0 || pl_.cores == 1;
    thread_local std::vector<std::pair<std::int64_t, double>> merged;
    if (!one) {
      std::map<std::int64_t, double> all;
      for (std::size_t c = 0; c < pl_.tiles.size(); ++c)
        for (const auto& [rows, count] : pl_.tiles.heights(c)) all[rows] += count;
      merged.assign(all.begin(), all.end());
    }
    const auto& heights =
        one ? pl_.tiles.heights(static_cast<std::size_t>(std::max(0, pl_.core))) : merged;
    work groups;
    double stall = 0, fill = 0, cycle = 0, tiles = 0;
    const auto evict = static_cast<std::size_t>(p_.evict - tensor_engine);
    const double block_load = block_load_ns();
    for (const auto& [rows, count] : heights) {
      work tile;
      const double transposes = load_x(tile, rows);
      const double first_group = multiply(tile, rows);
      groups.add(tile, count);
      tiles += count;
      const double x_chain = x_chain_ns(rows);
      stall += count * tile_stall(transposes, first_group, x_chain, block_load);
      if (fill == 0) fill = x_chain;
      // a tile's routing slot is free again when its last scatter is done: the
      // x_bufs tiles in flight share the chain from the routing load to it
      const double chain = x_chain + tile.busy[0] + tile.busy[evict] + tile.issue[s_scatter] +
                           tile.queue_data[s_scatter] + m_.dma_fixed_latency_ns;
      cycle += count * chain / p_.x_bufs;
    }
    // every tile loads each out block's weights, whatever its height
    each(split(p_.d_out, p_.out_tile), [&](double blocks, std::int64_t cols) {
      each(split(p_.d_in, parts_), [&](double slabs, std::int64_t k) {
        c_.transfer(groups, s_w, tiles * blocks * slabs, k, cols * b_, true, false);
      });
    });
    work tail;
    double combine_ns = 0;
    for (int c = 0; c < pl_.cores; ++c)
      if (pl_.core < 0 || c == pl_.core)
        for (const auto& [t0, t1] : pl_.combine[static_cast<std::size_t>(c)])
          combine_ns += combine(tail, t1 - t0);
    if (pl_.core >= 0 && needs_barrier(pl_))  // the lowering's core barrier (moe.cpp)
      combine_ns += c_.compute(tail, gpsimd_engine, op::copy, 1, 1, 0);
    const double warm = steady::warmup_loss(groups.busy[0], m_);
    const double dma = groups.dma_ns(m_);
    const double compute = fill + groups.busy[0] + warm + stall;
    const double span =
        std::max({compute, fill + cycle, groups.busy[1], groups.busy[2], groups.busy[3], dma});
    steady_estimate e;
    e.latency_ns = span + drain_ns() + combine_ns;
    if (pl_.core >= 0 && needs_barrier(pl_)) e.barrier_ns = span + drain_ns();  // then the wait
    groups.add(tail, 1);
    e.busy_ns = groups.busy;
    e.busy_ns[0] += warm;
    e.dma_data_ns = groups.data;
    e.hbm_read_bytes = groups.read;
    e.hbm_write_bytes = groups.write;
    e.instructions = groups.instructions;
    e.totals = totals_of(pl_);
    name_bound(e, groups, dma, compute);
    return e;
  }

 private:
  /// What bounds the estimate: a queue's issues or the DMA data when the
  /// DMA bound is the largest, else the busiest engine.
  static void name_bound(steady_estimate& e, const work& groups, double dma, double compute) {
    if (dma >= compute && dma >= std::max({groups.busy[1], groups.busy[2], groups.busy[3]})) {
      const auto q = static_cast<std::size_t>(
          std::max_element(groups.issue.begin(), groups.issue.end()) - groups.issue.begin());
      static constexpr std::array<const char*, 4> tags{"gather x", "load expert weights",
                                                       "scatter partials", "load partials"};
      e.bound = groups.issue[q] > groups.data ? "dma issue" : "dma data";
      e.tag = tags[q];
      return;
    }
    steady::name_bound(e, {"matmul", "scale by router weight", "scale by router weight", "combine"},
                       "load expert weights");
  }

  [[nodiscard]] op copy_op() const { return p_.evict == scalar_engine ? op::activation : op::copy; }

  /// A tile of `n` rows' routing and x^T; returns the TensorE time of its
  /// transposes, each paced by its copy out of PSUM (two banks in rotation).
  double load_x(work& w, std::int64_t n) const {
    double transposes = 0;
    each(split(n, parts_), [&](double subs, std::int64_t rows) {
      c_.transfer(w, s_x, subs, rows, 8, true, false);
      c_.transfer(w, s_x, subs, rows, 4, true, false);
      if (!p_.x_rows) {
        each(split(p_.d_in, parts_), [&](double slabs, std::int64_t k) {
          c_.transfer(w, s_x, subs * static_cast<double>(rows) * slabs, k, b_, true, false);
        });
        return;
      }
      c_.transfer(w, s_x, subs, rows, p_.d_in * b_, true, false, p_.d_in * b_);
      each(split(p_.d_in, parts_), [&](double slabs, std::int64_t k) {
        const double t = c_.tensor(w, subs * slabs, k, rows, 0, true);
        const double c = c_.compute(w, p_.evict, copy_op(), subs * slabs, k, rows);
        transposes += subs * slabs * std::max(t, c);
      });
    });
    return transposes;
  }

  /// A tile of `n` rows through every out block (its weight loads aside):
  /// the matmuls, scales and scatters; returns the matmuls of a block's
  /// first PSUM group.
  double multiply(work& w, std::int64_t n) const {
    double first = 0;
    each(split(p_.d_out, p_.out_tile), [&](double blocks, std::int64_t cols) {
      each(split(n, parts_), [&](double subs, std::int64_t rows) {
        each(split(cols, p_.mm_n), [&](double banks, std::int64_t width) {
          each(split(p_.d_in, parts_), [&](double slabs, std::int64_t k) {
            c_.tensor(w, blocks * subs * banks * slabs, k, rows, width);
          });
          c_.compute(w, p_.evict, p_.evict == scalar_engine ? op::activation : op::tensor_scalar,
                     blocks * subs * banks, rows, width);
        });
        if (p_.sbuf_partials)
          c_.transfer(w, s_scatter, blocks * subs * static_cast<double>(rows), 1, cols * 4, false,
                      false);
        else
          c_.transfer(w, s_scatter, blocks * subs, rows, cols * 4, false, true);
      });
    });
    work scratch;
    each(split(p_.d_in, parts_), [&](double slabs, std::int64_t k) {
      first += slabs * c_.tensor(scratch, 1, k, std::min(parts_, n),
                                 std::min({p_.mm_n, p_.out_tile, p_.d_out}));
    });
    return first;
  }

  /// From the issue of one weight block's loads to the last one's arrival.
  [[nodiscard]] double block_load_ns() const {
    work w;
    each(split(p_.d_in, parts_), [&](double slabs, std::int64_t k) {
      c_.transfer(w, s_w, slabs, k, std::min(p_.out_tile, p_.d_out) * b_, true, false);
    });
    return w.arrival_ns(m_);
  }

  /// A tile's routing and rows, from their issue to x^T in SBUF.
  [[nodiscard]] double x_chain_ns(std::int64_t n) const {
    work w;
    const std::int64_t rows = std::min(parts_, n);
    c_.transfer(w, s_x, 1, rows, 8, true, false);
    double chain = w.issue[s_x] + w.data + m_.dma_fixed_latency_ns;
    work x;
    if (p_.x_rows)
      c_.transfer(x, s_x, 1, rows, p_.d_in * b_, true, false, p_.d_in * b_);
    else
      each(split(p_.d_in, parts_), [&](double slabs, std::int64_t k) {
        c_.transfer(x, s_x, slabs * static_cast<double>(rows), k, b_, true, false);
      });
    return chain + x.arrival_ns(m_);
  }

  /// What TensorE waits for in a tile beyond its work (`load`: one weight
  /// block's, block_load_ns): the larger of the two waits, not their sum,
  /// as the event model overlaps them (the weights and the next tile's rows
  /// load on different queues at once).
  [[nodiscard]] double tile_stall(double transposes, double first_group, double x_chain,
                                  double load) const {
    double weights = 0;
    const double blocks = static_cast<double>(pl_.out_blocks);
    if (p_.bufs == 1) {
      weights = std::max(0.0, load - first_group - transposes) +
                (blocks - 1) * std::max(0.0, load - first_group);
    }
    return std::max(weights, p_.x_bufs == 1 ? x_chain : 0.0);
  }

  /// After the last matmul: its scale and scatter.
  [[nodiscard]] double drain_ns() const {
    work w;
    const std::int64_t cols = std::min(p_.out_tile, p_.d_out);
    c_.compute(w, p_.evict, p_.evict == scalar_engine ? op::activation : op::tensor_scalar, 1,
               parts_, std::min(p_.mm_n, cols));
    if (p_.sbuf_partials)
      c_.transfer(w, s_scatter, 1, 1, cols * 4, false, false);
    else
      c_.transfer(w, s_scatter, 1, parts_, cols * 4, false, true);
    return w.busy[1] + w.busy[2] + w.busy[3] + m_.dma_issue_ns + w.data + m_.dma_fixed_latency_ns;
  }

  /// The combine of `rows` tokens into `w`; returns its time: per out
  /// block, the partials' load, the top_k sums and the store, one after the
  /// other on the combine queue.
  double combine(work& w, std::int64_t rows) const {
    double ns = 0;
    const double lat = m_.dma_fixed_latency_ns + (m_.dma_queue_pipelined ? 0 : m_.dma_issue_ns);
    each(split(p_.d_out, p_.out_tile), [&](double blocks, std::int64_t cols) {
      double step = 0;
      if (!p_.sbuf_partials && pl_.share.exchanged) {  // the index tile, a gather per slot
        c_.transfer(w, s_combine, blocks, rows, p_.top_k * 4, true, false);
        step += c_.transfer_ns(rows, p_.top_k * 4, 0, true) + lat;
        c_.transfer(w, s_combine, blocks * static_cast<double>(p_.top_k), rows, cols * 4, true,
                    false, cols * 4);
        step +=
            static_cast<double>(p_.top_k) * c_.transfer_ns(rows, cols * 4, cols * 4, true) + lat;
      } else if (!p_.sbuf_partials) {
        c_.transfer(w, s_combine, blocks, rows, p_.top_k * cols * 4, true, false, cols * 4);
        step += c_.transfer_ns(rows, p_.top_k * cols * 4, cols * 4, true) + lat;
      }
      step += c_.compute(w, p_.combine_engine, p_.top_k == 1 ? op::copy : op::tensor_tensor, blocks,
                         rows, cols);
      for (std::int64_t j = 2; j < p_.top_k; ++j)
        step += c_.compute(w, p_.combine_engine, op::tensor_tensor, blocks, rows, cols);
      c_.transfer(w, s_combine, blocks, rows, cols * b_, false, true);
      step += c_.transfer_ns(rows, cols * b_, 0, true) + lat;
      ns += blocks * std::max(step, 2 * m_.dma_issue_ns);
    });
    return ns;
  }
};

}  // namespace

steady_estimate estimate_steady(const plan& pl, const machine& m) { return model(pl, m).run(); }

}  // namespace tessel::sim::moe_detail
