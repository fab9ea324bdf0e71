// Private: acquisition functions for minimisation, in numerically stable
// forms (docs/bayesian.md). Not installed.
#pragma once

namespace tessel::bayes {

/// erfc(x) * exp(x^2) for x >= 0, without overflow or underflow (the
/// asymptotic series past x = 25, where it is exact to double precision).
[[nodiscard]] double erfcx(double x) noexcept;

/// log(phi(z) + z * Phi(z)): the log of EI's standardised improvement
/// h(z), finite for every finite z. Ament, Daulton, Eriksson, Balandat &
/// Bakshy, "Unexpected Improvements to Expected Improvement for Bayesian
/// Optimization", NeurIPS 2023, eq. (9): direct above z = -1, through
/// log1mexp and erfcx below, and the asymptote -z^2/2 - log(2 pi)/2 - 2 log|z|
/// past z = -1/sqrt(machine epsilon).
[[nodiscard]] double log_h(double z) noexcept;

/// log E[max(0, best - f)] for f ~ N(mean, sd^2), sd > 0 (else log of the
/// plain improvement, -inf when there is none).
[[nodiscard]] double log_ei(double mean, double sd, double best) noexcept;

/// E[max(0, best - f)] for f ~ N(mean, sd^2): EI in the model's units.
[[nodiscard]] double normal_ei(double mean, double sd, double best) noexcept;

/// E[max(0, c - exp(g))] for g ~ N(mu, sd^2) and c > 0: EI in objective
/// units when the model is of log(objective):
///   c * Phi(z) - exp(mu + sd^2/2) * Phi(z - sd),  z = (log c - mu) / sd.
[[nodiscard]] double lognormal_ei(double mu, double sd, double c) noexcept;

/// log(log(1 + exp(x))): the log of a softplus, finite for every finite x.
/// Keeps UCB and Thompson values positive so they combine with log P(feasible).
[[nodiscard]] double log_softplus(double x) noexcept;

/// Standard normal cdf.
[[nodiscard]] double normal_cdf(double z) noexcept;

}  // namespace tessel::bayes
