// newton_schulz_steady.cpp: the steady-state screening model of
// newton_schulz (ns_detail::estimate_steady; docs/simulator.md, "Speed").
// The lowering (newton_schulz.cpp) is regular: every operand is resident,
// and each step is four chains of PSUM groups (a group: the matmuls of one
// output block, then its evict) through `psum_bufs` banks in rotation. So
// this replays the lowering's order group by group without building a
// program, as the event model's recurrence: every engine in order, an
// instruction starting at max(its engine free, its dependencies done), with
// the event model's own cost rules (cost_rules.hpp) and its TensorE
// stationary-load and warm-up rules. A group's matmuls after the first of a
// chain wait on nothing but TensorE, so they are timed as one run (what the
// lowering's aggregation issues as one instruction). The DMA transfers are
// the loads of G on one queue and the stores of X on another, never at once,
// so no sharing of the DMA engines is approximated.
#include "../../cost_rules.hpp"
#include "../../workload.hpp"
#include "newton_schulz.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <vector>

namespace tessel::sim::ns_detail {
namespace {

/// TensorE as timing.cpp runs it (tensor_duration, warmup_throttle): a new
/// stationary's load is hidden behind the multiply before it unless TensorE
/// was idle, and the warm-up throttle ramps from warmup_start over warmup_ns
/// of busy time, re-engaging when the utilization falls below one half.
class tensor_engine_state {
 public:
  explicit tensor_engine_state(const machine& m) : m_(m) {}

  /// `count` multiplies of `each` cycles back to back, each loading a
  /// stationary of `load` cycles, the first waiting for `ready`; returns the end.
  double run(double ready, double each, double load, double count) {
    const double start = std::max(free_, ready);
    const bool gap = last_end_ < 0 || start > last_end_ + 1e-9;
    const double cycles = count * each + (gap ? load : std::max(0.0, load - prev_)) +
                          (count - 1) * std::max(0.0, load - each);
    prev_ = each;
    const double ns = throttle_.duration(cycles / m_.tensor_ghz, start, last_end_, m_);
    busy += ns;
    free_ = last_end_ = start + ns;
    return free_;
  }

  double busy = 0;

 private:
  const machine& m_;
  double free_ = 0, last_end_ = -1, prev_ = 0;
  warmup_throttle throttle_;
};

class replay {
 public:
  replay(const plan& pl, const machine& m)
      : pl_(pl),
        p_(pl.p),
        m_(m),
        pe_(m),
        P_(m.partitions),
        bank_reader_(static_cast<std::size_t>(p_.psum_bufs), 0.0),
        x_piece_(static_cast<std::size_t>(pl.row_tiles * pl.col_groups), 0.0),
        xt_ready_(static_cast<std::size_t>(pl.col_tiles), 0.0),
        a_ready_(static_cast<std::size_t>(pl.row_tiles), 0.0),
        b_ready_(static_cast<std::size_t>(pl.row_tiles), 0.0) {}

  /// The latency of the whole program (newton_schulz.cpp's lowerer::run).
  double run() {
    normalise();
    transpose_x();
    for (std::int64_t t = 0; t < p_.iterations; ++t) {
      row_products(xt_ready_, p_.cols, a_ready_, true);  // A' = X X^T, scaled
      row_products(a_ready_, p_.rows, b_ready_, false);  // B from A'A'
      update();
      if (t + 1 == p_.iterations) break;
      if (p_.recompute_t)
        recompute_xt();
      else
        transpose_x();
    }
    for (std::int64_t i = 0; i < pl_.row_tiles; ++i) {  // the stores of X
      double ready = 0;
      for (std::int64_t g = 0; g < pl_.col_groups; ++g)
        ready = std::max(ready, x_piece_[at(i * pl_.col_groups + g)]);
      transfer(1, rows_of(i, p_.rows), ready);
    }
    return latest_;
  }

  std::array<double, 4> busy{};  ///< as steady_estimate::busy_ns
  double dma_work = 0, instructions = 0;

 private:
  static std::size_t at(std::int64_t i) { return static_cast<std::size_t>(i); }
  [[nodiscard]] std::int64_t rows_of(std::int64_t tile, std::int64_t extent) const {
    return std::min<std::int64_t>(P_, extent - tile * P_);
  }
  [[nodiscard]] std::int64_t width_of(std::int64_t group, std::int64_t extent) const {
    return std::min(p_.mm_n, extent - group * p_.mm_n);
  }

