// The cost models (tessel/bayesian.hpp, cost_model_options): a regression
// of ln(seconds) on the kernel features of a config's encoding, combined
// with the backend's estimate as a Gaussian prior in ln(seconds). The
// regression's mean has a variance that shrinks with data near x; the
// estimate has prior_log_sd^2; the prediction is their precision-weighted
// average, so the estimate rules before data and fades where observations
// accumulate. Two regressions: a Gaussian process (the objective's kernel,
// its own fitted hyper-parameters) and Bayesian ridge regression.
#include "strategies/bayesian/gp.hpp"
#include "strategies/bayesian/kernels.hpp"
#include "strategies/common.hpp"

#include <tessel/bayesian.hpp>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <optional>
#include <vector>

namespace tessel {
namespace {

/// ln(seconds) of a finished trial whose config belongs to `s`, or nullopt.
std::optional<double> log_cost_of(const space& s, const trial& t) {
  const double seconds = t.result.cost.total();
  if (!(seconds > 0) || !std::isfinite(seconds) || !bayes::kernel_layout::encodable(s, t.config))
    return {};
  return std::log(seconds);
}

/// The precision-weighted mean of the regression (log_mean, its variance)
/// and the backend estimate (prior variance prior_log_sd^2), in seconds.
double combine(double log_mean, double model_var, double backend_estimate,
               const cost_model_options& o) {
  if (!(backend_estimate > 0) || !std::isfinite(backend_estimate)) return std::exp(log_mean);
  const double prior_var = o.prior_log_sd * o.prior_log_sd;
  const double w = prior_var / (prior_var + model_var);  // weight of the regression
  return std::exp(w * log_mean + (1 - w) * std::log(backend_estimate));
}

/// Seconds predicted before any observation.
double unobserved(double backend_estimate, const cost_model_options& o) {
  return backend_estimate > 0 && std::isfinite(backend_estimate) ? backend_estimate
                                                                 : o.default_cost_s;
}

/// ln(seconds) as a Gaussian process over the kernel features, targets
/// standardised; hyper-parameters by maximum likelihood on the
/// first_fit * refit_growth^k schedule. Beyond max_points observations it
/// holds the most recent half (where the search is now) and a uniform draw
/// of the rest.
class gp_cost final : public cost_model {
 public:
  gp_cost(const space& s, const cost_model_options& o)
      : space_(s),
        options_(o),
        layout_(bayes::kernel_layout::of(s)),
        random_(o.seed),
        model_(bayes::kernel(layout_), bayes::gp::mean_mode::standardize),
        next_fit_(o.first_fit) {}

  void observe(const trial& t) override {
    const auto y = log_cost_of(space_, t);
    if (!y) return;
    features_.push_back(layout_.features_of(space_.encode(t.config)));
    targets_.push_back(*y);
    const auto cap = options_.max_points;
    if (model_.size() < cap + cap / 8) {
      model_.add(features_.back(), *y);
    } else {
      choose_points();
    }
    if (targets_.size() >= next_fit_) {
      bayes::fit_settings settings;
      settings.max_points = cap;
      (void)bayes::fit_hyper_parameters(model_, random_, settings);
      next_fit_ = bayes::next_fit(targets_.size(), options_.refit_growth);
    }
  }

  [[nodiscard]] double predict(const config& c, double backend_estimate) const override {
    // One point has no spread to standardise by.
    if (model_.size() < 2) return unobserved(backend_estimate, options_);
    const Eigen::MatrixXd raw = layout_.features_of(space_.encode(c));
    const Eigen::MatrixXd cross = model_.cross(model_.scaled(raw));
    return combine(model_.mean(cross)[0], model_.variance(cross.col(0)), backend_estimate,
                   options_);
  }

