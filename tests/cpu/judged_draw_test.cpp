// The cpu loader's draw of the call judged besides the timing's last
// (backends/cpu/loader_io.hpp, judged_call; docs/gate.md, "Round fourteen"):
// reservoir sampling over the samples, each offering one of its calls after
// its run. Tested on the loader's own code, below the backend: every call of
// every sample (a run's last too, since round seventeen) is kept with the
// same odds, the kept outputs are that call's, its number counts all the
// timing's calls, and the same seed draws the same.
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

TEST_CASE("judged call: every call of every sample is kept with the same odds, a run's last too") {
  // Until round seventeen a run's last call was never drawn (the last
  // sample's is judged anyway), so a kernel that skipped only the last call
  // of the runs before the last was never judged on them (docs/gate.md,
  // "Round seventeen"). Now each of the 8 x 5 calls is kept 1 / 40 of the time.
  const timing_shape shape;
  std::vector<int> per_sample(shape.samples, 0), per_call(shape.samples * shape.iters, 0);
  constexpr int seeds = 4000;
  for (std::uint64_t seed = 1; seed <= seeds; ++seed) {
    const std::uint64_t call = kept_call(seed, shape);
    REQUIRE(call > shape.warm);  // a sample's, not a warm-up call
    const std::uint64_t sample = (call - shape.warm - 1) / shape.iters;
    REQUIRE(sample < shape.samples);
    ++per_sample[sample];
    ++per_call[call - shape.warm - 1];
    CHECK(kept_call(seed, shape) == call);  // the same seed, the same draw
  }
  // 500 expected of each sample; 4 standard deviations (21) either way.
  for (std::size_t s = 0; s < shape.samples; ++s) {
    INFO("sample ", s + 1);
    CHECK(per_sample[s] > 500 - 84);
    CHECK(per_sample[s] < 500 + 84);
  }
  // 100 expected of each call, its run's last among them; 4 standard
  // deviations (9.9) either way.
  for (std::size_t c = 0; c < per_call.size(); ++c) {
    INFO("call ", c % shape.iters + 1, " of sample ", c / shape.iters + 1);
    CHECK(per_call[c] > 100 - 40);
    CHECK(per_call[c] < 100 + 40);
  }
}

TEST_CASE("judged call: with fewer slots than calls, only intact slots are drawn") {
  // Runs of 10 calls in 4 slots: calls 6 to 9 of a run (0-based) keep their
  // slots, the others' were written again; the draw is among 6 to 9.
  timing_shape shape;
  shape.iters = 10;
  shape.slots = 4;
  std::vector<int> drawn(shape.iters, 0);
  for (std::uint64_t seed = 1; seed <= 200; ++seed)
    ++drawn[(kept_call(seed, shape) - shape.warm - 1) % shape.iters];
  for (std::uint64_t in_run = 0; in_run < shape.iters; ++in_run) {
    INFO("call ", in_run, " of a run (0-based)");
    CHECK((drawn[in_run] > 0) == (in_run >= 6));
  }
  // One slot (or one call a run): the run's only intact call is offered.
  shape.slots = 1;
  for (std::uint64_t seed = 1; seed <= 50; ++seed)
    CHECK((kept_call(seed, shape) - shape.warm) % shape.iters == 0);
}
