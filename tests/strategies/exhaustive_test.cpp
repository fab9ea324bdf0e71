// exhaustive and random: coverage, order, and behaviour at exhaustion.
#include "harness.hpp"

#include "../core/space_fixtures.hpp"

#include <tessel/strategies.hpp>

#include <doctest/doctest.h>

#include <set>

using namespace tessel;
using namespace tessel::testing;

TEST_CASE("exhaustive with shuffle = false proposes every config in rank order") {
  const auto s = bowl_space();
  auto st = make_exhaustive_strategy({.shuffle = false});
  const auto run = drive(*st, s, bowl, 20000, 64, 1);
  CHECK(run.problems.empty());
  CHECK(run.ran_dry);
  REQUIRE(run.proposals.size() == s.count());
  for (std::uint64_t r = 0; r < s.count(); ++r) REQUIRE(run.proposals[r] == s.at(r));
}

TEST_CASE("shuffled exhaustive covers every rank once, in a seeded order") {
  const auto s = bowl_space();
  auto st = make_strategy("exhaustive");  // shuffled by default
  const auto run = drive(*st, s, bowl, 20000, 100, 1);
  CHECK(run.problems.empty());
  CHECK(run.ran_dry);
  REQUIRE(run.proposals.size() == s.count());
  std::set<std::uint64_t> ranks;
  for (const auto& c : run.proposals) ranks.insert(s.rank(c));
  CHECK(ranks.size() == s.count());
  CHECK(run.proposals[0] != s.at(0));  // not rank order (probability 1/9870)
  auto other = make_exhaustive_strategy({.shuffle = true});
  const auto reseeded = drive(*other, s, bowl, 50, 50, 2);
  CHECK(reseeded.proposals !=
        std::vector<config>(run.proposals.begin(), run.proposals.begin() + 50));
}

TEST_CASE("shuffled exhaustive covers spaces of every small size") {
  // The Feistel order's cycle walking, at sizes around powers of two.
  for (std::int64_t n : {1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 33, 64, 100}) {
    CAPTURE(n);
    space::definition def;
    std::vector<std::int64_t> values(static_cast<std::size_t>(n));
    for (std::int64_t v = 0; v < n; ++v) values[static_cast<std::size_t>(v)] = v;
    def.parameters.push_back(param("v", integers(values)));
    const space s(std::move(def));
    auto st = make_exhaustive_strategy({.shuffle = true});
    for (std::uint64_t seed = 0; seed < 5; ++seed) {
      const auto run = drive(
          *st, s, [](const space&, const config& c) { return std::optional<double>(c[0]); }, 1000,
          3, seed);
      CHECK(run.proposals.size() == s.count());
      CHECK(run.problems.empty());
    }
  }
}

TEST_CASE("random search runs dry exactly when the space is exhausted") {
  const auto s = conditional_space();
  auto st = make_random_strategy({.sample_attempts = 1});
  const auto run = drive(*st, s, conditional_objective, 1000, 5, 4);
  CHECK(run.problems.empty());
  CHECK(run.ran_dry);
  CHECK(run.proposals.size() == s.count());
}

TEST_CASE("a batch larger than what is left returns what is left") {
  const auto s = conditional_space();
  for (const auto& name : strategy_names()) {
    CAPTURE(name);
    auto st = make_strategy(name);
    fake_context context(s);
    st->start(s, 1);
    const auto all = st->propose(1000, context);
    CHECK(all.size() == s.count());
    for (const auto& c : all) context.mark_known(s.key(c));
    CHECK(st->propose(10, context).empty());
  }
}
