// Search quality on an easy space: the guided strategies find the single
// optimum of a bowl over three integers and a permutation (9870 configs)
// well within a budget that random search would need ~10x more of (its
// chance to hit the optimum in 600 evaluations is 6%).
#include "harness.hpp"

#include "../core/space_fixtures.hpp"

#include <tessel/strategies.hpp>

#include <doctest/doctest.h>

#include <algorithm>

using namespace tessel;
using namespace tessel::testing;

namespace {

void check_finds_optimum(const std::string& name, std::size_t budget, std::size_t batch) {
  const auto s = bowl_space();
  REQUIRE(s.count() == 9870);
  for (std::uint64_t seed = 1; seed <= 8; ++seed) {
    CAPTURE(name);
    CAPTURE(seed);
    auto st = make_strategy(name);
    const auto run = drive(*st, s, bowl, budget, batch, seed, 1.0);
    INFO(name << " seed " << seed << ": best " << run.best.value_or(-1) << " after "
              << run.evaluations_to_best);
    CHECK(run.problems.empty());
    REQUIRE(run.best.has_value());
    CHECK(*run.best == doctest::Approx(1.0));
  }
}

}  // namespace

TEST_CASE("local search finds the bowl's optimum") { check_finds_optimum("local", 250, 1); }
TEST_CASE("local search finds the bowl's optimum in batches") {
  check_finds_optimum("local", 250, 4);
}
TEST_CASE("annealing finds the bowl's optimum") { check_finds_optimum("annealing", 400, 1); }
TEST_CASE("annealing finds the bowl's optimum in batches") {
  check_finds_optimum("annealing", 400, 4);
}
TEST_CASE("ga finds the bowl's optimum one child at a time") { check_finds_optimum("ga", 600, 1); }
TEST_CASE("ga finds the bowl's optimum") { check_finds_optimum("ga", 600, 4); }
TEST_CASE("auto finds the bowl's optimum") { check_finds_optimum("auto", 600, 1); }
TEST_CASE("auto finds the bowl's optimum in batches") { check_finds_optimum("auto", 600, 4); }

TEST_CASE("random search finds the optimum of a small space") {
  const auto s = conditional_space();
  auto st = make_strategy("random");
  const auto run = drive(*st, s, conditional_objective, 66, 1, 9, 10.0);
  CHECK(run.problems.empty());
  CHECK(run.best == doctest::Approx(10.0));
}

TEST_CASE("local search and annealing restart out of a local optimum") {
  // Two basins of about equal size on a 64 x 64 grid: a local minimum of 3
  // at (10, 10) and the global minimum of 1 at (50, 50). Random search would
  // find the global one within 1200 evaluations with probability 0.29 per seed.
  space::definition def;
  std::vector<std::int64_t> values;
  for (std::int64_t v = 0; v < 64; ++v) values.push_back(v);
  def.parameters.push_back(param("x", integers(values)));
  def.parameters.push_back(param("y", integers(values)));
  const space s(std::move(def));
  const objective_fn two_basins = [](const space&, const config& c) {
    const auto x = static_cast<double>(c[0]), y = static_cast<double>(c[1]);
    const double local = (x - 10) * (x - 10) + (y - 10) * (y - 10) + 3;
    const double global = (x - 50) * (x - 50) + (y - 50) * (y - 50) + 1;
    return std::optional<double>(std::min(local, global));
  };
  for (const std::string name : {"local", "annealing"}) {
    std::size_t trapped = 0;  // runs that reached the local minimum, so had to restart
    for (std::uint64_t seed = 1; seed <= 8; ++seed) {
      CAPTURE(name);
      CAPTURE(seed);
      auto st = make_strategy(name);
      const auto run = drive(*st, s, two_basins, 1200, 1, seed, 1.0);
      CHECK(run.problems.empty());
      CHECK(run.best == doctest::Approx(1.0));
      trapped += std::count(run.proposals.begin(), run.proposals.end(), config{10, 10}) > 0 ? 1 : 0;
    }
    CHECK(trapped > 0);
  }
}

TEST_CASE("ga and local weigh cost when the study does, and still find the optimum") {
  const auto s = bowl_space();
  // y >= 8 costs 20 s, the rest 1 s; the optimum (x 11, y 5) is cheap.
  const auto seconds = [](const space& sp, const config& c) {
    return sp.integer(c, "y") >= 8 ? 20.0 : 1.0;
  };
  const auto weighing = [&](double alpha) {
    return [&seconds, alpha](fake_context& ctx) {
      ctx.alpha = alpha;
      ctx.seconds = seconds;
    };
  };
  for (const std::string name : {"ga", "local"}) {
    CAPTURE(name);
    double aware = 0, blind = 0;
    for (std::uint64_t seed = 1; seed <= 4; ++seed) {
      for (double alpha : {1.0, 0.0}) {
        auto st = make_strategy(name);
        const auto run = drive(*st, s, bowl, 200, 1, seed, std::nullopt, {}, weighing(alpha));
        CHECK(run.problems.empty());
        for (const auto& c : run.proposals) (alpha > 0 ? aware : blind) += seconds(s, c);
      }
    }
    MESSAGE(name << ": seconds of 200 proposals, 4 seeds: cost-aware " << aware << ", blind "
                 << blind);
    CHECK(aware < 0.85 * blind);
    // Weighing cost does not stop it finding the optimum (which is cheap here).
    for (std::uint64_t seed = 1; seed <= 4; ++seed) {
      auto st = make_strategy(name);
      const auto run = drive(*st, s, bowl, 600, 1, seed, 1.0, {}, weighing(1.0));
      CHECK(run.best == doctest::Approx(1.0));
    }
  }
}
