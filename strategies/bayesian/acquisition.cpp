#include "strategies/bayesian/acquisition.hpp"

#include <boost/math/distributions/normal.hpp>

#include <cmath>
#include <limits>
#include <numbers>

namespace tessel::bayes {
namespace {

const double log_sqrt_2pi = 0.5 * std::log(2 * std::numbers::pi);      // c1 of Ament et al.
const double log_sqrt_half_pi = 0.5 * std::log(std::numbers::pi / 2);  // c2

/// Boost.Math's standard normal, answering an error (a NaN argument) with
/// NaN instead of throwing: the functions here are noexcept.
using quiet = boost::math::policies::policy<
    boost::math::policies::domain_error<boost::math::policies::ignore_error>,
    boost::math::policies::overflow_error<boost::math::policies::ignore_error>>;
const boost::math::normal_distribution<double, quiet> standard_normal;

/// log(1 - exp(a)) for a < 0 (Maechler 2012).
double log1mexp(double a) noexcept {
  return a > -std::numbers::ln2 ? std::log(-std::expm1(a)) : std::log1p(-std::exp(a));
}

}  // namespace

double erfcx(double x) noexcept {
  if (x < 25) return std::exp(x * x) * std::erfc(x);
  const double inv2 = 1.0 / (x * x);
  // Asymptotic series (Abramowitz & Stegun 7.1.23), truncated after x^-8.
  return (1.0 / (x * std::sqrt(std::numbers::pi))) *
         (1 - 0.5 * inv2 * (1 - 1.5 * inv2 * (1 - 2.5 * inv2 * (1 - 3.5 * inv2))));
}

double normal_cdf(double z) noexcept { return cdf(standard_normal, z); }

double log_h(double z) noexcept {
  if (z > -1) {
    return std::log(pdf(standard_normal, z) + z * normal_cdf(z));
  }
  const double bound = 1 / std::sqrt(std::numeric_limits<double>::epsilon());
  if (z > -bound)
    return -0.5 * z * z - log_sqrt_2pi +
           log1mexp(std::log(erfcx(-z / std::numbers::sqrt2) * std::abs(z)) + log_sqrt_half_pi);
  return -0.5 * z * z - log_sqrt_2pi - 2 * std::log(std::abs(z));
}

double log_ei(double mean, double sd, double best) noexcept {
  if (!(sd > 0))
    return best > mean ? std::log(best - mean) : -std::numeric_limits<double>::infinity();
  return log_h((best - mean) / sd) + std::log(sd);
}

double normal_ei(double mean, double sd, double best) noexcept {
  if (!(sd > 0)) return std::max(0.0, best - mean);
  return std::exp(log_ei(mean, sd, best));
}

double lognormal_ei(double mu, double sd, double c) noexcept {
  if (!(c > 0)) return 0;
  if (!(sd > 0)) return std::max(0.0, c - std::exp(mu));
  const double z = (std::log(c) - mu) / sd;
  const double gain = c * normal_cdf(z) - std::exp(mu + 0.5 * sd * sd) * normal_cdf(z - sd);
  return std::max(0.0, gain);
}

double log_softplus(double x) noexcept {
  if (x < -30) return x;           // log1p(e^x) = e^x (1 - e^x/2 ...)
  if (x > 30) return std::log(x);  // softplus(x) = x + log1p(e^-x)
  return std::log(std::log1p(std::exp(x)));
}

}  // namespace tessel::bayes
