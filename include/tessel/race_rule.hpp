// tessel/race_rule.hpp: when to stop timing a candidate (racing). One sample
// is one timing of the candidate; after `min_repeats` samples the median's
// distribution-free confidence interval decides: stop once the candidate is
// clearly slower (or clearly faster) than the incumbent, or, with no
// incumbent, once the interval is tight; keep sampling while it might beat
// the incumbent, up to `max_repeats`.
//
// Self-contained on purpose (the standard library only, everything inline):
// the cpu backend compiles this very file into the loader process that times
// a kernel (docs/cpu.md), and tessel::racer (tessel/racing.hpp) runs the same
// loop in-process for the command and callback backends. The trainium runner
// (python/tessel_trainium/runner.py) is a Python port of race_decision;
// tests/trainium/racing_agreement_test.cpp checks the two agree.
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <optional>
#include <string_view>
#include <vector>

namespace tessel {

/// The median of some samples and its distribution-free ~95% confidence
/// interval: the order statistics n/2 -+ 1.96 sqrt(n)/2 (Conover, Practical
/// Nonparametric Statistics, 3rd ed., sec. 3.2). Empty samples: zeros.
struct median_interval {
  double median = 0, low = 0, high = 0;
};

[[nodiscard]] inline median_interval median_with_interval(std::vector<double> samples) {
  if (samples.empty()) return {};
  std::sort(samples.begin(), samples.end());
  const auto n = samples.size();
  const double centre = n % 2 ? samples[n / 2] : 0.5 * (samples[n / 2 - 1] + samples[n / 2]);
  const double half = 1.96 * std::sqrt(static_cast<double>(n)) / 2;
  const auto lo = static_cast<std::size_t>(std::max(0.0, std::floor(n / 2.0 - half)));
  const auto hi_raw = static_cast<std::ptrdiff_t>(std::ceil(n / 2.0 + half)) - 1;
  const auto hi = static_cast<std::size_t>(std::clamp<std::ptrdiff_t>(
      hi_raw, static_cast<std::ptrdiff_t>(lo), static_cast<std::ptrdiff_t>(n - 1)));
  return {centre, samples[lo], samples[hi]};
}

/// How many samples a race takes. Times are seconds.
struct race_options {
  std::size_t min_repeats = 5;   ///< samples before the rule may stop (>= 1)
  std::size_t max_repeats = 30;  ///< samples at most (>= min_repeats)
  /// Clearly slower: the interval's low end lies above incumbent x (1 + margin).
  double margin = 0.0;
  /// Without an incumbent: stop once (high - low) / median <= this.
  double target_relative_ci = 0.02;
  /// Stop once sampling has taken this long (at least one sample is
  /// taken); 0: no limit.
  double max_seconds = 0;

  /// A field and the rule it breaks: {"max_repeats", "must be >= min_repeats"}.
  struct broken_rule {
    const char* field;
    const char* rule;
  };
  /// The first field that breaks its rule, or nullopt.
  [[nodiscard]] std::optional<broken_rule> problem() const {
    if (min_repeats == 0) return broken_rule{"min_repeats", "must be >= 1"};
    if (max_repeats < min_repeats) return broken_rule{"max_repeats", "must be >= min_repeats"};
    if (!(margin >= 0) || !std::isfinite(margin)) return broken_rule{"margin", "must be >= 0"};
    if (!(target_relative_ci >= 0) || !std::isfinite(target_relative_ci))
      return broken_rule{"target_relative_ci", "must be >= 0"};
    if (!(max_seconds >= 0) || !std::isfinite(max_seconds))
      return broken_rule{"max_seconds", "must be >= 0"};
    return std::nullopt;
  }
};

/// Why a race stopped (go_on: it has not).
enum class race_stop : unsigned char {
  go_on,
  max_repeats,            ///< took max_repeats samples
  slower_than_incumbent,  ///< the interval lies above incumbent x (1 + margin)
  faster_than_incumbent,  ///< the interval lies below the incumbent
  tight_interval,         ///< no incumbent, and the interval is within target_relative_ci
  time_limit,             ///< sampling took max_seconds
  failed,                 ///< a sample could not be taken (the candidate failed)
};

/// The names the trainium runner also answers ("continue" for go_on).
[[nodiscard]] inline const char* to_string(race_stop s) noexcept {
  switch (s) {
    case race_stop::go_on: return "continue";
    case race_stop::max_repeats: return "max_repeats";
    case race_stop::slower_than_incumbent: return "slower_than_incumbent";
    case race_stop::faster_than_incumbent: return "faster_than_incumbent";
    case race_stop::tight_interval: return "tight_interval";
    case race_stop::time_limit: return "time_limit";
    case race_stop::failed: return "failed";
  }
  return "?";
}

/// Inverse of to_string; nullopt for a name it does not know.
[[nodiscard]] inline std::optional<race_stop> parse_race_stop(std::string_view name) noexcept {
  for (const auto s : {race_stop::go_on, race_stop::max_repeats, race_stop::slower_than_incumbent,
                       race_stop::faster_than_incumbent, race_stop::tight_interval,
                       race_stop::time_limit, race_stop::failed})
    if (name == to_string(s)) return s;
  return std::nullopt;
}

/// The rule on the samples so far. `incumbent` is the best median measured
/// so far (seconds); 0 or less: none. Never answers time_limit or failed.
[[nodiscard]] inline race_stop race_decision(const std::vector<double>& samples, double incumbent,
                                             const race_options& o) {
  const auto n = samples.size();
  if (n >= o.max_repeats) return race_stop::max_repeats;
  if (n < o.min_repeats) return race_stop::go_on;
  const auto mi = median_with_interval(samples);
  if (incumbent > 0) {
    if (mi.low > incumbent * (1 + o.margin)) return race_stop::slower_than_incumbent;
    if (mi.high < incumbent) return race_stop::faster_than_incumbent;
    return race_stop::go_on;
  }
  if (mi.median > 0 && (mi.high - mi.low) / mi.median <= o.target_relative_ci)
    return race_stop::tight_interval;
  return race_stop::go_on;
}

/// What a race measured.
struct race_result {
  std::vector<double> samples;  ///< in the order taken
  race_stop stopped = race_stop::go_on;
};

/// Takes samples until race_decision (or max_seconds) stops. `sample()`
/// returns one sample in seconds, or nullopt when the candidate failed
/// (the race then stops as failed; the caller knows why).
template <class Sampler>
[[nodiscard]] race_result race(Sampler&& sample, double incumbent, const race_options& o) {
  using clock = std::chrono::steady_clock;
  const auto start = clock::now();
  race_result r;
  for (;;) {
    r.stopped = race_decision(r.samples, incumbent, o);
    if (r.stopped != race_stop::go_on) return r;
    if (o.max_seconds > 0 && !r.samples.empty() &&
        std::chrono::duration<double>(clock::now() - start).count() >= o.max_seconds) {
      r.stopped = race_stop::time_limit;
      return r;
    }
    const std::optional<double> s = sample();
    if (!s) {
      r.stopped = race_stop::failed;
      return r;
    }
    r.samples.push_back(*s);
  }
}

}  // namespace tessel
