// The strategy contract, for every registered strategy: proposals are valid,
// distinct and unknown; a small space is covered exactly once before a
// strategy runs dry; the same seed gives the same proposals; failures are
// never proposed again.
#include "harness.hpp"

#include <tessel/strategies.hpp>

#include <doctest/doctest.h>

#include <set>

using namespace tessel;
using namespace tessel::testing;

namespace {

std::set<std::uint64_t> keys_of(const space& s, const std::vector<config>& configs) {
  std::set<std::uint64_t> keys;
  for (const auto& c : configs) keys.insert(s.key(c));
  return keys;
}

}  // namespace

TEST_CASE("every strategy covers a small conditional space exactly once, then runs dry") {
  const auto s = conditional_space();
  REQUIRE(s.count() == 66);
  for (const auto& name : strategy_names()) {
    for (std::size_t batch : {1, 4}) {
      CAPTURE(name);
      CAPTURE(batch);
      auto st = make_strategy(name);
      const auto run = drive(*st, s, conditional_objective, 1000, batch, 7);
      CHECK(run.problems.empty());
      if (!run.problems.empty()) MESSAGE(run.problems.front());
      CHECK(run.ran_dry);
      CHECK(run.proposals.size() == 66);
      CHECK(keys_of(s, run.proposals).size() == 66);
      CHECK(run.best == doctest::Approx(10.0));
    }
  }
}

TEST_CASE("every strategy skips configs the study already knows") {
  const auto s = conditional_space();
  std::vector<std::uint64_t> known;
  for (std::uint64_t r = 0; r < s.count(); r += 3) known.push_back(s.key(s.at(r)));
  for (const auto& name : strategy_names()) {
    CAPTURE(name);
    auto st = make_strategy(name);
    const auto run = drive(*st, s, conditional_objective, 1000, 3, 11, std::nullopt, known);
    CHECK(run.problems.empty());
    CHECK(run.ran_dry);
    CHECK(run.proposals.size() == 66 - known.size());
  }
}

TEST_CASE("the same seed and observations give the same proposals") {
  const auto s = bowl_space();
  for (const auto& name : strategy_names()) {
    for (std::size_t batch : {1, 5}) {
      CAPTURE(name);
      CAPTURE(batch);
      auto a = make_strategy(name);
      auto b = make_strategy(name);
      const auto first = drive(*a, s, bowl_with_failures, 150, batch, 42);
      const auto second = drive(*b, s, bowl_with_failures, 150, batch, 42);
      CHECK(first.proposals == second.proposals);
      // start() resets: a strategy reused with the same seed repeats itself.
      const auto again = drive(*a, s, bowl_with_failures, 150, batch, 42);
      CHECK(again.proposals == first.proposals);
      // Another seed, another run (exhaustive too: its order is shuffled).
      const auto other = drive(*b, s, bowl_with_failures, 150, batch, 43);
      CHECK(other.proposals != first.proposals);
    }
  }
}

TEST_CASE("failed configs count as bad and are never proposed again") {
  const auto s = bowl_space();
  for (const std::string name : {"local", "annealing", "ga", "auto"}) {
    CAPTURE(name);
    auto st = make_strategy(name);
    // Every config with x >= 13 fails; the optimum (x = 11) does not.
    const auto run = drive(*st, s, bowl_with_failures, 3000, 2, 5, 1.0);
    CHECK(run.problems.empty());
    CHECK(run.best == doctest::Approx(1.0));
  }
}

TEST_CASE(
    "a strategy whose every evaluation fails still proposes fresh configs until the space is "
    "exhausted") {
  const auto s = conditional_space();
  const objective_fn all_fail = [](const space&, const config&) { return std::optional<double>{}; };
  for (const auto& name : strategy_names()) {
    CAPTURE(name);
    auto st = make_strategy(name);
    const auto run = drive(*st, s, all_fail, 1000, 2, 3);
    CHECK(run.problems.empty());
    CHECK(run.ran_dry);
    CHECK(run.proposals.size() == 66);
    CHECK_FALSE(run.best.has_value());
  }
}
