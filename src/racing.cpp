// racing.cpp: tessel::racer and record_race (tessel/racing.hpp).
#include <tessel/error.hpp>
#include <tessel/racing.hpp>

#include <fmt/format.h>

#include <algorithm>

namespace tessel {

void validate(const race_options& o) {
  if (const char* p = o.problem()) throw options_error(fmt::format("race_options: {}", p));
}

racer::racer(race_options o) : options_(o) { validate(options_); }

double racer::incumbent() const {
  const std::lock_guard lock(mutex_);
  return incumbent_;
}

void racer::offer(double median_s) {
  if (!(median_s > 0)) return;
  const std::lock_guard lock(mutex_);
  if (incumbent_ == 0 || median_s < incumbent_) incumbent_ = median_s;
}

race_options racer::full_options() const {
  race_options o = options_;
  o.min_repeats = o.max_repeats;
  o.max_seconds = 0;
  return o;
}

race_result racer::run(const std::function<std::optional<double>()>& sample, bool full) const {
  if (full) return race(sample, 0.0, full_options());
  return race(sample, incumbent(), options_);
}

void record_race(measurement& m, const race_result& r) {
  const auto note = fmt::format("median of {} sample{}; racing stopped: {}", r.samples.size(),
                                r.samples.size() == 1 ? "" : "s", to_string(r.stopped));
  m.message = m.message.empty() ? note : m.message + "; " + note;
  if (r.samples.empty()) return;
  const auto mi = median_with_interval(r.samples);
  m.objective = mi.median;
  m.samples = r.samples;
  m.metrics["ci_low_s"] = mi.low;
  m.metrics["ci_high_s"] = mi.high;
  m.metrics["repeats"] = static_cast<double>(r.samples.size());
  auto sorted = r.samples;  // spread: the interquartile range, nearest-rank quartiles
  std::sort(sorted.begin(), sorted.end());
  const auto rank = [&sorted](double q) {
    return sorted[std::min(sorted.size() - 1,
                           static_cast<std::size_t>(q * static_cast<double>(sorted.size())))];
  };
  m.metrics["iqr_s"] = rank(0.75) - rank(0.25);
}

}  // namespace tessel
