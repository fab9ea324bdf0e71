// cost_rules.hpp: what one instruction costs on its engine, from the
// machine's constants: TensorE multiplies and stationary loads, the
// elementwise engines, and a DMA transfer's data phase and engines. The
// event-driven model (timing.cpp) charges these; they are inline so its hot
// loop keeps them inlined. Every rule is stated in docs/simulator.md with its
// source.
#pragma once

#include "machine.hpp"
#include "program.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace tessel::sim {

namespace cost_rule {

[[nodiscard]] inline double clock_ghz(engine_id e, const machine& m) {
  switch (e) {
    case tensor_engine: return m.tensor_ghz;
    case vector_engine: return m.vector_ghz;
    case scalar_engine: return m.scalar_ghz;
    case gpsimd_engine: return m.gpsimd_ghz;
    default: return 1.0;
  }
}

/// TensorE cycles of one multiply (or transpose), without the stationary load.
[[nodiscard]] inline double tensor_cycles(const instruction& in, const machine& m) {
  // transpose: the data is the stationary, the identity streams as moving
  // (free size = the partitions of the input).
  const double moving = in.kind == op::transpose ? in.partitions : in.free;
  const double stationary = in.kind == op::transpose ? in.free : in.aux;
  double cycles = std::max(moving, m.tensor_min_cycles);
  if (in.type == dtype::fp32) cycles *= m.fp32_cost_factor;
  const bool small = in.partitions < static_cast<std::uint32_t>(m.max_contraction) ||
                     stationary < m.max_stationary_free || moving < m.small_moving_free;
  if (small) cycles *= 1.0 + m.small_tile_penalty;
  return cycles / m.full_tile_efficiency;
}

/// TensorE cycles of LoadStationary for a stationary of free size `free`.
[[nodiscard]] inline double stationary_load_cycles(double free, const machine& m) {
  return std::max(free, m.tensor_min_cycles) / m.stationary_load_speedup;
}

[[nodiscard]] inline double elementwise_cycles(const instruction& in, const machine& m,
                                               bool depends_on_previous) {
  double per_element = 1.0;
  switch (in.kind) {
    case op::tensor_tensor: per_element = m.two_input_cycles_per_element; break;
    case op::reduce: per_element = m.reduce_cycles_per_element; break;
    case op::reciprocal: per_element = m.reciprocal_cycles_per_element; break;
    default: break;
  }
  if (in.engine == gpsimd_engine) per_element *= m.gpsimd_cycles_per_element;
  double speedup = 1.0;
  const bool perf_op = in.kind == op::copy || in.kind == op::tensor_scalar;
  if (in.engine == vector_engine && perf_op && (in.flags & flag_sbuf_contiguous) &&
      dtype_bytes(in.type) <= 2)
    speedup = std::min(m.perf_mode_max_speedup, 4.0 / dtype_bytes(in.type));
  const double floor_cycles =
      depends_on_previous ? m.dependent_instruction_cycles : m.elementwise_min_cycles;
  double cycles = std::max(floor_cycles, per_element * in.free / std::max(speedup, 1.0));
  cycles += m.elementwise_overhead_cycles;
  if (in.engine == gpsimd_engine) cycles += m.gpsimd_start_cycles;
  return cycles;
}

}  // namespace cost_rule

/// The duration of one (aggregated) compute instruction at full speed, in ns,
/// ignoring the warm-up throttle and stationary-load exposure.
[[nodiscard]] inline double compute_ns(const instruction& in, const machine& m,
                                       bool depends_on_previous = false) {
  const double ghz = cost_rule::clock_ghz(in.engine, m);
  if (in.engine == tensor_engine) return in.count * cost_rule::tensor_cycles(in, m) / ghz;
  return in.count * cost_rule::elementwise_cycles(in, m, depends_on_previous) / ghz;
}

