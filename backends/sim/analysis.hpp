// analysis.hpp: turns one timing into what users read: metrics, the
// roofline, the bottleneck in plain words, and a Perfetto trace.
#pragma once

#include "machine.hpp"
#include "program.hpp"
#include "timing.hpp"
#include "workload.hpp"

#include <tessel/sim.hpp>

#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace tessel::sim {

/// The critical path grouped by resource ("dma" or an engine) and label.
struct resource_share {
  std::string resource;  ///< "dma", "tensor", "vector", "scalar", "gpsimd"
  std::string tag;       ///< "load B", "matmul", ...
  double ns = 0;
  std::string main_phase;  ///< the phase with most of the time ("dma issue", ...)
  double issue_ns = 0, data_ns = 0, latency_ns = 0;  ///< DMA: by phase
};

/// The knob a suggestion tells to move ("raise tile_m ...", "set coalesce =
/// true ...", "try evict = scalar ..."), or "" when it names none.
[[nodiscard]] std::string suggestion_knob(const std::string& suggestion);

class analysis {
 public:
  analysis(const program& p, const timing_result& t, const machine& m);

  [[nodiscard]] double latency_s() const noexcept { return t_.latency_ns * 1e-9; }
  [[nodiscard]] double roofline_s() const noexcept {
    return std::max(compute_ns_, memory_ns_) * 1e-9;
  }
  /// The measurement's metrics (docs/simulator.md lists the keys).
  [[nodiscard]] std::map<std::string, double> metrics() const;
  /// One line: the bottleneck and the distance to the roofline.
  [[nodiscard]] std::string headline() const;
  [[nodiscard]] sim_explanation explanation() const;
  [[nodiscard]] bottleneck bottleneck_info() const;
  /// Suggestions that hold for any workload (roofline, warm-up, small tiles).
  [[nodiscard]] std::vector<std::string> generic_suggestions() const;
  [[nodiscard]] const std::vector<resource_share>& shares() const noexcept { return shares_; }

 private:
  [[nodiscard]] std::string bottleneck_text() const;
  const program& p_;
  const timing_result& t_;
  const machine& m_;
  double compute_ns_ = 0, memory_ns_ = 0;
  std::vector<resource_share> shares_;
};

/// The latency split by what a Neuron profile shows (tessel/model.hpp's
/// time_category): metrics "time_matmul_s" (TensorE on the critical path),
/// "time_elementwise_s" (VectorE, ScalarE, GpSimdE), "time_hbm_s" (DMA issue
/// and data), "time_collective_s" (0: one core) and "time_stall_s" (DMA
/// completion latency and the rest), in seconds, summing to the latency.
[[nodiscard]] std::map<std::string, double> category_split(const timing_result& t);

/// The roofline's two sides in ns: the FLOPs at the peak matmul rate of the
/// compute type, and the minimal HBM bytes at the peak DMA rate.
struct roofline_parts {
  double compute_ns = 0, memory_ns = 0;
};
[[nodiscard]] roofline_parts roofline_of(const workload_totals& t, const machine& m);

[[nodiscard]] inline analysis analyse_run(const program& p, const timing_result& t,
                                          const machine& m) {
  return analysis(p, t, m);
}

/// Chrome/Perfetto trace JSON of a recorded timing (timing_options::record):
/// one thread per engine and used DMA queue, "X" slices in microseconds.
[[nodiscard]] std::string trace_json(const program& p, const timing_result& t,
                                     std::string_view title);

}  // namespace tessel::sim
