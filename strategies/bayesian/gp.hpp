// Private: Gaussian process regression over kernel features, with an
// incrementally extended Cholesky factor, fantasy points for batch
// proposals, and maximum-likelihood hyper-parameters (docs/bayesian.md).
// Not installed.
#pragma once

#include "strategies/bayesian/kernels.hpp"

#include <tessel/random.hpp>

#include <Eigen/Dense>

#include <cstddef>
#include <vector>

namespace tessel::bayes {

/// A GP posterior. Targets are either standardised (mean and standard
/// deviation of the committed targets: the objective model) or taken about
/// a fixed prior mean (the feasibility model). Predictions are in target
/// units. Points beyond size() are fantasies: appended with push_fantasy(),
/// they extend the factor but not the standardisation, and clear_fantasies()
/// drops them by truncating the factor (its leading block is unchanged).
class gp {
 public:
  enum class mean_mode : unsigned char { standardize, fixed };

  gp() = default;
  gp(kernel k, mean_mode mode);

  [[nodiscard]] const bayes::kernel& current_kernel() const noexcept { return kernel_; }
  /// New hyper-parameters: rescales the features and refactors, O(n^3).
  void set_theta(const Eigen::VectorXd& theta);
  /// The prior mean in fixed mode (re-solves, O(n^2)).
  void set_fixed_mean(double mean);

  [[nodiscard]] std::size_t size() const noexcept { return committed_; }
  [[nodiscard]] std::size_t total() const noexcept { return n_; }
  /// Adds an observation: extends the Cholesky factor by one row, O(n^2)
  /// (a full refactorization with more jitter if the extension is not
  /// positive). Drops fantasies first.
  void add(const Eigen::VectorXd& features, double y);
  /// Replaces all committed points at once (one factorization).
  void assign(const Eigen::MatrixXd& features, const std::vector<double>& y);
  /// Replaces the committed targets, same points (the factor is kept).
  void set_targets(const std::vector<double>& y);
  void push_fantasy(const Eigen::VectorXd& features, double y);
  void clear_fantasies();

  /// Diagonal jitter added on top of the noise (0 unless a factorization failed).
  [[nodiscard]] double jitter() const noexcept { return jitter_; }
  /// The lower Cholesky factor of K + (noise + jitter) I, total() x total().
  [[nodiscard]] Eigen::MatrixXd factor() const;
  [[nodiscard]] Eigen::Ref<const Eigen::MatrixXd> features() const;
  [[nodiscard]] const std::vector<double>& targets() const noexcept { return y_; }
  [[nodiscard]] double target_mean() const noexcept { return mean_; }
  [[nodiscard]] double target_scale() const noexcept { return scale_; }
  /// log p(y | X, theta) of the committed points, standardised targets.
  [[nodiscard]] double log_marginal_likelihood() const;

  // --- prediction (target units; latent f, without observation noise) -------
  /// Kernel features scaled by the current hyper-parameters.
  [[nodiscard]] Eigen::MatrixXd scaled(const Eigen::Ref<const Eigen::MatrixXd>& raw) const;
  /// k(train, candidates): total() x m, from scaled candidate columns.
  [[nodiscard]] Eigen::MatrixXd cross(const Eigen::Ref<const Eigen::MatrixXd>& scaled) const;
  /// Posterior means of the candidates whose cross() this is.
  [[nodiscard]] Eigen::VectorXd mean(const Eigen::MatrixXd& cross) const;
  /// Posterior variance of one candidate from its cross() column, O(n^2).
  [[nodiscard]] double variance(const Eigen::Ref<const Eigen::VectorXd>& cross) const;
  /// Posterior variances of the candidates whose cross() this is, O(n^2 m)
  /// in one triangular solve.
  [[nodiscard]] Eigen::VectorXd variances(const Eigen::MatrixXd& cross) const;
  /// Upper bounds on variances(cross), O(n m): each candidate's variance
  /// given only its most correlated point, s2 - max_i k_i^2 / (s2 + noise +
  /// jitter); conditioning on more points never increases it.
  [[nodiscard]] Eigen::VectorXd variance_bounds(const Eigen::MatrixXd& cross) const;
  /// Joint posterior covariance of m candidates, m x m.
  [[nodiscard]] Eigen::MatrixXd covariance(const Eigen::Ref<const Eigen::MatrixXd>& scaled,
                                           const Eigen::MatrixXd& cross) const;

 private:
  void reserve(std::size_t n);
  void append(const Eigen::VectorXd& features, double y);
  void refactor();
  void restandardize();
  void solve();

  bayes::kernel kernel_;
  mean_mode mode_ = mean_mode::standardize;
  std::size_t n_ = 0, committed_ = 0, capacity_ = 0;
  Eigen::MatrixXd raw_, scaled_;  ///< features x capacity
  Eigen::MatrixXd l_;             ///< capacity x capacity, lower factor in the leading block
  std::vector<double> y_;         ///< committed targets, then fantasies
  Eigen::VectorXd alpha_;         ///< (K + noise I)^-1 (y - mean) / scale
  double mean_ = 0, scale_ = 1, fixed_mean_ = 0, jitter_ = 0;
};

/// How hyper-parameters are fitted.
struct fit_settings {
  std::size_t max_points = 128;  ///< a random subset of this many points when there are more
  std::size_t restarts = 1;      ///< random starts besides the current and default theta
  std::size_t evaluations = 50;  ///< likelihood evaluations per start
  double min_noise = 0;          ///< raises the noise variance's lower bound (0: the kernel's)
};

/// The observation count of the next hyper-parameter fit after one at
/// `count`: ceil(count * growth), at least count + 1 (8, 16, 32, ... from 8
/// with growth 2), so fits cost O(1) amortised per observation.
[[nodiscard]] std::size_t next_fit(std::size_t count, double growth);

/// model.assign() of the feature columns `which` (indices into `features`),
/// each with target(index): the capped point sets of the models.
template <class Target>
void assign_subset(gp& model, const std::vector<Eigen::VectorXd>& features,
                   const std::vector<std::size_t>& which, Target target) {
  Eigen::MatrixXd raw(features.front().size(), static_cast<Eigen::Index>(which.size()));
  std::vector<double> y;
  y.reserve(which.size());
  for (std::size_t i = 0; i < which.size(); ++i) {
    raw.col(static_cast<Eigen::Index>(i)) = features[which[i]];
    y.push_back(target(which[i]));
  }
  model.assign(raw, y);
}

/// What a fit did: the subset's log marginal likelihood before and after.
struct fit_report {
  double before = 0, after = 0;
  std::size_t evaluations = 0;
};

/// Maximises the log marginal likelihood over the kernel's log
/// hyper-parameters within their bounds: L-BFGS (nlopt LD_LBFGS) with the
/// analytic gradient, from the current theta, the defaults and
/// settings.restarts random points; keeps the best point any start reached.
/// The starts run in parallel (TBB); the result is the same on any thread
/// count. Deterministic for a given `random` state. Needs no fantasies present.
fit_report fit_hyper_parameters(gp& model, rng& random, const fit_settings& settings);

/// log p(y | X, theta) and its gradient for raw feature columns and
/// standardised targets (used by fit_hyper_parameters; exposed for tests).
double log_marginal_likelihood(const bayes::kernel& k, const Eigen::MatrixXd& raw,
                               const Eigen::VectorXd& y, Eigen::VectorXd* gradient);

}  // namespace tessel::bayes
