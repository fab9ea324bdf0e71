// The study's summary and its reports.
#include "study/state.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace tessel {
namespace {

std::string config_text(const space& s, const config& c) {
  std::string text;
  for (std::size_t p = 0; p < s.size(); ++p)
    text += fmt::format("{}{} = {}", p ? ", " : "", s.parameters()[p].name,
                        s.value_of(c, p).to_string());
  return text;
}

}  // namespace

summary study::state::make_summary() const {
  summary out;
  out.reason = last_reason;
  out.message = last_message;
  if (best_index) out.best = trials[*best_index];
  out.evaluations = progress_.evaluations;
  out.evaluations_to_best = evaluations_to_best;
  out.by_status = by_status;
  out.seed = options_.seed;
  out.space_name = space_.name();
  out.backend_name = backend_->name();
  out.strategy_name = strategy_->name();
  out.jobs_given = options_.jobs;
  out.jobs_used = jobs_used;
  out.wall_s = run_wall_s;
  out.propose_s = propose_s;
  out.evaluate_s = evaluate_s;
  out.overhead_s = std::max(0.0, run_wall_s - propose_s - evaluate_s);
  out.cost_s = progress_.cost_s;
  out.tokens = progress_.tokens;
  for (const auto& [source, spent] : tokens_by_source)
    if (spent.first > 0) out.tokens_by_source[source] = spent;
  out.reported = reported;
  out.verified = verified;
  if (best_index) out.best_config_text = config_text(space_, trials[*best_index].config);
  return out;
}

std::string summary::brief_report() const {
  std::string best_text =
      best ? fmt::format("best {} (trial {}, after {} evaluations)",
                         seconds_text(best->result.objective), best->id, evaluations_to_best)
           : std::string("no successful evaluation");
  return fmt::format("tessel: {} evaluations in {:.2f} s, {}; stopped: {}", evaluations, wall_s,
                     best_text, message.empty() ? std::string(to_string(reason)) : message);
}

std::string summary::full_report() const {
  std::string out = "tessel study report\n\n";
  out += fmt::format("{:<24}{:>16}{:>16}\n", "", "given", "used");
  out += fmt::format("{:<24}{:>16}{:>16}\n", "jobs",
                     jobs_given == 0 ? std::string("auto") : std::to_string(jobs_given), jobs_used);
  out += fmt::format("{:<24}{:>16}{:>16}\n", "seed", seed, seed);
  out += fmt::format("{:<24}{:>32}\n", "space", space_name);
  out += fmt::format("{:<24}{:>32}\n", "backend", backend_name);
  out += fmt::format("{:<24}{:>32}\n\n", "strategy", strategy_name);
  out += "evaluations by status\n";
  for (const auto& [st, n] : by_status) out += fmt::format("  {:<22}{:>10}\n", to_string(st), n);
  out += fmt::format("  {:<22}{:>10}\n\n", "total", evaluations);
  out += "time (seconds)\n";
  out += fmt::format("  {:<22}{:>10.3f}\n", "proposing", propose_s);
  out += fmt::format("  {:<22}{:>10.3f}\n", "evaluating (wall)", evaluate_s);
  out += fmt::format("  {:<22}{:>10.3f}\n", "overhead", overhead_s);
  out += fmt::format("  {:<22}{:>10.3f}\n", "total", wall_s);
  out += fmt::format("  {:<22}{:>10.3f}\n\n", "evaluation cost", cost_s);
  if (tokens > 0 || reported > 0 || verified > 0) {
    out += "agents\n";
    out += fmt::format("  {:<22}{:>10.0f}\n", "tokens spent", tokens);
    for (const auto& [source, spent] : tokens_by_source)
      out += fmt::format("    {:<20}{:>10.0f}  ({} proposals, {:.0f} each)\n", source, spent.first,
                         spent.second,
                         spent.first / static_cast<double>(std::max<std::size_t>(spent.second, 1)));
    out += fmt::format("  {:<22}{:>10}\n", "reported (unverified)", reported);
    out += fmt::format("  {:<22}{:>10}\n\n", "re-measured (verified)", verified);
  }
  if (best) {
    out += fmt::format("best objective          {} ({:.6g})\n",
                       seconds_text(best->result.objective), best->result.objective);
    out += fmt::format("found at                trial {} ({} evaluations), proposed by {}\n",
                       best->id, evaluations_to_best, best->provenance.source);
    out += fmt::format("best config             {}\n", best_config_text);
    if (best->reported)
      out +=
          "                        (agent-reported, not measured by tessel: --verify re-measures "
          "it)\n";
  } else {
    out += "no successful evaluation\n";
  }
  out += fmt::format("\ntermination             {} ({})\n", to_string(reason), message);
  return out;
}

}  // namespace tessel
