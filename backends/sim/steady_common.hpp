// steady_common.hpp: the pieces a workload's steady-state model
// (docs/simulator.md, "Speed") replays its schedule with, without lowering
// it: in-order engines as a max-plus recurrence and a jump over the periodic
// part of a loop.
//
// `replay` charges each instruction what the event model (timing.cpp)
// charges (cost_rules.hpp, TensorE's stationary loads and warm-up throttle)
// and starts it at max(its engine free, its dependencies done), in program
// order, which is exact for engines that share nothing (every compute engine
// on trn2). DMA: a queue issues and moves its transfers in order (issue
// pipelined with the data phase where the target's queues are); a data
// phase shares the DMA engines with the other queues' phases under way when
// it starts (its time times their number), where the event model re-shares
// them at every start and end, so overlapping streams come out within a few
// percent rather than exactly.
//
// `periodic_jump` watches the replay's state at the end of each repetition of
// a loop body: once the last c repetitions (c up to 8) advanced every field
// as the c before them did, the recurrence is in its periodic regime and
// the remaining cycles are added in one step, each field by its own advance.
#pragma once

#include "cost_rules.hpp"
#include "machine.hpp"
#include "program.hpp"
#include "workload.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <span>
#include <utility>
#include <vector>

namespace tessel::sim::steady {

/// An issued instruction: its id (0: none, whose `done` is 0) and when its
/// result is visible to dependents (ns).
struct token {
  std::uint64_t id = 0;
  double done = 0;
};

/// An elementwise instruction as the lowerings build one: `rows`
/// partitions x `n` elements (at least 1) of fp32.
[[nodiscard]] inline instruction elementwise(engine_id e, op kind, std::int64_t rows,
                                             std::int64_t n, std::uint8_t flags) {
  instruction in;
  in.engine = e;
  in.kind = kind;
  in.type = dtype::fp32;
  in.flags = flags;
  in.partitions = static_cast<std::uint32_t>(rows);
  in.free = static_cast<std::uint32_t>(std::max<std::int64_t>(n, 1));
  return in;
}

/// Names what bounds an estimate: the DMA data when it outweighs the
/// busiest compute engine (tag `transfers`), else that engine (tag: its
/// entry of `work`, TensorE, VectorE, ScalarE, GpSimdE).
inline void name_bound(steady_estimate& e, const std::array<const char*, 4>& work,
                       const char* transfers) {
  static constexpr std::array<const char*, 4> engines{"tensor", "vector", "scalar", "gpsimd"};
  const auto busiest = static_cast<std::size_t>(
      std::max_element(e.busy_ns.begin(), e.busy_ns.end()) - e.busy_ns.begin());
  const bool dma = e.dma_data_ns > e.busy_ns[busiest];
  e.bound = dma ? "dma data" : engines[busiest];
  e.tag = dma ? transfers : work[busiest];
}

/// The in-order engines of one core, replayed in program order.
class replay {
 public:
  explicit replay(const machine& m) : m_(m) {}

  /// An elementwise or TensorE instruction after `deps`.
  token compute(const instruction& in, std::initializer_list<token> deps) {
    return compute(in, std::span<const token>(deps.begin(), deps.size()));
  }
  token compute(const instruction& in, std::span<const token> deps) {
    const auto e = static_cast<std::size_t>(in.engine - tensor_engine);
    double ready = free_[e];
    bool after_previous = false;
    for (const token& d : deps) {
      ready = std::max(ready, d.done);
      after_previous = after_previous || (d.id != 0 && d.id == last_id_[e]);
    }
    const double ns =
        in.engine == tensor_engine ? tensor_ns(in, ready) : compute_ns(in, m_, after_previous);
    busy[e] += ns;
    free_[e] = ready + ns;
    instructions += in.count;
    last_id_[e] = ++serial_;
    return finish(free_[e]);
  }

