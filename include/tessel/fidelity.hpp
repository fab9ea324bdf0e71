// tessel/fidelity.hpp: multi-fidelity evaluation (docs/fidelity.md). A
// multi_fidelity_backend composes a cheap low-fidelity backend (the
// simulator) and an expensive high-fidelity one (the device): every config is
// screened at the low fidelity, and only what is promising, or what the
// fidelities may disagree on, is promoted to the high one. The study and its
// strategies see one backend, as DESIGN.md §6 wants: strategies never learn
// that fidelities exist, and the study never takes a screened prediction as
// its best (measurement::low_fidelity). Link tessel::backends.
#pragma once

#include <tessel/backend.hpp>
#include <tessel/config.hpp>
#include <tessel/measurement.hpp>
#include <tessel/space.hpp>

#include <condition_variable>
#include <cstddef>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace tessel {

/// The metrics a multi_fidelity_backend puts on every measurement it returns
/// (stored with the trial, so `tessel show` rebuilds the fidelity report
/// from a study file).
namespace fidelity_metric {
/// Index of the fidelity that produced the objective: 0 = low (a screen,
/// the objective is a prediction), 1 = high (a measurement).
inline constexpr const char* level = "fidelity";
/// How many fidelities the backend has (2).
inline constexpr const char* levels = "fidelity_levels";
/// The low fidelity's own objective (its unit, uncorrected).
inline constexpr const char* low_objective = "fidelity_low_objective";
/// The corrected prediction of the high-fidelity objective, made before the
/// promotion decision.
inline constexpr const char* predicted = "fidelity_predicted";
/// The correction's residual spread at that time (standard deviation, in
/// ln units for a log-linear correction); absent while it is not fitted.
inline constexpr const char* spread = "fidelity_spread";
/// Why a config was promoted (promotion_reason as a number); absent on a screen.
inline constexpr const char* reason = "fidelity_reason";
/// The high fidelity's cost of this config, seconds (also inside cost).
inline constexpr const char* high_cost_s = "fidelity_high_cost_s";
}  // namespace fidelity_metric

/// Why a config went to the high fidelity.
enum class promotion_reason : unsigned char {
  warmup,     ///< one of the first configs, measured at both to fit the correction
  promising,  ///< its corrected prediction may beat the best high-fidelity result
  disagree,   ///< the fidelities rank configs too differently to screen
  audit,      ///< a periodic check of a config the low fidelity would screen out
};
[[nodiscard]] std::string_view to_string(promotion_reason r) noexcept;

/// A monotone map from low- to high-fidelity objectives, fitted by least
/// squares on configs measured at both: ln y_high = intercept + slope * ln
/// y_low when every objective seen is positive (times), else the same on the
/// raw values. `spread` is the residual standard deviation (n - 2 degrees of
/// freedom). With fewer than 3 pairs the slope is 1 and the spread unknown.
struct fidelity_correction {
  bool log_scale = true;
  double intercept = 0, slope = 1;
  std::optional<double> spread;  ///< nullopt: too few pairs to tell
  std::size_t pairs = 0;
  double mean_low = 0, spread_low = 0;  ///< mean and sum of squares of the scaled low values

  /// The spread of a prediction at `low`: the residual spread widened for the
  /// fit's own uncertainty, more so away from the pairs' mean (the ordinary
  /// least-squares prediction interval: s sqrt(1 + 1/n + (x - mean)^2 / Sxx)),
  /// with s at least `min_residual` (multi_fidelity_options::min_spread).
  [[nodiscard]] std::optional<double> prediction_spread(double low, double min_residual = 0) const;

  /// The predicted high-fidelity objective of a low-fidelity objective.
  [[nodiscard]] double predict(double low) const;
  /// The same on the fit's scale (ln y when log_scale).
  [[nodiscard]] double predict_scaled(double low) const;
  [[nodiscard]] double scaled(double y) const;
  /// "ln high = 0.12 + 0.97 ln low (spread 0.08, 14 pairs)".
  [[nodiscard]] std::string text() const;
};

