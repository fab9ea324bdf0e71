// dma_sharing.hpp: the DMA data phases in flight sharing the 16 DMA engines
// (part of the event model, timing.cpp). Each active transfer progresses at
// 1/n of its busiest engine, n = the transfers using it (the round robin
// between queues of the NKI DMA overview), and every transfer that reads or
// writes HBM is slowed together when their bytes per ns would exceed the
// core's share of HBM. One predicted time stands for the earliest end.
// docs/simulator.md, "DMA", states the rules.
#pragma once

#include "machine.hpp"

#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

namespace tessel::sim {

class dma_sharing {
 public:
  /// Starts a run of a program of n instructions on `m` at time 0.
  void reset(std::size_t n, const machine& m);
  /// Set-up: instruction `id` is a transfer on the engines of `mask` moving
  /// `hbm_bytes` to or from HBM (0: none).
  void describe(std::uint32_t id, std::uint32_t mask, double hbm_bytes) {
    mask_[id] = mask;
    hbm_rate_[id] = hbm_bytes;  // until start(): the bytes, then bytes per ns at full rate
  }

  /// The data phase of `id` joins at `now` with `work_ns` of work on its
  /// busiest engine when it has the engines to itself.
  void start(std::uint32_t id, double work_ns, double now);
  /// At next(): the transfers done by then (within 1e-6 ns of work), in the
  /// order they joined; they have left the active set.
  const std::vector<std::uint32_t>& finish_due(double now);

  /// The earliest predicted end of an active data phase (infinity: none).
  [[nodiscard]] double next() const noexcept { return next_; }
  /// Time at least one transfer was in its data phase, and the data-phase
  /// work summed over the DMA engines, up to the last change (ns).
  [[nodiscard]] double active_ns() const noexcept { return active_ns_; }
  [[nodiscard]] double work_ns() const noexcept { return work_ns_; }

 private:
  template <bool collect>
  void advance(double now);
  void reshare(double now);

  std::uint32_t full_mask_ = 0;  ///< the mask of a transfer that uses every DMA engine
  double hbm_bytes_per_ns_ = 0;  ///< the core's HBM share (0: unlimited)
  std::vector<double> remaining_, rate_;
  std::vector<double> hbm_rate_;  ///< bytes per ns at full rate (0: no HBM)
  std::vector<std::uint32_t> mask_, active_, finished_;
  std::size_t not_full_ = 0;  ///< active transfers that do not span every DMA engine
  double next_ = std::numeric_limits<double>::infinity();
  double t_ = 0, active_ns_ = 0, work_ns_ = 0;
};

}  // namespace tessel::sim
