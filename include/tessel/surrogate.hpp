// tessel/surrogate.hpp: the small interfaces through which the scheduler sees
// models (DESIGN.md §5). The core never includes a module: the Gaussian
// process of strategies/bayesian/ implements these, and whoever builds the
// study (the CLI, a user) wires them in through study::options.
#pragma once

#include <tessel/config.hpp>
#include <tessel/trial.hpp>

#include <algorithm>
#include <optional>

namespace tessel {

/// What a surrogate says of one candidate.
struct candidate_score {
  double mean = 0;           ///< predicted objective (the objective's units)
  double sigma = 0;          ///< its standard deviation
  double p_feasible = 1;     ///< probability the config compiles and passes the gate
  double expected_gain = 0;  ///< E[max(0, incumbent - objective)] * p_feasible, objective units
};

/// A model of the objective (and of failure) over a space's configs.
/// observe() is called for every finished trial, in study order; score() may
/// be called many times between observations and must be cheap.
class surrogate {
 public:
  virtual ~surrogate() = default;
  virtual void observe(const trial& t) = 0;
  /// Whether it has seen enough to score (else the scheduler keeps proposal order).
  [[nodiscard]] virtual bool ready() const = 0;
  /// `incumbent`: the best ok objective so far, if any.
  [[nodiscard]] virtual candidate_score score(const config& c,
                                              std::optional<double> incumbent) const = 0;
};

/// What the study knows of a candidate, besides its config, when it asks a
/// cost model.
struct cost_query {
  /// backend::estimated_cost(c), the prior; <= 0 or not finite: none.
  double backend_estimate = 0;
  /// The surrogate's view of the candidate once it is ready. Timing a kernel
  /// takes about repetitions x its run time, so the run part of the cost
  /// follows the predicted objective.
  std::optional<candidate_score> objective;
};

/// A model of what evaluating a config costs, in seconds (compile + gate +
/// run), learned from observed costs and seeded by the backend's estimate.
class cost_model {
 public:
  virtual ~cost_model() = default;
  virtual void observe(const trial& t) = 0;
  [[nodiscard]] virtual double predict(const config& c, const cost_query& q) const = 0;
  /// What a failed evaluation of `c` costs, in seconds: a compile error
  /// stops early, a timeout runs long. Default: predict(c, q), a failure
  /// costing what a success does.
  [[nodiscard]] virtual double predict_failure(const config& c, const cost_query& q) const {
    return predict(c, q);
  }
  /// Whether predict() would read cost_query::objective now; when false the
  /// study skips scoring the surrogate for it.
  [[nodiscard]] virtual bool wants_objective() const { return true; }
  /// predict() from the backend's estimate alone.
  [[nodiscard]] double predict(const config& c, double backend_estimate) const {
    return predict(c, cost_query{backend_estimate, std::nullopt});
  }
};

/// The seconds spent per successful evaluation of a config that succeeds
/// with probability p_feasible (floored at min_p), costing ok_s when it does
/// and failed_s when it does not: (p ok_s + (1 - p) failed_s) / p. With
/// failed_s = ok_s it is ok_s / p.
[[nodiscard]] inline double price_per_success(double p_feasible, double ok_s, double failed_s,
                                              double min_p = 1e-4) {
  const double p = std::clamp(p_feasible, min_p, 1.0);
  return (p * ok_s + (1 - p) * failed_s) / p;
}

/// The Pandora's-box Gittins index of a candidate whose objective f is
/// N(mean, sigma^2) and whose opening costs `price` (objective units): the g
/// solving E[(g - f)^+] = sigma h((g - mean) / sigma) = price, h(z) = z Phi(z)
/// + phi(z) (Weitzman 1979; Xie, Astudillo, Frazier, Scully & Terenin,
/// NeurIPS 2024). For minimisation the lowest index is opened first. It
/// rises with mean and price and falls as sigma grows; sigma <= 0 gives
/// mean + price, price <= 0 -infinity. Solved by Newton's method on ln h,
/// to a relative error of about 1e-13 in the equation.
[[nodiscard]] double gittins_index(double mean, double sigma, double price) noexcept;

}  // namespace tessel
