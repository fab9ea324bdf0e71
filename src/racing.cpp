// racing.cpp: tessel::racer and record_race (tessel/racing.hpp).
#include <tessel/error.hpp>
#include <tessel/racing.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace tessel {

void validate(const race_options& o, std::string_view owner) {
  if (const auto p = o.problem())
    throw options_error(fmt::format("{}.{}", owner, p->field), p->rule);
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

measurement race_measurements(racer& r, const std::function<measurement()>& once, bool full) {
  std::optional<measurement> first, failed;
  cost total;
  const auto result = r.run(
      [&]() -> std::optional<double> {
        auto m = once();
        total.compile_s += m.cost.compile_s;
        total.gate_s += m.cost.gate_s;
        total.run_s += m.cost.run_s;
        if (m.ok() && !std::isfinite(m.objective))
          m = measurement::failure(
              status::suspicious,
              fmt::format("suspicious: a non-finite objective ({})", m.objective), m.cost);
        if (!m.ok()) {
          failed = std::move(m);
          return std::nullopt;
        }
        const double objective = m.objective;
        if (!first) first = std::move(m);
        return objective;
      },
      full);
  measurement out = failed ? std::move(*failed) : std::move(*first);
  out.cost = total;
  if (failed) return out;
  out.samples.clear();
  record_race(out, result);
  if (!full) r.offer(out.objective);
  return out;
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
