// matmul_kernel.hpp: a small tiled matmul C = A B for the gate's corpus of
// wrong variants: the spec (shapes, fp64 reference, default tolerance and
// probes), as a backend would own it, and the candidate (a gated_kernel,
// correct or with one deliberate flaw) that returns the whole of C. The
// schedule mirrors a NeuronCore one: fp32 partial sums per (M, N) tile and K
// tile, accumulated across K tiles (PSUM), then rounded to the output type.
#pragma once

#include <tessel/gate.hpp>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string_view>
#include <vector>

namespace tessel::testing {

/// What the kernel gets wrong.
enum class flaw : unsigned char {
  none,
  tail_tiles_dropped,  ///< only whole tiles computed; the M and N tails stay 0
  k_tile_skipped,      ///< the last K tile is never accumulated
  output_as_bf16,      ///< an fp32 output rounded through bf16
  output_as_fp8,       ///< a bf16 output rounded through fp8 e4m3
  constant,            ///< 1 everywhere
  zeros,               ///< 0 everywhere
  ignores_b,           ///< reads B as all ones
  nondeterministic,    ///< every other run bumps one element by one ulp (split-K style: passes)
  arrival_order,       ///< K tiles added in an order that changes every run (atomics: passes)
  unstable,            ///< every other run is off by 1% at one element
  nan_element,         ///< C[123, 45] is NaN
  inf_element,         ///< C[7, 299] is +inf
  hard_coded,          ///< replays the outputs of its first run
  throws,              ///< run() throws
};
[[nodiscard]] std::string_view to_string(flaw f);

struct matmul_shape {
  std::int64_t m = 200, n = 300, k = 260;
  std::int64_t tile_m = 64, tile_n = 128, tile_k = 128;
  element_type in = element_type::bf16;
  element_type out = element_type::fp32;
};

/// What C = A B must be: A [m, k] and B [k, n] of the input type, C [m, n]
/// of the output type, the reference in fp64.
class matmul_spec : public gate_spec {
 public:
  explicit matmul_spec(matmul_shape s) : s_(s) {}
  [[nodiscard]] std::vector<tensor_spec> inputs() const override;
  [[nodiscard]] std::vector<tensor_spec> outputs() const override;
  [[nodiscard]] probe_values reference(std::span<const input_tensor> in,
                                       const probe_points& where) const override;

 private:
  matmul_shape s_;
};

/// The candidate: the tiled schedule of `s`, with one flaw.
class tiled_matmul : public gated_kernel {
 public:
  explicit tiled_matmul(matmul_shape s, flaw f = flaw::none) : s_(s), flaw_(f) {}

  [[nodiscard]] output_values run(std::span<const hidden_input> in) const override;
  /// run() calls so far.
  [[nodiscard]] int runs() const noexcept { return runs_.load(); }
  /// The tiled product of row-major A [m, k] and B [k, n] given as floats
  /// (what the flaws other than the output ones change).
  [[nodiscard]] std::vector<double> compute(const std::vector<float>& a,
                                            const std::vector<float>& b) const;
  [[nodiscard]] const matmul_shape& shape() const noexcept { return s_; }

 private:
  matmul_shape s_;
  flaw flaw_;
  mutable std::atomic<int> runs_{0};
  mutable std::mutex memo_mutex_;
  mutable output_values memo_;  ///< hard_coded: the first run's outputs
};

/// Every element of `t` as a float (exact for every input type).
[[nodiscard]] std::vector<float> floats_of(const hidden_input& t);

/// The fp64 product of row-major A [m, k] and B [k, n] given as values (a
/// callback_gate's reference).
[[nodiscard]] output_values reference_product(const std::vector<std::vector<double>>& in,
                                              const matmul_shape& s);

/// A kernel every class of cheat's cases must still let through.
struct honest_control {
  std::string_view name;
  matmul_shape shape;
  flaw f;
};
/// The honest controls of issue 25: plain, split-K (runs differ in the last
/// bits), atomics (partial sums added in arrival order, new every run), and
/// bf16 outputs; on `s` (its output type replaced for the bf16 one).
[[nodiscard]] std::vector<honest_control> honest_controls(matmul_shape s);

}  // namespace tessel::testing
