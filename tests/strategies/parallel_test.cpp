// tests/strategies/parallel_test.cpp: bo fits its GPs' hyper-parameters from
// several starts at once (gp.cpp) and scores its candidate pool in chunks at
// once (bo.cpp, best_of) on TBB's threads; the trials it proposes must be
// bit-identical with one thread and with several.
#include "harness.hpp"

#include <tessel/bayesian.hpp>

#include <doctest/doctest.h>

#include <tbb/global_control.h>
#include <tbb/task_arena.h>

#include <cmath>

using namespace tessel;
using namespace tessel::testing;

namespace {

/// bo's proposals on the bowl with failures (so both GPs are refitted, from
/// 8 trials on, every doubling), on `threads` threads. A pool of 400 is seven chunks
/// of 64 or more per maximisation; `cost` adds the cost-weighted acquisition
/// (a predicted cost that grows with x).
run_record bo_run(int threads, bool cost) {
  // The process-wide limit may exceed the cores (this machine may have two).
  const tbb::global_control limit(tbb::global_control::max_allowed_parallelism,
                                  static_cast<std::size_t>(threads));
  tbb::task_arena arena(threads);
  return arena.execute([&] {
    CHECK(tbb::this_task_arena::max_concurrency() == threads);
    auto st = make_bo_strategy({.pool_size = 400});
    const auto prepare = [&](fake_context& ctx) {
      if (!cost) return;
      ctx.alpha = 0.5;
      ctx.seconds = [](const space& s, const config& c) {
        return 1.0 + static_cast<double>(s.integer(c, "x"));
      };
    };
    return drive(*st, bowl_space(), bowl_with_failures, 60, 2, 7, std::nullopt, {}, prepare);
  });
}

}  // namespace

TEST_CASE("bo proposes the same trials on one scoring thread and on four") {
  for (const bool cost : {false, true}) {
    CAPTURE(cost);
    const auto serial = bo_run(1, cost);
    const auto parallel = bo_run(4, cost);
    CHECK(serial.problems.empty());
    CHECK(serial.proposals.size() == 60);
    CHECK(parallel.proposals == serial.proposals);
    CHECK(parallel.sources == serial.sources);
  }
}
