// swiglu.hpp: what swiglu.cpp (the workload: reading, planning, lowering)
// shares with swiglu_functional.cpp (its schedule on data for the gate), and
// the executor's entry point, which tests call to inject faults
// (docs/simulator.md, swiglu).
#pragma once

#include "../../functional.hpp"
#include "../../machine.hpp"
#include "../../program.hpp"

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
