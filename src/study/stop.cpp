// Stop conditions and their composition.
#include <tessel/error.hpp>
#include <tessel/study.hpp>

#include <fmt/format.h>

#include <algorithm>

namespace tessel {

stop_condition::stop_condition(std::function<bool(const progress&)> test, std::string reason,
                               termination kind,
                               std::function<std::optional<std::size_t>(const progress&)> budget,
                               std::function<std::optional<double>(const progress&)> spent)
    : test_(std::move(test)),
      reason_(std::move(reason)),
      kind_(kind),
      budget_(std::move(budget)),
      spent_(std::move(spent)) {
  if (!test_) throw error("stop_condition: the test must be callable");
}

bool stop_condition::operator()(const progress& p) const {
  switch (combine_) {
    case combine::any:
      return std::any_of(parts_.begin(), parts_.end(), [&](const auto& c) { return c(p); });
    case combine::all:
      return std::all_of(parts_.begin(), parts_.end(), [&](const auto& c) { return c(p); });
    case combine::leaf: break;
  }
  return test_(p);
}

std::string stop_condition::reason(const progress& p) const {
  if (combine_ == combine::leaf) return reason_;
  std::string text;
  for (const auto& c : parts_) {
    if (!c(p)) continue;
    text += (text.empty() ? "" : " and ") + c.reason(p);
    if (combine_ == combine::any) break;
  }
  return text;
}

termination stop_condition::kind(const progress& p) const {
  if (combine_ == combine::leaf) return kind_;
  for (const auto& c : parts_)
    if (c(p)) return c.kind(p);
  return termination::not_run;
}

std::optional<std::size_t> stop_condition::evaluations_left(const progress& p) const {
  if (combine_ == combine::leaf) return budget_ ? budget_(p) : std::nullopt;
  std::optional<std::size_t> left;
  for (const auto& c : parts_) {
    const auto part = c.evaluations_left(p);
    if (combine_ == combine::any) {
      if (part) left = left ? std::min(*left, *part) : *part;
    } else if (!part) {
      return std::nullopt;  // one unbounded clause keeps the conjunction open
    } else {
      left = left ? std::max(*left, *part) : *part;
    }
  }
  return left;
}

std::optional<double> stop_condition::spent(const progress& p) const {
  if (combine_ == combine::leaf) return spent_ ? spent_(p) : std::nullopt;
  std::optional<double> out;
  for (const auto& c : parts_) {
    const auto part = c.spent(p);
    if (combine_ == combine::any) {
      if (part) out = out ? std::max(*out, *part) : *part;
    } else if (!part) {
      return std::nullopt;
    } else {
      out = out ? std::min(*out, *part) : *part;
    }
  }
  return out;
}

stop_condition operator||(stop_condition a, stop_condition b) {
  stop_condition c;
  c.combine_ = stop_condition::combine::any;
  c.parts_ = {std::move(a), std::move(b)};
  return c;
}

stop_condition operator&&(stop_condition a, stop_condition b) {
  stop_condition c;
  c.combine_ = stop_condition::combine::all;
  c.parts_ = {std::move(a), std::move(b)};
  return c;
}

namespace {

/// used / budget, clamped to [0, 1].
std::optional<double> fraction(double used, double budget) {
  return budget > 0 ? std::clamp(used / budget, 0.0, 1.0) : 1.0;
}

}  // namespace

namespace stop {

stop_condition evaluations(std::size_t n) {
  return {[n](const progress& p) { return p.evaluations >= n; },
          fmt::format("{} evaluations done", n), termination::evaluations,
          [n](const progress& p) {
            return std::optional<std::size_t>(n > p.evaluations ? n - p.evaluations : 0);
          },
          [n](const progress& p) {
            return fraction(static_cast<double>(p.evaluations), static_cast<double>(n));
          }};
}

stop_condition wall_seconds(double seconds) {
  return {[seconds](const progress& p) { return p.wall_s >= seconds; },
          fmt::format("wall time limit of {:g} s reached", seconds),
          termination::wall_time,
          {},
          [seconds](const progress& p) { return fraction(p.wall_s, seconds); }};
}

stop_condition cost_seconds(double seconds) {
  return {[seconds](const progress& p) { return p.cost_s >= seconds; },
          fmt::format("evaluation-cost budget of {:g} s spent", seconds),
          termination::cost_budget,
          {},
          [seconds](const progress& p) { return fraction(p.cost_s, seconds); }};
}

stop_condition tokens(double n) {
  return {[n](const progress& p) { return p.tokens >= n; },
          fmt::format("token budget of {:g} spent", n),
          termination::token_budget,
          {},
          [n](const progress& p) { return fraction(p.tokens, n); }};
}

stop_condition target(double objective) {
  return {[objective](const progress& p) { return p.best && *p.best <= objective; },
          fmt::format("target objective {:g} reached", objective), termination::target_reached};
}

stop_condition no_improvement(std::size_t n) {
  return {[n](const progress& p) { return p.evaluations > 0 && p.since_improvement >= n; },
          fmt::format("no improvement in {} evaluations", n), termination::no_improvement};
}

stop_condition never() {
  return {[](const progress&) { return false; }, "never", termination::not_run};
}

}  // namespace stop

std::string_view to_string(termination t) noexcept {
  switch (t) {
    case termination::evaluations: return "evaluations";
    case termination::wall_time: return "wall_time";
    case termination::cost_budget: return "cost_budget";
    case termination::target_reached: return "target_reached";
    case termination::no_improvement: return "no_improvement";
    case termination::token_budget: return "token_budget";
    case termination::space_exhausted: return "space_exhausted";
    case termination::strategy_done: return "strategy_done";
    case termination::negligible_gain: return "negligible_gain";
    case termination::not_run: return "not_run";
  }
  return "unknown";
}

}  // namespace tessel
