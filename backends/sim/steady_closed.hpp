// steady_closed.hpp: pieces of the closed-form steady models (matmul, swiglu,
// moe, cross_entropy, newton_schulz): a dimension cut into tiles (full tiles
// of one size and at most one tail, so a sum over the tiles is two terms),
// the TensorE time the warm-up throttle (cost_rules.hpp) costs a run of work
// or each of a train of bursts, and the work of a stretch of a schedule
// summed with the event model's per-instruction costs.
#pragma once

#include "cost_rules.hpp"
#include "machine.hpp"
#include "steady_common.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>

namespace tessel::sim::steady {

/// A dimension cut into tiles: count[i] tiles of size[i], i < n (the full
/// tiles first, then the tail).
struct cut {
  std::array<std::int64_t, 2> count{}, size{};
  int n = 0;
};

/// `extent` cut into tiles of `tile` (> 0).
[[nodiscard]] inline cut split(std::int64_t extent, std::int64_t tile) {
  cut c;
  if (extent / tile > 0) {
    c.count[0] = extent / tile;
    c.size[0] = tile;
    c.n = 1;
  }
  if (extent % tile > 0) {
    c.count[static_cast<std::size_t>(c.n)] = 1;
    c.size[static_cast<std::size_t>(c.n)] = extent % tile;
    ++c.n;
  }
  return c;
}

/// f(count, size) for each distinct tile size of `c`.
template <class F>
void each(const cut& c, F&& f) {
  for (int i = 0; i < c.n; ++i)
    f(static_cast<double>(c.count[static_cast<std::size_t>(i)]),
      c.size[static_cast<std::size_t>(i)]);
}

/// TensorE time lost to the warm-up throttle by `work_ns` of work that starts cold.
[[nodiscard]] inline double warmup_loss(double work_ns, const machine& m) {
  const double w = m.warmup_ns, s0 = m.warmup_start;
  if (w <= 0 || s0 >= 1 || work_ns <= 0) return 0;
  const double slope = (1 - s0) / w;
  const double in_ramp = s0 * w + slope * w * w / 2;
  if (work_ns >= in_ramp) return w - in_ramp;
  return (-s0 + std::sqrt(s0 * s0 + 2 * slope * work_ns)) / slope - work_ns;
}

/// The warm-up loss of each TensorE burst of `busy_ns` after an idle gap of
/// `gap_ns`, bursts repeating: in the throttle's steady state its
/// utilization (an exponential average over warmup_ns) at the start of a
/// burst is u = (e^-g - e^-(b+g)) / (1 - e^-(b+g)) in units of warmup_ns, and
/// the ramp restarts (warmup_loss(busy_ns) again) when u is below one half,
/// else it stays at full speed (0).
[[nodiscard]] inline double burst_warmup_loss(double busy_ns, double gap_ns, const machine& m) {
  if (m.warmup_ns <= 0 || busy_ns <= 0) return 0;
  const double b = busy_ns / m.warmup_ns, g = std::max(gap_ns, 0.0) / m.warmup_ns;
  const double u = (std::exp(-g) - std::exp(-(b + g))) / (1 - std::exp(-(b + g)));
  return u < 0.5 ? warmup_loss(busy_ns, m) : 0;
}

/// The work of a stretch of a schedule, summed in closed form (ns at full
/// speed, counts, bytes) over up to four DMA streams.
struct stretch {
  std::array<double, 4> busy{};                  ///< TensorE, VectorE, ScalarE, GpSimdE
  std::array<double, 4> issue{}, queue_data{};   ///< per queue of each stream
  double data = 0;                               ///< every transfer's data phase
  double stall = 0;                              ///< TensorE waiting beyond its work
  double read = 0, write = 0, instructions = 0;  ///< HBM bytes, instructions issued

  /// Adds `times` copies of `o`.
  void add(const stretch& o, double times) {
    for (std::size_t i = 0; i < 4; ++i) {
      busy[i] += times * o.busy[i];
      issue[i] += times * o.issue[i];
      queue_data[i] += times * o.queue_data[i];
    }
    data += times * o.data;
    stall += times * o.stall;
    read += times * o.read;
    write += times * o.write;
    instructions += times * o.instructions;
  }

  /// Its totals as an estimate (the latency, totals and bound are the caller's).
  [[nodiscard]] steady_estimate estimate() const {
    steady_estimate e;
    e.busy_ns = busy;
    e.dma_data_ns = data;
    e.hbm_read_bytes = read;
    e.hbm_write_bytes = write;
    e.instructions = instructions;
    return e;
  }

  /// The DMA bound: every transfer's data on the shared engines, or the
  /// busiest queue's issues and data (pipelined: the larger; else both).
  [[nodiscard]] double dma_ns(const machine& m) const {
    double out = data;
    for (std::size_t s = 0; s < 4; ++s)
      out = std::max(out, m.dma_queue_pipelined ? std::max(issue[s], queue_data[s])
                                                : issue[s] + queue_data[s]);
    return out;
  }

