// The Bayesian optimization module (strategies/bayesian/, docs/bayesian.md):
// the GP interpolates and its variance behaves, the likelihood gradient is
// right and fitting raises the likelihood, the incremental Cholesky factor
// equals a full one, the permutation kernel is PSD, log-EI is finite where
// EI underflows, the feasibility model learns a failing region, `bo` finds
// the optimum of small spaces reproducibly, and the surrogate and cost model
// say sensible things.
#include "harness.hpp"

#include "../core/space_fixtures.hpp"
#include "strategies/bayesian/acquisition.hpp"
#include "strategies/bayesian/gp.hpp"
#include "strategies/bayesian/model.hpp"

#include <tessel/bayesian.hpp>
#include <tessel/error.hpp>
#include <tessel/strategies.hpp>

#include <doctest/doctest.h>

#include <Eigen/Eigenvalues>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <numbers>
#include <numeric>
#include <set>

using namespace tessel;
using namespace tessel::testing;
using bayes::gp;
using bayes::kernel;
using bayes::kernel_layout;

namespace {

/// x in 0..100: one numeric dim encoded x / 100.
space line_space() {
  space::definition def;
  std::vector<std::int64_t> v(101);
  std::iota(v.begin(), v.end(), 0);
  def.parameters.push_back(param("x", integers(v)));
  return space(std::move(def));
}

/// x, y in 0..20.
space plane_space() {
  space::definition def;
  std::vector<std::int64_t> v(21);
  std::iota(v.begin(), v.end(), 0);
  def.parameters.push_back(param("x", integers(v)));
  def.parameters.push_back(param("y", integers(v)));
  return space(std::move(def));
}

space permutation_space(const std::vector<std::string>& elements) {
  space::definition def;
  def.parameters.push_back(param("order", permutation(def, elements)));
  return space(std::move(def));
}

Eigen::VectorXd point(std::initializer_list<double> values) {
  Eigen::VectorXd f(static_cast<Eigen::Index>(values.size()));
  Eigen::Index i = 0;
  for (double v : values) f[i++] = v;
  return f;
}

/// theta for a kernel of numeric dims only: length scales, signal, noise.
Eigen::VectorXd numeric_theta(std::size_t dims, double length, double signal, double noise) {
  Eigen::VectorXd t(static_cast<Eigen::Index>(dims + 2));
  t.head(static_cast<Eigen::Index>(dims)).setConstant(std::log(length));
  t[static_cast<Eigen::Index>(dims)] = std::log(signal);
  t[static_cast<Eigen::Index>(dims) + 1] = std::log(noise);
  return t;
}

double mean_at(const gp& g, const Eigen::VectorXd& f) { return g.mean(g.cross(g.scaled(f)))[0]; }
double variance_at(const gp& g, const Eigen::VectorXd& f) {
  return g.variance(g.cross(g.scaled(f)).col(0));
}

}  // namespace

TEST_CASE("log-EI matches log(EI) where EI is representable and stays finite below") {
  for (double z = -1.0; z <= 5.0; z += 0.25) {
    const double pdf = std::exp(-0.5 * z * z) / std::sqrt(2 * std::numbers::pi);
    const double direct = std::log(pdf + z * bayes::normal_cdf(z));
    CHECK(bayes::log_h(z) == doctest::Approx(direct).epsilon(1e-12));
  }
  for (double z = -1.5; z >= -25; z -= 0.5) {  // still representable: compare to the direct form
    const double pdf = std::exp(-0.5 * z * z) / std::sqrt(2 * std::numbers::pi);
    const double direct = std::log(pdf + z * bayes::normal_cdf(z));
    if (std::isfinite(direct) && z > -8)
      CHECK(bayes::log_h(z) == doctest::Approx(direct).epsilon(1e-6));
  }
  double previous = bayes::log_h(0.0);
  for (double z : {-1.0, -5.0, -30.0, -40.0, -1e3, -1e5, -1e9}) {
    const double v = bayes::log_h(z);
    CHECK(std::isfinite(v));
    CHECK(v < previous);  // increasing in z
    previous = v;
  }
  // Past the cut-over the asymptote -z^2/2 - log(2 pi)/2 - 2 log|z| holds.
  CHECK(bayes::log_h(-1e3) ==
        doctest::Approx(-0.5e6 - 0.5 * std::log(2 * std::numbers::pi) - 2 * std::log(1e3))
            .epsilon(1e-9));
  CHECK(bayes::erfcx(24.999) == doctest::Approx(bayes::erfcx(25.0)).epsilon(1e-4));
  CHECK(bayes::log_ei(0.0, 1.0, 0.0) ==
        doctest::Approx(std::log(1 / std::sqrt(2 * std::numbers::pi))));
}

