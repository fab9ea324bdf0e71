// functional.hpp: the simulator's functional mode (docs/simulator.md,
// "Functional mode"). A workload's executor computes a config's outputs on
// the gate's lazily drawn inputs following the same plan its lowering
// times: the tile and block sizes, the accumulation groups, the types each
// step rounds to. This header holds what every executor shares: the base
// class that applies the test-only faults, the dtype mapping, and the probe
// sampling (whole tiles when cheap, else rows x columns inside the first,
// the tail and random interior tiles).
#pragma once

#include "program.hpp"

#include <tessel/gate.hpp>
#include <tessel/random.hpp>

#include <cstdint>
#include <mutex>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

namespace tessel::sim {

/// A deliberate mistake the functional executor makes (sim_options::fault),
/// for the gate's test corpus; the timing never changes.
enum class fault : std::uint8_t {
  none,
  drop_tail,          ///< the loops stop before a partial last tile: its outputs stay 0
  skip_accumulation,  ///< the last accumulation into each output is skipped
  truncate_output,    ///< outputs rounded to a narrower type (bf16 -> fp8, fp32 -> bf16)
  constant_output,    ///< every output element is 0.5
  ignore_input,       ///< the last input is replaced by a fixed tensor of its shape
};
/// "none", "drop_tail", ...; nullopt for an unknown name ("" is none).
[[nodiscard]] std::optional<fault> parse_fault(std::string_view name) noexcept;
[[nodiscard]] std::string_view to_string(fault f) noexcept;

/// The gate's element type of a simulator dtype.
[[nodiscard]] element_type element_of(dtype t) noexcept;

/// A config's functional executor. The workload owns both halves of the
/// gate's contract: the spec (shapes, reference, probes, tolerances) and the
/// trusted executor that computes the schedule's outputs at the probes.
/// Subclasses implement execute(); run() applies the injected fault's
/// generic part (truncate, constant, ignore) around it, and executors apply
/// drop_tail and skip_accumulation where their schedule makes those mistakes.
class functional_kernel : public gate_spec, public sampled_kernel {
 public:
  void inject(fault f) noexcept { fault_ = f; }
  [[nodiscard]] fault injected() const noexcept { return fault_; }

  [[nodiscard]] probe_values run(std::span<const input_tensor> in,
                                 const probe_points& where) const final;

 protected:
  /// The schedule's outputs at `where`.
  [[nodiscard]] virtual probe_values execute(std::span<const input_tensor> in,
                                             const probe_points& where) const = 0;

 private:
  fault fault_ = fault::none;
};

/// What one suite's run read from its inputs, kept for the next call on the
/// same inputs: the gate calls run(), reference() and (for determinism) run()
/// again on one suite, so each input element is drawn once per suite. Keyed
/// by every input's seed and distribution (input_tensor::seed), cleared when
/// they change. Thread-safe: with() holds a lock while `use` runs.
template <class T>
class input_memo {
 public:
  template <class F>
  auto with(std::span<const input_tensor> in, F&& use) const {
    std::vector<std::uint64_t> k;
    k.reserve(2 * in.size());
    for (const auto& t : in) {
      k.push_back(t.seed());
      k.push_back(static_cast<std::uint64_t>(t.kind()));
    }
    const std::lock_guard lock(mutex_);
    if (k != key_) {
      value_ = T{};
      key_ = std::move(k);
    }
    return use(value_);
  }

 private:
  mutable std::mutex mutex_;
  mutable std::vector<std::uint64_t> key_;
  mutable T value_{};
};

/// Up to `want` indices of [0, extent) tiled by `tile`, in priority order:
/// the first and the last index (the first and the tail tile), the other
/// edges of those two tiles,
/// then random indices of random interior tiles, then the rest of the first
/// and last tiles (so a `want` of two tiles' worth covers both whole).
/// Sorted, unique.
[[nodiscard]] std::vector<std::int64_t> pick_indices(std::int64_t extent, std::int64_t tile,
                                                     std::int64_t want, rng& r);

/// Flat row-major indices of the grid rows x cols of a [.., width] tensor.
[[nodiscard]] std::vector<std::int64_t> grid(const std::vector<std::int64_t>& rows,
                                             const std::vector<std::int64_t>& cols,
                                             std::int64_t width);

/// Values the executors may read per run() before sampling gets sparser
/// (about a millisecond of input draws and fp32 arithmetic).
inline constexpr std::int64_t probe_budget = 1 << 13;

}  // namespace tessel::sim
