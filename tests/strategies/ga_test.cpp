// The genetic algorithm's operators: order crossover (OX1) keeps
// permutations valid, permutation ranks round-trip, crossover and repair
// give valid configs of a constrained, conditional space.
#include "harness.hpp"
#include "strategies/common.hpp"
#include "strategies/ga_operators.hpp"

#include "../core/space_fixtures.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <numeric>

using namespace tessel;
using namespace tessel::testing;

TEST_CASE("order crossover matches Davis's worked example") {
  // Parents 1 2 3 | 4 5 6 7 | 8 9 and 4 5 2 | 1 8 7 6 | 9 3 (elements minus one),
  // cut after positions 2 and 6: the child is 2 1 8 4 5 6 7 9 3.
  const std::vector<std::size_t> first{0, 1, 2, 3, 4, 5, 6, 7, 8};
  const std::vector<std::size_t> second{3, 4, 1, 0, 7, 6, 5, 8, 2};
  const auto child = detail::order_crossover(first, second, 3, 6);
  CHECK(child == std::vector<std::size_t>{1, 0, 7, 3, 4, 5, 6, 8, 2});
}

TEST_CASE(
    "order crossover of random permutations is a permutation keeping the first parent's segment") {
  rng random(5);
  for (int round = 0; round < 500; ++round) {
    const std::size_t n = 1 + random.uniform(8);
    std::vector<std::size_t> a(n), b(n);
    std::iota(a.begin(), a.end(), 0);
    std::iota(b.begin(), b.end(), 0);
    detail::shuffle(a, random);
    detail::shuffle(b, random);
    std::size_t lo = random.uniform(n), hi = random.uniform(n);
    if (lo > hi) std::swap(lo, hi);
    auto child = detail::order_crossover(a, b, lo, hi);
    for (std::size_t i = lo; i <= hi; ++i) CHECK(child[i] == a[i]);
    std::sort(child.begin(), child.end());
    std::vector<std::size_t> identity(n);
    std::iota(identity.begin(), identity.end(), 0);
    CHECK(child == identity);
  }
}

TEST_CASE("permutation_rank inverts domain::permutation") {
  space::definition def;
  const auto d = permutation(def, {"a", "b", "c", "d", "e"});
  for (std::size_t r = 0; r < d.size(); ++r) CHECK(detail::permutation_rank(d.permutation(r)) == r);
}

TEST_CASE("crossover then repair gives valid configs that take after both parents") {
  const auto s = conditional_space();
  rng random(3);
  std::size_t repaired = 0;
  for (int round = 0; round < 2000; ++round) {
    const auto a = s.sample(random), b = s.sample(random);
    auto child = detail::crossover(s, a, b, random);
    // Every parameter comes from a parent, except permutations (OX1 of both).
    for (std::size_t p = 0; p + 1 < s.size(); ++p) CHECK((child[p] == a[p] || child[p] == b[p]));
    if (!s.is_valid(child)) {
      ++repaired;
      child = detail::repair_toward(s, child, a, random);
    }
    CHECK(s.is_valid(child));
  }
  CHECK(repaired > 0);  // the space's `when` and constraint do bite
}

TEST_CASE("repair adopts a condition and the parameter it switches together") {
  const auto s = conditional_space();
  // Parent: home = sbuf (prefetch inactive). Child: home = hbm with prefetch
  // taken from the sbuf parent (inactive): invalid until prefetch is active.
  const config parent{0, config::inactive, 0, 0};
  const config invalid_child{1, config::inactive, 1, 0};
  const config hbm_parent{1, 1, 1, 0};
  REQUIRE(s.is_valid(parent));
  REQUIRE(!s.is_valid(invalid_child));
  REQUIRE(s.is_valid(hbm_parent));
  rng random(1);
  const auto fixed = detail::repair_toward(s, invalid_child, parent, random);
  CHECK(s.is_valid(fixed));
  CHECK(fixed[2] == 1);  // the valid part of the child (tile) is kept
  // Toward a parent where prefetch is active, both change in one pair step.
  const config child2{0, config::inactive, 2, 0};  // sbuf with tile 4: valid as is
  CHECK(detail::repair_toward(s, child2, hbm_parent, random) == child2);
  const config child3{1, 1, 0, 0};  // hbm with prefetch: neither change is valid alone
  CHECK(detail::repair_toward(s, child3, parent, random) == child3);
}

TEST_CASE("ga proposes only valid configs on a constrained conditional space, and breeds") {
  const auto s = conditional_space();
  auto st = make_ga_strategy({.population_size = 6, .tournament_size = 2, .elite_count = 1});
  const auto run = drive(*st, s, conditional_objective, 66, 2, 8);
  CHECK(run.problems.empty());
  CHECK(run.proposals.size() == 66);
}
