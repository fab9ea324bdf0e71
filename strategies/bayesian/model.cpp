// The shared model: objective GP on ok trials, feasibility GP on all of
// them, hyper-parameters refitted when the ok count grows by refit_growth.
#include "strategies/bayesian/model.hpp"

#include "strategies/common.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace tessel::bayes {

model::model(const tessel::space& s, const gp_options& options, std::uint64_t seed)
    : space_(s),
      options_(options),
      layout_(kernel_layout::of(s, options.alignment_features, options.ordinal_features)),
      random_(seed),
      objective_(kernel(layout_), gp::mean_mode::standardize),
      feasibility_(kernel(layout_), gp::mean_mode::fixed),
      log_scale_(options.log_objective),
      best_(std::numeric_limits<double>::infinity()),
      next_fit_(options.first_fit),
      next_feasibility_fit_(options.first_fit) {
  if (options.learn_constraints) rules_.emplace(s);
}

Eigen::VectorXd model::features(const config& c) const {
  return layout_.features_of(space_.encode(c));
}

double model::to_model(double objective) const {
  return log_scale_ ? std::log(objective) : objective;
}

void model::observe(const trial& t) {
  const auto& c = t.config;
  if (!kernel_layout::encodable(space_, c)) return;
  if (rules_) rules_->observe(t);
  const Eigen::VectorXd f = features(c);
  const bool ok = t.result.ok() && std::isfinite(t.result.objective);
  if (ok) {
    add_ok(c, f, t.result.objective);
  } else {
    ++failures_;
  }
  update_feasibility(f, ok);
}

void model::add_ok(const config& c, const Eigen::VectorXd& f, double objective) {
  if (log_scale_ && !(objective > 0)) {
    // log(objective) is undefined from now on: model the objective itself.
    log_scale_ = false;
    best_ = std::numeric_limits<double>::infinity();
    for (std::size_t i = 0; i < observed_.size(); ++i) {
      observed_[i].first = objectives_[i];
      best_ = std::min(best_, objectives_[i]);
    }
    std::vector<double> targets;
    for (auto i : active_) targets.push_back(observed_[i].first);
    objective_.set_targets(targets);
  }
  objectives_.push_back(objective);
  const double y = to_model(objective);
  observed_.emplace_back(y, c);
  features_.push_back(f);
  best_ = std::min(best_, y);
  const auto cap = options_.max_model_points;
  if (cap == 0 || objective_.size() < cap + cap / 8) {
    objective_.add(f, y);
    active_.push_back(observed_.size() - 1);
  } else {
    choose_active();
  }
  if (ok_count() >= next_fit_) refit();
}

/// The GP's points once there are more than max_model_points: the best half
/// (lowest targets) and a uniform random draw from the rest, one
/// factorization; new observations are then appended one row at a time until
/// the set has grown by an eighth.
void model::choose_active() {
  const auto cap = options_.max_model_points;
  std::vector<std::size_t> order(observed_.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  const auto best = cap / 2;
  std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(best), order.end(),
                    [&](std::size_t a, std::size_t b) {
                      return observed_[a].first < observed_[b].first ||
                             (observed_[a].first == observed_[b].first && a < b);
                    });
  detail::draw_to_front(order, best, cap - best, random_);
  order.resize(cap);
  std::sort(order.begin(), order.end());
  active_ = order;
  assign_subset(objective_, features_, active_, [&](std::size_t i) { return observed_[i].first; });
}

void model::refit() {
  const fit_settings settings{options_.max_fit_points, options_.fit_restarts,
                              options_.fit_evaluations};
  last_fit_ = fit_hyper_parameters(objective_, random_, settings);
  ++fits_;
  next_fit_ = next_fit(ok_count(), options_.refit_growth);
}

/// The feasibility model's own maximum-likelihood fit (label regression), on
/// the same growth schedule counted in trials: failure boundaries need
/// shorter length scales than the objective, and other dims. The label noise
/// stays at least feasibility_noise.
void model::refit_feasibility() {
  // Without a noise floor the labels (deterministic 0s and 1s) are
  // interpolated exactly, and the fit rings between nearby opposite labels.
  const fit_settings settings{options_.max_fit_points, 0, options_.fit_evaluations,
                              options_.feasibility_noise};
  (void)fit_hyper_parameters(feasibility_, random_, settings);
  next_feasibility_fit_ = next_fit(labels_.size(), options_.refit_growth);
}