TEST_CASE("the log-normal expected gain matches a quadrature") {
  const double mu = std::log(2.0), sd = 0.4, c = 2.2;
  double integral = 0;
  const int steps = 200000;
  for (int i = 0; i < steps; ++i) {  // midpoint rule over g in mu +- 10 sd
    const double g = mu - 10 * sd + (i + 0.5) * 20 * sd / steps;
    const double density =
        std::exp(-0.5 * std::pow((g - mu) / sd, 2)) / (sd * std::sqrt(2 * std::numbers::pi));
    integral += std::max(0.0, c - std::exp(g)) * density * 20 * sd / steps;
  }
  CHECK(bayes::lognormal_ei(mu, sd, c) == doctest::Approx(integral).epsilon(1e-6));
  CHECK(bayes::normal_ei(1.0, 0.0, 3.0) == 2.0);
  CHECK(bayes::lognormal_ei(mu, 0.0, 1.0) == 0.0);
}

TEST_CASE("the GP interpolates a 1-D function; its variance is the noise at data and grows away") {
  const auto s = line_space();
  gp g(kernel(kernel_layout::of(s)), gp::mean_mode::standardize);
  const double noise = 1e-6;
  g.set_theta(numeric_theta(1, 0.15, 1.0, noise));
  for (int i = 0; i <= 6; ++i) {
    const double t = 0.1 * i;  // data on [0, 0.6]
    g.add(point({t}), std::sin(6 * t));
  }
  const double scale2 = g.target_scale() * g.target_scale();
  for (int i = 0; i <= 6; ++i) {
    const double t = 0.1 * i;
    CHECK(mean_at(g, point({t})) == doctest::Approx(std::sin(6 * t)).epsilon(1e-3).scale(1));
    CHECK(variance_at(g, point({t})) <= 2 * noise * scale2);
  }
  // Between data points the variance rises; beyond the data it grows toward the signal.
  CHECK(variance_at(g, point({0.05})) > 10 * noise * scale2);
  double previous = variance_at(g, point({0.6}));
  for (double t : {0.65, 0.7, 0.8, 0.9, 1.0}) {
    const double v = variance_at(g, point({t}));
    CHECK(v > previous);
    previous = v;
  }
  CHECK(previous <= scale2 * (1 + 1e-9));
  CHECK(previous > 0.5 * scale2);
}

TEST_CASE("the GP fitted on a 2-D function predicts held-out points") {
  const auto s = plane_space();
  bayes::model m(s, gp_options{}, 5);
  const auto f = [](double x, double y) {
    return 1 + (x - 0.3) * (x - 0.3) + 2 * (y - 0.6) * (y - 0.6);
  };
  rng random(3);
  for (int i = 0; i < 40; ++i) {
    const auto c = s.sample(random);
    const double x = static_cast<double>(s.integer(c, "x")) / 20,
                 y = static_cast<double>(s.integer(c, "y")) / 20;
    m.observe(finished_trial(s, c, f(x, y)));
  }
  CHECK(m.fits() >= 2);  // at 8 and 16 and 32 observations
  double worst = 0;
  for (int i = 0; i < 20; ++i) {
    const auto c = s.sample(random);
    const double x = static_cast<double>(s.integer(c, "x")) / 20,
                 y = static_cast<double>(s.integer(c, "y")) / 20;
    const auto v = m.view(m.features(c));
    worst = std::max(worst, std::abs(std::exp(v.mean[0]) - f(x, y)) / f(x, y));
  }
  CHECK(worst < 0.05);
}

