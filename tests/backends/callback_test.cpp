#include "backend_fixtures.hpp"

#include <tessel/backends.hpp>
#include <tessel/error.hpp>

#include <doctest/doctest.h>

#include <span>
#include <stdexcept>
#include <vector>

using namespace tessel;

TEST_CASE("callback: a function returning the objective is timed as run cost") {
  const auto s = testing::small_space();
  callback_backend b(
      [&s](const config& c) { return static_cast<double>(s.integer(c, "tile_m")) / 2; });
  b.prepare(s);
  const auto c = testing::small_config(s, 64, "m,n,k", false, "alpha");
  const auto m = b.evaluate(s, c);
  CHECK(m.ok());
  CHECK(m.objective == 32);
  CHECK(m.cost.run_s >= 0);
  CHECK(m.cost.compile_s == 0);
  CHECK(b.name() == "callback");
  CHECK(b.concurrency() == 1);
  CHECK(b.estimated_cost(s, c) == 1.0);
  // Issue 15: a callback study was labelled with the space's default target.
  CHECK(b.hardware() == "host");
  callback_options on_device;
  on_device.target = "trn2";
  CHECK(callback_backend([](const config&) { return 1.0; }, on_device).hardware() == "trn2");
}

TEST_CASE("callback: a function returning a measurement is passed through") {
  const auto s = testing::small_space();
  callback_options options;
  options.name = "mine";
  options.concurrency = 4;
  options.cost_estimate = [](const space& sp, const config& c) {
    return 0.001 * static_cast<double>(sp.integer(c, "tile_m"));
  };
  callback_backend b(
      [](const space& sp, const config& c) {
        if (sp.value_of(c, "kind").symbol == "beta")
          return measurement::failure(status::compile_error, "no beta", cost{0.5, 0, 0});
        return measurement::success(1.0);
      },
      options);
  CHECK(b.name() == "mine");
  CHECK(b.concurrency() == 4);
  const auto beta = testing::small_config(s, 128, "k,m,n", true, "beta", 3);
  CHECK(b.estimated_cost(s, beta) == doctest::Approx(0.128));
  const auto m = b.evaluate(s, beta);
  CHECK(m.status == status::compile_error);
  CHECK(m.message == "no beta");
  CHECK(m.cost.compile_s == 0.5);
  CHECK(b.evaluate(s, testing::small_config(s, 32, "m,n,k", false, "alpha")).ok());

  callback_backend config_only([](const config&) { return measurement::success(3.0); });
  CHECK(config_only.evaluate(s, beta).objective == 3.0);
}

TEST_CASE("callback: exceptions propagate; empty functions and zero concurrency are misuse") {
  const auto s = testing::small_space();
  callback_backend b([](const config&) -> double { throw std::runtime_error("device lost"); });
  CHECK_THROWS_WITH_AS(b.evaluate(s, *s.configs().begin()), "device lost", std::runtime_error);
  CHECK_THROWS_AS(callback_backend(std::function<double(const config&)>{}), options_error);
  callback_options zero;
  zero.concurrency = 0;
  CHECK_THROWS_AS(callback_backend([](const config&) { return 1.0; }, zero), options_error);
}

TEST_CASE("callback: with racing, each call is one sample; the objective is their median") {
  const auto s = testing::small_space();
  int calls = 0;
  callback_options o;
  o.racing = race_options{4, 12, 0.0, 0.001, 0.0};
  callback_backend b(
      [&calls](const config&) -> double {
        ++calls;
        return calls % 4 == 0 ? 9.0 : 1.0 + 0.01 * (calls % 3);  // every fourth call an outlier
      },
      o);
  const auto m = b.evaluate(s, testing::small_config(s, 64, "k,m,n", true, "beta", 3));
  REQUIRE(m.ok());
  CHECK(calls == 12);
  CHECK(m.samples.size() == 12);
  CHECK(m.objective == doctest::Approx(1.015));  // 1.00 x3, 1.01 x3, 1.02 x3, 9 x3
  CHECK(m.metrics.at("ci_low_s") <= m.objective);
  CHECK(m.metrics.at("ci_high_s") >= m.objective);
  CHECK(m.metrics.at("repeats") == 12);
  const auto again = *b.remeasure(s, testing::small_config(s, 64, "k,m,n", true, "beta", 3));
  CHECK(again.samples.size() == 12);
  // A racing rule broken is named where the caller set it.
  callback_options broken;
  broken.racing = race_options{4, 12, -1.0, 0.001, 0.0};
  CHECK_THROWS_WITH_AS(callback_backend([](const config&) { return 1.0; }, broken),
                       "callback_options::racing.margin: must be >= 0", options_error);
  // No racing: one call, and nothing to re-measure.
  callback_backend once([](const config&) { return 2.0; });
  CHECK(once.evaluate(s, testing::small_config(s, 64, "k,m,n", true, "beta", 3)).samples.empty());
  CHECK(!once.remeasure(s, testing::small_config(s, 64, "k,m,n", true, "beta", 3)));
  // A gated callback's samples are its gate calls: racing it too is named.
  callback_gate g;
  g.inputs = "x:4";
  g.outputs = "y:4";
  g.reference = [](const std::vector<std::vector<double>>& in) { return output_values{in[0]}; };
  CHECK_THROWS_WITH_AS(
      callback_backend([](const space&, const config&,
                          std::span<const hidden_input>) { return output_values{}; },
                       g, o),
      "callback_options::racing: a gated callback is timed by its gate calls (and "
      "callback_gate::timed_calls); racing is for ungated callbacks",
      options_error);
}
