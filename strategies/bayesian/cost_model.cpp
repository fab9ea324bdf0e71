// The cost models (tessel/bayesian.hpp, cost_model_options): regressions of
// ln(seconds) on the kernel features of a config's encoding, combined with
// the backend's estimate as a Gaussian prior in ln(seconds). A regression's
// mean has a variance that shrinks with data near x; the estimate has
// prior_log_sd^2; the prediction is their precision-weighted average, so the
// estimate rules before data and fades where observations accumulate. Two
// regressions: a Gaussian process (the objective's kernel, its own fitted
// hyper-parameters) and Bayesian ridge regression.
//
// The run link: timing a kernel costs about repetitions x its run time, a
// ratio the ok trials show. While that ratio is steady and the study passes
// the surrogate's predicted objective, the cost is a regression of the
// compile + gate seconds plus ratio x predicted objective (x P(feasible),
// plus what failed runs cost x P(failure)); otherwise one regression of the
// total seconds.
//
// Choosing by one-step error (choose_by_error): the total's and the
// failures' regressions are kept twice, a GP and a ridge regression, fed
// the same points; before each point is added both
// predict it, and the one with the smaller mean absolute error in
// ln(seconds) so far answers (the GP's hyper-parameters, fitted on few
// points in many dimensions, can rank costs worse than a line early). The
// run link is scored the same way, from the objective the study predicted
// for the trial when it dispatched it (trial::prediction), against the
// total's regression, and answers only while it is no worse.
//
// Failures: a third regression, of the total seconds of failed trials
// alone (a compile error stops early, a timeout runs long), answers
// predict_failure() once it can; until then a failure costs what a success
// does.
#include "strategies/bayesian/gp.hpp"
#include "strategies/bayesian/kernels.hpp"
#include "strategies/common.hpp"

#include <tessel/bayesian.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <numeric>
#include <optional>
#include <utility>
#include <vector>

namespace tessel {
namespace {

/// The precision-weighted mean of a regression (log_mean, its variance) and
/// the backend estimate (prior variance prior_log_sd^2), in seconds.
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

/// ln(seconds) for `seconds` > 0 and finite, else nullopt.
std::optional<double> log_of(double seconds) {
  if (!(seconds > 0) || !std::isfinite(seconds)) return {};
  return std::log(seconds);
}

/// A regression of ln(seconds) on kernel features.
class log_regression {
 public:
  virtual ~log_regression() = default;
  virtual void add(const Eigen::VectorXd& features, double y) = 0;
  /// Whether at() may be called.
  [[nodiscard]] virtual bool ready() const = 0;
  /// The mean of ln(seconds) at `features` and its variance.
  [[nodiscard]] virtual std::pair<double, double> at(const Eigen::VectorXd& features) const = 0;
};

/// ln(seconds) as a Gaussian process, targets standardised; hyper-parameters
/// by maximum likelihood on the first_fit * refit_growth^k schedule. Beyond
/// max_points observations it holds the most recent half (where the search
/// is now) and a uniform draw of the rest.
class gp_regression final : public log_regression {
 public:
  gp_regression(const bayes::kernel_layout& layout, const cost_model_options& o)
      : options_(o),
        random_(o.seed),
        model_(bayes::kernel(layout), bayes::gp::mean_mode::standardize),
        next_fit_(o.first_fit) {}

