// multi_fidelity_backend.cpp: screen at the low fidelity, promote to the high
// one what is promising or where the fidelities disagree (docs/fidelity.md).
#include <tessel/error.hpp>
#include <tessel/fidelity.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace tessel {
namespace {

void tag(measurement& m, double level) {
  m.metrics[fidelity_metric::level] = level;
  m.metrics[fidelity_metric::levels] = 2;
}

cost operator+(const cost& a, const cost& b) {
  return {a.compile_s + b.compile_s, a.gate_s + b.gate_s, a.run_s + b.run_s};
}

}  // namespace

multi_fidelity_backend::multi_fidelity_backend(std::shared_ptr<backend> low,
                                               std::shared_ptr<backend> high, options opts)
    : low_(std::move(low)), high_(std::move(high)), options_(opts) {
  if (!low_ || !high_)
    throw error("multi_fidelity_backend: both a low- and a high-fidelity backend are required");
  options_.validate();
}

std::string multi_fidelity_backend::name() const {
  return fmt::format("fidelity({} -> {})", low_->name(), high_->name());
}

std::optional<std::string> multi_fidelity_backend::hardware() const { return high_->hardware(); }

void multi_fidelity_backend::prepare(const space& s) {
  low_->prepare(s);
  high_->prepare(s);
}

std::size_t multi_fidelity_backend::concurrency() const {
  return std::max<std::size_t>(1, low_->concurrency());
}

double multi_fidelity_backend::estimated_cost(const space& s, const config& c) const {
  return low_->estimated_cost(s, c);
}

multi_fidelity_backend::decision multi_fidelity_backend::decide(double low_objective) {
  const auto& corr = stats_.correction;
  decision d;
  const auto at = std::lower_bound(low_sorted_.begin(), low_sorted_.end(), low_objective);
  const auto rank = static_cast<double>(at - low_sorted_.begin()) + 1.0;
  low_sorted_.insert(at, low_objective);
  const double fraction = options_.top_fraction *
                          (1.0 + static_cast<double>(screened_in_a_row_ / options_.top_patience));
  const bool top = rank <= std::max(static_cast<double>(options_.top_min),
                                    fraction * static_cast<double>(low_sorted_.size()));
  d.spread = corr.spread;
  const bool usable = !corr.log_scale || low_objective > 0;
  d.predicted = usable ? corr.predict(low_objective) : low_objective;
  if (pairs_.size() < options_.warmup || !stats_.best_high || !corr.spread || !usable) {
    d.promote = promotion_reason::warmup;
    return d;
  }
  const double tau = stats_.agreement.kendall_tau.value_or(0.0);
  if (tau <= 0) {
    d.promote = promotion_reason::disagree;
    return d;
  }
  const double incumbent = corr.scaled(*stats_.best_high);
  const double predicted = corr.predict_scaled(low_objective);
  // The residual spread, floored at min_spread: a few promoted pairs that
  // agree fit a spread far below the low model's real level error.
  const double residual = std::max(*corr.spread, options_.min_spread);
  d.spread = corr.prediction_spread(low_objective, options_.min_spread);
  const double spread = *d.spread;
  const double widened =
      options_.z * options_.min_agreement / std::min(tau, options_.min_agreement);
  // The same question asked on the low fidelity's own scale, which needs no
  // correction, only monotonicity: could c's low objective beat the
  // incumbent's, given the noise of both (the residual spread over the slope,
  // times sqrt 2)? It keeps a bias of the log-linear fit at the extremes
  // from screening out the best configs.
  const double low_noise = residual / corr.slope * std::sqrt(2.0);
  const bool beats_low =
      corr.scaled(low_objective) - options_.z * low_noise < corr.scaled(best_high_low_);
  if (top && (predicted - options_.z * spread < incumbent || beats_low)) {
    d.promote = promotion_reason::promising;
  } else if (tau < options_.min_agreement && predicted - widened * spread < incumbent) {
    d.promote = promotion_reason::disagree;
  } else if (options_.audit_every && ++screened_since_audit_ >= options_.audit_every) {
    screened_since_audit_ = 0;
    d.promote = promotion_reason::audit;
  }
  return d;
}

void multi_fidelity_backend::record_high(double low_objective, const measurement& high) {
  ++stats_.high_evaluations;
  stats_.high_cost_s += high.cost.total();
  if (!high.ok() || !std::isfinite(high.objective) || !std::isfinite(low_objective)) return;
  if (!stats_.best_high || high.objective < *stats_.best_high) {
    stats_.best_high = high.objective;
    best_high_low_ = low_objective;
  }
  pairs_.emplace_back(low_objective, high.objective);
  stats_.correction = fit_correction(pairs_);
  stats_.agreement = measure_agreement(pairs_);
}

