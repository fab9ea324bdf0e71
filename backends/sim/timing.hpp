// timing.hpp: the event-driven timing model of one NeuronCore. Each engine
// executes its stream in program order; an instruction starts when its engine
// is free, every dependency is done and (trn1) its shared port is free. Costs
// follow shared/hardware/neuroncore.md with the calibrated factors of
// machine.hpp; docs/simulator.md states every rule.
#pragma once

#include "cost_rules.hpp"
#include "machine.hpp"
#include "program.hpp"

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace tessel::sim {

struct timing_options {
  bool record = false;  ///< keep each instruction's start and end (for traces)
};

/// Where time on the critical path went: one row per (phase, label).
struct path_share {
  std::string
      phase;  ///< "tensor", "vector", "scalar", "gpsimd", "dma issue", "dma data", "dma latency"
  std::string tag;  ///< the instruction label ("load B", "matmul", "evict")
  double ns = 0;
};

struct timing_result {
  double latency_ns = 0;
  std::array<double, engine_count> busy_ns{};  ///< per engine; a queue counts issue and data phases
  double dma_active_ns = 0;                    ///< time at least one transfer is in its data phase
  double dma_work_ns = 0;                      ///< data-phase work summed over the DMA engines
  double hbm_read_bytes = 0, hbm_write_bytes = 0;
  double sbuf_dma_bytes = 0;       ///< bytes DMA moved into or out of SBUF
  double psum_write_bytes = 0;     ///< bytes TensorE wrote to PSUM
  std::uint64_t instructions = 0;  ///< issued, counting aggregation
  double tensor_ideal_ns = 0;   ///< TensorE time at full speed without small-tile or warm-up losses
  double tensor_warmup_ns = 0;  ///< TensorE time lost to the warm-up throttle
  /// When the program reaches its (last) core barrier (program::barriers): the
  /// barrier's start on this core alone; -1 without one. sim_backend adds the
  /// wait for the other cores to latency_ns (wait_at_barrier).
  double barrier_ns = -1;
  std::vector<path_share> critical_path;  ///< sorted by time, largest first; sums to latency_ns

  /// With timing_options::record: per instruction, in ns.
  std::vector<double> start_ns, end_ns;
  std::vector<double> data_start_ns;  ///< DMA: when the data phase began (else = start)
  std::vector<double> done_ns;        ///< when dependents may start (DMA: after the fixed latency)

  [[nodiscard]] double busy_fraction(engine_id e) const noexcept {
    return latency_ns > 0 ? busy_ns[e] / latency_ns : 0;
  }
};

/// Times `p` on `m`. Throws std::logic_error if the program deadlocks (a
/// dependency that can never be satisfied: a workload bug).
[[nodiscard]] timing_result time_program(const program& p, const machine& m,
                                         const timing_options& options = {});

}  // namespace tessel::sim
