// The cpu loader's draw of the call judged besides the timing's last
// (backends/cpu/loader_io.hpp, judged_call; docs/gate.md, "Round fourteen"):
// reservoir sampling over the samples, each offering one of its calls after
// its run. Tested on the loader's own code, below the backend: every sample
// holds the kept call with the same odds, the kept outputs are that call's,
// its number counts all the timing's calls, and the same seed draws the same.
#if defined(__GNUC__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"  // the loader's parts this test does not use
#endif
#include "cpu/loader_io.hpp"
#if defined(__GNUC__)
#pragma GCC diagnostic pop
#endif

#include <doctest/doctest.h>

#include <cstdint>
#include <vector>

namespace {

/// The shape of one timing: `warm` warm-up calls, then `samples` runs of
/// `iters` calls, in slots for at most `slots` calls.
struct timing_shape {
  std::uint64_t warm = 3, samples = 8, iters = 5;
  std::size_t slots = 16;
};

/// The kept call of a timing of `shape` under `seed`: each call writes its
/// number into its slot, as a kernel writes its outputs, and each sample is
/// offered after its run. Checks that the kept outputs are the kept call's.
std::uint64_t kept_call(std::uint64_t seed, const timing_shape& shape) {
  judged_seed = seed;
  std::vector<buffer> outputs(1);
  outputs[0].shape = {4};
  output_slots slots;
  slots.map(outputs, {}, shape.slots);
  judged_call judged;
  std::uint64_t calls = shape.warm;
  for (std::uint64_t s = 0; s < shape.samples; ++s, calls += shape.iters) {
    for (std::uint64_t k = 0; k < shape.iters; ++k) {
      auto* y = static_cast<float*>(slots.at(k % slots.used(shape.iters), 0));
      for (int e = 0; e < 4; ++e) y[e] = static_cast<float>(calls + k + 1);  // its number
    }
    judged.offer(slots, outputs, calls, shape.iters);
  }
  REQUIRE(judged.call > 0);
  CHECK(static_cast<const float*>(judged.outputs[0].data)[3] == static_cast<float>(judged.call));
  return judged.call;
}

}  // namespace

TEST_CASE("judged call: every sample holds it with the same odds, never a run's last call") {
  const timing_shape shape;
  std::vector<int> per_sample(shape.samples, 0);
  constexpr int seeds = 4000;
  for (std::uint64_t seed = 1; seed <= seeds; ++seed) {
    const std::uint64_t call = kept_call(seed, shape);
    REQUIRE(call > shape.warm);  // a sample's, not a warm-up call
    const std::uint64_t sample = (call - shape.warm - 1) / shape.iters,
                        in_run = (call - shape.warm - 1) % shape.iters;
    REQUIRE(sample < shape.samples);
    CHECK(in_run + 1 < shape.iters);  // the run's last is not drawn (the last is judged anyway)
    ++per_sample[sample];
    CHECK(kept_call(seed, shape) == call);  // the same seed, the same draw
  }
  // 500 expected of each sample; 4 standard deviations (21) either way.
  for (std::size_t s = 0; s < shape.samples; ++s) {
    INFO("sample ", s + 1);
    CHECK(per_sample[s] > 500 - 84);
    CHECK(per_sample[s] < 500 + 84);
  }
}

TEST_CASE("judged call: with fewer slots than calls, only intact slots are drawn") {
  // Runs of 10 calls in 4 slots: calls 6 to 9 of a run (0-based) keep their
  // slots, the others' were written again; the draw is among 6, 7 and 8.
  timing_shape shape;
  shape.iters = 10;
  shape.slots = 4;
  for (std::uint64_t seed = 1; seed <= 200; ++seed) {
    const std::uint64_t in_run = (kept_call(seed, shape) - shape.warm - 1) % shape.iters;
    CHECK((in_run >= 6 && in_run <= 8));
  }
  // One slot (or one call a run): the run's only intact call is offered.
  shape.slots = 1;
  for (std::uint64_t seed = 1; seed <= 50; ++seed)
    CHECK((kept_call(seed, shape) - shape.warm) % shape.iters == 0);
}
