// validate() of the options in tessel/bayesian.hpp: each names the field
// and the rule ("bo_options.pool_size: must be at least 1 (got 0)").
#include "strategies/common.hpp"

#include <tessel/bayesian.hpp>

#include <cmath>
#include <sstream>
#include <string>

namespace tessel {
namespace {

void at_least(std::string_view where, std::string_view field, std::size_t value, std::size_t min) {
  if (value < min)
    detail::options_failure(where, field,
                            "must be at least " + std::to_string(min) + detail::got(value));
}

/// value in (lo, hi) or (lo, hi] (hi_inclusive); both ends finite.
void between(std::string_view where, std::string_view field, double value, double lo, double hi,
             bool hi_inclusive) {
  const bool ok = value > lo && (hi_inclusive ? value <= hi : value < hi);
  if (!ok) {
    std::ostringstream rule;
    rule << "must be in (" << lo << ", " << hi << (hi_inclusive ? "]" : ")");
    detail::options_failure(where, field, rule.str() + detail::got(value));
  }
}

void positive_finite(std::string_view where, std::string_view field, double value) {
  if (!(value > 0) || !std::isfinite(value))
    detail::options_failure(where, field, "must be finite and > 0" + detail::got(value));
}

void validate_gp(const gp_options& o, const std::string& where) {
  at_least(where, "first_fit", o.first_fit, 2);
  if (!(o.refit_growth > 1) || !std::isfinite(o.refit_growth))
    detail::options_failure(where, "refit_growth",
                            "must be finite and > 1" + detail::got(o.refit_growth));
  at_least(where, "max_fit_points", o.max_fit_points, 10);
  if (o.max_model_points != 0 && o.max_model_points < 16)
    detail::options_failure(
        where, "max_model_points",
        "must be 0 (no limit) or at least 16" + detail::got(o.max_model_points));
  at_least(where, "fit_evaluations", o.fit_evaluations, 1);
  between(where, "feasibility_noise", o.feasibility_noise, 0, 1, true);
  between(where, "min_p_feasible", o.min_p_feasible, 0, 1, false);
  at_least(where, "min_observations", o.min_observations, 2);
}

}  // namespace

void gp_options::validate() const { validate_gp(*this, "gp_options"); }

void bo_options::validate() const {
  constexpr std::string_view where = "bo_options";
  validate_gp(model, "bo_options.model");
  at_least(where, "initial_samples", initial_samples, 1);
  at_least(where, "initial_draws", initial_draws, 1);
  if (!(ucb_kappa >= 0) || !std::isfinite(ucb_kappa))
    detail::options_failure(where, "ucb_kappa", "must be finite and >= 0" + detail::got(ucb_kappa));
  at_least(where, "pool_size", pool_size, 1);
  for (const auto& [field, value] :
       {std::pair{"feasibility_cutoff", feasibility_cutoff},
        std::pair{"initial_share", initial_share}, std::pair{"explore_runway", explore_runway},
        std::pair{"phase_share", phase_share}})
    if (!(value >= 0 && value <= 1))
      detail::options_failure(where, field, "must be in [0, 1]" + detail::got(value));
}

void cost_model_options::validate() const {
  constexpr std::string_view where = "cost_model_options";
  positive_finite(where, "prior_log_sd", prior_log_sd);
  positive_finite(where, "ridge", ridge);
  positive_finite(where, "default_cost_s", default_cost_s);
  if (!(run_link_max_sd >= 0) || !std::isfinite(run_link_max_sd))
    detail::options_failure(where, "run_link_max_sd",
                            "must be finite and >= 0" + detail::got(run_link_max_sd));
  at_least(where, "max_points", max_points, 16);
  at_least(where, "first_fit", first_fit, 2);
  if (!(refit_growth > 1) || !std::isfinite(refit_growth))
    detail::options_failure(where, "refit_growth",
                            "must be finite and > 1" + detail::got(refit_growth));
}

}  // namespace tessel