/// The mask of DMA engines a transfer uses (bit e: engine e).
[[nodiscard]] inline std::uint32_t dma_engine_mask(const instruction& in, const machine& m) {
  const int per = m.dma_partitions_per_engine;
  const int rows = std::max<int>(1, static_cast<int>(in.partitions));
  const int first = in.partition_offset / per;
  const int count = std::min((in.partition_offset + rows - 1) / per - first + 1, m.dma_engines);
  const std::uint64_t run = (std::uint64_t{1} << count) - 1;
  const std::uint64_t shifted = run << (first % m.dma_engines);
  const std::uint64_t all = (std::uint64_t{1} << m.dma_engines) - 1;
  return static_cast<std::uint32_t>((shifted | (shifted >> m.dma_engines)) & all);
}

/// The data-phase work of one DMA transfer on its busiest engine, in ns, when
/// it has the engines to itself.
[[nodiscard]] inline double dma_data_ns(const instruction& in, const machine& m) {
  // Rows on the busiest engine: each engine serves `dma_partitions_per_engine`
  // consecutive partitions (NKI DMA overview).
  const int per = m.dma_partitions_per_engine;
  const int offset_in_group = in.partition_offset % per;
  const int rows = static_cast<int>(in.partitions);
  int busiest = std::min(rows, per - offset_in_group);
  if (rows > per - offset_in_group)
    busiest = std::max(busiest, std::min(per, rows - (per - offset_in_group)));
  // Engines beyond 16 wrap around: more rows per engine.
  const int engines_needed = (offset_in_group + rows + per - 1) / per;
  if (engines_needed > m.dma_engines)
    busiest = static_cast<int>(std::ceil(static_cast<double>(rows) / m.dma_engines));
  const double row_bytes = in.free;
  const double chunk = in.aux > 0 ? std::min<double>(in.aux, row_bytes) : row_bytes;
  const double descriptors_per_row = chunk > 0 ? std::ceil(row_bytes / chunk) : 1.0;
  const double per_row =
      descriptors_per_row * m.dma_descriptor_ns + row_bytes / m.dma_stream_bytes_per_ns;
  return in.count * busiest * per_row;
}

/// The warm-up throttle (trn2): TensorE starts at warmup_start of peak and
/// ramps linearly to full speed over warmup_ns of busy time; it re-engages
/// when its utilization (an exponential average with time constant
/// warmup_ns) falls below 50%. The event model (timing.cpp) and the steady
/// models that time TensorE (attention_steady.cpp, newton_schulz) keep one
/// each, so their latencies agree to the bit.
struct warmup_throttle {
  double ramp = 0;  ///< busy time into the ramp (ns)
  double util = 0;  ///< the utilization average, 0..1

  /// exp(-x) for x >= 0: a short series where x is small (the common case:
  /// one instruction against a 3 us time constant), else the library's.
  [[nodiscard]] static double decay(double x) {
    if (x < 0.125) return 1 - x * (1 - x / 2 * (1 - x / 3 * (1 - x / 4)));
    return x > 40 ? 0.0 : std::exp(-x);
  }

  /// The time WORK_NS of full-speed TensorE work takes when it starts at NOW,
  /// the last TensorE instruction having ended at LAST_END (< 0: none yet).
  double duration(double work_ns, double now, double last_end, const machine& m) {
    const double w = m.warmup_ns;
    if (w <= 0 || m.warmup_start >= 1) return work_ns;
    const double gap = last_end < 0 ? w * 10 : std::max(0.0, now - last_end);
    if (gap > 0) util *= decay(gap / w);
    if (util < 0.5) ramp = 0;
    const double s0 = m.warmup_start;
    double out = work_ns;
    if (ramp < w) {
      const double ramp_left = w - ramp;
      const double slope = (1 - s0) / w;
      const double speed0 = s0 + slope * ramp;
      const double work_in_ramp = speed0 * ramp_left + slope * ramp_left * ramp_left / 2;
      if (work_ns >= work_in_ramp) {
        out = ramp_left + (work_ns - work_in_ramp);
      } else {  // slope/2 t^2 + speed0 t = work
        out = (-speed0 + std::sqrt(speed0 * speed0 + 2 * slope * work_ns)) / slope;
      }
    }
    ramp += out;
    if (util < 0.999) util = 1 - (1 - util) * decay(out / w);
    return out;
  }
};

}  // namespace tessel::sim
