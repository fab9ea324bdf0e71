// The cost model (tessel/bayesian.hpp, cost_model_options): Bayesian ridge
// regression of ln(seconds) on the kernel features of a config's encoding,
// combined with the backend's estimate as a Gaussian prior in ln(seconds).
// The regression's mean has variance s^2 x^T A^-1 x (its uncertainty, which
// shrinks with data near x); the estimate has prior_log_sd^2; the prediction
// is their precision-weighted average, so the estimate rules before data and
// fades where observations accumulate.
#include "strategies/bayesian/kernels.hpp"

#include <tessel/bayesian.hpp>

#include <cmath>

namespace tessel {
namespace {

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
  const double seconds = t.result.cost.total();
  if (!(seconds > 0) || !std::isfinite(seconds) || t.config.size() != space_.size()) return;
  for (std::size_t p = 0; p < t.config.size(); ++p)
    if (t.config[p] != config::inactive && t.config[p] >= space_.parameters()[p].dom.size()) return;
  const Eigen::VectorXd x = design(t.config);
  const double y = std::log(seconds);
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
  const bool has_prior = backend_estimate > 0 && std::isfinite(backend_estimate);
  if (n_ == 0) return has_prior ? backend_estimate : options_.default_cost_s;
  const Eigen::VectorXd x = design(c);
  const double mean = weights_.dot(x);
  if (!has_prior) return std::exp(mean);
  const double model_var = residual_ * x.dot(inverse_ * x);
  const double prior_var = options_.prior_log_sd * options_.prior_log_sd;
  const double w = prior_var / (prior_var + model_var);  // weight of the regression
  return std::exp(w * mean + (1 - w) * std::log(backend_estimate));
}

}  // namespace

std::unique_ptr<cost_model> make_cost_model(const space& s, const cost_model_options& options) {
  options.validate();
  return std::make_unique<log_linear_cost>(s, options);
}

}  // namespace tessel
