// parameter_importances (tessel/report.hpp): first-order functional ANOVA
// of a surrogate's prediction, estimated on the study's own configs.
#include <tessel/report.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace tessel {
namespace {

double variance(const std::vector<double>& xs) {
  if (xs.size() < 2) return 0;
  double mean = 0;
  for (const double x : xs) mean += x;
  mean /= static_cast<double>(xs.size());
  double sum = 0;
  for (const double x : xs) sum += (x - mean) * (x - mean);
  return sum / static_cast<double>(xs.size());
}

/// `count` domain indices evenly spread over 0..size-1 (all when size <= count).
std::vector<config::index_type> spread(std::size_t size, std::size_t count) {
  std::vector<config::index_type> out;
  const std::size_t n = std::min(size, std::max<std::size_t>(count, 2));
  for (std::size_t k = 0; k < n; ++k)
    out.push_back(static_cast<config::index_type>(n == 1 ? 0 : k * (size - 1) / (n - 1)));
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

}  // namespace

std::optional<importance_result> parameter_importances(const space& s,
                                                       const std::vector<trial>& trials,
                                                       const surrogate& model,
                                                       std::size_t base_configs,
                                                       std::size_t values_per_parameter) {
  if (!model.ready()) return std::nullopt;
  std::vector<config> base;
  for (const auto& t : trials)
    if (t.state == trial_state::finished && t.result.ok() && !t.result.low_fidelity() &&
        base.size() < base_configs)
      base.push_back(t.config);
  if (base.size() < 2) return std::nullopt;

  std::vector<double> at_base;
  for (const auto& c : base) at_base.push_back(model.score(c, std::nullopt).mean);
  // log(objective) when every prediction allows it: relative effects.
  const bool log_scale = std::ranges::all_of(at_base, [](double m) { return m > 0; });
  auto on_scale = [&](double m) { return log_scale ? std::log(std::max(m, 1e-300)) : m; };
  for (auto& m : at_base) m = on_scale(m);
  const double total = variance(at_base);

  importance_result out;
  out.method = fmt::format(
      "first-order functional ANOVA of the surrogate's mean {} over {} of the study's ok configs",
      log_scale ? "log(objective)" : "objective", base.size());
  for (std::size_t p = 0; p < s.size(); ++p) {
    std::vector<double> effects;  // the mean prediction at each value of p
    for (const auto value : spread(s.parameters()[p].dom.size(), values_per_parameter)) {
      double sum = 0;
      std::size_t n = 0;
      for (auto c : base) {
        if (c[p] == config::inactive) continue;  // p plays no part in that config
        c[p] = value;
        sum += on_scale(model.score(c, std::nullopt).mean);
        ++n;
      }
      if (n > 0) effects.push_back(sum / static_cast<double>(n));
    }
    const double share = total > 0 ? std::min(variance(effects) / total, 1.0) : 0.0;
    out.parameters.push_back({s.parameters()[p].name, share});
  }
  std::ranges::stable_sort(out.parameters,
                           [](const auto& a, const auto& b) { return a.share > b.share; });
  return out;
}

}  // namespace tessel