TEST_CASE("alignment features: a row per integer domain whose alignments differ, and they help") {
  // x in 32, 40, ..., 256 (as dedispersion's block_size_y): 40 is aligned
  // to 8 (2^3), 64 to 64, 256 to 256; w's values are all odd (aligned alike).
  space::definition def;
  std::vector<std::int64_t> xs;
  for (std::int64_t x = 32; x <= 256; x += 8) xs.push_back(x);
  def.parameters.push_back(param("x", integers(xs)));
  def.parameters.push_back(param("w", integers({1, 3, 5, 7})));
  const space s(std::move(def));
  CHECK(kernel_layout::of(s).numeric.size() == 2);
  const auto layout = kernel_layout::of(s, true);
  REQUIRE(layout.numeric.size() == 3);  // x, w and the alignment of x only
  CHECK(layout.numeric[2] == layout.numeric[0]);
  const auto at = [&](std::int64_t x) {
    const config c = s.from_json(R"({"x": )" + std::to_string(x) + R"(, "w": 3})");
    return layout.features_of(s.encode(c))[2];
  };
  CHECK(at(40) == doctest::Approx(0.0));        // 2^3, the least aligned
  CHECK(at(64) == doctest::Approx(3.0 / 5.0));  // 2^6 of 2^3 .. 2^8
  CHECK(at(256) == doctest::Approx(1.0));
  CHECK(at(96) == doctest::Approx(2.0 / 5.0));  // 2^5

  // A kernel that is slower off multiples of 32: with the alignment row the
  // model predicts held-out values better from the same 20 observations
  // (two of every three values; a pattern of period 4 in the value).
  const auto f = [](std::int64_t x) { return x % 32 == 0 ? 2.0 : 3.0; };
  auto error = [&](bool alignment) {
    gp_options o;
    o.alignment_features = alignment;
    bayes::model m(s, o, 5);
    const auto at_x = [&](std::int64_t x) {
      return s.from_json(R"({"x": )" + std::to_string(x) + R"(, "w": 1})");
    };
    for (std::size_t i = 0; i < xs.size(); ++i)
      if (i % 3 != 2) m.observe(finished_trial(s, at_x(xs[i]), f(xs[i])));
    double sum = 0;
    int held = 0;
    for (std::size_t i = 2; i < xs.size(); i += 3, ++held)
      sum += std::abs(std::exp(m.view(m.features(at_x(xs[i]))).mean[0]) - f(xs[i]));
    return sum / held;
  };
  const double plain = error(false), aligned = error(true);
  CAPTURE(plain);
  CAPTURE(aligned);
  CHECK(aligned < 0.5 * plain);
}

TEST_CASE("ordinal features: an unevenly spaced integer domain reads its values' positions") {
  // x as convolution's block_size_x (1, 2, 4, ..., 128 with 48, 96, 112):
  // by value 1 and 8 are 0.055 apart, by position 3 of 10 steps; w is evenly
  // spaced, so its position is its encoded value and it keeps no map.
  space::definition def;
  def.parameters.push_back(param("x", integers({1, 2, 4, 8, 16, 32, 48, 64, 96, 112, 128})));
  def.parameters.push_back(param("w", integers({2, 4, 6, 8})));
  const space s(std::move(def));
  const auto layout = kernel_layout::of(s, false, true);
  REQUIRE(layout.numeric.size() == 2);
  CHECK(layout.mapped[0].value.size() == 11);
  CHECK(layout.mapped[1].value.empty());
  const auto features = [&](std::int64_t x, std::int64_t w) {
    const config c =
        s.from_json(R"({"x": )" + std::to_string(x) + R"(, "w": )" + std::to_string(w) + "}");
    return layout.features_of(s.encode(c));
  };
  CHECK(features(1, 2)[0] == doctest::Approx(0.0));
  CHECK(features(8, 2)[0] == doctest::Approx(0.3));
  CHECK(features(96, 2)[0] == doctest::Approx(0.8));
  CHECK(features(128, 2)[0] == doctest::Approx(1.0));
  CHECK(features(8, 6)[1] == doctest::Approx(2.0 / 3.0));
  // Without the option the row is the value: 8 sits at 7/127.
  CHECK(kernel_layout::of(s).features_of(s.encode(s.from_json(R"({"x": 8, "w": 2})")))[0] ==
        doctest::Approx(7.0 / 127.0));
}

