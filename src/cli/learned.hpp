// What the failures of a study taught: the learned constraints
// (tessel/constraints.hpp) as candidate `require` lines, for `show`,
// `explain --best`, `tune`'s report and `check --suggest-constraints`.
#pragma once

#include <tessel/constraints.hpp>
#include <tessel/space.hpp>
#include <tessel/trial.hpp>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace tessel::cli {

/// The rules learned from every finished trial of a study.
inline std::vector<learned_constraint> learned_from(const space& s,
                                                    const std::vector<trial>& trials) {
  return learn_constraints(s, trials);
}

/// A titled block of `require` lines, or "" when nothing was learned.
inline std::string learned_text(const std::vector<learned_constraint>& rules) {
  if (rules.empty()) return {};
  std::string out =
      "learned constraints: candidate require lines for the .tsl (each condition met by every\n"
      "failure it counts and by no success so far; check before pasting)\n";
  for (const auto& r : rules) out += "  " + r.line() + "\n";
  return out;
}

inline nlohmann::json learned_json(const std::vector<learned_constraint>& rules) {
  auto out = nlohmann::json::array();
  for (const auto& r : rules)
    out.push_back({{"require", r.require},
                   {"rejects", r.condition},
                   {"kind", std::string(to_string(r.kind))},
                   {"failures_rejected", r.failures_rejected},
                   {"failures", r.failures},
                   {"successes_rejected", r.successes_rejected},
                   {"successes", r.successes}});
  return out;
}

}  // namespace tessel::cli
