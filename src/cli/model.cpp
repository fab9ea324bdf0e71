// `tessel model FILE`: a model's step time at its kernels' default configs
// (or, with --from DIR, at the best configs of tune-model's study files), per
// kernel and in total, by category and by group, with FLOPs, bytes and the
// roofline; with two targets, which gives the shorter step (docs/models.md).
#include "command.hpp"
#include "common.hpp"

#include <fmt/format.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <memory>

namespace tessel::cli {
namespace {

struct model_command_options {
  model_options model;
  std::string from;  ///< tune-model's --db-dir: time each kernel's best config instead
};

int run_model(const model_command_options& o) {
  const auto targets = o.model.chosen_targets();
  const bool several = targets.size() > 1;
  nlohmann::json all = nlohmann::json::array();
  std::vector<target_step> steps;
  for (const auto& target : targets) {
    const auto r = model_step(o.model.spec_for(target), o.from, several);
    steps.push_back({target, r.step.step_s, physical_cores(r.model)});
    if (o.model.json)
      all.push_back(r.to_json());
    else
      fmt::print("{}{}", &target == &targets.front() ? "" : "\n", r.text());
  }
  const auto comparison = compare_text(steps);
  if (o.model.json) {
    nlohmann::json out = {{"ok", true}, {"targets", all}};
    if (!comparison.empty()) out["comparison"] = comparison;
    fmt::print("{}\n", out.dump(2));
  } else if (!comparison.empty()) {
    fmt::print("\n{}", comparison);
  }
  return exit_code::success;
}

}  // namespace

command add_model_command(CLI::App& tool) {
  auto options = std::make_shared<model_command_options>();
  auto* app = tool.add_subcommand(
      "model",
      "Decompose a model's step time: per kernel and in total, by category (matmul, elementwise, "
      "HBM, collectives, stall) and group, with FLOPs, bytes and each kernel's share");
  add_model_options(*app, options->model);
  app->add_option("--from", options->from,
                  "Time each kernel's best config from tune-model's study files in DIR (its "
                  "--db-dir; default: the default configs)")
      ->type_name("DIR");
  return {app, [options] {
            return report_errors([&] { return run_model(*options); }, options->model.json);
          }};
}

}  // namespace tessel::cli
