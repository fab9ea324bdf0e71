// newton_schulz_steady.cpp: the steady-state screening model of
// newton_schulz (ns_detail::estimate_steady; docs/simulator.md, "Speed") in
// closed form, without lowering or replaying the plan. The lowering
// (newton_schulz.cpp) is regular: every operand is resident, and each step is
// chains of PSUM groups (a group: the matmuls of one output block, then its
// evict or combine) through `psum_bufs` banks in rotation: A' = X X^T, B from
// A'A', the update of X, and X^T for the next step (transposes, or a second
// product). The counts are the lowering's; each cost is cost_rules.hpp's. A
// chain of identical groups (TensorE time T, evict E) runs at a period of
// max(T, E, (T + E) / psum_bufs), the in-order recurrence's cycle; its first
// group's matmuls overlap the end of the chain before it but for the last
// contraction tile, and its last evict follows. Where TensorE idles between
// groups it loads each group's first stationary after a gap, and the warm-up
// throttle restarts in each burst when its utilization falls below one half
// (steady::burst_warmup_loss). Before the first step X is loaded, normalised
// and transposed; after the last its rows are stored.
#include "../../cost_rules.hpp"
#include "../../steady_closed.hpp"
#include "../../workload.hpp"
#include "../emit.hpp"
#include "newton_schulz.hpp"

#include <algorithm>
#include <array>

namespace tessel::sim::ns_detail {
namespace {

using steady::each;
using steady::split;

class model {
 public:
  model(const plan& pl, const machine& m)
      : pl_(pl), p_(pl.p), m_(m), P_(m.partitions), c_(m, pl.p.type, 1) {}

  /// The latency of the whole program (newton_schulz.cpp's lowerer::run).
  double run() {
    double latency = normalise();
    latency += transposes();
    for (std::int64_t t = 0; t < p_.iterations; ++t) {
      latency += products(p_.cols, p_.rows, true);   // A' = X X^T, scaled
      latency += products(p_.rows, p_.rows, false);  // B from A'A'
      latency += chains(p_.rows, p_.rows, p_.cols, vector_engine, op::tensor_tensor);  // X
      if (t + 1 == p_.iterations) break;
      latency += p_.recompute_t
                     ? chains(p_.cols, p_.rows, p_.rows, vector_engine, op::tensor_tensor)
                     : transposes();
    }
    // the stores of X, the last row band's after the update's last evict
    each(split(p_.rows, P_), [&](double n, std::int64_t rows) {
      c_.transfer(issued, 1, n, rows, p_.cols * dtype_bytes(p_.type), false, true);
    });
    return latency + cold_ + last_store_ns() + m_.dma_fixed_latency_ns;
  }

  steady::stretch issued;  ///< what it issues: busy times, DMA data, HBM bytes, instructions

 private:
  /// One TensorE instruction's cycles.
  [[nodiscard]] double cycles(const instruction& in) const {
    return cost_rule::tensor_cycles(in, m_);
  }

  /// A chain of `g` groups alike: each `tensor` ns of TensorE work over `k`
  /// instructions (`first`: the exposed stationary load after a gap), then
  /// an evict of `evict` ns on engine e. Returns the chain's time from the
  /// end of the one before.
  double chain(double g, double tensor, double k, double first, double evict, engine_id e) {
    double period = std::max({tensor, evict, (tensor + evict) / p_.psum_bufs});
    if (period > tensor * (1 + 1e-9)) tensor += first;  // TensorE idled: the load is exposed
    const double loss = steady::burst_warmup_loss(tensor, period - tensor, m_);
    tensor += loss;
    if (!warm_) cold_ = loss > 0 ? 0 : steady::warmup_loss(g * tensor, m_);
    warm_ = true;
    period = std::max({tensor, evict, (tensor + evict) / p_.psum_bufs});
    issued.busy[0] += g * tensor;
    issued.busy[static_cast<std::size_t>(e - tensor_engine)] += g * evict;
    issued.instructions += g * (k + 1);
    // the phase's first groups start from the end of the one before (their
    // last contraction tile), the others follow on
    const double d = first_in_phase_ ? tensor / k + (g - 1) * period + evict : g * period;
    first_in_phase_ = false;
    return d;
  }

  /// Row-band products out[rows, rows] over a contraction of `k_extent`:
  /// A' (gram: evicted and scaled) or B (combined on VectorE).
  double products(std::int64_t k_extent, std::int64_t out_rows, bool gram) {
    const op kind = !gram                       ? op::tensor_tensor
                    : p_.evict == scalar_engine ? op::activation
                                                : op::tensor_scalar;
    return chains(out_rows, k_extent, out_rows, gram ? p_.evict : vector_engine, kind);
  }

