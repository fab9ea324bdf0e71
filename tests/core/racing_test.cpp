// The racing rule and loop (tessel/race_rule.hpp) and the racer that keeps
// the incumbent (tessel/racing.hpp): exact stopping points on scripted
// samples, and a noisy candidate whose median lands inside its interval.
#include <tessel/error.hpp>
#include <tessel/racing.hpp>

#include <doctest/doctest.h>

#include <cmath>
#include <cstddef>
#include <random>
#include <vector>

namespace {

using namespace tessel;

/// A sampler that answers `values` in order (and fails past their end).
struct scripted {
  std::vector<double> values;
  std::size_t next = 0;
  std::optional<double> operator()() {
    if (next >= values.size()) return std::nullopt;
    return values[next++];
  }
};

race_options small(std::size_t min_repeats, std::size_t max_repeats) {
  race_options o;
  o.min_repeats = min_repeats;
  o.max_repeats = max_repeats;
  return o;
}

}  // namespace

TEST_CASE(
    "racing: the median's confidence interval is the order statistics n/2 -+ 1.96 sqrt(n)/2") {
  const auto one = median_with_interval({3.0});
  CHECK(one.median == 3.0);
  CHECK(one.low == 3.0);
  CHECK(one.high == 3.0);
  std::vector<double> v;
  for (int i = 20; i >= 1; --i) v.push_back(i);  // order does not matter
  const auto mi = median_with_interval(v);
  CHECK(mi.median == 10.5);
  CHECK(mi.low == 6.0);    // floor(10 - 4.38) = 5 (0-based)
  CHECK(mi.high == 15.0);  // ceil(10 + 4.38) - 1 = 14 (0-based)
  CHECK(median_with_interval({}).median == 0);
}

TEST_CASE("racing: the rule stops where it says") {
  const auto o = small(4, 10);
  CHECK(race_decision({1, 1, 1}, 0, o) == race_stop::go_on);  // under min_repeats
  CHECK(race_decision({1, 1, 1, 1}, 0, o) == race_stop::tight_interval);
  CHECK(race_decision({2, 2.1, 2, 2.05}, 1, o) == race_stop::slower_than_incumbent);
  CHECK(race_decision({0.5, 0.52, 0.5, 0.51}, 1, o) == race_stop::faster_than_incumbent);
  CHECK(race_decision({0.9, 1.1, 0.95, 1.05}, 1, o) == race_stop::go_on);  // might beat it
  CHECK(race_decision({0.9, 1.1, 0.9, 1.1, 0.9, 1.1, 0.9, 1.1, 0.9, 1.1}, 1, o) ==
        race_stop::max_repeats);
  auto wide = o;
  wide.margin = 1.5;  // 2.0 is not clearly slower than 1 x (1 + 1.5)
  CHECK(race_decision({2, 2.1, 2, 2.05}, 1, wide) == race_stop::go_on);
  for (const auto s : {race_stop::go_on, race_stop::max_repeats, race_stop::time_limit,
                       race_stop::failed, race_stop::tight_interval})
    CHECK(parse_race_stop(to_string(s)) == s);
  CHECK(!parse_race_stop("soon"));
}

TEST_CASE("racing: a candidate clearly slower than the incumbent stops at min_repeats") {
  racer r(small(3, 20));
  r.offer(1.0);
  r.offer(2.0);  // the incumbent keeps the lower median
  CHECK(r.incumbent() == 1.0);
  scripted slow{{3, 3.1, 2.9, 3, 3, 3, 3, 3}};
  const auto got = r.run(std::ref(slow));
  CHECK(got.stopped == race_stop::slower_than_incumbent);
  CHECK(got.samples.size() == 3);
  // A full re-measurement takes every sample, with no incumbent.
  scripted again{std::vector<double>(20, 3.0)};
  const auto full = r.run(std::ref(again), true);
  CHECK(full.samples.size() == 20);
  CHECK(full.stopped == race_stop::max_repeats);
}

TEST_CASE("racing: a failed sample stops the race as failed, keeping the samples taken") {
  racer r(small(3, 10));
  scripted breaks{{1.0, 1.0}};
  const auto got = r.run(std::ref(breaks));
  CHECK(got.stopped == race_stop::failed);
  CHECK(got.samples.size() == 2);
}

TEST_CASE("racing: a noisy candidate keeps sampling, and its median lies in its interval") {
  // 1 ms with 2% jitter, and one sample in four delayed by 0.5 to 3 ms (a
  // shared machine): the mean is far off, the median is not.
  std::mt19937_64 engine(7);
  std::uniform_real_distribution<double> jitter(0.99e-3, 1.01e-3), delay(0.5e-3, 3e-3);
  std::bernoulli_distribution hit(0.25);
  auto noisy = [&]() -> std::optional<double> {
    return jitter(engine) + (hit(engine) ? delay(engine) : 0.0);
  };
  race_options o = small(5, 40);
  o.target_relative_ci = 0.01;
  racer r(o);
  const auto got = r.run(noisy);
  CHECK(got.samples.size() > 5);  // the outliers widen the interval: racing goes on
  measurement m;
  record_race(m, got);
  const double low = m.metrics.at("ci_low_s"), high = m.metrics.at("ci_high_s");
  CHECK(low <= m.objective);
  CHECK(m.objective <= high);
  CHECK(m.objective == doctest::Approx(1e-3).epsilon(0.03));
  CHECK(m.metrics.at("repeats") == static_cast<double>(got.samples.size()));
  CHECK(m.metrics.at("iqr_s") >= 0);
  CHECK(m.message.find("racing stopped: ") != std::string::npos);
}

TEST_CASE("racing: the time limit stops sampling after at least one sample") {
  race_options o = small(5, 1000);
  o.max_seconds = 1e-9;
  scripted many{std::vector<double>(1000, 1.0)};
  const auto got = race(std::ref(many), 0.0, o);
  CHECK(got.stopped == race_stop::time_limit);
  CHECK(got.samples.size() == 1);
}

TEST_CASE("racing: bad options are named") {
  CHECK_THROWS_WITH_AS(racer(small(0, 3)), "race_options.min_repeats: must be >= 1", options_error);
  CHECK_THROWS_WITH_AS(racer(small(5, 3)), "race_options.max_repeats: must be >= min_repeats",
                       options_error);
  race_options o;
  o.margin = -1;
  CHECK_THROWS_WITH_AS(validate(o), "race_options.margin: must be >= 0", options_error);
}
