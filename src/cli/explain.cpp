// `tessel explain FILE --config JSON`: why one config of a space is as fast
// as it is on the simulator: the bottleneck, engine busy fractions, the
// critical path and ranked suggestions in plain words, and with --trace a
// Chrome/Perfetto timeline. The config is given inline, from a file
// (@PATH), or as the best trial of a study file (--best DB).
#include "command.hpp"
#include "common.hpp"

#include <tessel/driver.hpp>
#include <tessel/error.hpp>
#include <tessel/ops.hpp>
#include <tessel/settings.hpp>
#include <tessel/sim.hpp>

#include <fmt/format.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <memory>

namespace tessel::cli {
namespace {

struct explain_options {
  spec_options input;
  config_choice chosen;
  std::string backend = "sim";
  std::vector<std::string> backend_settings;
  std::string trace;  ///< write the timeline here
  bool json = false;
  bool interactions = false;  ///< standalone and cascading effects against `against`
  std::string against;        ///< the base config (JSON or @PATH); "" = the baseline
  std::size_t budget = 64;    ///< simulator evaluations the interactions may spend
};

/// `explain --interactions`: the designed set of the chosen config against
/// the base, measured on the simulator (gated) within the budget, predicted
/// by the study's GP surrogate beyond it, the study's own figures reused
/// (tessel/interactions.hpp).
int run_interactions(const explain_options& o, const space& s, backend& b, const config& target) {
  const config base =
      o.against.empty() ? s.default_config().value_or(config{}) : chosen_config(s, o.against, "");
  if (base.empty())
    throw error("explain --interactions: the baseline is not a valid config; give --against");
  std::vector<trial> known;  // with --best, the study's trials: measured already, at no cost
  if (!o.chosen.best.empty()) known = reopen_study(o.chosen.best).trials;
  const auto r = interactions_measured_on(b, s, base, target, o.budget, known);
  fmt::print("base    {}\ntarget  {}\n{}", s.to_json(base), s.to_json(target), r.text());
  return exit_code::success;
}

int run_explain(const explain_options& o) {
  const auto loaded = read_space(o.input.resolved());
  const auto& s = loaded.space;
  const auto sim =
      simulator_for(s, o.backend, parse_assignments(o.backend_settings, "--backend-set"));
  const config c = o.chosen.in(s, "explain");
  if (o.interactions) return run_interactions(o, s, *sim, c);
  const auto e = sim->analyse(s, c);
  if (!o.trace.empty()) sim->write_trace(s, c, o.trace);
  // With --best, what the study's failures taught (tessel/constraints.hpp).
  std::vector<learned_constraint> learned;
  std::string learned_block;
  if (!o.chosen.best.empty()) {
    const auto stored = reopen_study(o.chosen.best);
    learned = learn_constraints(stored.space, stored.trials);
    learned_block = learned_text(learned, stored.trials);
  }
  if (o.json) {
    auto out = explanation_json(e, s, c);
    out["ok"] = true;
    if (!o.trace.empty()) out["trace"] = o.trace;
    if (!o.chosen.best.empty()) out["learned_constraints"] = learned_json(learned);
    fmt::print("{}\n", out.dump(2, ' ', false, nlohmann::json::error_handler_t::replace));
    return exit_code::success;
  }
  fmt::print("config  {}\n{}", s.to_json(c), e.text());
  if (!learned_block.empty()) fmt::print("\n{}", learned_block);
  if (!o.trace.empty())
    fmt::print("\ntrace written to {} (open it at https://ui.perfetto.dev or chrome://tracing)\n",
               o.trace);
  return exit_code::success;
}

}  // namespace

command add_explain_command(CLI::App& tool) {
  auto options = std::make_shared<explain_options>();
  auto* app = tool.add_subcommand(
      "explain",
      "Say why one config is as fast as it is on the simulator: bottleneck, engine busy "
      "fractions, ranked suggestions; --trace writes a Perfetto timeline");
  add_space_options(*app, options->input);
  add_config_options(*app, options->chosen, "Explain");
  app->add_option("--backend", options->backend, "The simulator: sim or sim:WORKLOAD")
      ->capture_default_str()
      ->type_name("SPEC");
  app->add_option("--backend-set", options->backend_settings,
                  "A simulator setting, e.g. --backend-set set.dma_issue_ns=60; repeatable")
      ->type_name("KEY=VALUE")
      ->allow_extra_args(false);
  app->add_option("--trace", options->trace,
                  "Write the timeline as Chrome/Perfetto trace JSON to PATH")
      ->type_name("PATH");
  app->add_flag("--json", options->json, "Print JSON on stdout");
  app->add_flag("--interactions", options->interactions,
                "Say which changes from the baseline help alone and which only together "
                "(measured on the simulator within --budget, else predicted)")
      ->excludes("--json", "--trace");
  app->add_option("--against", options->against,
                  "With --interactions: the base config (JSON or @PATH); default the baseline")
      ->type_name("JSON");
  app->add_option("--budget", options->budget,
                  "With --interactions: simulator evaluations to spend at most")
      ->type_name("N")
      ->check(whole_number())
      ->capture_default_str();
  return {app, [options] {
            return report_errors([&] { return run_explain(*options); }, options->json);
          }};
}

}  // namespace tessel::cli
