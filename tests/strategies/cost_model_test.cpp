// The cost models of the Bayesian module (strategies/bayesian/,
// docs/bayesian.md and docs/scheduler.md): they start from the backend's
// estimate, learn from observed costs (the GP one also a cost that is not
// log-linear), link run seconds to the objective, learn what failures cost
// apart, and `bo` weighs cost when the study does.
#include "harness.hpp"

#include "../core/space_fixtures.hpp"

#include <tessel/bayesian.hpp>
#include <tessel/error.hpp>
#include <tessel/strategies.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>
#include <vector>

using namespace tessel;
using namespace tessel::testing;

namespace {

using cost_fn = std::function<double(const config&)>;

/// Observes `n` uniform samples of `s`, each costing truth(c) seconds.
void teach(cost_model& cost, const space& s, const cost_fn& truth, int n, rng& random) {
  for (int i = 0; i < n; ++i) {
    const auto c = s.sample(random);
    cost.observe(finished_trial(s, c, 1.0, truth(c)));
  }
}

/// |ln(predicted / true seconds)| at `n` fresh uniform samples (estimate 1 s).
std::vector<double> log_errors(const cost_model& cost, const space& s, const cost_fn& truth, int n,
                               rng& random) {
  std::vector<double> out;
  for (int i = 0; i < n; ++i) {
    const auto c = s.sample(random);
    out.push_back(std::abs(std::log(cost.predict(c, 1.0) / truth(c))));
  }
  return out;
}

double worst(const std::vector<double>& errors) {
  return *std::max_element(errors.begin(), errors.end());
}

}  // namespace

TEST_CASE("the cost model starts from the backend estimate and learns from observed costs") {
  const auto s = bowl_space();
  auto cost = make_cost_model(s);
  rng first(1);
  const auto c0 = s.sample(first);
  CHECK(cost->predict(c0, 3.0) == doctest::Approx(3.0));
  CHECK(cost->predict(c0, 0.0) == doctest::Approx(1.0));  // default_cost_s
  // True cost: 0.1 s * 2^(x / 4); the estimate says 1 s for everything.
  const auto truth = [&](const config& c) {
    return 0.1 * std::exp2(static_cast<double>(s.integer(c, "x")) / 4);
  };
  rng random(6);
  teach(*cost, s, truth, 200, random);
  CHECK(worst(log_errors(*cost, s, truth, 50, random)) < std::log(1.3));
}

TEST_CASE("both cost models learn; the GP follows a cost that is not log-linear") {
  const auto s = bowl_space();
  // A cost valley in x (cheap at x = 8, 30x dearer at the edges) and a
  // doubling with log2 z: ln(cost) is quadratic in x, which no linear model fits.
  const auto truth = [&](const config& c) {
    const double x = static_cast<double>(s.integer(c, "x"));
    const double z = static_cast<double>(s.integer(c, "z"));
    return 0.05 * std::exp(0.06 * (x - 8) * (x - 8)) * z;
  };
  auto held_out_error = [&](cost_model_kind kind, bool choose) {
    auto cost = make_cost_model(s, {.kind = kind, .choose_by_error = choose});
    rng random(11);
    teach(*cost, s, truth, 120, random);
    double squared = 0;
    for (double e : log_errors(*cost, s, truth, 200, random)) squared += e * e;
    return std::sqrt(squared / 200);
  };
  const double gp_error = held_out_error(cost_model_kind::gp, false);
  const double linear_error = held_out_error(cost_model_kind::log_linear, false);
  MESSAGE("held-out rms error of ln(cost): gp " << gp_error << ", log_linear " << linear_error);
  CHECK(gp_error < 0.2);
  CHECK(gp_error < 0.5 * linear_error);
  // Choosing by one-step error keeps both and answers with
  // the GP here, whichever kind was asked for.
  CHECK(held_out_error(cost_model_kind::log_linear, true) == doctest::Approx(gp_error));
  CHECK(held_out_error(cost_model_kind::gp, true) == doctest::Approx(gp_error));
  // The GP keeps at most max_points observations and still predicts well.
  auto capped = make_cost_model(s, {.max_points = 32});
  rng random(12);
  teach(*capped, s, truth, 300, random);
  CHECK(worst(log_errors(*capped, s, truth, 50, random)) < std::log(2.0));
}

