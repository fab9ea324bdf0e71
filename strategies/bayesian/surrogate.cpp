// gp_surrogate: the GP model behind tessel::surrogate, for the scheduler
// (tessel/surrogate.hpp, docs/bayesian.md). Predictions are converted from
// the model's log scale to objective units: the log-normal mean and standard
// deviation, and the expected gain E[max(0, incumbent - objective)] in
// closed form, times P(feasible).
#include "strategies/bayesian/acquisition.hpp"
#include "strategies/bayesian/model.hpp"

#include <tessel/bayesian.hpp>

#include <algorithm>
#include <cmath>

namespace tessel {
namespace {

class gp_surrogate final : public surrogate {
 public:
  gp_surrogate(const space& s, const gp_options& options) : model_(s, options, options.seed) {}

  void observe(const trial& t) override { model_.observe(t); }
  [[nodiscard]] bool ready() const override {
    return model_.ok_count() >= model_.options().min_observations;
  }
  [[nodiscard]] candidate_score score(const config& c,
                                      std::optional<double> incumbent) const override;

 private:
  bayes::model model_;
};

candidate_score gp_surrogate::score(const config& c, std::optional<double> incumbent) const {
  candidate_score out;
  const auto v = model_.view(model_.features(c));
  out.p_feasible = std::min(v.p[0], model_.rule_p_feasible(c));
  if (model_.ok_count() == 0) return out;
  const double mu = v.mean[0];
  const double var = model_.objective().variance(v.cross.col(0));
  const double sd = std::sqrt(var);
  // Without an incumbent from the caller, the best objective the model saw.
  const double best =
      incumbent ? *incumbent : (model_.log_scale() ? std::exp(model_.best()) : model_.best());
  if (model_.log_scale()) {
    out.mean = std::exp(mu + 0.5 * var);
    out.sigma = out.mean * std::sqrt(std::expm1(var));
    out.expected_gain = bayes::lognormal_ei(mu, sd, best);
  } else {
    out.mean = mu;
    out.sigma = sd;
    out.expected_gain = bayes::normal_ei(mu, sd, best);
  }
  out.expected_gain *= out.p_feasible;
  return out;
}

}  // namespace

std::unique_ptr<surrogate> make_gp_surrogate(const space& s, const gp_options& options) {
  options.validate();
  return std::make_unique<gp_surrogate>(s, options);
}

}  // namespace tessel
