// cross_entropy_plan.hpp: the plan of the cross_entropy workload
// (cross_entropy.cpp), read by its lowering and its steady-state model
// (cross_entropy_steady.cpp).
#pragma once

#include "../../machine.hpp"
#include "../../program.hpp"
#include "../../workload.hpp"

#include <cstdint>
#include <optional>

namespace tessel::sim::ce {

struct params {
  std::int64_t tokens = 0, d_model = 0, vocab = 0;
  dtype type = dtype::bf16;
  std::int64_t token_tile = 128, vocab_chunk = 512, mm_k = 128, mm_n = 512;
  bool vocab_outer = false;  ///< order (v, t): W chunks resident, x tiles streamed
  int bufs = 2, queues = 1;
  engine_id max_engine = vector_engine, exp_engine = scalar_engine, pick_engine = vector_engine;
};

/// The sizes the lowering derives from the parameters.
struct plan {
  params p;
  std::int64_t slabs = 1;          ///< contraction tiles (mm_k rows of d_model)
  std::int64_t subs = 1;           ///< 128-token row tiles per token tile
  std::int64_t banks_per_sub = 1;  ///< PSUM banks one row tile's chunk of logits spans
  std::int64_t groups = 1;         ///< banks a unit keeps accumulating at once
  std::int64_t sets = 1;           ///< units whose logits fit PSUM at once
  std::int64_t token_tiles = 1, chunks = 1;
  int x_slots = 1, w_slots = 1;
  std::int64_t x_bytes = 0, w_bytes = 0, scratch_bytes = 0, state_bytes = 0;  ///< per partition
};

/// The steady-state estimate of a plan that lowers (cross_entropy_steady.cpp);
/// nullopt where the replay does not cover it.
[[nodiscard]] std::optional<steady_estimate> estimate_steady(const plan& pl, const machine& m);

}  // namespace tessel::sim::ce