TEST_CASE("the run link predicts the run seconds from the objective the study passes") {
  const auto s = bowl_space();
  // Compiling costs 0.2 s * 2^(x / 8); timing runs the kernel 50 times, so
  // the run seconds are 50 x the objective (the bowl, 1 to ~300): the total
  // is dominated by the objective, which a regression on the encoding can
  // only learn from many points, and the surrogate knows.
  const auto compile_s = [&](const config& c) {
    return 0.2 * std::exp2(static_cast<double>(s.integer(c, "x")) / 8);
  };
  const auto measured = [&](const config& c) {
    trial t = finished_trial(s, c, *bowl(s, c));
    t.result.cost.compile_s = compile_s(c);
    t.result.cost.run_s = 50 * t.result.objective;
    return t;
  };
  const auto told = [&](const config& c) {
    return cost_query{1.0, candidate_score{*bowl(s, c), 0.01 * *bowl(s, c), 1.0, 0.0}};
  };
  auto linked = make_cost_model(s);
  auto unlinked = make_cost_model(s, {.run_link_max_sd = 0});
  rng random(5);
  for (int i = 0; i < 40; ++i) {
    CHECK(linked->wants_objective() == (i >= 3));  // three ok trials show the ratio
    const auto t = measured(s.sample(random));
    linked->observe(t);
    unlinked->observe(t);
  }
  CHECK_FALSE(unlinked->wants_objective());
  double linked_error = 0, unlinked_error = 0, ignored_error = 0;
  for (int i = 0; i < 100; ++i) {
    const auto c = s.sample(random);
    const double truth = measured(c).result.cost.total();
    linked_error = std::max(linked_error, std::abs(std::log(linked->predict(c, told(c)) / truth)));
    unlinked_error += std::abs(std::log(unlinked->predict(c, told(c)) / truth)) / 100;
    ignored_error += std::abs(std::log(linked->predict(c, 1.0) / truth)) / 100;
  }
  MESSAGE("|ln(predicted / true)| after 40 trials: linked worst "
          << linked_error << ", unlinked mean " << unlinked_error
          << ", linked without an objective mean " << ignored_error);
  CHECK(linked_error < std::log(1.15));
  CHECK(unlinked_error > 2 * linked_error);
  // Without an objective it is the total's regression, as with the link off.
  CHECK(ignored_error == doctest::Approx(unlinked_error));

  // The prediction is what the config costs when it runs, whatever its
  // P(feasible): a config sure to fail must not look cheap (ok_only).
  const auto c = s.sample(random);
  auto query = told(c);
  const double runs = linked->predict(c, query);
  query.objective->p_feasible = 0;
  CHECK(linked->predict(c, query) == doctest::Approx(runs));
  // With ok_only off it costs its compile seconds plus what failed runs cost (none here).
  auto expected = make_cost_model(s, {.ok_only = false});
  rng again(5);
  for (int i = 0; i < 40; ++i) expected->observe(measured(s.sample(again)));
  CHECK(expected->predict(c, query) == doctest::Approx(compile_s(c)).epsilon(0.15));

  // When run seconds do not follow the objective, the link stays off.
  auto steady = make_cost_model(s);
  for (int i = 0; i < 40; ++i) {
    auto t = measured(s.sample(random));
    t.result.cost.run_s = 5.0;  // a fixed-time benchmark loop
    steady->observe(t);
  }
  CHECK_FALSE(steady->wants_objective());
  const auto d = s.sample(random);
  CHECK(steady->predict(d, told(d)) == doctest::Approx(compile_s(d) + 5.0).epsilon(0.1));
}