TEST_CASE("the likelihood gradient matches finite differences, and fitting raises the likelihood") {
  const auto s = bowl_space();  // numeric, log-scaled and permutation dims
  const auto layout = kernel_layout::of(s);
  kernel k(layout);
  rng random(11);
  Eigen::MatrixXd raw(static_cast<Eigen::Index>(layout.features), 25);
  Eigen::VectorXd y(25);
  for (Eigen::Index i = 0; i < 25; ++i) {
    const auto c = s.sample(random);
    raw.col(i) = layout.features_of(s.encode(c));
    y[i] = std::log(*bowl(s, c));
  }
  y = (y.array() - y.mean()) / std::sqrt((y.array() - y.mean()).square().mean());
  Eigen::VectorXd theta = k.default_theta();
  for (Eigen::Index i = 0; i < theta.size(); ++i)
    theta[i] += 0.1 * static_cast<double>(i % 3) - 0.1;
  k.set_theta(theta);
  Eigen::VectorXd grad;
  (void)bayes::log_marginal_likelihood(k, raw, y, &grad);
  for (Eigen::Index i = 0; i < theta.size(); ++i) {
    const double h = 1e-5;
    Eigen::VectorXd up = theta, down = theta;
    up[i] += h;
    down[i] -= h;
    k.set_theta(up);
    const double a = bayes::log_marginal_likelihood(k, raw, y, nullptr);
    k.set_theta(down);
    const double b = bayes::log_marginal_likelihood(k, raw, y, nullptr);
    CAPTURE(i);
    CHECK(grad[i] == doctest::Approx((a - b) / (2 * h)).epsilon(1e-4).scale(1e-3));
  }

  gp g(kernel(layout), gp::mean_mode::standardize);
  for (Eigen::Index i = 0; i < 25; ++i) g.add(raw.col(i), y[i]);
  const double before = g.log_marginal_likelihood();
  rng fit_random(1);
  const auto report = bayes::fit_hyper_parameters(g, fit_random, {});
  CHECK(report.before == doctest::Approx(before));
  CHECK(report.after > before + 1);
  CHECK(g.log_marginal_likelihood() == doctest::Approx(report.after));
}

TEST_CASE("the incremental Cholesky factor equals a full factorization, fantasies included") {
  const auto s = bowl_space();
  const auto layout = kernel_layout::of(s);
  gp g(kernel(layout), gp::mean_mode::standardize);
  rng random(2);
  std::vector<Eigen::VectorXd> points;
  for (int i = 0; i < 30; ++i) {
    const auto c = s.sample(random);
    points.push_back(layout.features_of(s.encode(c)));
    g.add(points.back(), std::log(*bowl(s, c)));
  }
  const auto full = [&](std::size_t n) {
    Eigen::MatrixXd raw(static_cast<Eigen::Index>(layout.features), static_cast<Eigen::Index>(n));
    for (std::size_t i = 0; i < n; ++i) raw.col(static_cast<Eigen::Index>(i)) = points[i];
    const auto& k = g.current_kernel();
    Eigen::MatrixXd kk = k.cross(k.scale(raw), k.scale(raw));
    kk.diagonal().array() += k.noise() + g.jitter();
    return Eigen::MatrixXd(Eigen::LLT<Eigen::MatrixXd>(kk).matrixL());
  };
  REQUIRE(g.jitter() == 0);
  CHECK((g.factor() - full(30)).cwiseAbs().maxCoeff() < 1e-10);

  const Eigen::MatrixXd committed = g.factor();
  for (int i = 0; i < 3; ++i) {
    points.push_back(layout.features_of(s.encode(s.sample(random))));
    g.push_fantasy(points.back(), 0.5);
  }
  CHECK(g.total() == 33);
  CHECK((g.factor() - full(33)).cwiseAbs().maxCoeff() < 1e-10);
  g.clear_fantasies();
  CHECK(g.total() == 30);
  CHECK((g.factor() - committed).cwiseAbs().maxCoeff() == 0);

  // A duplicate point still factors (the noise keeps the pivot positive).
  points.resize(30);
  g.add(points[4], 1.0);
  points.push_back(points[4]);
  CHECK((g.factor() - full(31)).cwiseAbs().maxCoeff() < 1e-8);
}

