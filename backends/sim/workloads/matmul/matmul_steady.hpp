// matmul_steady.hpp: the steady-state analytic model of the matmul plan
// (docs/simulator.md, "Speed"): the latency in closed form from the plan,
// without lowering it, for screening many candidates per CPU second. The
// event-driven model (timing.cpp on the lowered program) stays the reference
// for detail, traces and explain.
#pragma once

#include "../../machine.hpp"
#include "../../workload.hpp"
#include "matmul_plan.hpp"

namespace tessel::sim::mm {

/// What the model sums per operand stream (A loads, B loads, C stores).
struct stream_totals {
  double transfers = 0;  ///< DMA transfers issued
  double data_ns = 0;    ///< their data-phase work on the busiest DMA engine
  double bytes = 0;
  double blocks = 0;  ///< block loads (A, B) or final C blocks (C)
};

/// The plan's work totals, each summed in closed form over the full and the
/// partial blocks (the pieces the estimate combines; exposed for tests).
struct steady_work {
  double tensor_ns = 0;               ///< multiplies and transposes at full speed
  std::array<double, 4> engine_ns{};  ///< TensorE, VectorE, ScalarE, GpSimdE
  double evict_last_ns = 0;           ///< one evict of the last group (the drain)
  /// A loads, B loads, C stores, and (scale = row) the row scales' loads
  /// issued up front on A's queue.
  std::array<stream_totals, 4> streams{};
  double iterations = 0;  ///< block iterations
  double groups = 0;      ///< PSUM groups per block iteration (average)
  double instructions = 0;
};

/// The totals of a plan without error.
[[nodiscard]] steady_work steady_totals(const plan& pl, const machine& m);
/// The latency estimate of a plan without error.
[[nodiscard]] steady_estimate estimate_steady(const plan& pl, const machine& m);

}  // namespace tessel::sim::mm