  /// A DMA transfer on queue in.engine after `deps`; `hbm_src`/`hbm_dst`:
  /// which side is HBM (its bytes count, and the core's HBM share caps it).
  token dma(const instruction& in, bool hbm_src, bool hbm_dst, std::initializer_list<token> deps) {
    return dma(in, hbm_src, hbm_dst, std::span<const token>(deps.begin(), deps.size()));
  }
  token dma(const instruction& in, bool hbm_src, bool hbm_dst, std::span<const token> deps) {
    double ready = 0;
    for (const token& d : deps) ready = std::max(ready, d.done);
    auto& q = queue_[in.engine];
    const double issue = m_.dma_issue_ns * in.count;
    const double issue_at =
        m_.dma_queue_pipelined ? std::max(q.issue_free, ready - issue) : std::max(q.free, ready);
    const double bytes = static_cast<double>(in.count) * in.partitions * in.free;
    double data = dma_data_ns(in, m_);
    if ((hbm_src || hbm_dst) && m_.hbm_bytes_per_ns > 0)
      data = std::max(data, bytes / m_.hbm_bytes_per_ns);
    const double start = std::max({issue_at + issue, ready, q.free});
    // the queues whose data phase is still under way share the engines with it
    int sharing = 1;
    for (const auto& other : queue_) sharing += &other != &q && other.free > start ? 1 : 0;
    q.issue_free = issue_at + issue;
    q.free = start + data * sharing;
    dma_data += data;
    if (hbm_src) hbm_read += bytes;
    if (hbm_dst) hbm_write += bytes;
    instructions += in.count;
    ++serial_;
    return finish(q.free + std::max(0.0, m_.dma_fixed_latency_ns - m_.dma_issue_ns));
  }

  /// The state's times (ns): engine and queue free times, the last done.
  void times(std::vector<double*>& out) {
    for (double& f : free_) out.push_back(&f);
    for (auto& q : queue_) {
      out.push_back(&q.issue_free);
      out.push_back(&q.free);
    }
    for (double* f : {&tensor_last_end_, &latency}) out.push_back(f);
  }
  /// The totals it sums (busy times, counts, bytes).
  void totals(std::vector<double*>& out) {
    for (double& b : busy) out.push_back(&b);
    for (double* f : {&instructions, &hbm_read, &hbm_write, &dma_data, &warmup_loss})
      out.push_back(f);
  }
  /// TensorE's warm-up throttle: its ramp and utilization (not times).
  void throttle(std::vector<double*>& out) {
    out.push_back(&throttle_.ramp);
    out.push_back(&throttle_.util);
  }

  /// What it replayed, as an estimate (the totals and the bound are the caller's).
  [[nodiscard]] steady_estimate estimate() const {
    steady_estimate e;
    e.latency_ns = latency;
    e.busy_ns = busy;
    e.dma_data_ns = dma_data;
    e.hbm_read_bytes = hbm_read;
    e.hbm_write_bytes = hbm_write;
    e.instructions = instructions;
    return e;
  }

  std::array<double, 4> busy{};  ///< TensorE, VectorE, ScalarE, GpSimdE (ns)
  double latency = 0;            ///< the last instruction's done
  double instructions = 0, hbm_read = 0, hbm_write = 0, dma_data = 0, warmup_loss = 0;

 private:
  token finish(double done) {
    latency = std::max(latency, done);
    return {serial_, done};
  }

  /// timing.cpp's TensorE duration: the multiply, the exposed stationary
  /// load, and the warm-up throttle.
  double tensor_ns(const instruction& in, double now) {
    const double each = cost_rule::tensor_cycles(in, m_);
    const bool gap = tensor_last_end_ < 0 || now > tensor_last_end_ + 1e-9;
    double cycles = in.count * each;
    if (in.kind == op::transpose || (in.flags & flag_new_stationary)) {
      const double load =
          cost_rule::stationary_load_cycles(in.kind == op::transpose ? in.free : in.aux, m_);
      cycles += gap ? load : std::max(0.0, load - tensor_prev_cycles_);
      cycles += (in.count - 1) * std::max(0.0, load - each);
    }
    tensor_prev_cycles_ = each;
    const double full = cycles / m_.tensor_ghz,
                 ns = throttle_.duration(full, now, tensor_last_end_, m_);
    warmup_loss += ns - full;
    tensor_last_end_ = now + ns;
    return ns;
  }