TEST_CASE("variance bounds are at or above every variance, and tight beside one point") {
  const auto s = bowl_space();
  const auto layout = kernel_layout::of(s);
  gp g(kernel(layout), gp::mean_mode::standardize);
  rng random(3);
  const auto sample = [&] { return layout.features_of(s.encode(s.sample(random))); };
  Eigen::MatrixXd candidates(static_cast<Eigen::Index>(layout.features), 200);
  for (Eigen::Index j = 0; j < candidates.cols(); ++j) candidates.col(j) = sample();
  for (int i = 0; i < 40; ++i) {
    g.add(candidates.col(i), static_cast<double>(i % 7));  // the first 40 are data
    if (i == 0) {
      // One point: the bound is the variance itself (up to its margin).
      const Eigen::MatrixXd cross = g.cross(g.scaled(candidates));
      const Eigen::VectorXd gap = g.variance_bounds(cross) - g.variances(cross);
      CHECK(gap.minCoeff() >= 0);
      CHECK(gap.maxCoeff() <= 1e-8 * g.current_kernel().signal());
    }
  }
  for (int i = 0; i < 3; ++i) g.push_fantasy(sample(), 2.0);
  const Eigen::MatrixXd cross = g.cross(g.scaled(candidates));
  const Eigen::VectorXd variance = g.variances(cross);
  const Eigen::VectorXd bound = g.variance_bounds(cross);
  for (Eigen::Index j = 0; j < candidates.cols(); ++j) CHECK(bound[j] >= variance[j]);
  // At data the bound is the single-point variance: small, not the prior.
  CHECK(bound.head(40).maxCoeff() <
        0.01 * g.current_kernel().signal() * g.target_scale() * g.target_scale());
}

TEST_CASE("the permutation kernel is positive semi-definite on all permutations of 4 and 5") {
  for (const auto& elements : {std::vector<std::string>{"a", "b", "c", "d"},
                               std::vector<std::string>{"a", "b", "c", "d", "e"}}) {
    const auto s = permutation_space(elements);
    const auto layout = kernel_layout::of(s);
    REQUIRE(layout.blocks.size() == 1);
    Eigen::MatrixXd raw(static_cast<Eigen::Index>(layout.features),
                        static_cast<Eigen::Index>(s.count()));
    Eigen::Index i = 0;
    for (const auto& c : s.configs()) raw.col(i++) = layout.features_of(s.encode(c));
    kernel k(layout);
    for (double lambda : {0.01, 0.5, 1.0, 3.0, 10.0, 60.0}) {
      Eigen::VectorXd theta = k.default_theta();
      theta[0] = std::log(lambda);
      theta[1] = 0;  // unit signal
      k.set_theta(theta);
      const Eigen::MatrixXd kk = k.cross(k.scale(raw), k.scale(raw));
      const Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd> eigen(kk);
      CAPTURE(elements.size());
      CAPTURE(lambda);
      CHECK(eigen.eigenvalues().minCoeff() >= -1e-9);
      // exp(-lambda * discordant pairs / pairs): the reversed order is fully discordant.
      const auto n = static_cast<Eigen::Index>(s.count());
      CHECK(kk(0, n - 1) == doctest::Approx(std::exp(-lambda)));
      CHECK(kk(0, 0) == doctest::Approx(1.0));
    }
  }
}

TEST_CASE("the model keeps at most max_model_points observations, the best among them") {
  const auto s = bowl_space();
  bayes::model m(s, gp_options{.max_model_points = 16}, 3);
  rng random(5);
  double best = std::numeric_limits<double>::infinity();
  config best_config;
  for (int i = 0; i < 60; ++i) {
    const auto c = s.sample(random);
    const double y = *bowl(s, c);
    m.observe(finished_trial(s, c, y));
    if (y < best) {
      best = y;
      best_config = c;
    }
    CHECK(m.objective().size() <= 16 + 2);  // redrawn once it grows by an eighth
  }
  CHECK(m.ok_count() == 60);
  CHECK(m.best() == doctest::Approx(std::log(best)));
  // The best observation is always among the points the GP holds.
  const auto v = m.view(m.features(best_config));
  CHECK(m.objective().variance(v.cross.col(0)) <
        0.05 * m.objective().target_scale() * m.objective().target_scale());
  // And bo with a small model still finds the bowl's optimum.
  auto st = make_bo_strategy({.model = {.max_model_points = 32}});
  const auto run = drive(*st, s, bowl, 150, 1, 4, 1.0);
  CHECK(run.problems.empty());
  CHECK(run.best == doctest::Approx(1.0));
}