  /// Groups over `bands` row bands x mm_n-wide groups of `cols`, each
  /// contracting `k_extent`, drained by `kind` on engine e.
  double chains(std::int64_t bands, std::int64_t k_extent, std::int64_t cols, engine_id e,
                op kind) {
    double out = 0;
    first_in_phase_ = true;
    each(split(bands, P_), [&](double nb, std::int64_t rows) {
      each(split(cols, p_.mm_n), [&](double ng, std::int64_t width) {
        // each matmul loads its stationary behind the one before (what
        // exceeds that one is exposed), all of it after a gap
        const double load = cost_rule::stationary_load_cycles(static_cast<double>(rows), m_);
        double tensor = 0, k = 0, first = 0;
        each(split(k_extent, P_), [&](double nk, std::int64_t kk) {
          const double each_mm = cycles(make_matmul(p_.type, kk, rows, width));
          tensor += nk * (each_mm + std::max(0.0, load - each_mm));
          first = std::min(load, each_mm);
          k += nk;
        });
        const double evict = compute_ns(make_elementwise(e, kind, dtype::fp32, rows, width), m_);
        out += chain(nb * ng, tensor / m_.tensor_ghz, k, first / m_.tensor_ghz, evict, e);
      });
    });
    return out;
  }

  /// X^T by TensorE transposes: per 128-column tile of X, banks of t_width
  /// rows, each drained by one evict.
  double transposes() {
    double out = 0;
    first_in_phase_ = true;
    each(split(p_.cols, P_), [&](double nc, std::int64_t cols) {
      each(split(p_.rows, pl_.t_width), [&](double nb, std::int64_t width) {
        const double load = cost_rule::stationary_load_cycles(static_cast<double>(cols), m_);
        double tensor = 0, k = 0, first = 0;
        each(split(width, P_), [&](double nt, std::int64_t rows) {
          const double each_t = cycles(make_transpose(p_.type, rows, cols));
          tensor += nt * (each_t + std::max(0.0, load - each_t));
          first = std::min(load, each_t);
          k += nt;
        });
        const op kind = p_.evict == scalar_engine ? op::activation : op::copy;
        const double evict =
            compute_ns(make_elementwise(p_.evict, kind, dtype::fp32, cols, width), m_);
        out += chain(nc * nb, tensor / m_.tensor_ghz, k, first / m_.tensor_ghz, evict, p_.evict);
      });
    });
    return out;
  }

  /// X loaded, each row band's square sum, their total (fp32 matmuls with a
  /// ones tile), its rsqrt, and X scaled by it.
  double normalise() {
    steady::stretch loads;
    each(split(p_.rows, P_), [&](double n, std::int64_t rows) {
      c_.transfer(loads, 0, n, rows, p_.cols * dtype_bytes(p_.type), true, false);
    });
    issued.add(loads, 1);
    const std::int64_t last = p_.rows - (pl_.row_tiles - 1) * P_;
    const double bands = static_cast<double>(pl_.row_tiles);
    const double sum = c_.compute(issued, scalar_engine, op::activation, 1, last, p_.cols);
    c_.compute(issued, scalar_engine, op::activation, bands - 1, P_, p_.cols);
    c_.compute(issued, vector_engine, op::tensor_scalar, 1, P_, P_);
    const double total = bands * cycles(make_matmul(dtype::fp32, P_, P_, 1)) / m_.tensor_ghz;
    issued.busy[0] += total;
    issued.instructions += bands;
    const double rsqrt = c_.compute(issued, scalar_engine, op::activation, 1, P_, 1);
    const op kind = p_.evict == scalar_engine ? op::activation : op::tensor_scalar;
    double scales = 0;
    each(split(p_.rows, P_), [&](double n, std::int64_t rows) {
      scales += n * c_.compute(issued, p_.evict, kind, n, rows, p_.cols);
    });
    return loads.arrival_ns(m_) + sum + total + rsqrt + scales;
  }

  [[nodiscard]] double last_store_ns() const {
    const std::int64_t rows = p_.rows - (pl_.row_tiles - 1) * P_;
    return m_.dma_issue_ns + c_.transfer_ns(rows, p_.cols * dtype_bytes(p_.type), 0, true);
  }

  const plan& pl_;
  const params& p_;
  const machine& m_;
  std::int64_t P_;
  steady::counter c_;
  bool warm_ = false, first_in_phase_ = true;
  double cold_ = 0;  ///< the first burst's ramp, where no burst restarts it
};

}  // namespace

steady_estimate estimate_steady(const plan& pl, const machine& m) {
  model r(pl, m);
  const double latency = r.run();
  steady_estimate e = r.issued.estimate();
  e.latency_ns = latency;
  const auto rows = static_cast<double>(pl.p.rows), cols = static_cast<double>(pl.p.cols);
  const double bytes = rows * cols * static_cast<double>(dtype_bytes(pl.p.type));
  e.totals.flops =
      static_cast<double>(pl.p.iterations) * (4 * rows * rows * cols + 2 * rows * rows * rows);
  e.totals.min_hbm_bytes = 2 * bytes;
  e.totals.compute_type = pl.p.type;
  static constexpr std::array<const char*, 4> engines{"tensor", "vector", "scalar", "gpsimd"};
  const auto busiest = static_cast<std::size_t>(
      std::max_element(e.busy_ns.begin(), e.busy_ns.end()) - e.busy_ns.begin());
  e.bound = engines[busiest];
  e.tag = busiest == 0 ? "matmul" : "evict";
  return e;
}

}  // namespace tessel::sim::ns_detail