  struct dma_queue {
    double issue_free = 0, free = 0;
  };
  const machine& m_;
  std::array<double, 4> free_{};
  std::array<std::uint64_t, 4> last_id_{};
  std::array<dma_queue, dma_queue_count> queue_{};
  std::uint64_t serial_ = 0;
  double tensor_last_end_ = -1, tensor_prev_cycles_ = 0;
  warmup_throttle throttle_;
};

/// Slots in rotation, kept oldest first so that the state reads the same
/// from one repetition to the next whatever the lowering's slot numbers:
/// next() recycles the oldest as the newest.
template <class T>
class ring {
 public:
  explicit ring(std::size_t n, const T& init = T{}) : slots_(std::max<std::size_t>(n, 1), init) {}
  [[nodiscard]] T& oldest() { return slots_.front(); }
  [[nodiscard]] T& newest() { return slots_.back(); }
  /// The oldest slot, moved to the newest place (its contents kept).
  T& next() {
    std::rotate(slots_.begin(), slots_.begin() + 1, slots_.end());
    return slots_.back();
  }
  [[nodiscard]] std::vector<T>& slots() { return slots_; }

 private:
  std::vector<T> slots_;
};

/// Skips the periodic repetitions of a loop body: call step() after each
/// repetition; once it finds a cycle, jump(n) adds n more cycles. A cycle
/// may span up to `longest` repetitions (in-order engines can settle into
/// a pattern that repeats every second repetition, not every one).
class periodic_jump {
 public:
  explicit periodic_jump(std::vector<double*> fields, int longest = 8)
      : fields_(std::move(fields)),
        longest_(longest),
        history_(static_cast<std::size_t>(2 * longest + 1), std::vector<double>(fields_.size())) {}

  /// Records the state after a repetition. Returns the cycle c (in
  /// repetitions) when the last c repetitions advanced every field as the
  /// c before them did (within `tolerance` ns, or units, plus 1e-9
  /// relative), else 0.
  int step(double tolerance = 1e-3) {
    const std::size_t depth = history_.size();
    auto& now = history_[static_cast<std::size_t>(seen_) % depth];
    for (std::size_t i = 0; i < fields_.size(); ++i) now[i] = *fields_[i];
    ++seen_;
    for (int c = 1; c <= longest_ && 2 * c < seen_; ++c) {
      const auto& mid = history_[static_cast<std::size_t>(seen_ - 1 - c) % depth];
      const auto& old = history_[static_cast<std::size_t>(seen_ - 1 - 2 * c) % depth];
      bool same = true;
      for (std::size_t i = 0; i < fields_.size() && same; ++i) {
        const double d = now[i] - mid[i];
        same = std::abs(d - (mid[i] - old[i])) <= tolerance + 1e-9 * std::abs(d);
      }
      if (same) {
        cycle_ = c;
        return c;
      }
    }
    return 0;
  }
  /// Advances every field by `n` cycles of the last advance.
  void jump(double n) {
    const std::size_t depth = history_.size();
    const auto& now = history_[static_cast<std::size_t>(seen_ - 1) % depth];
    const auto& mid = history_[static_cast<std::size_t>(seen_ - 1 - cycle_) % depth];
    for (std::size_t i = 0; i < fields_.size(); ++i) *fields_[i] += n * (now[i] - mid[i]);
    seen_ = 0;
  }
  /// Forgets the repetitions seen (a new loop starts).
  void reset() { seen_ = 0; }

 private:
  std::vector<double*> fields_;
  int longest_;
  std::vector<std::vector<double>> history_;  ///< the last 2 longest + 1 states, by repetition
  int seen_ = 0, cycle_ = 1;
};

}  // namespace tessel::sim::steady