TEST_CASE("the feasibility model learns a failing region") {
  const auto s = bowl_space();  // bowl_with_failures: x >= 13 does not build
  bayes::model m(s, gp_options{}, 1);
  rng random(4);
  for (int i = 0; i < 80; ++i) {
    const auto c = s.sample(random);
    m.observe(finished_trial(s, c, bowl_with_failures(s, c)));
  }
  REQUIRE(m.failure_count() > 0);
  double failing = 0, feasible = 0;
  int n_failing = 0, n_feasible = 0;
  for (int i = 0; i < 400; ++i) {
    const auto c = s.sample(random);
    const double p = m.p_feasible(m.features(c))[0];
    const auto x = s.integer(c, "x");
    if (x >= 14) {
      failing += p;
      ++n_failing;
    } else if (x <= 10) {
      feasible += p;
      ++n_feasible;
    }
  }
  REQUIRE(n_failing > 0);
  CHECK(failing / n_failing < 0.25);
  CHECK(feasible / n_feasible > 0.85);
}

TEST_CASE("bo finds the optimum of small spaces reproducibly from a seed") {
  const auto bowl_s = bowl_space();
  for (std::uint64_t seed : {1, 2, 3}) {
    CAPTURE(seed);
    auto a = make_bo_strategy();
    const auto run = drive(*a, bowl_s, bowl, 120, 1, seed, 1.0);
    CHECK(run.problems.empty());
    REQUIRE(run.best.has_value());
    CHECK(*run.best == doctest::Approx(1.0));
    auto b = make_bo_strategy();
    const auto again = drive(*b, bowl_s, bowl, 120, 1, seed, 1.0);
    CHECK(again.proposals == run.proposals);
  }
  const auto cond = conditional_space();
  auto st = make_bo_strategy();
  const auto run = drive(*st, cond, conditional_objective, 66, 1, 5, 10.0);
  CHECK(run.problems.empty());
  CHECK(run.best == doctest::Approx(10.0));
  CHECK(run.proposals.size() < 40);
}

TEST_CASE("bo in batches, with each acquisition, avoids failures and covers a space exactly once") {
  const auto s = bowl_space();
  for (auto acquisition :
       {acquisition_kind::log_ei, acquisition_kind::ucb, acquisition_kind::thompson}) {
    for (auto batch : {batch_kind::kriging_believer, batch_kind::constant_liar}) {
      CAPTURE(static_cast<int>(acquisition));
      CAPTURE(static_cast<int>(batch));
      auto st = make_bo_strategy({.acquisition = acquisition, .batch = batch});
      const auto run = drive(*st, s, bowl_with_failures, 100, 4, 9);
      CHECK(run.problems.empty());
      REQUIRE(run.best.has_value());
      CHECK(*run.best <= 4.0);  // the optimum is 1; random's expected best of 100 is ~11
      // After the initial design few proposals land in the failing region x >= 13.
      std::size_t failing = 0;
      for (std::size_t i = 30; i < run.proposals.size(); ++i)
        failing += s.integer(run.proposals[i], "x") >= 13 ? 1 : 0;
      MESSAGE("failing proposals after the first 30: " << failing);
      CHECK(failing < 10);  // uniform sampling would put ~10 of 70 there
    }
  }
  const auto small = conditional_space();
  auto st = make_bo_strategy();
  const auto run = drive(*st, small, conditional_objective, 1000, 4, 3);
  CHECK(run.problems.empty());
  CHECK(run.ran_dry);
  CHECK(run.proposals.size() == 66);
}