  void add(const Eigen::VectorXd& features, double y) override {
    features_.push_back(features);
    targets_.push_back(y);
    const auto cap = options_.max_points;
    if (model_.size() < cap + cap / 8) {
      model_.add(features, y);
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

  // One point has no spread to standardise by.
  [[nodiscard]] bool ready() const override { return model_.size() >= 2; }

  [[nodiscard]] std::pair<double, double> at(const Eigen::VectorXd& features) const override {
    const Eigen::MatrixXd cross = model_.cross(model_.scaled(features));
    return {model_.mean(cross)[0], model_.variance(cross.col(0))};
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

  cost_model_options options_;
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

/// Bayesian ridge regression of ln(seconds) on the features and an intercept.
class ridge_regression final : public log_regression {
 public:
  ridge_regression(std::size_t features, const cost_model_options& o) : options_(o) {
    const auto p = static_cast<Eigen::Index>(features + 1);
    gram_ = Eigen::MatrixXd::Zero(p, p);
    moment_ = Eigen::VectorXd::Zero(p);
    solve();
  }

  void add(const Eigen::VectorXd& features, double y) override {
    const Eigen::VectorXd x = design(features);
    gram_.noalias() += x * x.transpose();
    moment_ += y * x;
    sum_y2_ += y * y;
    ++n_;
    solve();
  }

  [[nodiscard]] bool ready() const override { return n_ > 0; }

  [[nodiscard]] std::pair<double, double> at(const Eigen::VectorXd& features) const override {
    const Eigen::VectorXd x = design(features);
    return {weights_.dot(x), residual_ * x.dot(inverse_ * x)};
  }

 private:
  [[nodiscard]] static Eigen::VectorXd design(const Eigen::VectorXd& features) {
    Eigen::VectorXd x(features.size() + 1);
    x[0] = 1;
    x.tail(features.size()) = features;
    return x;
  }

  void solve() {
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

  cost_model_options options_;
  Eigen::MatrixXd gram_;    ///< X^T X
  Eigen::VectorXd moment_;  ///< X^T y
  double sum_y2_ = 0;
  std::size_t n_ = 0;
  Eigen::MatrixXd inverse_;  ///< A^-1 = (X^T X + ridge)^-1
  Eigen::VectorXd weights_;
  double residual_ = 0;  ///< s^2, residual variance of ln(seconds)
};

/// Trials two predictions must both have been scored on before one is
/// preferred to the other by its error.
constexpr std::size_t min_scored = 5;

/// Absolute errors of two rival predictions on the same trials (not
/// squared: a few outlying costs, a 15 s framework stall among 2 s runs,
/// would decide).
struct rivalry {
  std::size_t n = 0;
  double first = 0, second = 0;
  void add(double first_error, double second_error) {
    ++n;
    first += std::abs(first_error);
    second += std::abs(second_error);
  }
  /// The second has been scored often enough and erred less.
  [[nodiscard]] bool second_wins() const { return n >= min_scored && second < first; }
};

/// A GP and a ridge regression of the same targets; the one with the
/// smaller one-step-ahead absolute error so far answers (the configured
/// kind until both have been scored min_scored times).
class chosen_regression final : public log_regression {
 public:
  chosen_regression(std::unique_ptr<log_regression> primary, std::unique_ptr<log_regression> rival)
      : primary_(std::move(primary)), rival_(std::move(rival)) {}

  void add(const Eigen::VectorXd& features, double y) override {
    if (rival_ && primary_->ready() && rival_->ready())
      errors_.add(primary_->at(features).first - y, rival_->at(features).first - y);
    primary_->add(features, y);
    if (rival_) rival_->add(features, y);
  }

  [[nodiscard]] bool ready() const override { return chosen().ready(); }

  [[nodiscard]] std::pair<double, double> at(const Eigen::VectorXd& features) const override {
    return chosen().at(features);
  }

 private:
  [[nodiscard]] const log_regression& chosen() const {
    return rival_ && rival_->ready() && errors_.second_wins() ? *rival_ : *primary_;
  }

  std::unique_ptr<log_regression> primary_, rival_;  ///< rival_: null when not choosing
  rivalry errors_;
};

/// Running mean and variance (Welford).
struct running {
  std::size_t n = 0;
  double mean = 0, m2 = 0;
  void add(double x) {
    ++n;
    const double d = x - mean;
    mean += d / static_cast<double>(n);
    m2 += d * (x - mean);
  }
  [[nodiscard]] double variance() const { return n > 1 ? m2 / static_cast<double>(n - 1) : 0.0; }
};

/// Observations at which the run link's ratio is trusted at the earliest.
constexpr std::size_t link_min_observations = 3;

class linked_cost final : public cost_model {
 public:
  linked_cost(const space& s, const cost_model_options& o)
      : space_(s), options_(o), layout_(bayes::kernel_layout::of(s)) {
    total_ = make_regression(options_.choose_by_error);
    failed_ = make_regression(options_.choose_by_error);
    // The configured kind only: the link it feeds is itself scored against
    // the total's regression, and choosing here made the simulator demo
    // fail more often early (benchmarks/README.md, session 9).
    if (options_.run_link_max_sd > 0) fixed_ = make_regression(false);  // else never read
  }

  void observe(const trial& t) override {
    if (!bayes::kernel_layout::encodable(space_, t.config)) return;
    const auto total = log_of(t.result.cost.total());
    if (!total) return;
    const Eigen::VectorXd x = layout_.features_of(space_.encode(t.config));
    if (!t.result.ok()) failed_->add(x, *total);
    if (options_.ok_only && !t.result.ok()) return;
    score_link(t, x, *total);
    total_->add(x, *total);
    const auto& paid = t.result.cost;
    if (const auto fixed = log_of(paid.compile_s + paid.gate_s); fixed && fixed_) {
      fixed_->add(x, *fixed);
      fixed_seen_ = true;
    }
    if (!t.result.ok()) {
      failed_run_.add(paid.run_s);
    } else if (const auto run = log_of(paid.run_s); run && t.result.objective > 0) {
      ratio_.add(*run - std::log(t.result.objective));
    }
  }

  [[nodiscard]] double predict(const config& c, const cost_query& q) const override {
    if (!total_->ready()) return unobserved(q.backend_estimate, options_);
    const Eigen::VectorXd x = layout_.features_of(space_.encode(c));
    if (wants_objective() && q.objective && q.objective->mean > 0 &&
        std::isfinite(q.objective->mean))
      return linked_prediction(x, *q.objective, q.backend_estimate);
    const auto [mean, var] = total_->at(x);
    return combine(mean, var, q.backend_estimate, options_);
  }

  /// The failures' own regression once it is ready (no backend prior: the
  /// estimate is of a success); predict() before.
  [[nodiscard]] double predict_failure(const config& c, const cost_query& q) const override {
    if (!failed_->ready()) return predict(c, q);
    return std::exp(failed_->at(layout_.features_of(space_.encode(c))).first);
  }

  /// The run link holds: the run seconds follow the objective steadily, and
  /// the compile + gate regression can predict (or there is nothing to).
  [[nodiscard]] bool wants_objective() const override {
    return link_holds() && !link_errors_.second_wins();
  }

 private:
  /// The configured kind, or (`choose`) both kinds, chosen by error.
  [[nodiscard]] std::unique_ptr<log_regression> make_regression(bool choose) const {
    const bool linear = options_.kind == cost_model_kind::log_linear;
    auto of_kind = [&](bool ridge) -> std::unique_ptr<log_regression> {
      if (ridge) return std::make_unique<ridge_regression>(layout_.features, options_);
      return std::make_unique<gp_regression>(layout_, options_);
    };
    if (!choose) return of_kind(linear);  // the rival is built only when it is scored
    return std::make_unique<chosen_regression>(of_kind(linear), of_kind(!linear));
  }

  /// The ratio is steady and the compile + gate regression can predict (or
  /// there is nothing to).
  [[nodiscard]] bool link_holds() const {
    return options_.run_link_max_sd > 0 && ratio_.n >= link_min_observations &&
           std::sqrt(ratio_.variance()) <= options_.run_link_max_sd &&
           (fixed_->ready() || !fixed_seen_);
  }

  /// Before `t` (ln total seconds `y`) is learnt: the errors of the link,
  /// from the objective the study predicted for it, and of the total's
  /// regression.
  void score_link(const trial& t, const Eigen::VectorXd& x, double y) {
    if (!options_.choose_by_error || !link_holds() || !total_->ready() || !t.prediction ||
        t.prediction->from != prediction::basis::model || !(t.prediction->mean > 0) ||
        !std::isfinite(t.prediction->mean))
      return;
    const candidate_score told{t.prediction->mean, t.prediction->sigma, t.prediction->p_feasible,
                               t.prediction->expected_gain};
    const double linked = linked_log_total(x, told).first;
    if (!std::isfinite(linked)) return;
    link_errors_.add(linked - y, total_->at(x).first - y);
  }

  /// compile + gate from its regression, plus the run: ratio x predicted
  /// objective when it succeeds, the failed runs' mean seconds when it does
  /// not. The variance of ln(total) by the delta method.
  [[nodiscard]] double linked_prediction(const Eigen::VectorXd& x, const candidate_score& objective,
                                         double backend_estimate) const {
    const auto [mean, var] = linked_log_total(x, objective);
    if (!std::isfinite(mean)) return unobserved(backend_estimate, options_);
    return combine(mean, var, backend_estimate, options_);
  }

  /// ln(compile + gate + run seconds) by the link and its variance; -inf
  /// when the total is not > 0.
  [[nodiscard]] std::pair<double, double> linked_log_total(const Eigen::VectorXd& x,
                                                           const candidate_score& objective) const {
    double fixed = 0, fixed_var = 0;
    if (fixed_->ready()) {
      const auto [mean, var] = fixed_->at(x);
      fixed = std::exp(mean);
      fixed_var = var;
    }
    const double p = std::clamp(objective.p_feasible, 0.0, 1.0);
    const double ok_run = std::exp(ratio_.mean) * objective.mean;
    const double run =
        options_.ok_only ? ok_run : p * ok_run + (1 - p) * (failed_run_.n ? failed_run_.mean : 0.0);
    const double spread = objective.sigma / objective.mean;
    const double run_var =
        ratio_.variance() / static_cast<double>(ratio_.n) + std::log1p(spread * spread);
    const double total = fixed + run;
    if (!(total > 0)) return {-std::numeric_limits<double>::infinity(), 0.0};
    const double var = (fixed * fixed * fixed_var + run * run * run_var) / (total * total);
    return {std::log(total), var};
  }

  space space_;
  cost_model_options options_;
  bayes::kernel_layout layout_;
  std::unique_ptr<log_regression> total_;   ///< ln(compile + gate + run seconds)
  std::unique_ptr<log_regression> failed_;  ///< the same, of failed trials only
  std::unique_ptr<log_regression> fixed_;   ///< ln(compile + gate seconds); null: link off
  bool fixed_seen_ = false;                 ///< a trial with compile + gate seconds > 0
  running ratio_;                           ///< ln(run seconds / objective) of ok trials
  running failed_run_;                      ///< run seconds of failed trials
  rivalry link_errors_;                     ///< the link, then the total's regression
};

}  // namespace

std::unique_ptr<cost_model> make_cost_model(const space& s, const cost_model_options& options) {
  options.validate();
  return std::make_unique<linked_cost>(s, options);
}

}  // namespace tessel