 private:
  void choose_points() {
    const auto cap = options_.max_points;
    const std::size_t n = targets_.size();
    const std::size_t recent = cap / 2;
    std::vector<std::size_t> chosen(n - recent);
    std::iota(chosen.begin(), chosen.end(), std::size_t{0});
    detail::draw_to_front(chosen, 0, cap - recent, random_);
    chosen.resize(cap - recent);
    std::sort(chosen.begin(), chosen.end());
    for (std::size_t i = n - recent; i < n; ++i) chosen.push_back(i);
    bayes::assign_subset(model_, features_, chosen, [&](std::size_t i) { return targets_[i]; });
  }

  space space_;
  cost_model_options options_;
  bayes::kernel_layout layout_;
  rng random_;
  bayes::gp model_;
  std::vector<Eigen::VectorXd> features_;  ///< of every observation
  std::vector<double> targets_;            ///< ln(seconds) of every observation
  std::size_t next_fit_ = 0;
};

/// Regularisation of the intercept: effectively free.
constexpr double intercept_ridge = 1e-6;
/// Pseudo-observations behind the residual variance's prior (prior_log_sd^2).
constexpr double prior_weight = 2;

class log_linear_cost final : public cost_model {
 public:
  log_linear_cost(const space& s, const cost_model_options& o)
      : space_(s), options_(o), layout_(bayes::kernel_layout::of(s)) {
    const auto p = static_cast<Eigen::Index>(layout_.features + 1);
    gram_ = Eigen::MatrixXd::Zero(p, p);
    moment_ = Eigen::VectorXd::Zero(p);
    solve();
  }

  void observe(const trial& t) override;
  [[nodiscard]] double predict(const config& c, double backend_estimate) const override;

 private:
  [[nodiscard]] Eigen::VectorXd design(const config& c) const {
    Eigen::VectorXd x(static_cast<Eigen::Index>(layout_.features + 1));
    x[0] = 1;
    x.tail(x.size() - 1) = layout_.features_of(space_.encode(c));
    return x;
  }
  void solve();

  space space_;
  cost_model_options options_;
  bayes::kernel_layout layout_;
  Eigen::MatrixXd gram_;    ///< X^T X
  Eigen::VectorXd moment_;  ///< X^T y
  double sum_y2_ = 0;
  std::size_t n_ = 0;
  Eigen::MatrixXd inverse_;  ///< A^-1 = (X^T X + ridge)^-1
  Eigen::VectorXd weights_;
  double residual_ = 0;  ///< s^2, residual variance of ln(seconds)
};

void log_linear_cost::observe(const trial& t) {
  const auto log_cost = log_cost_of(space_, t);
  if (!log_cost) return;
  const Eigen::VectorXd x = design(t.config);
  const double y = *log_cost;
  gram_.noalias() += x * x.transpose();
  moment_ += y * x;
  sum_y2_ += y * y;
  ++n_;
  solve();
}

void log_linear_cost::solve() {
  Eigen::MatrixXd a = gram_;
  a.diagonal().array() += options_.ridge;
  a(0, 0) += intercept_ridge - options_.ridge;
  const Eigen::LDLT<Eigen::MatrixXd> ldlt(a);
  inverse_ = ldlt.solve(Eigen::MatrixXd::Identity(a.rows(), a.cols()));
  weights_ = inverse_ * moment_;
  const double rss =
      std::max(0.0, sum_y2_ - 2 * weights_.dot(moment_) + weights_.dot(gram_ * weights_));
  const double prior = options_.prior_log_sd * options_.prior_log_sd;
  residual_ = (rss + prior_weight * prior) / (static_cast<double>(n_) + prior_weight);
}

double log_linear_cost::predict(const config& c, double backend_estimate) const {
  if (n_ == 0) return unobserved(backend_estimate, options_);
  const Eigen::VectorXd x = design(c);
  return combine(weights_.dot(x), residual_ * x.dot(inverse_ * x), backend_estimate, options_);
}

}  // namespace

std::unique_ptr<cost_model> make_cost_model(const space& s, const cost_model_options& options) {
  options.validate();
  if (options.kind == cost_model_kind::log_linear)
    return std::make_unique<log_linear_cost>(s, options);
  return std::make_unique<gp_cost>(s, options);
}

}  // namespace tessel