/// The feasibility kernel until its first fit: the objective's correlation
/// structure, with length scales capped at 1 (the width of a numeric dim) and
/// categorical and permutation weights at least 1, so a dimension the
/// objective ignores can still separate failures; unit signal; label noise
/// from the options.
Eigen::VectorXd model::feasibility_theta() const {
  Eigen::VectorXd t = objective_.current_kernel().theta();
  const auto dn = static_cast<Eigen::Index>(layout_.numeric.size());
  const auto nb = static_cast<Eigen::Index>(layout_.blocks.size());
  t.head(dn) = t.head(dn).cwiseMin(0.0);
  t.segment(dn, nb) = t.segment(dn, nb).cwiseMax(0.0);
  t[dn + nb] = 0;
  t[dn + nb + 1] = std::log(options_.feasibility_noise);
  return t;
}

/// Kernel regression of the 0/1 labels about the smoothed overall rate
/// (least-squares classification, Rasmussen & Williams 2006, section 6.5).
void model::update_feasibility(const Eigen::VectorXd& f, bool ok) {
  labels_.push_back(ok ? 1.0 : 0.0);
  trial_features_.push_back(f);
  if (failures_ == 0) return;  // P(feasible) = 1 until something fails
  const auto cap = options_.max_model_points;
  if (feasibility_.size() == 0 || (cap != 0 && feasibility_.size() >= cap + cap / 8)) {
    choose_feasibility_points();
  } else {
    feasibility_.add(f, labels_.back());
    feasibility_.set_fixed_mean(success_rate());
  }
  if (labels_.size() >= next_feasibility_fit_) refit_feasibility();
}

/// The feasibility GP's points: every trial while they fit under
/// max_model_points; beyond, the failures (at most half the cap, a uniform
/// draw when there are more) and a uniform draw of the successes, redrawn
/// each time an eighth more have arrived, so P(feasible) costs
/// O(max_model_points) per candidate however long the study. The fixed
/// prior mean stays the success rate of every trial.
void model::choose_feasibility_points() {
  if (feasibility_.size() == 0) feasibility_.set_theta(feasibility_theta());
  const auto cap = options_.max_model_points;
  std::vector<std::size_t> chosen;
  chosen.reserve(std::min(labels_.size(), cap == 0 ? labels_.size() : cap));
  if (cap == 0 || labels_.size() <= cap) {
    for (std::size_t i = 0; i < labels_.size(); ++i) chosen.push_back(i);
  } else {
    std::vector<std::size_t> failed, succeeded;
    for (std::size_t i = 0; i < labels_.size(); ++i)
      (labels_[i] > 0.5 ? succeeded : failed).push_back(i);
    auto draw = [&](std::vector<std::size_t>& from, std::size_t k) {
      k = std::min(k, from.size());
      detail::draw_to_front(from, 0, k, random_);
      chosen.insert(chosen.end(), from.begin(), from.begin() + static_cast<std::ptrdiff_t>(k));
    };
    const std::size_t keep_ok = std::min(succeeded.size(), cap - std::min(failed.size(), cap / 2));
    draw(failed, cap - keep_ok);
    draw(succeeded, keep_ok);
    std::sort(chosen.begin(), chosen.end());
  }
  feasibility_.set_fixed_mean(success_rate());
  assign_subset(feasibility_, trial_features_, chosen, [&](std::size_t i) { return labels_[i]; });
}

Eigen::VectorXd model::p_feasible(const Eigen::Ref<const Eigen::MatrixXd>& raw) const {
  if (failures_ == 0) return Eigen::VectorXd::Ones(raw.cols());
  const Eigen::VectorXd mean = feasibility_.mean(feasibility_.cross(feasibility_.scaled(raw)));
  return mean.cwiseMax(options_.min_p_feasible).cwiseMin(1.0);
}

candidates_view model::view(Eigen::MatrixXd raw) const {
  candidates_view v;
  v.cross = objective_.cross(objective_.scaled(raw));
  v.mean = objective_.mean(v.cross);
  v.p = p_feasible(raw);
  v.raw = std::move(raw);
  return v;
}

}  // namespace tessel::bayes
