// newton_schulz.hpp: what newton_schulz.cpp (the workload: reading,
// planning, lowering) shares with its executor (newton_schulz_functional.cpp)
// and its NKI emitter (newton_schulz_nki.cpp): the parameters, the sizes the
// plan derives, and Muon's quintic coefficients (docs/simulator.md,
// newton_schulz).
#pragma once

#include "../../functional.hpp"
#include "../../machine.hpp"
#include "../../program.hpp"
#include "../../workload.hpp"

#include <tessel/gate.hpp>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>

namespace tessel::sim {

namespace nki {
struct context;
}

namespace ns_detail {

/// The quintic iteration X <- a X + (b A + c A^2) X with A = X X^T, the
/// coefficients of Muon (K. Jordan et al., "Muon: An optimizer for hidden
/// layers in neural networks", 2024, kellerjordan.github.io/posts/muon):
/// chosen to push every singular value of the normalised X into about
/// [0.7, 1.2] in five steps.
inline constexpr double coeff_a = 3.4445, coeff_b = -4.7750, coeff_c = 2.0315;
/// X0 = G / sqrt(||G||_F^2 + norm_eps): the normalisation before the steps.
inline constexpr double norm_eps = 1e-14;

/// The parameters newton_schulz reads.
struct params {
  std::int64_t rows = 0, cols = 0;  ///< G and X: [rows, cols], rows <= cols
  std::int64_t iterations = 5;
  dtype type = dtype::bf16;
  std::int64_t mm_n = 512;          ///< moving free size of a matmul (columns of one PSUM group)
  bool recompute_t = false;         ///< true: X^T by a second product; false: TensorE transposes
  engine_id evict = vector_engine;  ///< drains A and the transposes from PSUM
  int psum_bufs = 2;                ///< PSUM banks in rotation
};

/// The sizes the lowering, the executor and the emitter derive.
struct plan {
  params p;
  std::int64_t row_tiles = 1;  ///< 128-row tiles of X (and of A, B)
  std::int64_t col_tiles = 1;  ///< 128-row tiles of X^T (the contraction of A = X X^T)
  std::int64_t row_groups = 1, col_groups = 1;  ///< mm_n-wide groups of A's and X's columns
  std::int64_t t_width = 512;  ///< X^T columns one PSUM bank holds in fp32 (transposes)
  std::int64_t x_bytes = 0, xt_bytes = 0, a_bytes = 0;  ///< per partition, per slot
};

/// The gate's tolerance of X (newton_schulz_functional.cpp says why): the
/// type's default, 16 units in the last place, and at least 2^-10 (bf16:
/// 2^-4, fp32: 2^-10).
[[nodiscard]] inline double tolerance(dtype t, std::int64_t cols) {
  const element_type e = element_of(t);
  return std::max({default_tolerance(e, cols), 16 * unit_roundoff(e), 0x1p-10});
}

/// The steps the functional mode checks: every step runs the same schedule,
/// and two include forming X^T for a next step, so the executor checks two
/// (newton_schulz_functional.cpp says why no more).
inline constexpr std::int64_t functional_steps = 2;

/// The executor of the schedule `pl` on data (newton_schulz_functional.cpp),
/// on a machine of `partitions` partitions.
[[nodiscard]] std::unique_ptr<functional_kernel> make_kernel(const plan& pl,
                                                             std::int64_t partitions);

/// The steady-state screening estimate of the schedule `pl`
/// (newton_schulz_steady.cpp; docs/simulator.md, "Speed").
[[nodiscard]] steady_estimate estimate_steady(const plan& pl, const machine& m);

/// The NKI kernel of the schedule `pl` (newton_schulz_nki.cpp): "" or why not.
[[nodiscard]] std::string emit_nki(const plan& pl, const nki::context& ctx, std::string& out);

}  // namespace ns_detail
}  // namespace tessel::sim
