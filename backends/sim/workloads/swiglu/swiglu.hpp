// swiglu.hpp: what swiglu.cpp (the workload: reading, planning, lowering)
// shares with swiglu_functional.cpp (its schedule on data for the gate), and
// the executor's entry point, which tests call to inject faults
// (docs/simulator.md, swiglu).
#pragma once

#include "../../functional.hpp"
#include "../../machine.hpp"
#include "../../program.hpp"
#include "../../workload.hpp"

#include <tessel/config.hpp>
#include <tessel/gate.hpp>
#include <tessel/space.hpp>

#include <cstdint>
#include <memory>
#include <string>

namespace tessel::sim {

namespace nki {
struct context;
}

namespace swiglu_detail {

/// The parameters swiglu reads (swiglu.cpp), shared with its executor.
struct params {
  std::int64_t tokens = 0, d_model = 0, d_ff = 0;
  dtype type = dtype::bf16;
  std::int64_t token_tile = 512, ff_tile = 128, d_tile = 512, mm_k = 128, mm_n = 512;
  int bufs = 2, x_bufs = 2, psum_sets = 2, queues = 1;
  bool fuse_gate_up = false;
  bool fuse_down = false;  ///< down projection per ff block into an fp32 y accumulator
  engine_id silu_engine = scalar_engine, mul_engine = vector_engine, evict = vector_engine;
};

/// The sizes the lowering derives from the parameters.
struct plan {
  params p;
  std::int64_t k_slabs = 1;         ///< contraction tiles of d_model (mm_k rows)
  std::int64_t f_subs = 1;          ///< d_ff sub-tiles of <= 128 rows (h^T rows)
  std::int64_t subs_per_block = 1;  ///< sub-tiles per ff block
  std::int64_t t_subs = 1;          ///< 128-token row tiles of a token tile (down stationaries)
  std::int64_t n_tiles = 1;         ///< moving tiles (mm_n tokens) of a token tile
  std::int64_t down_banks = 1;      ///< PSUM banks one row tile's y block spans
  std::int64_t down_groups = 1, token_tiles = 1, f_blocks = 1, d_blocks = 1;
  std::int64_t x_bytes = 0, gu_bytes = 0, h_bytes = 0, wd_bytes = 0, scratch_bytes = 0,
               stage_bytes = 0, acc_bytes = 0;  ///< per partition
  std::int64_t down_sets = 1;                   ///< y block PSUM sets in rotation (fuse_down)
};

/// The roofline totals: three projections of 2 tokens d_model d_ff FLOPs;
/// x, the weights and y once (swiglu_steady.cpp).
[[nodiscard]] workload_totals totals_of(const params& p);

/// The steady-state estimate of a plan without error, in closed form
/// (swiglu_steady.cpp).
[[nodiscard]] steady_estimate estimate_steady(const plan& pl, const machine& m);

/// The executor of the schedule `p` on data (swiglu_functional.cpp).
[[nodiscard]] std::unique_ptr<functional_kernel> make_kernel(const params& p);

/// The NKI kernel of the schedule `p` (swiglu_nki.cpp): "" or why not.
[[nodiscard]] std::string emit_nki(const params& p, const nki::context& ctx, std::string& out);

}  // namespace swiglu_detail

/// The executor of (s, c) on `m` following swiglu's schedule, or nullptr when
/// (s, c) does not compile. A sim::functional_kernel (faults injectable).
[[nodiscard]] std::unique_ptr<functional_kernel> swiglu_functional(const space& s, const config& c,
                                                                   const machine& m);

}  // namespace tessel::sim