  /// From the issue of these transfers alone to the last one's arrival:
  /// the busiest queue's issues with the data (pipelined: the larger), and
  /// the completion latency.
  [[nodiscard]] double arrival_ns(const machine& m) const {
    const double most = *std::max_element(issue.begin(), issue.end());
    return (m.dma_queue_pipelined ? std::max(most, data) : most + data) + m.dma_fixed_latency_ns;
  }
};

/// Adds instructions to a stretch at the event model's costs
/// (cost_rules.hpp), `count` alike at a time.
class counter {
 public:
  /// `queues`: per DMA stream, which takes them in turn.
  counter(const machine& m, dtype type, int queues) : m_(m), type_(type), queues_(queues) {}

  /// One transfer's data phase alone: its busiest DMA engine, capped by the
  /// core's HBM share when it touches HBM (`chunk`: bytes per descriptor).
  [[nodiscard]] double transfer_ns(std::int64_t rows, std::int64_t bytes, std::int64_t chunk,
                                   bool hbm) const {
    const double moved = static_cast<double>(rows * bytes);
    return std::max(dma_data_ns(make_dma(0, rows, bytes, chunk), m_),
                    hbm && m_.hbm_bytes_per_ns > 0 ? moved / m_.hbm_bytes_per_ns : 0);
  }
  /// `count` transfers of `rows` x `bytes` on `stream`; `read`/`write`: HBM is their source/target.
  void transfer(stretch& w, std::size_t stream, double count, std::int64_t rows, std::int64_t bytes,
                bool read, bool write, std::int64_t chunk = 0) const {
    const double data = count * transfer_ns(rows, bytes, chunk, read || write);
    w.issue[stream] += count * m_.dma_issue_ns / queues_;
    w.queue_data[stream] += data / queues_;
    w.data += data;
    const double moved = count * static_cast<double>(rows * bytes);
    if (read) w.read += moved;
    if (write) w.write += moved;
    w.instructions += count;
  }

  /// One elementwise instruction of `rows` x `n` fp32 on engine e.
  [[nodiscard]] double elementwise_ns(engine_id e, op kind, std::int64_t rows,
                                      std::int64_t n) const {
    return compute_ns(make_elementwise(e, kind, dtype::fp32, rows, n), m_);
  }
  /// `count` of them; returns one's time.
  double compute(stretch& w, engine_id e, op kind, double count, std::int64_t rows,
                 std::int64_t n) const {
    const double ns = elementwise_ns(e, kind, rows, n);
    w.busy[static_cast<std::size_t>(e - tensor_engine)] += count * ns;
    w.instructions += count;
    return ns;
  }

  /// One matmul (contraction k, stationary free `rows`, moving free n) or,
  /// `transpose`, a transpose of `rows` partitions x k, without its
  /// stationary load (hidden behind the instruction before).
  [[nodiscard]] double tensor_ns(std::int64_t k, std::int64_t rows, std::int64_t n,
                                 bool transpose = false) const {
    instruction in;
    in.engine = tensor_engine;
    in.kind = transpose ? op::transpose : op::matmul;
    in.type = type_;
    in.partitions = static_cast<std::uint32_t>(transpose ? rows : k);
    in.aux = static_cast<std::uint32_t>(rows);
    in.free = static_cast<std::uint32_t>(transpose ? k : n);
    return cost_rule::tensor_cycles(in, m_) / m_.tensor_ghz;
  }
  /// `count` of them; returns one's time.
  double tensor(stretch& w, double count, std::int64_t k, std::int64_t rows, std::int64_t n,
                bool transpose = false) const {
    const double ns = tensor_ns(k, rows, n, transpose);
    w.busy[0] += count * ns;
    w.instructions += count;
    return ns;
  }

 private:
  const machine& m_;
  dtype type_;
  double queues_;
};

/// What a closed-form model of a plan starts from (swiglu's, moe's and
/// cross_entropy's): the plan, its params, the machine, the element size,
/// the partitions, and a counter with the plan's dma_queues per stream
/// (emit::queues over the lowering's `streams` streams).
template <class Plan>
class closed_model {
 public:
  closed_model(const Plan& pl, const machine& m, int streams = 4)
      : pl_(pl),
        p_(pl.p),
        m_(m),
        b_(dtype_bytes(pl.p.type)),
        parts_(m.partitions),
        c_(m, pl.p.type, std::clamp(pl.p.queues, 1, dma_queue_count / streams)) {}

 protected:
  const Plan& pl_;
  const decltype(Plan::p)& p_;
  const machine& m_;
  std::int64_t b_, parts_;
  counter c_;
};

}  // namespace tessel::sim::steady
