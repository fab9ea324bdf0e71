// machine.cpp: the model's constants (machine.hpp). The target gives the
// hardware; the table below gives the factors the model calibrates against
// data/calibration/ and the cost rules of docs/neuroncore.md that
// no target carries. Candidates to move into src/target.cpp are marked.
#include "machine.hpp"

#include <tessel/error.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <string_view>

namespace tessel::sim {
namespace {

// Sources:
// [tile]  data/calibration/tensore_tile_shapes_trn2.json (trn2 profiler measurements)
// [dmasz] data/calibration/dma_descriptor_size_trn2.json (trn2 measurements; the
//         NKI DMA overview's A[4,4096] example for the single-engine case)
// [tut]   data/calibration/nki_matmul_tutorial_trn1.json (trn1 tutorial latencies)
// [nc]    docs/neuroncore.md (cost rules, NKI perf guide)
// [sim]   this simulator's own choice, documented in docs/simulator.md
constexpr std::array table{
    // TensorE
    calibrated_constant{"tensor_full_tile_efficiency_percent", 98, 98, "% of issue rate",
                        "[tile] 2048 full 128x128x512 tiles at 98% of peak (445 us vs 437 us); "
                        "trn1 assumed equal"},
    calibrated_constant{"tensor_small_tile_penalty_percent", 44, 44, "% extra time",
                        "[tile] fit: the mixed case (30.8 TFLOPS) runs 33% over max(min(64,M),N); "
                        "the penalty applies to its three under-filled groups; trn1 assumed equal"},
    calibrated_constant{
        "tensor_small_moving_free", 128, 128, "elements",
        "[sim] moving free sizes below this count as small (the measured case has N=64)"},
    calibrated_constant{
        "tensor_stationary_load_speedup", 4, 4, "x",
        "[nc] LoadStationary is up to 4x faster than a multiply of the same free size"},
    // VectorE / ScalarE / GpSimdE cost rules
    calibrated_constant{"elementwise_two_input_cycles_per_element", 2, 2, "cycles",
                        "[nc] two-input instructions cost ~2N cycles"},
    calibrated_constant{"elementwise_reduce_cycles_per_element", 0.5, 0.5, "cycles",
                        "[nc] tensor_reduce ~N/2 for bf16 add/max"},
    calibrated_constant{"elementwise_reciprocal_cycles_per_element", 8, 8, "cycles",
                        "[nc] reciprocal ~8N"},
    calibrated_constant{
        "gpsimd_cycles_per_element", 1, 1, "cycles",
        "[sim] assumed as VectorE (8 cores x 16 partitions = 128 lanes); uncalibrated"},
    // DMA
    calibrated_constant{
        "dma_stream_bytes_per_us_per_engine", 18'626, 25'200, "bytes/us",
        "[dmasz] trn2 fit of t = descriptors*d + bytes/rate to 1 KiB (259 GB/s) and "
        "4 KiB (354 GB/s) per partition; trn1 scaled by 17/23 (the per-engine "
        "figures of docs/targets.md)"},
    calibrated_constant{"dma_descriptor_ns", 56, 22.6, "ns per descriptor per engine",
                        "trn2: [dmasz] same fit; trn1: [tut] fit to the tiled and hoisted stages "
                        "(256 B and 1 KiB rows move at about the same ~100 GB/s there)"},
    calibrated_constant{"dma_issue_ns", 400, 600, "ns per transfer, holding its queue",
                        "trn2: [nc] hardware-generated descriptors ~600 ns per instruction; "
                        "trn1: [tut] fit to the tiled and hoisted stages"},
    calibrated_constant{"dma_queue_pipelined", 0, 1, "0/1",
                        "trn2: [nc] hardware descriptor generation (~600 ns per instruction) "
                        "runs while the queue's previous transfer moves data and while the "
                        "transfer waits on its semaphore; trn1: [tut] the tutorial's stages fit "
                        "a queue that issues and moves one transfer at a time"},
    calibrated_constant{"hbm_bytes_per_us_per_core", 410'000, 362'500, "bytes/us",
                        "[nc] the chip's HBM bandwidth over its physical cores: trn1 820 GB/s / 2, "
                        "trn2 2.9 TB/s / 8; shared by every transfer that touches HBM"},
    // the modelled compile cost
    calibrated_constant{"compile_base_s", 0.002, 0.002, "s",
                        "[sim] fixed cost of one modelled compile"},
    calibrated_constant{"compile_per_instruction_s", 2e-6, 2e-6, "s per instruction",
                        "[sim] grows with the lowered program's instruction count"},
};

/// Target constants the model cannot work without.
constexpr std::array required_target_constants{
    "partitions",
    "sbuf_bytes_per_partition",
    "psum_banks",
    "psum_bank_bytes",
    "matmul_max_contraction",
    "matmul_max_stationary_free",
    "matmul_max_moving_free",
    "tensor_clock_mhz",
    "vector_clock_mhz",
    "scalar_clock_mhz",
    "gpsimd_clock_mhz",
    "tensor_min_instruction_cycles",
    "fp32_matmul_cost_factor",
    "vector_min_instruction_cycles",
    "vector_static_overhead_cycles",
    "dma_engines",
    "dma_partitions_per_engine",
    "dma_bytes_per_us_per_engine",
    "dma_fixed_latency_ns",
};

using value_map = std::map<std::string, double, std::less<>>;

/// The column of the table for `t`: its name, else its base, else trn2.
bool use_trn1_column(const target& t) {
  if (t.name == "trn1") return true;
  if (t.name == "trn2") return false;
  return t.base == "trn1";
}

value_map collect(const target& t, const value_map& overrides) {
  value_map values;
  for (const auto& [name, value] : t.constants) values[name] = static_cast<double>(value);
  const bool trn1 = use_trn1_column(t);
  for (const auto& row : table)
    if (!values.contains(row.name)) values[row.name] = trn1 ? row.trn1 : row.trn2;
  for (const auto& [name, value] : overrides) {
    if (!values.contains(name))
      throw error(
          fmt::format("sim: override '{}' names no constant of target '{}' or of the "
                      "simulator's table (docs/simulator.md)",
                      name, t.name));
    values[name] = value;
  }
  for (const auto* name : required_target_constants)
    if (!values.contains(name))
      throw error(
          fmt::format("sim: target '{}' has no constant '{}'; the NeuronCore simulator "
                      "needs a trn1- or trn2-like target",
                      t.name, name));
  return values;
}

double get(const value_map& v, std::string_view name, double fallback) {
  const auto it = v.find(name);
  return it == v.end() ? fallback : it->second;
}

}  // namespace

std::span<const calibrated_constant> calibrated_constants() noexcept { return table; }

machine resolve_machine(const target& t, const value_map& overrides) {
  const value_map v = collect(t, overrides);
  machine m;
  m.target_name = t.name;
  m.cores = std::max(1, static_cast<int>(get(v, "lnc", 1)));
  m.partitions = static_cast<int>(get(v, "partitions", 128));
  m.sbuf_bytes_per_partition = static_cast<std::int64_t>(get(v, "sbuf_bytes_per_partition", 0));
  m.psum_banks = static_cast<int>(get(v, "psum_banks", 8));
  m.psum_bank_bytes = static_cast<std::int64_t>(get(v, "psum_bank_bytes", 2048));
  m.max_contraction = static_cast<int>(get(v, "matmul_max_contraction", 128));
  m.fp8_max_contraction = static_cast<int>(get(v, "matmul_fp8_max_contraction", m.max_contraction));
  m.max_stationary_free = static_cast<int>(get(v, "matmul_max_stationary_free", 128));
  m.max_moving_free = static_cast<int>(get(v, "matmul_max_moving_free", 512));

  m.tensor_ghz = get(v, "tensor_clock_mhz", 0) / 1000.0;
  m.vector_ghz = get(v, "vector_clock_mhz", 0) / 1000.0;
  m.scalar_ghz = get(v, "scalar_clock_mhz", 0) / 1000.0;
  m.gpsimd_ghz = get(v, "gpsimd_clock_mhz", 0) / 1000.0;

  m.tensor_min_cycles = get(v, "tensor_min_instruction_cycles", 64);
  m.fp32_cost_factor = get(v, "fp32_matmul_cost_factor", 4);
  m.fp8_speedup = get(v, "fp8_matmul_speedup", 1);
  m.full_tile_efficiency = get(v, "tensor_full_tile_efficiency_percent", 100) / 100.0;
  m.small_tile_penalty = get(v, "tensor_small_tile_penalty_percent", 0) / 100.0;
  m.small_moving_free = get(v, "tensor_small_moving_free", 128);
  m.stationary_load_speedup = get(v, "tensor_stationary_load_speedup", 4);
  m.warmup_ns = get(v, "tensor_warmup_ns", 0);
  m.warmup_start = get(v, "tensor_warmup_start_percent", 100) / 100.0;

  m.elementwise_min_cycles = get(v, "vector_min_instruction_cycles", 64);
  m.elementwise_overhead_cycles = get(v, "vector_static_overhead_cycles", 60);
  m.dependent_instruction_cycles = get(v, "vector_dependent_instruction_cycles", 100);
  m.perf_mode_max_speedup = get(v, "vector_perf_mode_max_speedup", 1);
  m.gpsimd_start_cycles = get(v, "gpsimd_start_cycles", 150);
  m.gpsimd_cycles_per_element = get(v, "gpsimd_cycles_per_element", 1);
  m.two_input_cycles_per_element = get(v, "elementwise_two_input_cycles_per_element", 2);
  m.reduce_cycles_per_element = get(v, "elementwise_reduce_cycles_per_element", 0.5);
  m.reciprocal_cycles_per_element = get(v, "elementwise_reciprocal_cycles_per_element", 8);
  m.vector_scalar_share_psum = get(v, "vector_scalar_share_psum", 0) != 0;
  m.vector_gpsimd_share_sbuf_port = get(v, "vector_gpsimd_share_sbuf_port", 0) != 0;

  m.dma_engines = static_cast<int>(get(v, "dma_engines", 16));
  m.dma_partitions_per_engine = static_cast<int>(get(v, "dma_partitions_per_engine", 8));
  m.dma_stream_bytes_per_ns = get(v, "dma_stream_bytes_per_us_per_engine", 0) / 1000.0;
  m.dma_descriptor_ns = get(v, "dma_descriptor_ns", 0);
  m.dma_issue_ns = get(v, "dma_issue_ns", 0);
  m.dma_fixed_latency_ns = get(v, "dma_fixed_latency_ns", 0);
  m.hbm_bytes_per_ns = get(v, "hbm_bytes_per_us_per_core", 0) / 1000.0;
  m.dma_queue_pipelined = get(v, "dma_queue_pipelined", 1) != 0;
  m.dma_bytes_per_ns = m.dma_engines * get(v, "dma_bytes_per_us_per_engine", 0) / 1000.0;

  // 128 x 128 MACs x 2 FLOP per TensorE cycle (neuroncore.md, "derived"),
  // unless the target states its peak.
  // GFLOP/s = FLOP/ns.
  const double derived_gflops = 2.0 * m.max_contraction * m.max_stationary_free * m.tensor_ghz;
  m.bf16_peak_flops_per_ns = get(v, "bf16_peak_gflops", derived_gflops);
  // a logical core's target states the peak of all its physical cores; the
  // model times one physical core (trn2_lnc2, docs/simulator.md)
  if (v.contains("bf16_peak_gflops")) m.bf16_peak_flops_per_ns /= m.cores;

  m.topo = topology_of(v);

  m.compile_base_s = get(v, "compile_base_s", 0);
  m.compile_per_instruction_s = get(v, "compile_per_instruction_s", 0);

  if (m.tensor_ghz <= 0 || m.vector_ghz <= 0 || m.scalar_ghz <= 0 || m.gpsimd_ghz <= 0)
    throw error(fmt::format("sim: target '{}' has a clock of 0 MHz", t.name));
  if (m.dma_stream_bytes_per_ns <= 0 || m.dma_engines <= 0 || m.dma_partitions_per_engine <= 0)
    throw error(fmt::format("sim: target '{}' has no DMA bandwidth", t.name));
  if (m.full_tile_efficiency <= 0 || m.full_tile_efficiency > 1)
    throw error("sim: tensor_full_tile_efficiency_percent must be in (0, 100]");
  return m;
}

}  // namespace tessel::sim