  /// A row band of X (cols wide) on DMA queue q; returns when dependents see it.
  double transfer(int q, std::int64_t rows, double ready) {
    instruction in;
    in.kind = op::dma;
    in.partitions = static_cast<std::uint32_t>(rows);
    in.free = static_cast<std::uint32_t>(p_.cols * dtype_bytes(p_.type));
    double alone = dma_data_ns(in, m_);
    if (m_.hbm_bytes_per_ns > 0)
      alone = std::max(alone, static_cast<double>(rows) * in.free / m_.hbm_bytes_per_ns);
    dma_work += alone;
    ++instructions;
    const double issue = m_.dma_issue_ns;
    auto& issue_free = issue_free_[static_cast<std::size_t>(q)];
    auto& queue_free = queue_free_[static_cast<std::size_t>(q)];
    double data_at = 0;
    if (m_.dma_queue_pipelined) {
      const double issue_at = std::max(issue_free, ready - issue);
      issue_free = issue_at + issue;
      data_at = std::max({issue_at + issue, ready, queue_free});
    } else {
      data_at = std::max(queue_free, ready) + issue;
    }
    queue_free = data_at + alone;
    const double done = queue_free + std::max(0.0, m_.dma_fixed_latency_ns - issue);
    latest_ = std::max(latest_, done);
    return done;
  }

  double compute(engine_id e, op kind, std::int64_t rows, std::int64_t n, double ready,
                 bool dependent = false) {
    instruction in;
    in.engine = e;
    in.kind = kind;
    in.type = dtype::fp32;
    in.partitions = static_cast<std::uint32_t>(rows);
    in.free = static_cast<std::uint32_t>(std::max<std::int64_t>(n, 1));
    const double ns = compute_ns(in, m_, dependent);
    auto& free = free_[static_cast<std::size_t>(e - tensor_engine)];
    free = std::max(free, ready) + ns;
    busy[static_cast<std::size_t>(e - tensor_engine)] += ns;
    ++instructions;
    latest_ = std::max(latest_, free);
    return free;
  }

  double evict(std::int64_t rows, std::int64_t n, bool scales, double ready) {
    const op kind = p_.evict == scalar_engine ? op::activation
                    : scales                  ? op::tensor_scalar
                                              : op::copy;
    return compute(p_.evict, kind, rows, n, ready);
  }

  /// `count` matmuls of one shape (contraction k, stationary m, moving n) back to back.
  double matmul(dtype t, std::int64_t k, std::int64_t m, std::int64_t n, double ready,
                double count = 1) {
    instruction in;
    in.engine = tensor_engine;
    in.kind = op::matmul;
    in.type = t;
    in.partitions = static_cast<std::uint32_t>(k);
    in.aux = static_cast<std::uint32_t>(m);
    in.free = static_cast<std::uint32_t>(n);
    instructions += count;
    return tensor(ready, cost_rule::tensor_cycles(in, m_),
                  cost_rule::stationary_load_cycles(static_cast<double>(m), m_), count);
  }

  double tensor(double ready, double each, double load, double count) {
    const double end = pe_.run(ready, each, load, count);
    busy[0] = pe_.busy;
    latest_ = std::max(latest_, end);
    return end;
  }

  /// The next bank in rotation; `ready` becomes when its last reader is done.
  std::size_t open_bank(double& ready) {
    const auto bank = static_cast<std::size_t>(banks_++ % static_cast<std::uint64_t>(p_.psum_bufs));
    ready = bank_reader_[bank];
    return bank;
  }

  /// One group's matmuls over the k tiles of `extent`; the first group of a
  /// chain (`inputs`) waits on each k tile's readiness as it comes.
  double group(std::int64_t extent, std::int64_t m, std::int64_t n, double ready,
               const std::vector<double>* inputs) {
    const std::int64_t tiles = (extent + P_ - 1) / P_, full = extent / P_;
    if (inputs != nullptr) {
      double last = 0;
      for (std::int64_t k = 0; k < tiles; ++k)
        last = matmul(p_.type, rows_of(k, extent), m, n,
                      std::max(k == 0 ? ready : 0.0, (*inputs)[at(k)]));
      return last;
    }
    double last = full > 0 ? matmul(p_.type, P_, m, n, ready, static_cast<double>(full)) : ready;
    if (full < tiles) last = matmul(p_.type, extent - full * P_, m, n, full > 0 ? 0.0 : ready);
    return last;
  }

  void normalise() {
    std::vector<double> loads, sums;
    for (std::int64_t i = 0; i < pl_.row_tiles; ++i) {
      loads.push_back(transfer(0, rows_of(i, p_.rows), 0));
      sums.push_back(
          compute(scalar_engine, op::activation, rows_of(i, p_.rows), p_.cols, loads.back()));
    }
    const double ones = compute(vector_engine, op::tensor_scalar, P_, P_, 0);
    double bank_ready = 0;
    const auto bank = open_bank(bank_ready);
    double total = 0;
    for (std::int64_t i = 0; i < pl_.row_tiles; ++i)
      total = matmul(dtype::fp32, rows_of(i, p_.rows), P_, 1,
                     i == 0 ? std::max({sums[0], bank_ready, ones}) : sums[at(i)]);
    const double rsqrt = compute(scalar_engine, op::activation, P_, 1, total);
    bank_reader_[bank] = rsqrt;
    const op kind = p_.evict == scalar_engine ? op::activation : op::tensor_scalar;
    for (std::int64_t i = 0; i < pl_.row_tiles; ++i) {
      // ScalarE's first scale follows the rsqrt it reads (the dependent floor)
      const double x = compute(p_.evict, kind, rows_of(i, p_.rows), p_.cols,
                               std::max(rsqrt, loads[at(i)]), i == 0 && p_.evict == scalar_engine);
      for (std::int64_t g = 0; g < pl_.col_groups; ++g) x_piece_[at(i * pl_.col_groups + g)] = x;
    }
  }

