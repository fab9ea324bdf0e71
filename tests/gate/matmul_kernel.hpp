// matmul_kernel.hpp: a small tiled matmul C = A B exposed as a gated_kernel,
// correct or with one deliberate flaw, for the gate's corpus of wrong
// variants. The schedule mirrors a NeuronCore one: fp32 partial sums per
// (M, N) tile and K tile, accumulated across K tiles (PSUM), then rounded to
// the output type.
#pragma once

#include <tessel/gate.hpp>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string_view>

namespace tessel::test {

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
  nondeterministic,    ///< every other run bumps one element by one ulp
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

class tiled_matmul : public gated_kernel {
 public:
  explicit tiled_matmul(matmul_shape s, flaw f = flaw::none) : s_(s), flaw_(f) {}

  [[nodiscard]] std::vector<tensor_spec> inputs() const override;
  [[nodiscard]] std::vector<tensor_spec> outputs() const override;
  [[nodiscard]] probe_values run(std::span<const input_tensor> in,
                                 const probe_points& where) const override;
  [[nodiscard]] probe_values reference(std::span<const input_tensor> in,
                                       const probe_points& where) const override;
  /// run() calls so far.
  [[nodiscard]] int runs() const noexcept { return runs_.load(); }

 private:
  [[nodiscard]] std::vector<double> compute(std::span<const input_tensor> in) const;

  matmul_shape s_;
  flaw flaw_;
  mutable std::atomic<int> runs_{0};
  mutable std::mutex memo_mutex_;
  mutable probe_values memo_;  ///< hard_coded: the first run's outputs
};

}  // namespace tessel::test
