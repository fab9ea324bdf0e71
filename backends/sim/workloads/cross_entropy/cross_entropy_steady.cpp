// cross_entropy_steady.cpp: the steady-state model of the cross_entropy plan
// (cross_entropy_plan.hpp, docs/simulator.md "Speed") in closed form,
// without lowering or replaying it. The counts (instructions, HBM bytes) are
// the lowering's (cross_entropy.cpp), summed over the distinct token tile
// heights and vocabulary chunk widths (steady::split); every
// per-instruction cost is cost_rules.hpp's, the event model's. What is
// approximated is how the work overlaps: a unit (one token tile against one
// chunk) takes its busiest resource (TensorE with its stalls, the other
// engines, the DMA engines and each stream's queues); an outer iteration
// (a token tile, or a chunk with order (v, t)) at least its DMA work with
// the outer block's load. TensorE stalls where the streamed operand has one
// slot (its next block loads after the unit's last matmul, and the first
// contraction waits for it), where the outer operand has one slot (the first
// unit of each outer iteration waits for both blocks), and where a PSUM set
// comes round before the epilogue of its last use has read it. The fill
// (the first blocks' arrival), the drain (the last row tile's epilogue,
// loss and store) are added once; TensorE's warm-up throttle is charged per
// unit where TensorE idles (steady::burst_warmup_loss), once where not.
#include "../../cost_rules.hpp"
#include "../../steady_closed.hpp"
#include "../../steady_common.hpp"
#include "../emit.hpp"
#include "cross_entropy_plan.hpp"

#include <algorithm>

namespace tessel::sim::ce {
namespace {

using steady::cut;
using steady::each;
using steady::split;
using work = steady::stretch;

/// The lowering's DMA streams: x tiles, W chunks, labels and losses.
enum stream : std::size_t { s_x, s_w, s_rows };

class model : steady::closed_model<plan> {
 public:
  model(const plan& pl, const machine& m) : closed_model(pl, m, 3) {}

  steady_estimate run() {
    const cut tiles = split(p_.tokens, p_.token_tile), chunks = split(p_.vocab, p_.vocab_chunk);
    const cut& outer = p_.vocab_outer ? chunks : tiles;
    const cut& inner = p_.vocab_outer ? tiles : chunks;
    // a single inner block stays in its slot: loaded once, not per unit
    const bool reload = (p_.vocab_outer ? pl_.token_tiles : pl_.chunks) > 1;
    work all;
    c_.compute(all, gpsimd_engine, op::copy, 1, parts_, p_.vocab_chunk);  // iota
    double latency = 0;
    bool first_outer = true;
    each(outer, [&](double n_outer, std::int64_t o_size) {
      work iteration = outer_load(o_size);
      double span = 0, wait = 0;  // wait: the first unit's, for its outer block
      bool first = true;
      each(inner, [&](double n_inner, std::int64_t i_size) {
        const std::int64_t rows_t = p_.vocab_outer ? i_size : o_size;
        const std::int64_t cols = p_.vocab_outer ? o_size : i_size;
        work u = matmuls(rows_t, cols);
        epilogues(u, rows_t, cols);
        const work load = inner_load(i_size);
        if (reload) u.add(load, 1);
        const double fc = first_contraction_ns(rows_t, cols);
        const double alone = reload && p_.bufs == 1 ? wait_ns(load, fc) : 0;
        u.stall += psum_stall(rows_t, cols) + alone;
        // the throttle: where TensorE idles in a unit, the first
        // contraction's matmuls wait on their slabs (paced by the loads),
        // then the rest of the unit runs back to back as one burst; where
        // TensorE idles enough between such bursts the ramp restarts in each
        const double idle = unit_span_of(u) - u.busy[0];
        const double paced = std::min(idle, fc - fc / static_cast<double>(pl_.slabs));
        const double burst = u.busy[0] - std::max(paced, 0.0);
        const double loss = steady::burst_warmup_loss(burst, unit_span_of(u) - burst, m_);
        u.busy[0] += loss;
        if (first_outer && first) cold_ = loss > 0 ? 0 : steady::warmup_loss(u.busy[0], m_);
        const double each_span = unit_span_of(u);
        span += n_inner * each_span;
        if (first) {
          // the first unit's first contraction streams with both blocks: at
          // the start (the fill), and with one outer slot at every outer block
          work both = outer_load(o_size);
          both.add(load, 1);
          const double with_outer = wait_ns(both, fc);
          if (first_outer) fill_ = with_outer;
          if (outer_slots() == 1) wait = with_outer - alone;
        }
        iteration.add(u, n_inner);
        first = false;
      });
      latency +=
          n_outer * std::max(span, iteration.dma_ns(m_)) + (n_outer - (first_outer ? 1 : 0)) * wait;
      all.add(iteration, n_outer);
      first_outer = false;
    });
    if (!reload) all.add(inner_load(inner.size[0]), 1);
    edges(all, tiles);
    all.busy[0] += cold_;
    steady_estimate e = all.estimate();
    e.latency_ns = fill_ + latency + cold_ + drain_ns();
    e.totals.flops = 2.0 * static_cast<double>(p_.tokens) * static_cast<double>(p_.d_model) *
                     static_cast<double>(p_.vocab);
    e.totals.min_hbm_bytes =
        static_cast<double>((p_.tokens + p_.vocab) * p_.d_model * b_) + 8.0 * p_.tokens;
    e.totals.compute_type = p_.type;
    steady::name_bound(e, {"logits", "row max", "exp", "label logit"},
                       p_.vocab_outer ? "load x" : "load W");
    return e;
  }