TEST_CASE("the run link answers only while the study's predictions of the objective are no worse") {
  const auto s = bowl_space();
  // Compiling costs 0.2 s * 2^(x / 8), running 50 x the objective, as above.
  const auto measured = [&](const config& c, double predicted_objective) {
    trial t = finished_trial(s, c, *bowl(s, c));
    t.result.cost.compile_s = 0.2 * std::exp2(static_cast<double>(s.integer(c, "x")) / 8);
    t.result.cost.run_s = 50 * t.result.objective;
    // What the study predicted for the trial when it dispatched it.
    t.prediction = prediction{predicted_objective, 0.01 * predicted_objective, 1.0, 0.0};
    return t;
  };
  auto told_right = make_cost_model(s, {.choose_by_error = true});
  auto told_wrong = make_cost_model(s, {.choose_by_error = true});
  auto unchosen = make_cost_model(s);
  rng random(7), noise(8);
  for (int i = 0; i < 60; ++i) {
    const auto c = s.sample(random);
    // A surrogate that knows nothing: a prediction unrelated to the config.
    const double wrong = std::exp(5 * noise.uniform01());
    told_right->observe(measured(c, *bowl(s, c)));
    told_wrong->observe(measured(c, wrong));
    unchosen->observe(measured(c, wrong));
  }
  CHECK(told_right->wants_objective());
  CHECK_FALSE(told_wrong->wants_objective());  // the total's regression erred less
  CHECK(unchosen->wants_objective());          // without the choice the link holds regardless
  // A trial the study did not predict from its model does not score the link.
  auto unscored = make_cost_model(s, {.choose_by_error = true});
  for (int i = 0; i < 60; ++i) {
    auto t = measured(s.sample(random), 1.0);
    t.prediction->from = prediction::basis::prior;
    unscored->observe(t);
  }
  CHECK(unscored->wants_objective());
}

TEST_CASE("failures have their own cost model, and a success is priced with both") {
  const auto s = bowl_space();
  // Successes cost 10 s; failures (x >= 12) stop early: 0.1 s * 2^(y / 10).
  const auto failed_s = [&](const config& c) {
    return 0.1 * std::exp2(static_cast<double>(s.integer(c, "y")) / 10);
  };
  const auto measured = [&](const config& c) {
    return s.integer(c, "x") >= 12 ? finished_trial(s, c, std::nullopt, failed_s(c))
                                   : finished_trial(s, c, 1.0, 10.0);
  };
  auto cost = make_cost_model(s);
  rng random(7);
  const auto c0 = s.sample(random);
  // Before any failure, a failure costs what a success does.
  CHECK(cost->predict_failure(c0, {3.0, std::nullopt}) == doctest::Approx(cost->predict(c0, 3.0)));
  std::size_t failures = 0;
  for (int i = 0; i < 60; ++i) {
    const auto t = measured(s.sample(random));
    failures += t.result.ok() ? 0 : 1;
    cost->observe(t);
  }
  REQUIRE(failures >= 10);
  double worst_ok = 0, worst_failed = 0;
  for (int i = 0; i < 50; ++i) {
    const auto c = s.sample(random);
    worst_ok = std::max(worst_ok, std::abs(std::log(cost->predict(c, 1.0) / 10.0)));
    worst_failed =
        std::max(worst_failed, std::abs(std::log(cost->predict_failure(c, {}) / failed_s(c))));
  }
  MESSAGE("|ln(predicted / true)| worst: successes " << worst_ok << ", failures " << worst_failed);
  CHECK(worst_ok < std::log(1.2));  // ok_only: the cheap failures do not pull it down
  CHECK(worst_failed < std::log(1.5));

  // (p ok + (1 - p) failed) / p: ok / p when failures cost as much, ok when
  // they are free, and p is floored.
  CHECK(price_per_success(0.5, 10.0, 10.0) == doctest::Approx(20.0));
  CHECK(price_per_success(0.5, 10.0, 0.0) == doctest::Approx(10.0));
  CHECK(price_per_success(0.25, 1.0, 100.0) == doctest::Approx(301.0));
  CHECK(price_per_success(1.0, 4.0, 1e9) == doctest::Approx(4.0));
  CHECK(price_per_success(0.0, 1.0, 1.0, 0.01) == doctest::Approx(100.0));
}

