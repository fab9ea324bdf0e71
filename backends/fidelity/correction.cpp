// correction.cpp: the low-to-high correction (least squares on ln objectives)
// and the rank agreement (Kendall tau-b, Spearman rho) between fidelities,
// plus the fidelity report rebuilt from stored measurements.
#include <tessel/error.hpp>
#include <tessel/fidelity.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>

namespace tessel {
namespace {

/// Average ranks (1-based; ties share their mean rank).
std::vector<double> ranks(const std::vector<double>& v) {
  std::vector<std::size_t> order(v.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](auto a, auto b) { return v[a] < v[b]; });
  std::vector<double> out(v.size());
  for (std::size_t i = 0; i < order.size();) {
    std::size_t j = i;
    while (j + 1 < order.size() && v[order[j + 1]] == v[order[i]]) ++j;
    const double r = 0.5 * static_cast<double>(i + j) + 1.0;
    for (std::size_t k = i; k <= j; ++k) out[order[k]] = r;
    i = j + 1;
  }
  return out;
}

double pearson(const std::vector<double>& x, const std::vector<double>& y) {
  const auto n = static_cast<double>(x.size());
  const double mx = std::accumulate(x.begin(), x.end(), 0.0) / n;
  const double my = std::accumulate(y.begin(), y.end(), 0.0) / n;
  double sxy = 0, sxx = 0, syy = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    sxy += (x[i] - mx) * (y[i] - my);
    sxx += (x[i] - mx) * (x[i] - mx);
    syy += (y[i] - my) * (y[i] - my);
  }
  return sxx > 0 && syy > 0 ? sxy / std::sqrt(sxx * syy) : 0.0;
}

/// Kendall's tau-b (ties in either variable accounted for), O(n^2).
double kendall(const std::vector<std::pair<double, double>>& p) {
  double concordant = 0, discordant = 0, ties_x = 0, ties_y = 0;
  for (std::size_t i = 0; i < p.size(); ++i)
    for (std::size_t j = i + 1; j < p.size(); ++j) {
      const double dx = p[i].first - p[j].first, dy = p[i].second - p[j].second;
      if (dx == 0 && dy == 0) continue;
      if (dx == 0) {
        ++ties_x;
      } else if (dy == 0) {
        ++ties_y;
      } else if ((dx > 0) == (dy > 0)) {
        ++concordant;
      } else {
        ++discordant;
      }
    }
  const double denominator =
      std::sqrt((concordant + discordant + ties_x) * (concordant + discordant + ties_y));
  return denominator > 0 ? (concordant - discordant) / denominator : 0.0;
}

}  // namespace

std::string_view to_string(promotion_reason r) noexcept {
  switch (r) {
    case promotion_reason::warmup: return "warmup";
    case promotion_reason::promising: return "promising";
    case promotion_reason::disagree: return "disagree";
    case promotion_reason::audit: return "audit";
  }
  return "unknown";
}

double fidelity_correction::scaled(double y) const { return log_scale ? std::log(y) : y; }

double fidelity_correction::predict_scaled(double low) const {
  return intercept + slope * scaled(low);
}

double fidelity_correction::predict(double low) const {
  const double v = predict_scaled(low);
  return log_scale ? std::exp(v) : v;
}

std::optional<double> fidelity_correction::prediction_spread(double low,
                                                             double min_residual) const {
  if (!spread) return std::nullopt;
  const double d = scaled(low) - mean_low;
  const double leverage = spread_low > 0 ? d * d / spread_low : 0.0;
  return std::max(*spread, min_residual) *
         std::sqrt(1.0 + 1.0 / static_cast<double>(pairs) + leverage);
}

std::string fidelity_correction::text() const {
  const char* f = log_scale ? "ln " : "";
  const auto spread_text = spread ? fmt::format("spread {:.3g}", *spread) : "spread unknown";
  return fmt::format("{}high = {:.4g} {} {:.4g} {}low ({}, {} pair{})", f, intercept,
                     slope < 0 ? '-' : '+', std::abs(slope), f, spread_text, pairs,
                     pairs == 1 ? "" : "s");
}

fidelity_correction fit_correction(const std::vector<std::pair<double, double>>& pairs) {
  fidelity_correction c;
  c.pairs = pairs.size();
  c.log_scale =
      std::all_of(pairs.begin(), pairs.end(), [](auto p) { return p.first > 0 && p.second > 0; });
  if (pairs.empty()) return c;
  std::vector<double> x, y;
  for (const auto& [low, high] : pairs) {
    x.push_back(c.scaled(low));
    y.push_back(c.scaled(high));
  }
  const auto n = static_cast<double>(pairs.size());
  const double mx = std::accumulate(x.begin(), x.end(), 0.0) / n;
  const double my = std::accumulate(y.begin(), y.end(), 0.0) / n;
  c.slope = 1.0;
  c.mean_low = mx;
  double sxy = 0, sxx = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    sxy += (x[i] - mx) * (y[i] - my);
    sxx += (x[i] - mx) * (x[i] - mx);
  }
  c.spread_low = sxx;
  if (pairs.size() >= 3 && sxx > 0 && sxy > 0) c.slope = std::clamp(sxy / sxx, 0.05, 20.0);
  c.intercept = my - c.slope * mx;
  if (pairs.size() >= 3) {
    double rss = 0;
    for (std::size_t i = 0; i < x.size(); ++i) {
      const double r = y[i] - c.intercept - c.slope * x[i];
      rss += r * r;
    }
    c.spread = std::sqrt(rss / (n - 2.0));
  }
  return c;
}

