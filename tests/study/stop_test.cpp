#include <tessel/study.hpp>

#include <doctest/doctest.h>

using namespace tessel;

namespace {

/// 10 evaluations, 5 s of wall time, 30 s of evaluation cost, best 2, 3
/// evaluations since it improved.
progress midway() {
  progress p;
  p.evaluations = 10;
  p.wall_s = 5;
  p.cost_s = 30;
  p.best = 2.0;
  p.since_improvement = 3;
  return p;
}

}  // namespace

TEST_CASE("stop conditions compose with || and &&") {
  const progress p = midway();
  CHECK(stop::evaluations(10)(p));
  CHECK_FALSE(stop::evaluations(11)(p));
  CHECK(stop::target(2.5)(p));
  CHECK_FALSE(stop::target(1.0)(p));
  CHECK(stop::no_improvement(3)(p));

  const auto any = stop::evaluations(100) || stop::wall_seconds(4);
  CHECK(any(p));
  CHECK(any.kind(p) == termination::wall_time);
  CHECK(any.reason(p) == "wall time limit of 4 s reached");
  CHECK(any.evaluations_left(p) == 90u);

  const auto all = stop::evaluations(5) && stop::target(3);
  CHECK(all(p));
  CHECK(all.reason(p) == "5 evaluations done and target objective 3 reached");
  const auto not_all = stop::evaluations(5) && stop::target(1);
  CHECK_FALSE(not_all(p));
  CHECK_FALSE(not_all.evaluations_left(p).has_value());
  CHECK_FALSE(stop::never()(p));
}

TEST_CASE("a stop condition says what fraction of its budget is spent") {
  const progress p = midway();
  CHECK(stop::evaluations(40).spent(p) == doctest::Approx(0.25));
  CHECK(stop::wall_seconds(20).spent(p) == doctest::Approx(0.25));
  CHECK(stop::cost_seconds(60).spent(p) == doctest::Approx(0.5));
  CHECK(stop::cost_seconds(10).spent(p) == doctest::Approx(1.0));  // clamped
  CHECK_FALSE(stop::target(1.0).spent(p).has_value());
  CHECK_FALSE(stop::no_improvement(5).spent(p).has_value());
  // ||: the clause closest to firing; a clause with no budget does not count.
  CHECK((stop::evaluations(40) || stop::cost_seconds(60)).spent(p) == doctest::Approx(0.5));
  CHECK((stop::target(1.0) || stop::evaluations(40)).spent(p) == doctest::Approx(0.25));
  // &&: the clause furthest from firing; unbounded when one clause is.
  CHECK((stop::evaluations(40) && stop::cost_seconds(60)).spent(p) == doctest::Approx(0.25));
  CHECK_FALSE((stop::evaluations(40) && stop::target(1.0)).spent(p).has_value());
}