/// Fits the correction to (low, high) pairs. The slope is kept within
/// [0.05, 20] (a monotone map); a negative or zero fitted slope leaves the
/// slope at 1 and the spread as the residuals of that fit.
[[nodiscard]] fidelity_correction fit_correction(
    const std::vector<std::pair<double, double>>& pairs);

/// How the two fidelities rank the configs measured at both.
struct rank_agreement {
  std::size_t pairs = 0;
  std::optional<double> kendall_tau;   ///< tau-b; nullopt under 3 pairs
  std::optional<double> spearman_rho;  ///< on average ranks; nullopt under 3 pairs
  /// "Kendall tau 0.81, Spearman rho 0.93 over 14 configs".
  [[nodiscard]] std::string text() const;
};
[[nodiscard]] rank_agreement measure_agreement(const std::vector<std::pair<double, double>>& pairs);

/// Options of multi_fidelity_backend (docs/fidelity.md has the rule).
struct multi_fidelity_options {
  /// The first `warmup` configs that succeed at the low fidelity are promoted
  /// whatever their prediction, to fit the correction. At least 3.
  std::size_t warmup = 3;
  /// A config is promising when its corrected prediction minus z residual
  /// spreads beats the best high-fidelity objective (on the fit's scale).
  double z = 2.0;
  /// Below this Kendall tau the low fidelity is not trusted to screen: z
  /// widens as z / (tau / min_agreement) and at tau <= 0 every config is
  /// promoted (reason disagree).
  double min_agreement = 0.5;
  /// Every `audit_every`-th config the rule would screen out is promoted
  /// anyway (reason audit), so the agreement is measured beyond the
  /// promising configs too; 0 = never.
  std::size_t audit_every = 0;
  /// Promote (as promising) only configs whose low-fidelity objective ranks
  /// within this fraction of the best of every low-fidelity success so far
  /// (itself included), once `warmup` pairs exist: the study screens widely
  /// before it spends the high fidelity, instead of promoting every early
  /// improvement. The fraction grows by top_fraction for every
  /// `top_patience` configs screened in a row, so a study whose promising
  /// configs all rank below it cannot stall. 1 = off. In (0, 1].
  double top_fraction = 0.1;
  std::size_t top_patience = 20;  ///< at least 1
  /// The top filter passes at least the best `top_min` low-fidelity
  /// objectives so far: rank <= max(top_min, fraction * n). With 1 the best
  /// screen so far always qualifies, so a small space (or the first screens
  /// of a large one, before the tenth with top_fraction 0.1) cannot screen
  /// its best config out for good; 0 = no minimum. The default 0 is what a
  /// leave-one-out over 13 benchmark pairs chose (benchmarks/README.md,
  /// "top_min"): 1 spends more promotions than it saves on most of them.
  std::size_t top_min = 0;
  /// A floor on the correction's residual spread used by the "may beat"
  /// tests, on the fit's scale (natural log of the objective when it is
  /// positive: 0.02 = about 2%). A few promoted pairs that agree fit a
  /// spread far below the low fidelity's real level error, and the rule
  /// then screens out for good configs that might beat the incumbent.
  /// 0 = no floor. At least 0. The default 0.02 is what a leave-one-out
  /// over 13 benchmark pairs chose (benchmarks/README.md, "min_spread"): it
  /// lifts sim_attention from 1.09x to 1.43x and costs no pair anything.
  double min_spread = 0.02;
  /// Screen failures: a config that fails at the low fidelity (compile
  /// error, gate) returns that failure without a high-fidelity evaluation;
  /// true sends it to the high fidelity anyway.
  bool promote_failures = false;
  /// At most this many high-fidelity evaluations (promotions), whatever
  /// runs in parallel; past it every config is a screen. 0 = no limit.
  /// `tessel tune --high-budget N` sets it with its stop condition.
  std::size_t max_high = 0;