  void transpose_x() {
    const std::int64_t per_bank = pl_.t_width / P_;
    for (std::int64_t j = 0; j < pl_.col_tiles; ++j) {
      const std::int64_t cols = rows_of(j, p_.cols), g = j * P_ / p_.mm_n;
      for (std::int64_t i0 = 0; i0 < pl_.row_tiles; i0 += per_bank) {
        double ready = 0;
        const auto bank = open_bank(ready);
        double last = 0;
        std::int64_t width = 0;
        for (std::int64_t i = i0; i < std::min(pl_.row_tiles, i0 + per_bank); ++i) {
          instruction in;
          in.engine = tensor_engine;
          in.kind = op::transpose;
          in.type = p_.type;
          in.partitions = static_cast<std::uint32_t>(rows_of(i, p_.rows));
          in.free = static_cast<std::uint32_t>(cols);
          ++instructions;
          last = tensor(std::max(i == i0 ? ready : 0.0, x_piece_[at(i * pl_.col_groups + g)]),
                        cost_rule::tensor_cycles(in, m_),
                        cost_rule::stationary_load_cycles(static_cast<double>(cols), m_), 1);
          width += rows_of(i, p_.rows);
        }
        const double e = evict(cols, width, false, last);
        bank_reader_[bank] = e;
        xt_ready_[at(j)] = e;
      }
    }
  }

  /// A' = X X^T (gram: evicted and scaled) or B from A'A' (combined on VectorE).
  void row_products(const std::vector<double>& inputs, std::int64_t k_extent,
                    std::vector<double>& out, bool gram) {
    for (std::int64_t i = 0; i < pl_.row_tiles; ++i) {
      const std::int64_t rows = rows_of(i, p_.rows);
      double e = 0;
      for (std::int64_t g = 0; g < pl_.row_groups; ++g) {
        double ready = 0;
        const auto bank = open_bank(ready);
        const std::int64_t width = width_of(g, p_.rows);
        const double last =
            group(k_extent, rows, width, ready, i == 0 && g == 0 ? &inputs : nullptr);
        e = gram ? evict(rows, width, true, last)
                 : compute(vector_engine, op::tensor_tensor, rows, width, last);
        bank_reader_[bank] = e;
      }
      out[at(i)] = e;
    }
  }

  void update() {
    for (std::int64_t i = 0; i < pl_.row_tiles; ++i) {
      const std::int64_t rows = rows_of(i, p_.rows);
      for (std::int64_t g = 0; g < pl_.col_groups; ++g) {
        double ready = 0;
        const auto bank = open_bank(ready);
        const std::int64_t width = width_of(g, p_.cols);
        const double last =
            group(p_.rows, rows, width, ready, i == 0 && g == 0 ? &b_ready_ : nullptr);
        const double e = compute(vector_engine, op::tensor_tensor, rows, width, last);
        bank_reader_[bank] = e;
        x_piece_[at(i * pl_.col_groups + g)] = e;
      }
    }
  }

  void recompute_xt() {
    for (std::int64_t j = 0; j < pl_.col_tiles; ++j) {
      const std::int64_t cols = rows_of(j, p_.cols);
      double e = 0;
      for (std::int64_t g = 0; g < pl_.row_groups; ++g) {
        double ready = 0;
        const auto bank = open_bank(ready);
        const std::int64_t width = width_of(g, p_.rows);
        e = compute(vector_engine, op::tensor_tensor, cols, width,
                    group(p_.rows, cols, width, ready, nullptr));
        bank_reader_[bank] = e;
      }
      xt_ready_[at(j)] = e;
    }
  }

  const plan& pl_;
  const params& p_;
  const machine& m_;
  tensor_engine_state pe_;
  std::int64_t P_;
  std::array<double, 4> free_{};
  std::array<double, 2> issue_free_{}, queue_free_{};
  std::vector<double> bank_reader_, x_piece_, xt_ready_, a_ready_, b_ready_;
  std::uint64_t banks_ = 0;
  double latest_ = 0;
};

}  // namespace

steady_estimate estimate_steady(const plan& pl, const machine& m) {
  replay r(pl, m);
  steady_estimate e;
  e.latency_ns = r.run();
  e.busy_ns = r.busy;
  e.dma_data_ns = r.dma_work;
  e.instructions = r.instructions;
  const auto rows = static_cast<double>(pl.p.rows), cols = static_cast<double>(pl.p.cols);
  const double bytes = rows * cols * static_cast<double>(dtype_bytes(pl.p.type));
  e.hbm_read_bytes = e.hbm_write_bytes = bytes;
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