TEST_CASE("bo weighs cost when the study does: EI per second, and a cheaper initial design") {
  const auto s = bowl_space();
  // y >= 8 costs 20 s, the rest 1 s; the optimum (x 11, y 5) is cheap.
  const auto seconds = [](const space& sp, const config& c) {
    return sp.integer(c, "y") >= 8 ? 20.0 : 1.0;
  };
  // A clearly cheaper initial design: 10 initial samples, each the cheapest
  // of 4 draws at alpha 1 (the default is 5 samples, the cheaper of 2).
  auto spent = [&](double alpha, std::uint64_t seed) {
    auto st = make_bo_strategy({.initial_samples = 10, .initial_draws = 4});
    const auto run = drive(*st, s, bowl, 60, 1, seed, std::nullopt, {}, [&](fake_context& ctx) {
      ctx.alpha = alpha;
      ctx.seconds = seconds;
    });
    CHECK(run.problems.empty());
    double total = 0, initial = 0;
    for (std::size_t i = 0; i < run.proposals.size(); ++i) {
      total += seconds(s, run.proposals[i]);
      if (i < 10) initial += seconds(s, run.proposals[i]);
    }
    return std::pair{total, initial};
  };
  double aware = 0, blind = 0, aware_initial = 0, blind_initial = 0;
  for (std::uint64_t seed : {1, 2, 3}) {
    const auto [a, ai] = spent(1.0, seed);
    const auto [b, bi] = spent(0.0, seed);
    aware += a;
    blind += b;
    aware_initial += ai;
    blind_initial += bi;
  }
  MESSAGE("seconds of 60 proposals, 3 seeds: cost-aware " << aware << ", EI alone " << blind
                                                          << " (initial: " << aware_initial << ", "
                                                          << blind_initial << ")");
  CHECK(aware < 0.8 * blind);
  CHECK(aware_initial < 0.6 * blind_initial);
  // Weighing cost does not stop it finding the optimum (which is cheap here).
  auto st = make_bo_strategy();
  const auto run = drive(*st, s, bowl, 150, 1, 4, 1.0, {}, [&](fake_context& ctx) {
    ctx.alpha = 1.0;
    ctx.seconds = seconds;
  });
  CHECK(run.best == doctest::Approx(1.0));
}

TEST_CASE("bo ranks by the gittins index when the study's rule is gittins: cheaper, still finds") {
  const auto s = bowl_space();
  // y >= 8 costs 20 s, the rest 1 s; the optimum (x 11, y 5) is cheap.
  const auto seconds = [](const space& sp, const config& c) {
    return sp.integer(c, "y") >= 8 ? 20.0 : 1.0;
  };
  // Seconds of the model's proposals (after the 10 initial samples).
  auto spent = [&](double alpha, double rate, std::uint64_t seed) {
    auto st = make_bo_strategy({.initial_samples = 10});
    const auto run = drive(*st, s, bowl, 60, 1, seed, std::nullopt, {}, [&](fake_context& ctx) {
      ctx.alpha = alpha;
      ctx.gittins = rate;
      ctx.seconds = seconds;
    });
    CHECK(run.problems.empty());
    double total = 0;
    for (std::size_t i = 10; i < run.proposals.size(); ++i) total += seconds(s, run.proposals[i]);
    return total;
  };
  double gittins = 0, cooled = 0, blind = 0;
  for (std::uint64_t seed : {1, 2, 3}) {
    gittins += spent(1.0, 0.01, seed);
    cooled += spent(1.0, 0.0, seed);
    blind += spent(0.0, 0.0, seed);
  }
  MESSAGE("seconds of the model's 50 proposals, 3 seeds: gittins "
          << gittins << ", log EI - ln cost " << cooled << ", EI alone " << blind);
  CHECK(gittins < 0.8 * blind);
  auto st = make_bo_strategy();
  const auto run = drive(*st, s, bowl, 150, 1, 4, 1.0, {}, [&](fake_context& ctx) {
    ctx.alpha = 1.0;
    ctx.gittins = 0.01;
    ctx.seconds = seconds;
  });
  CHECK(run.best == doctest::Approx(1.0));
}