  /// Throws options_error naming the field and the rule.
  void validate() const;
};

/// What the backend has done so far.
struct multi_fidelity_stats {
  std::size_t low_evaluations = 0, high_evaluations = 0;
  std::size_t by_reason[4] = {0, 0, 0, 0};  ///< high evaluations by promotion_reason
  double low_cost_s = 0, high_cost_s = 0;
  std::optional<double> best_high;  ///< best ok high-fidelity objective
  fidelity_correction correction;
  rank_agreement agreement;
  /// Several lines for reports: evaluations, costs, agreement, correction.
  [[nodiscard]] std::string text() const;
};

/// Screens every config at `low`, promotes to `high` what the rule in
/// docs/fidelity.md picks. The correction and the agreement are this
/// backend's own: one backend per study, so one correction per workload.
/// Returned measurements carry fidelity_metric metrics; a screen is status
/// ok with objective = the corrected prediction and metrics["fidelity"] = 0
/// (measurement::low_fidelity() is true, so no study takes it as its best);
/// a promoted config returns the high fidelity's measurement with both
/// costs summed. Thread-safe: concurrency() is the low fidelity's, and at
/// most high->concurrency() high-fidelity evaluations run at once. With
/// jobs > 1 the decisions depend on completion order.
class multi_fidelity_backend : public backend {
 public:
  using options = multi_fidelity_options;
  multi_fidelity_backend(std::shared_ptr<backend> low, std::shared_ptr<backend> high,
                         options opts = {});

  /// "fidelity(sim:matmul@trn2 -> trainium:...)".
  [[nodiscard]] std::string name() const override;
  /// The high fidelity's hardware: what the study's best was measured on.
  [[nodiscard]] std::optional<std::string> hardware() const override;
  void prepare(const space& s) override;
  [[nodiscard]] measurement evaluate(const space& s, const config& c) override;
  [[nodiscard]] std::size_t concurrency() const override;
  /// The high fidelity's remeasurement: a study's best was measured there.
  [[nodiscard]] std::optional<measurement> remeasure(const space& s, const config& c) override;
  /// The low fidelity's estimate (the cost every config pays).
  [[nodiscard]] double estimated_cost(const space& s, const config& c) const override;

  /// Feeds back measurements this backend returned earlier (a resumed
  /// study's trials), so the correction and agreement continue where they
  /// were; measurements without fidelity metrics are ignored.
  void restore(const std::vector<measurement>& earlier);

  [[nodiscard]] multi_fidelity_stats stats() const;
  [[nodiscard]] const backend& low() const noexcept { return *low_; }
  [[nodiscard]] const backend& high() const noexcept { return *high_; }

 private:
  struct decision {
    std::optional<promotion_reason> promote;
    double predicted = 0;
    std::optional<double> spread;
  };
  [[nodiscard]] decision decide(double low_objective);
  void record_high(double low_objective, const measurement& high);
  void acquire_high();
  void release_high();

  std::shared_ptr<backend> low_, high_;
  options options_;
  mutable std::mutex mutex_;
  std::condition_variable high_free_;
  std::size_t high_running_ = 0;
  std::vector<std::pair<double, double>> pairs_;  ///< (low, high) of configs ok at both
  multi_fidelity_stats stats_;
  std::size_t screened_since_audit_ = 0;
  std::size_t screened_in_a_row_ = 0;  ///< since the last promotion
  std::size_t promoted_ = 0;           ///< promotions made (started or done)
  double best_high_low_ = 0;           ///< the low-fidelity objective of best_high
  std::vector<double> low_sorted_;     ///< every ok low-fidelity objective, ascending
};

/// The fidelity report of finished measurements (a study file's trials):
/// the same statistics multi_fidelity_backend keeps, rebuilt from the
/// fidelity_metric metrics. nullopt when none carries them.
[[nodiscard]] std::optional<multi_fidelity_stats> fidelity_stats(
    const std::vector<measurement>& results);

}  // namespace tessel
