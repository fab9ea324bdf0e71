// overview.cpp: what `tessel tune` and `tessel show` say of a study besides
// its codec summary (tessel/driver.hpp): the best config re-measured, and a
// stored study's counts, best trials, fidelity and learned constraints.
#include <tessel/codec.hpp>
#include <tessel/driver.hpp>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>

namespace tessel {

nlohmann::json run_json(const summary& sum, const space& s,
                        const std::optional<measurement>& remeasured,
                        const multi_fidelity_backend* fidelity) {
  nlohmann::json out = {{"ok", true}, {"summary", codec::to_json(sum, s)}};
  if (remeasured) {
    auto again = codec::to_json(*remeasured);
    for (const auto* key : {"ci_low_s", "ci_high_s"})
      if (const auto it = remeasured->metrics.find(key); it != remeasured->metrics.end())
        again[key] = it->second;
    out["remeasured"] = std::move(again);
  }
  if (fidelity) out["fidelity"] = fidelity_json(fidelity->stats());
  return out;
}

std::string remeasured_text(const measurement& m, double searched) {
  if (!m.ok()) return "best config re-measured: " + outcome_text(m.status, m.message);
  const auto at = [&m](const char* key) {
    const auto it = m.metrics.find(key);
    return it == m.metrics.end() ? m.objective : it->second;
  };
  return fmt::format(
      "best config re-measured: median {} over {} samples, 95% CI [{}, {}] (the search "
      "measured {})",
      seconds_text(m.objective), m.samples.size(), seconds_text(at("ci_low_s")),
      seconds_text(at("ci_high_s")), seconds_text(searched));
}

study_overview overview_of(const stored_study& stored, std::size_t top) {
  study_overview out;
  std::vector<measurement> results;
  for (const auto& t : stored.trials) {
    if (t.state != trial_state::finished) {
      ++out.pending;
      continue;
    }
    ++out.finished;
    ++out.by_status[t.result.status];
    out.cost_s += t.result.cost.total();
    results.push_back(t.result);
    if (t.result.ok() && !t.result.low_fidelity()) out.best.push_back(&t);  // screens predict
  }
  out.fidelity = fidelity_stats(results);
  std::stable_sort(out.best.begin(), out.best.end(),
                   [](auto* a, auto* b) { return a->result.objective < b->result.objective; });
  if (out.best.size() > top) out.best.resize(top);
  out.learned = learn_constraints(stored.space, stored.trials);
  return out;
}

nlohmann::json study_overview::to_json(const stored_study& stored) const {
  const auto& s = stored.space;
  nlohmann::json top = nlohmann::json::array();
  for (const auto* t : best) top.push_back(codec::to_json(s, *t));
  return {{"ok", true},
          {"space", stored.record.space_name},
          {"target", stored.record.target},
          {"backend", stored.record.backend},
          {"strategy", stored.record.strategy},
          {"seed", stored.record.seed},
          {"valid_configs", s.count()},
          {"spec", stored.spec.to_json()},
          {"finished", finished},
          {"pending", pending},
          {"by_status", codec::counts_json(by_status)},
          {"cost_s", cost_s},
          {"best", top},
          {"learned_constraints", learned_json(learned)},
          {"fidelity", fidelity ? fidelity_json(*fidelity) : nlohmann::json(nullptr)}};
}

}  // namespace tessel
