// report.cpp: what the failures of a study taught, for every front-end's
// report (tessel/driver.hpp): the learned constraints (tessel/constraints.hpp)
// as candidate `require` lines, and what testing them found.
#include <tessel/driver.hpp>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include <cstdint>

namespace tessel {
namespace {

/// The finished trials `bo` proposed to test its learned rules
/// (bo_options::rule_test_after): provenance "bo/rule-test" or "auto/bo/rule-test".
std::vector<const trial*> rule_tests(const std::vector<trial>& trials) {
  std::vector<const trial*> out;
  for (const auto& t : trials)
    if (t.state == trial_state::finished && t.provenance.source.ends_with("bo/rule-test"))
      out.push_back(&t);
  return out;
}

}  // namespace

/// A titled block of `require` lines and what testing the rules found, or
/// "" when nothing was learned or tested.
std::string learned_text(const std::vector<learned_constraint>& rules,
                         const std::vector<trial>& trials) {
  const auto tests = rule_tests(trials);
  if (rules.empty() && tests.empty()) return {};
  std::string out =
      "learned constraints: candidate require lines for the .tsl (each condition met by every\n"
      "failure it counts and by no success so far; check before pasting)\n";
  for (const auto& r : rules) out += "  " + r.line() + "\n";
  if (tests.empty()) return out;
  std::vector<std::uint64_t> ok, failed;
  for (const auto* t : tests) (t->result.ok() ? ok : failed).push_back(t->id);
  auto listed = [](const std::vector<std::uint64_t>& ids) {
    return ids.empty() ? std::string("none")
                       : fmt::format("{} (trial {})", ids.size(), fmt::join(ids, ", "));
  };
  out +=
      fmt::format("  bo tested the rules {} time(s): {} ran ok{}; {} failed\n", tests.size(),
                  listed(ok), ok.empty() ? "" : ", each refuting a rule held then", listed(failed));
  return out;
}

nlohmann::json learned_json(const std::vector<learned_constraint>& rules) {
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

}  // namespace tessel
