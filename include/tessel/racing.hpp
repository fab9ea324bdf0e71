// tessel/racing.hpp: noisy timings measured as on hardware, for any backend
// (docs/backends.md, "Racing"). A racer keeps the incumbent (the best median
// it has measured) and times each candidate by tessel::race (race_rule.hpp):
// repeats until the median's confidence interval is tight, or the candidate
// is clearly slower (or faster) than the incumbent. The cpu, command,
// callback and trainium backends measure through it; the rule itself is in
// race_rule.hpp so that out-of-process timers can compile it too.
#pragma once

#include <tessel/measurement.hpp>
#include <tessel/race_rule.hpp>

#include <functional>
#include <mutex>
#include <optional>
#include <string_view>

namespace tessel {

/// Throws options_error naming the field when `o` breaks a rule, relative to
/// `owner`, the options that hold `o`: "cpu_options::racing.margin".
void validate(const race_options& o, std::string_view owner = "race_options");

/// Races candidates against the best median seen so far. Thread-safe.
class racer {
 public:
  /// Throws options_error for bad options.
  explicit racer(race_options o = {});

  [[nodiscard]] const race_options& options() const noexcept { return options_; }
  /// The best median offered so far, or 0 when none.
  [[nodiscard]] double incumbent() const;
  /// Records a finished candidate's median; the incumbent becomes the lower one.
  void offer(double median_s);

  /// Races `sample` against the incumbent (or, with `full`, takes all
  /// max_repeats samples without racing: the re-measurement of a best
  /// config). Does not offer the result: call offer() once the candidate
  /// has also passed whatever else it must.
  [[nodiscard]] race_result run(const std::function<std::optional<double>()>& sample,
                                bool full = false) const;
  /// The options a full re-measurement uses: min_repeats = max_repeats.
  [[nodiscard]] race_options full_options() const;

 private:
  race_options options_;
  mutable std::mutex mutex_;
  double incumbent_ = 0;
};

/// Times a candidate whose every evaluation is one sample (a command run
/// once per sample, a callback called once per sample): calls `once` until
/// `r`'s rule stops (`full`: all max_repeats, no racing), and returns the
/// first call's measurement with the race recorded (record_race: objective
/// = the median of the calls' objectives) and every call's cost summed. The
/// first call that is not ok is returned instead, with the cost so far.
/// Offers the median to `r` (unless `full`).
[[nodiscard]] measurement race_measurements(racer& r, const std::function<measurement()>& once,
                                            bool full = false);

/// Writes a race's outcome into `m`: objective = the median (seconds),
/// samples, and the metrics ci_low_s, ci_high_s (the median's ~95%
/// interval), iqr_s (interquartile range, nearest-rank), repeats; appends
/// "median of N samples; racing stopped: REASON" to the message. Leaves
/// status and cost alone. Empty samples: only the message.
void record_race(measurement& m, const race_result& r);

}  // namespace tessel
