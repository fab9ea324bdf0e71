// analyse_interactions (tessel/interactions.hpp).
#include <tessel/interactions.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace tessel {
namespace {

/// `base` with the target's value of each parameter in `changes`.
config with_changes(const config& base, const config& target,
                    const std::vector<std::size_t>& params,
                    const std::vector<std::size_t>& changes) {
  config c = base;
  for (const auto i : changes) c[params[i]] = target[params[i]];
  return c;
}

std::string percent(std::optional<double> g) {
  return g ? fmt::format("{:+.1f}%", 100 * *g) : std::string("n/a");
}

}  // namespace

std::optional<double> interaction_report::gain(const interaction_point& p) const {
  if (!p.objective || !base.objective || *base.objective == 0) return std::nullopt;
  return (*base.objective - *p.objective) / *base.objective;
}

std::vector<std::string> interaction_report::only_together(double alone_below,
                                                           double with_above) const {
  std::vector<std::string> out;
  const std::size_t k = changes.size();
  auto pair_of = [&](std::size_t i, std::size_t j) -> const interaction_point& {
    const auto [a, b] = std::minmax(i, j);
    // pairs are stored (0,1), (0,2), ..., (1,2), ...: the index of (a, b)
    return pairs[a * k - a * (a + 1) / 2 + (b - a - 1)];
  };
  for (std::size_t i = 0; i < k; ++i) {
    const auto solo = gain(alone[i]);
    if (!solo || *solo >= alone_below) continue;
    std::optional<double> best_extra;
    std::size_t best_j = 0;
    for (std::size_t j = 0; j < k; ++j) {
      if (j == i) continue;
      const auto both = gain(pair_of(i, j)), other = gain(alone[j]);
      if (!both || !other) continue;
      const double extra = *both - *other;  // what i adds on top of j
      if (!best_extra || extra > *best_extra) {
        best_extra = extra;
        best_j = j;
      }
    }
    if (best_extra && *best_extra >= with_above) {
      const bool all_measured =
          alone[i].measured && pair_of(i, best_j).measured && alone[best_j].measured;
      auto whole = [](double g) { return std::abs(g) < 0.005 ? 0.0 : 100 * g; };  // no "-0%"
      out.push_back(fmt::format("{} gains {:.0f}% alone, {:.0f}% with {} ({})", changes[i],
                                whole(*solo), whole(*best_extra), changes[best_j],
                                all_measured ? "measured" : "partly predicted"));
    }
  }
  return out;
}

std::string interaction_report::text() const {
  auto row = [&](std::string_view what, const interaction_point& p) {
    const std::string value = p.objective ? fmt::format("{:.4g}", *p.objective) : p.note;
    return fmt::format("  {:<44} {:>12}  {:>8}  {}\n", what, value, percent(gain(p)),
                       p.objective ? (p.measured ? "measured" : "predicted") : "");
  };
  auto names = [&](const interaction_point& p) {
    std::string out;
    for (const auto i : p.changes) out += (out.empty() ? "" : " + ") + changes[i];
    return out;
  };
  std::string out =
      fmt::format("interactions: {} changed parameters between base and target\n", changes.size());
  out += fmt::format("  {:<44} {:>12}  {:>8}\n", "config", "objective", "gain");
  out += row("base", base);
  out += row("target (every change)", target);
  out += "standalone: the base plus one change\n";
  for (const auto& p : alone) out += row(names(p), p);
  out += "on top of the others: the target without one change\n";
  for (const auto& p : without) out += row("without " + names(p), p);
  out += "cascading: the base plus two changes\n";
  for (const auto& p : pairs) out += row(names(p), p);
  const auto together = only_together();
  out += together.empty() ? "no change pays off only together with another\n"
                          : "changes that pay off only together:\n";
  for (const auto& line : together) out += "  " + line + "\n";
  out += fmt::format("budget: {} evaluations measured, {} figures predicted by the surrogate\n",
                     measured, predicted);
  return out;
}

interaction_report analyse_interactions(const space& s, const config& base, const config& target,
                                        const interaction_measure& measure, const surrogate* model,
                                        std::size_t budget) {
  interaction_report r;
  std::vector<std::size_t> params;  // the parameters the target changes
  for (std::size_t p = 0; p < s.size(); ++p)
    if (base[p] != target[p]) {
      params.push_back(p);
      r.changes.push_back(
          fmt::format("{}={}", s.parameters()[p].name, s.value_of(target, p).to_string()));
    }
  const std::size_t k = params.size();
  std::vector<std::size_t> all(k);
  for (std::size_t i = 0; i < k; ++i) all[i] = i;
  auto point = [&](std::vector<std::size_t> changes, const config& start,
                   const std::vector<std::size_t>& applied) {
    interaction_point p;
    p.changes = std::move(changes);
    p.c = with_changes(start, target, params, applied);
    return p;
  };
  r.base = point({}, base, {});
  r.target = point(all, base, all);
  for (std::size_t i = 0; i < k; ++i) r.alone.push_back(point({i}, base, {i}));
  for (std::size_t i = 0; i < k; ++i) {  // the target with change i undone
    auto p = point({i}, target, {});
    p.c[params[i]] = base[params[i]];
    r.without.push_back(std::move(p));
  }
  for (std::size_t i = 0; i < k; ++i)
    for (std::size_t j = i + 1; j < k; ++j) r.pairs.push_back(point({i, j}, base, {i, j}));

  auto evaluate = [&](interaction_point& p) {
    if (const auto why = s.why_invalid(p.c); !why.empty()) {
      p.note = "invalid (" + why + ")";
      return;
    }
    if (measure && r.measured < budget) {
      ++r.measured;
      p.measured = true;
      std::string why_failed;
      p.objective = measure(p.c, why_failed);
      if (!p.objective) p.note = why_failed.empty() ? "failed" : why_failed;
      return;
    }
    if (model && model->ready()) {
      p.objective = model->score(p.c, std::nullopt).mean;
      ++r.predicted;
      return;
    }
    p.note = "not evaluated (over budget)";
  };
  evaluate(r.base);
  evaluate(r.target);
  for (auto* design : {&r.alone, &r.without, &r.pairs})
    for (auto& p : *design) evaluate(p);
  return r;
}

}  // namespace tessel
