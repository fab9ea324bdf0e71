// `tessel model FILE`: a model's step time at its kernels' default configs
// (or, with --from DIR, at the best configs of tune-model's study files), per
// kernel and in total, by category and by group, with FLOPs, bytes and the
// roofline; with two targets, which gives the shorter step (docs/models.md).
#include "command.hpp"
#include "common.hpp"
#include "format.hpp"
#include "model_text.hpp"

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
  const bool several = o.model.targets.size() > 1;
  nlohmann::json all = nlohmann::json::array();
  std::vector<target_step> steps;
  for (const auto& target : o.model.targets) {
    const auto spec = o.model.spec_for(target);
    const auto m = read_model(spec);
    const auto dir = model_db_dir(m, o.from, several);
    const auto timed = o.from.empty() ? time_defaults(m, spec) : time_bests(m, spec, dir);
    const auto step = step_for(m, timed);
    steps.push_back({target, step.step_s, physical_cores(m)});
    if (o.model.json) {
      auto j = step_json(m, step);
      j["notes"] = timed.notes;
      j["configs"] = o.from.empty() ? "default" : "best of " + dir.string();
      all.push_back(std::move(j));
      continue;
    }
    fmt::print("{}model {} ({}) on {}, backend {}: {} kernels, step {} at the {}\n\n{}",
               &target == &o.model.targets.front() ? "" : "\n", m.name, m.file, target,
               o.model.backend, m.kernels.size(), milliseconds(step.step_s * 1e3),
               o.from.empty() ? "default configs" : "best configs of " + dir.string(),
               step_text(m, step, timed));
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
