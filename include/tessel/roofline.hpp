// tessel/roofline.hpp: the most a machine can do, and the least time a run
// can take on it. A machine is its peak arithmetic rate and the rates bytes
// move at; a run that performs F FLOPs and moves B bytes takes at least
// max(F / peak FLOP/s, B / cache rate, (B - cache bytes) / memory rate).
// Built from a target's constants (trn1, trn2: a NeuronCore's TensorE peak
// and its chip's HBM bandwidth) or measured on the host (a small probe, run
// once per process and cached), for backends that run kernels on the CPU.
// Figures are deliberately generous upper bounds: the gate flags times
// below the floor they give, so a floor must never be above an honest
// time (docs/gate.md, "Time: the physical floor").
#pragma once

#include <tessel/target.hpp>

#include <optional>
#include <string>

namespace tessel {

struct machine_peaks {
  double flops_per_s = 0;         ///< peak arithmetic rate, FLOP/s (0: unknown)
  double memory_bytes_per_s = 0;  ///< main memory (DRAM, HBM) bandwidth, B/s (0: unknown)
  /// Bytes a run may keep closer than main memory between calls (the host's
  /// caches; 0 on a device whose kernels read HBM on every call) and the
  /// rate they move at, B/s.
  double cache_bytes = 0;
  double cache_bytes_per_s = 0;
  std::string source;  ///< where the figures come from ("trn2 constants", "host probe: ...")

  /// Whether any rate is known.
  [[nodiscard]] bool known() const noexcept {
    return flops_per_s > 0 || memory_bytes_per_s > 0 || cache_bytes_per_s > 0;
  }
  /// The least seconds a run that performs `flops` FLOPs and moves `bytes`
  /// bytes can take (0 when nothing is known): the larger of the FLOPs at the
  /// peak rate, the bytes at the cache rate, and the bytes beyond the cache
  /// at the memory rate.
  [[nodiscard]] double floor_s(double flops, double bytes) const noexcept;
};

/// The host's peaks, measured once per process (about 0.1 s) and cached.
/// The clock is measured (a chain of dependent integer additions, the best
/// of several short trials); the FLOPs per cycle follow from the widest
/// vector instructions the CPU supports (two FMA pipes); main memory's rate
/// is a measured single-thread streaming read times the hardware threads.
/// Each is raised by half again as a margin (turbo, measurement noise),
/// main memory's four times (a read measured beside other work varies by
/// 2-3x). Thread-safe.
[[nodiscard]] const machine_peaks& host_peaks();

/// The peaks of `t`: a NeuronCore target (one with bf16_peak_gflops and
/// hbm_bytes_per_us): TensorE's peak times the FP8 speedup, and the chip's
/// HBM bandwidth; `cpu` (or a target based on it): host_peaks(); nullopt
/// for any other target.
[[nodiscard]] std::optional<machine_peaks> peaks_of(const target& t);

}  // namespace tessel
