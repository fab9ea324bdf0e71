// Private: the model `bo` and gp_surrogate share: trials in, an objective
// GP (ok trials, log objective) and a feasibility GP (every trial, 0/1
// labels) out, with hyper-parameters refitted on a schedule
// (docs/bayesian.md). Not installed.
#pragma once

#include "strategies/bayesian/gp.hpp"

#include <tessel/bayesian.hpp>
#include <tessel/constraints.hpp>
#include <tessel/space.hpp>
#include <tessel/trial.hpp>

#include <Eigen/Dense>

#include <optional>
#include <utility>
#include <vector>

namespace tessel::bayes {

/// Predictions for a set of candidates (feature columns), in model units.
struct candidates_view {
  Eigen::MatrixXd raw;    ///< features x m
  Eigen::MatrixXd cross;  ///< objective k(train, candidates)
  Eigen::VectorXd mean;   ///< objective posterior means
  Eigen::VectorXd p;      ///< P(feasible)
};

class model {
 public:
  model(const tessel::space& s, const gp_options& options, std::uint64_t seed);

  [[nodiscard]] const tessel::space& space() const noexcept { return space_; }
  [[nodiscard]] const gp_options& options() const noexcept { return options_; }
  [[nodiscard]] Eigen::VectorXd features(const config& c) const;

  /// A finished trial of any source. Ok trials with a finite objective feed
  /// the objective GP; every trial feeds the feasibility model. Trials whose
  /// config does not belong to the space are ignored.
  void observe(const trial& t);

  [[nodiscard]] std::size_t ok_count() const noexcept { return observed_.size(); }
  [[nodiscard]] std::size_t failure_count() const noexcept { return failures_; }
  /// (ok + 1) / (trials + 2): the smoothed share of trials that succeeded.
  [[nodiscard]] double success_rate() const noexcept {
    const auto total = static_cast<double>(labels_.size());
    return (total - static_cast<double>(failures_) + 1) / (total + 2);
  }
  [[nodiscard]] std::size_t fits() const noexcept { return fits_; }
  [[nodiscard]] const fit_report& last_fit() const noexcept { return last_fit_; }
  /// Whether targets are log(objective).
  [[nodiscard]] bool log_scale() const noexcept { return log_scale_; }
  [[nodiscard]] double to_model(double objective) const;
  /// The lowest committed target (model units); +inf before any.
  [[nodiscard]] double best() const noexcept { return best_; }
  /// Ok configs observed, with their targets, in observation order.
  [[nodiscard]] const std::vector<std::pair<double, config>>& observed() const noexcept {
    return observed_;
  }

  [[nodiscard]] const gp& objective() const noexcept { return objective_; }
  /// Fantasies (batch proposals): see gp::push_fantasy.
  void push_fantasy(const Eigen::VectorXd& features, double target) {
    objective_.push_fantasy(features, target);
  }
  void clear_fantasies() { objective_.clear_fantasies(); }

  /// The learned rules' cap on P(feasible) of `c` (1 when no rule rejects
  /// it, or gp_options::learn_constraints is off).
  [[nodiscard]] double rule_p_feasible(const config& c) const {
    return rules_ ? rules_->p_feasible(c) : 1.0;
  }
  /// The rules learned so far; null when gp_options::learn_constraints is off.
  [[nodiscard]] const constraint_learner* rules() const noexcept {
    return rules_ ? &*rules_ : nullptr;
  }

  /// P(feasible) of feature columns: 1 until a trial has failed.
  [[nodiscard]] Eigen::VectorXd p_feasible(const Eigen::Ref<const Eigen::MatrixXd>& raw) const;
  /// Means, cross-covariances and P(feasible) of feature columns.
  [[nodiscard]] candidates_view view(Eigen::MatrixXd raw) const;

  /// Fits hyper-parameters now (also done on the gp_options schedule).
  void refit();

 private:
  void add_ok(const config& c, const Eigen::VectorXd& f, double objective);
  void choose_active();
  void update_feasibility(const Eigen::VectorXd& f, bool ok);
  void refit_feasibility();
  void choose_feasibility_points();
  [[nodiscard]] Eigen::VectorXd feasibility_theta() const;

  tessel::space space_;
  gp_options options_;
  kernel_layout layout_;
  rng random_;
  gp objective_;
  gp feasibility_;
  std::optional<constraint_learner> rules_;
  bool log_scale_ = true;
  double best_ = 0;
  std::vector<double> objectives_;  ///< ok objectives, as measured
  std::vector<std::pair<double, config>> observed_;
  std::vector<Eigen::VectorXd> features_;        ///< of each ok observation
  std::vector<std::size_t> active_;              ///< observations the objective GP holds
  std::vector<Eigen::VectorXd> trial_features_;  ///< of every trial, in observation order
  std::vector<double> labels_;                   ///< of every trial: 1 ok, 0 failed
  std::size_t failures_ = 0, fits_ = 0, next_fit_ = 0;
  std::size_t next_feasibility_fit_ = 0;  ///< in trials (ok or not)
  fit_report last_fit_;
};

}  // namespace tessel::bayes