 private:
  [[nodiscard]] int outer_slots() const { return p_.vocab_outer ? pl_.w_slots : pl_.x_slots; }

  /// A unit's time: its busiest resource, TensorE with its stalls.
  [[nodiscard]] double unit_span_of(const work& u) const {
    return std::max({u.busy[0] + u.stall, u.busy[1], u.busy[2], u.busy[3], u.dma_ns(m_)});
  }

  /// The slab loads of one block: an x tile of `rows_t` tokens (stream 0)
  /// or a W chunk of `cols` columns (stream 1).
  [[nodiscard]] work block_load(stream s, std::int64_t size) const {
    work w;
    each(split(p_.d_model, p_.mm_k), [&](double nk, std::int64_t rows) {
      c_.transfer(w, s, nk, rows, size * b_, true, false);
    });
    return w;
  }
  [[nodiscard]] work inner_load(std::int64_t size) const {
    return block_load(p_.vocab_outer ? s_x : s_w, size);
  }
  /// The outer block's load, with (t, v) the token tile's labels.
  [[nodiscard]] work outer_load(std::int64_t size) const {
    work w = block_load(p_.vocab_outer ? s_w : s_x, size);
    if (!p_.vocab_outer) labels(w, size);
    return w;
  }
  /// The labels of `count` token tiles of `rows_t`, one transfer a row tile.
  void labels(work& w, std::int64_t rows_t, double count = 1) const {
    each(split(rows_t, parts_), [&](double n, std::int64_t rows) {
      c_.transfer(w, s_rows, count * n, rows, 4, true, false);
    });
  }

  /// One unit's matmuls: each row tile's logits, mm_n columns at a time,
  /// accumulated over the slabs.
  [[nodiscard]] work matmuls(std::int64_t rows_t, std::int64_t cols) const {
    work w;
    each(split(rows_t, parts_), [&](double subs, std::int64_t rows) {
      each(split(cols, p_.mm_n), [&](double n, std::int64_t width) {
        each(split(p_.d_model, p_.mm_k),
             [&](double nk, std::int64_t k) { c_.tensor(w, subs * n * nk, k, rows, width); });
      });
    });
    return w;
  }

  /// What TensorE waits for `load`, issued at once, beyond the first
  /// contraction (`fc`), which streams with it: the last slab's arrival (its
  /// completion latency counted from the end of its issue, as the event
  /// model does), then that slab's matmul.
  [[nodiscard]] double wait_ns(const work& load, double fc) const {
    const double arrival = load.arrival_ns(m_) - std::min(m_.dma_issue_ns, m_.dma_fixed_latency_ns);
    return std::max(0.0, arrival + fc / static_cast<double>(pl_.slabs) - fc);
  }