TEST_CASE("bo's ucb_after keeps log EI's proposals up to that trial count, then maximises UCB") {
  const auto s = bowl_space();
  const auto run = [&](bo_options o) {
    auto st = make_bo_strategy(o);
    return drive(*st, s, bowl, 60, 1, 4).proposals;  // no target: all 60
  };
  const auto never = std::numeric_limits<std::size_t>::max();
  const auto log_ei = run({.ucb_after = never});
  const auto ucb = run({.acquisition = acquisition_kind::ucb, .ucb_kappa = 1.5});
  const auto switched = run({.ucb_kappa = 1.5, .ucb_after = 25});
  CHECK(run({}) == log_ei);  // the default turns at 100 trials: not within these 60
  REQUIRE(log_ei.size() == 60);
  REQUIRE(switched.size() == 60);
  CHECK(std::equal(log_ei.begin(), log_ei.begin() + 25, switched.begin()));
  CHECK(switched != log_ei);
  CHECK(run({.ucb_kappa = 1.5, .ucb_after = 0}) == ucb);
  // Thompson sampling ignores it.
  CHECK(run({.acquisition = acquisition_kind::thompson, .ucb_after = 0}) ==
        run({.acquisition = acquisition_kind::thompson}));
}

TEST_CASE("bo's phases sized to the study's evaluation budget are those counts given outright") {
  const auto s = bowl_space();
  const auto run = [&](bo_options o, std::optional<std::size_t> budget) {
    auto st = make_bo_strategy(o);
    return drive(*st, s, bowl, 40, 1, 6, std::nullopt, {},
                 [&](fake_context& c) { c.budget = budget; })
        .proposals;
  };
  const auto never = std::numeric_limits<std::size_t>::max();
  const bo_options shares{.ucb_kappa = 1.5, .initial_share = 0.1, .phase_share = 0.5};
  // Unbounded: the shares change nothing.
  CHECK(run(shares, std::nullopt) == run({.ucb_kappa = 1.5}, std::nullopt));
  // Budget 30: ceil(0.1 * 30) = 3 initial samples, the turn to UCB at 15.
  CHECK(run(shares, 30) == run({.initial_samples = 3, .ucb_kappa = 1.5, .ucb_after = 15}, {}));
  // Budget 10: the initial design keeps its floor of 2; the turn at 5.
  CHECK(run(shares, 10) == run({.initial_samples = 2, .ucb_kappa = 1.5, .ucb_after = 5}, {}));
  // explore_runway 0.75 of 60: no turn past trial 15, so a turn due at 25 never comes.
  const bo_options runway{.ucb_kappa = 1.5, .ucb_after = 25, .explore_runway = 0.75};
  CHECK(run(runway, 60) == run({.ucb_kappa = 1.5, .ucb_after = never}, {}));
  CHECK(run(runway, 200) == run({.ucb_kappa = 1.5, .ucb_after = 25}, {}));
  CHECK(run(runway, 200) != run({.ucb_kappa = 1.5, .ucb_after = never}, {}));
}

TEST_CASE("the GP surrogate scores candidates in objective units") {
  const auto s = bowl_space();
  auto sur = make_gp_surrogate(s);
  CHECK_FALSE(sur->ready());
  rng random(8);
  std::optional<double> best;
  config best_config;
  for (int i = 0; i < 60; ++i) {
    const auto c = s.sample(random);
    const auto y = bowl_with_failures(s, c);
    sur->observe(finished_trial(s, c, y));
    if (y && (!best || *y < *best)) {
      best = y;
      best_config = c;
    }
  }
  REQUIRE(sur->ready());
  const auto at_best = sur->score(best_config, best);
  // The GP smooths (its noise is fitted): within a factor of 1.5 of the data.
  CHECK(at_best.mean > *best / 1.5);
  CHECK(at_best.mean < *best * 1.5);
  CHECK(at_best.sigma > 0);
  CHECK(at_best.expected_gain >= 0);
  CHECK(at_best.expected_gain < 0.1 * *best);
  // A config deep in the failing region: low P(feasible), gain scaled down by it.
  config failing = best_config;
  failing[0] = 15;  // x = 15
  failing[1] = 0;   // y = 0 keeps x + y <= 24
  REQUIRE(s.is_valid(failing));
  const auto bad = sur->score(failing, best);
  CHECK(bad.p_feasible < 0.3);
  CHECK(bad.expected_gain <= bad.p_feasible * *best);
}
