// analyse_interactions (tessel/interactions.hpp).
#include <tessel/interactions.hpp>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <map>

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

/// `c` with each conditional parameter active exactly when its condition
/// holds (as from_partial_json decides): an inactive one that must be active
/// takes the target's value, else the base's, else its default. A parameter
/// is thereby never a change of its own only by being switched on or off.
config settled(const space& s, config c, const config& base, const config& target) {
  const auto& params = s.parameters();
  auto j = nlohmann::json::parse(s.to_json(c));
  bool conditional = false;
  for (const auto& p : params)
    if (p.when) {
      j.erase(p.name);
      conditional = true;
    }
  if (!conditional) return c;
  const config filled = s.from_partial_json(j.dump());
  for (std::size_t p = 0; p < params.size(); ++p) {
    if (!params[p].when) continue;
    if (filled[p] == config::inactive)
      c[p] = config::inactive;
    else if (c[p] == config::inactive)
      c[p] = target[p] != config::inactive ? target[p]
             : base[p] != config::inactive ? base[p]
                                           : filled[p];
  }
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
  out += fmt::format(
      "budget: {} evaluations spent, {} figures measured in all, {} predicted by the surrogate\n",
      spent, measured, predicted);
  return out;
}

interaction_report analyse_interactions(const space& s, const config& base, const config& target,
                                        const interaction_measure& measure, const surrogate* model,
                                        std::size_t budget, const std::vector<trial>& known) {
  interaction_report r;
  // config key -> the result of its first ok (else first failed) trial in
  // `known`, copied: `measure` may add to the vector `known` refers to.
  std::map<std::uint64_t, measurement> found;
  for (const auto& t : known) {
    if (t.state != trial_state::finished || t.result.low_fidelity()) continue;
    const auto [at, added] = found.emplace(t.key, t.result);
    if (!added && !at->second.ok() && t.result.ok()) at->second = t.result;
  }
  auto& params = r.parameters;                // the parameters the target changes
  for (std::size_t p = 0; p < s.size(); ++p)  // switched on or off: follows its condition
    if (base[p] != target[p] && base[p] != config::inactive && target[p] != config::inactive) {
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
    p.c = settled(s, with_changes(start, target, params, applied), base, target);
    return p;
  };
  r.base = point({}, base, {});
  r.target = point(all, base, all);
  for (std::size_t i = 0; i < k; ++i) r.alone.push_back(point({i}, base, {i}));
  for (std::size_t i = 0; i < k; ++i) {  // the target with change i undone
    auto p = point({i}, target, {});
    p.c[params[i]] = base[params[i]];
    p.c = settled(s, p.c, base, target);
    r.without.push_back(std::move(p));
  }
  for (std::size_t i = 0; i < k; ++i)
    for (std::size_t j = i + 1; j < k; ++j) r.pairs.push_back(point({i, j}, base, {i, j}));

  auto evaluate = [&](interaction_point& p) {
    if (const auto why = s.why_invalid(p.c); !why.empty()) {
      p.note = "invalid (" + why + ")";
      return;
    }
    if (const auto t = found.find(s.key(p.c)); t != found.end()) {
      ++r.measured;
      p.measured = true;
      const auto& m = t->second;
      if (m.ok()) p.objective = m.objective;
      p.note = m.ok() ? "" : outcome_text(m.status, m.message);
      return;
    }
    if (measure && r.spent < budget) {
      ++r.spent;
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