  /// TensorE time of a unit's first contraction (its first row tile's
  /// first mm_n columns), which streams with the unit's loads.
  [[nodiscard]] double first_contraction_ns(std::int64_t rows_t, std::int64_t cols) const {
    double ns = 0;
    each(split(p_.d_model, p_.mm_k), [&](double nk, std::int64_t k) {
      ns += nk * c_.tensor_ns(k, std::min(parts_, rows_t), std::min(p_.mm_n, cols));
    });
    return ns;
  }

  /// The online log-sum-exp step of each row tile of a unit (a chunk after
  /// the first).
  void epilogues(work& w, std::int64_t rows_t, std::int64_t cols) const {
    each(split(rows_t, parts_), [&](double n, std::int64_t rows) {
      c_.compute(w, vector_engine, op::reduce, n, rows, cols);
      c_.compute(w, vector_engine, op::tensor_tensor, n, rows, 1);
      c_.compute(w, scalar_engine, op::activation, n, rows, cols);
      c_.compute(w, p_.pick_engine, op::tensor_scalar, n, rows, cols);
      c_.compute(w, vector_engine, op::tensor_tensor, n, rows, cols);
      c_.compute(w, vector_engine, op::reduce, n, rows, cols);
      c_.compute(w, scalar_engine, op::activation, n, rows, 1);
      c_.compute(w, vector_engine, op::tensor_tensor, 2 * n, rows, 1);
    });
  }

  /// What the first chunk's units leave out of the online step (no running
  /// state to merge) and the last chunk's add (the loss and its store).
  void edges(work& w, const cut& tiles) const {
    each(tiles, [&](double n_tiles, std::int64_t rows_t) {
      each(split(rows_t, parts_), [&](double subs, std::int64_t rows) {
        const double n = n_tiles * subs;
        c_.compute(w, vector_engine, op::tensor_tensor, -3 * n, rows, 1);
        c_.compute(w, scalar_engine, op::activation, -n, rows, 1);
        c_.compute(w, scalar_engine, op::activation, n, rows, 1);
        c_.compute(w, vector_engine, op::tensor_tensor, n, rows, 1);
        c_.transfer(w, s_rows, n, rows, 4, false, true);
      });
      if (p_.vocab_outer) labels(w, rows_t, n_tiles);
    });
  }

  /// TensorE waiting for the readers of its PSUM set's last use: the set
  /// comes round after `sets` units, and the epilogue of a row tile (its
  /// row max then exp; its label product) must have read it.
  [[nodiscard]] double psum_stall(std::int64_t rows_t, std::int64_t cols) const {
    const std::int64_t rows = std::min(parts_, rows_t);
    const double chain = c_.elementwise_ns(vector_engine, op::reduce, rows, cols) +
                         std::max(c_.elementwise_ns(scalar_engine, op::activation, rows, cols),
                                  c_.elementwise_ns(vector_engine, op::tensor_tensor, rows, cols));
    const double subs = static_cast<double>(emit::ceil_div(rows_t, parts_));
    const double per_sub = matmuls(rows, cols).busy[0];
    const double between = (static_cast<double>(pl_.sets - 1) * subs + subs - 1) * per_sub;
    return std::max(0.0, chain - between);
  }

  /// After the last matmul: the last row tile's epilogue, its loss and store.
  [[nodiscard]] double drain_ns() const {
    const std::int64_t rows_t = p_.tokens - (pl_.token_tiles - 1) * p_.token_tile;
    const std::int64_t rows = rows_t - (emit::ceil_div(rows_t, parts_) - 1) * parts_;
    const std::int64_t cols = p_.vocab - (pl_.chunks - 1) * p_.vocab_chunk;
    work w;
    epilogues(w, rows, cols);
    c_.compute(w, scalar_engine, op::activation, 1, rows, 1);
    c_.compute(w, vector_engine, op::tensor_tensor, 1, rows, 1);
    return w.busy[1] + c_.elementwise_ns(scalar_engine, op::activation, rows, 1) +
           c_.transfer_ns(rows, 4, 0, true) + m_.dma_fixed_latency_ns;
  }

  double fill_ = 0, cold_ = 0;  ///< the first blocks' wait; the first burst's ramp
};

}  // namespace

std::optional<steady_estimate> estimate_steady(const plan& pl, const machine& m) {
  return model(pl, m).run();
}

}  // namespace tessel::sim::ce