void multi_fidelity_backend::acquire_high() {
  std::unique_lock lock(mutex_);
  const auto limit = std::max<std::size_t>(1, high_->concurrency());
  high_free_.wait(lock, [&] { return high_running_ < limit; });
  ++high_running_;
}

void multi_fidelity_backend::release_high() {
  {
    const std::lock_guard lock(mutex_);
    --high_running_;
  }
  high_free_.notify_one();
}

std::optional<measurement> multi_fidelity_backend::remeasure(const space& s, const config& c) {
  acquire_high();
  struct release_on_exit {
    multi_fidelity_backend& self;
    ~release_on_exit() { self.release_high(); }
  } release{*this};
  return high_->remeasure(s, c);
}

measurement multi_fidelity_backend::evaluate(const space& s, const config& c) {
  auto low = low_->evaluate(s, c);
  decision d;
  {
    const std::lock_guard lock(mutex_);
    ++stats_.low_evaluations;
    stats_.low_cost_s += low.cost.total();
    if (low.ok()) {
      d = decide(low.objective);
    } else if (options_.promote_failures) {
      d.promote = promotion_reason::disagree;
    }
    if (d.promote && options_.max_high > 0 && promoted_ >= options_.max_high)
      d.promote.reset();  // the high budget is spent (or promised to evaluations in flight)
    if (d.promote) ++promoted_;
    if (low.ok()) screened_in_a_row_ = d.promote ? 0 : screened_in_a_row_ + 1;
  }
  if (!low.ok() && !d.promote) {
    low.message = fmt::format("low fidelity ({}): {}", low_->name(), low.message);
    tag(low, 0);
    return low;
  }
  if (!d.promote) {
    measurement screen = measurement::success(d.predicted, low.cost);
    screen.metrics = std::move(low.metrics);
    tag(screen, 0);
    screen.metrics[fidelity_metric::low_objective] = low.objective;
    screen.metrics[fidelity_metric::predicted] = d.predicted;
    if (d.spread) screen.metrics[fidelity_metric::spread] = *d.spread;
    const std::lock_guard lock(mutex_);
    screen.message = fmt::format(
        "screened at low fidelity ({}): {:.6g} there, predicted {:.6g} here (spread {:.3g}); "
        "best high-fidelity {:.6g}; not promoted",
        low_->name(), low.objective, d.predicted, d.spread.value_or(0.0),
        stats_.best_high.value_or(0.0));
    return screen;
  }
  acquire_high();
  measurement high;
  try {
    high = high_->evaluate(s, c);
  } catch (...) {
    release_high();
    throw;
  }
  release_high();
  {
    const std::lock_guard lock(mutex_);
    record_high(low.ok() ? low.objective : NAN, high);
    ++stats_.by_reason[static_cast<std::size_t>(*d.promote)];
  }
  const double high_cost = high.cost.total();
  high.cost = low.cost + high.cost;
  tag(high, 1);
  if (low.ok()) {
    high.metrics[fidelity_metric::low_objective] = low.objective;
    high.metrics[fidelity_metric::predicted] = d.predicted;
  }
  if (d.spread) high.metrics[fidelity_metric::spread] = *d.spread;
  high.metrics[fidelity_metric::reason] = static_cast<double>(*d.promote);
  high.metrics[fidelity_metric::high_cost_s] = high_cost;
  if (!high.ok()) high.message = fmt::format("high fidelity ({}): {}", high_->name(), high.message);
  return high;
}

void multi_fidelity_backend::restore(const std::vector<measurement>& earlier) {
  const auto rebuilt = fidelity_stats(earlier);
  if (!rebuilt) return;
  const std::lock_guard lock(mutex_);
  stats_ = *rebuilt;
  promoted_ = stats_.high_evaluations;
  pairs_.clear();
  low_sorted_.clear();
  for (const auto& m : earlier) {
    if (const auto low = m.metrics.find(fidelity_metric::low_objective); low != m.metrics.end())
      low_sorted_.push_back(low->second);
    const auto level = m.metrics.find(fidelity_metric::level);
    const auto low = m.metrics.find(fidelity_metric::low_objective);
    if (m.ok() && level != m.metrics.end() && level->second >= 1 && low != m.metrics.end()) {
      pairs_.emplace_back(low->second, m.objective);
      if (m.objective <= *stats_.best_high) best_high_low_ = low->second;
    }
  }
  std::sort(low_sorted_.begin(), low_sorted_.end());
}

multi_fidelity_stats multi_fidelity_backend::stats() const {
  const std::lock_guard lock(mutex_);
  return stats_;
}

}  // namespace tessel
