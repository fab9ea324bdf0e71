// machine.hpp: every number the NeuronCore timing model uses, resolved once
// per (target, overrides). Hardware figures come from the target (data:
// src/target.cpp, docs/targets.md); the model's calibrated factors, which no
// target carries yet, come from a table in machine.cpp keyed by target name
// (docs/simulator.md lists each with its source). A target constant of the
// same name overrides a table entry, and the backend's overrides override
// both, so every figure can be changed without touching code.
#pragma once

#include "collectives.hpp"

#include <tessel/target.hpp>

#include <cstdint>
#include <map>
#include <span>
#include <string>

namespace tessel::sim {

/// One row of the calibrated-constant table: the model's factors that the
/// targets do not (yet) carry. Values are per target; `source` says where
/// each comes from.
struct calibrated_constant {
  const char* name;
  double trn1;
  double trn2;
  const char* unit;
  const char* source;
};

/// The table, in a stable order.
[[nodiscard]] std::span<const calibrated_constant> calibrated_constants() noexcept;

/// The resolved model constants. Times in ns, clocks in cycles per ns (GHz).
struct machine {
  std::string target_name;

  /// Physical cores per logical core (the target's `lnc`: trn2_lnc2 has 2).
  /// Every other figure is per physical core.
  int cores = 1;

  // geometry
  int partitions = 128;
  std::int64_t sbuf_bytes_per_partition = 0;
  int psum_banks = 8;
  std::int64_t psum_bank_bytes = 2048;
  int max_contraction = 128;
  int fp8_max_contraction = 128;
  int max_stationary_free = 128;
  int max_moving_free = 512;

  // clocks (GHz = cycles per ns)
  double tensor_ghz = 0, vector_ghz = 0, scalar_ghz = 0, gpsimd_ghz = 0;

  // TensorE
  double tensor_min_cycles = 64;  ///< multiplies issue every max(N, this)
  double fp32_cost_factor = 4;
  double fp8_speedup = 1;              ///< peak FP8 over BF16 (roofline)
  double full_tile_efficiency = 0.98;  ///< issue efficiency of back-to-back full tiles
  double small_tile_penalty = 0;       ///< extra fraction of time for an under-filled tile
  double small_moving_free = 128;      ///< moving free sizes below this are "small"
  double stationary_load_speedup = 4;  ///< LoadStationary vs a multiply of the same free size
  double warmup_ns = 0;                ///< throttle ramp length (0: none)
  double warmup_start = 1;             ///< speed at the start of the ramp (fraction of peak)

  // VectorE / ScalarE / GpSimdE
  double elementwise_min_cycles = 64;
  double elementwise_overhead_cycles = 60;
  double dependent_instruction_cycles = 100;
  double perf_mode_max_speedup = 1;
  double gpsimd_start_cycles = 150;
  double gpsimd_cycles_per_element = 1;
  double two_input_cycles_per_element = 2;
  double reduce_cycles_per_element = 0.5;
  double reciprocal_cycles_per_element = 8;
  bool vector_scalar_share_psum = false;
  bool vector_gpsimd_share_sbuf_port = false;

  // DMA
  int dma_engines = 16;
  int dma_partitions_per_engine = 8;
  double dma_stream_bytes_per_ns = 0;  ///< per engine, once a descriptor is under way
  double dma_descriptor_ns = 0;        ///< per descriptor (contiguous chunk) per engine
  double dma_issue_ns = 0;             ///< per transfer, holds its queue
  double dma_fixed_latency_ns = 0;     ///< trigger to completion, beyond the data phase
  double dma_bytes_per_ns = 0;         ///< the target's nominal aggregate (reports)
  bool dma_queue_pipelined = true;     ///< issue overlaps the previous data phase and the wait
  double hbm_bytes_per_ns = 0;         ///< the core's share of HBM bandwidth (0: no cap)

  // roofline
  double bf16_peak_flops_per_ns = 0;

  /// The ranks collectives span and their links (the target's topology
  /// constants, docs/targets.md): one rank on a one-core target.
  topology topo;

  // the modelled compile cost (sim_backend)
  double compile_base_s = 0;
  double compile_per_instruction_s = 0;

  /// Peak DMA streaming rate of all engines (bytes/ns), capped by the core's
  /// share of HBM: the memory roofline.
  [[nodiscard]] double dma_peak_bytes_per_ns() const noexcept {
    const double engines = dma_stream_bytes_per_ns * dma_engines;
    return hbm_bytes_per_ns > 0 && hbm_bytes_per_ns < engines ? hbm_bytes_per_ns : engines;
  }
};

/// Resolves the model constants for `t`. Calibrated factors come from the
/// row of `t.name`, else of `t.base`, else trn2's (docs/simulator.md).
/// `overrides` may name any constant of the target or of the table (in the
/// target's units). Throws tessel::error naming a required target constant
/// the target lacks (e.g. on `cpu`) or an override that names nothing.
[[nodiscard]] machine resolve_machine(
    const target& t, const std::map<std::string, double, std::less<>>& overrides = {});

}  // namespace tessel::sim