std::string rank_agreement::text() const {
  if (!kendall_tau)
    return fmt::format("not measured yet ({} config{} at both fidelities; 3 needed)", pairs,
                       pairs == 1 ? "" : "s");
  return fmt::format("Kendall tau {:.3f}, Spearman rho {:.3f} over {} configs", *kendall_tau,
                     *spearman_rho, pairs);
}

rank_agreement measure_agreement(const std::vector<std::pair<double, double>>& pairs) {
  rank_agreement a;
  a.pairs = pairs.size();
  if (pairs.size() < 3) return a;
  std::vector<double> x, y;
  for (const auto& [low, high] : pairs) {
    x.push_back(low);
    y.push_back(high);
  }
  a.kendall_tau = kendall(pairs);
  a.spearman_rho = pearson(ranks(x), ranks(y));
  return a;
}

std::string multi_fidelity_stats::text() const {
  std::string out;
  out += fmt::format("  {:<22}{:>10}  ({:.3f} s)\n", "low-fidelity evals", low_evaluations,
                     low_cost_s);
  out += fmt::format("  {:<22}{:>10}  ({:.3f} s)", "high-fidelity evals", high_evaluations,
                     high_cost_s);
  std::string reasons;
  for (std::size_t r = 0; r < 4; ++r)
    if (by_reason[r])
      reasons += fmt::format("{}{} {}", reasons.empty() ? "" : ", ", by_reason[r],
                             to_string(static_cast<promotion_reason>(r)));
  out += reasons.empty() ? "\n" : fmt::format(": {}\n", reasons);
  out += fmt::format("  {:<22}{}\n", "rank agreement", agreement.text());
  out += fmt::format("  {:<22}{}\n", "correction", correction.text());
  if (best_high) out += fmt::format("  {:<22}{:.6g}\n", "best high-fidelity", *best_high);
  return out;
}

std::optional<multi_fidelity_stats> fidelity_stats(const std::vector<measurement>& results) {
  multi_fidelity_stats s;
  std::vector<std::pair<double, double>> pairs;
  bool any = false;
  for (const auto& m : results) {
    const auto level = m.metrics.find(fidelity_metric::level);
    if (level == m.metrics.end()) continue;
    any = true;
    ++s.low_evaluations;
    const auto high_cost = m.metrics.find(fidelity_metric::high_cost_s);
    const double hc = high_cost == m.metrics.end() ? 0.0 : high_cost->second;
    s.low_cost_s += m.cost.total() - hc;
    if (level->second < 1) continue;
    ++s.high_evaluations;
    s.high_cost_s += hc;
    if (const auto r = m.metrics.find(fidelity_metric::reason); r != m.metrics.end())
      if (r->second >= 0 && r->second < 4) ++s.by_reason[static_cast<std::size_t>(r->second)];
    if (!m.ok()) continue;
    if (!s.best_high || m.objective < *s.best_high) s.best_high = m.objective;
    if (const auto low = m.metrics.find(fidelity_metric::low_objective); low != m.metrics.end())
      pairs.emplace_back(low->second, m.objective);
  }
  if (!any) return std::nullopt;
  s.correction = fit_correction(pairs);
  s.agreement = measure_agreement(pairs);
  return s;
}

void multi_fidelity_options::validate() const {
  if (warmup < 3)
    throw options_error("multi_fidelity_options::warmup", warmup,
                        "must be at least 3 (a correction needs 3 pairs)");
  if (!(z >= 0) || !std::isfinite(z))
    throw options_error("multi_fidelity_options::z", z, "must be finite and >= 0");
  if (top_patience == 0)
    throw options_error("multi_fidelity_options::top_patience", "0", "must be at least 1");
  if (!(top_fraction > 0 && top_fraction <= 1))
    throw options_error("multi_fidelity_options::top_fraction", top_fraction, "must be in (0, 1]");
  if (!(min_agreement > 0 && min_agreement <= 1))
    throw options_error("multi_fidelity_options::min_agreement", min_agreement,
                        "must be in (0, 1]");
  if (!(min_spread >= 0) || !std::isfinite(min_spread))
    throw options_error("multi_fidelity_options::min_spread", min_spread,
                        "must be finite and >= 0");
}

}  // namespace tessel
