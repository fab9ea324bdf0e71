// `tessel tune-model FILE --budget N`: tunes every kernel of a model under one
// budget, one study file per kernel, each next evaluation given to the
// kernel with the largest expected step-time gain per unit of cost
// (docs/models.md); reports the step before and after, per kernel, and where
// the gap to each kernel's roofline is. Resumable like `tune`.
#include "command.hpp"
#include "common.hpp"

#include <tessel/error.hpp>
#include <tessel/text.hpp>

#include <fmt/format.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <unistd.h>
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <memory>

namespace tessel::cli {
namespace {

struct tune_model_options {
  model_options model;
  model_spec tuning;  ///< its tuning fields (the model's come from `model`)
  std::string allocate = "utility";
  bool resume = false, overwrite = false;
  bool quiet = false;
  const CLI::App* command = nullptr;  ///< tune-model: which options were given
};

/// A log line each time the step time improves (a live line on a terminal).
class step_printer final : public model_observer {
 public:
  step_printer(const model_study& m, std::size_t budget)
      : model_(m), budget_(budget), tty_(isatty(fileno(stderr)) != 0) {}
  void on_evaluation(std::size_t kernel, const trial& t, std::optional<double> step_s) override {
    ++done_;
    const bool better = step_s && (!best_ || *step_s < *best_);
    if (better) best_ = step_s;
    const auto line =
        fmt::format("[{:>6}{}] step {} | {} {}", done_, budget_ ? fmt::format("/{}", budget_) : "",
                    best_ ? seconds_as_ms(*best_) : "-", model_.member(kernel).name,
                    t.result.ok() ? seconds_as_ms(t.result.objective)
                                  : std::string(to_string(t.result.status)));
    if (tty_)
      fmt::print(stderr, "\r\033[K{}", line);
    else if (better)
      fmt::print(stderr, "{}\n", line);
  }
  ~step_printer() override {
    if (tty_ && done_ > 0) fmt::print(stderr, "\n");
  }

 private:
  const model_study& model_;
  std::size_t budget_;
  bool tty_;
  std::size_t done_ = 0;
  std::optional<double> best_;
};

int run_tune_model(const tune_model_options& o) {
  const auto policy = parse_allocation(o.allocate);
  if (!policy)
    throw error(fmt::format("--allocate {}: expected utility, even or share", o.allocate));
  const auto targets = o.model.chosen_targets();
  const bool several = targets.size() > 1;
  nlohmann::json all = nlohmann::json::array();
  std::vector<target_step> steps;
  for (const auto& target : targets) {
    auto spec = o.model.spec_for(target);
    spec.strategy = o.tuning.strategy;
    spec.seed = o.tuning.seed;
    spec.scheduler = o.tuning.scheduler;
    spec.db_dir = o.tuning.db_dir;
    spec.no_db = o.tuning.no_db;
    spec.mode = o.resume      ? open_mode::resume
                : o.overwrite ? open_mode::overwrite
                              : open_mode::create;
    spec.budget = o.tuning.budget;
    spec.cost_budget_s = o.tuning.cost_budget_s;
    spec.policy = *policy;
    spec.resuming = resume_as_given(*o.command);
    auto t = open_model_tuning(spec, several);
    if (!t.db_dir.empty()) print_notes("the study files in " + t.db_dir, t.notes);
    // Before the header, which tells a watcher (the tests) the run is on.
    std::vector<study*> kernels;
    for (std::size_t k = 0; k < t.study.size(); ++k) kernels.push_back(&t.study.kernel_study(k));
    announce_interrupts(t.db_dir.empty() ? "" : "the study files in " + t.db_dir, kernels);
    if (!o.quiet) {
      fmt::print(stderr, "tessel: model '{}' on {}: {} kernels, {} allocation{}\n", t.model.name,
                 target, t.model.kernels.size(), o.allocate,
                 t.db_dir.empty() ? "" : fmt::format(", study files in {}", t.db_dir));
      t.study.add_observer(std::make_shared<step_printer>(t.study, spec.budget));
    }
    const auto& sum = t.run();
    stop_announcing_interrupts();
    if (sum.after_s) steps.push_back({target, *sum.after_s, physical_cores(t.model)});
    if (o.model.json)
      all.push_back(t.to_json());
    else
      fmt::print("{}{}", &target == &targets.front() ? "" : "\n", t.text());
  }
  const auto comparison = steps.size() == targets.size() ? compare_text(steps) : "";
  if (o.model.json) {
    nlohmann::json out = {{"ok", true}, {"targets", all}};
    if (!comparison.empty()) out["comparison"] = comparison;
    fmt::print("{}\n", out.dump(2, ' ', false, nlohmann::json::error_handler_t::replace));
  } else if (!comparison.empty()) {
    fmt::print("\ntuned steps: {}", comparison);
  }
  return exit_code::success;
}

}  // namespace

command add_tune_model_command(CLI::App& tool) {
  auto options = std::make_shared<tune_model_options>();
  auto* app = tool.add_subcommand(
      "tune-model",
      "Tune every kernel of a model under one budget, each next evaluation going to the kernel "
      "with the largest expected step-time gain per unit of cost");
  add_model_options(*app, options->model);
  options->command = app;
  auto& s = options->tuning;
  app->add_option("--budget", s.budget, "Evaluations over all kernels (resumed ones count)")
      ->type_name("N")
      ->check(whole_number());
  app->add_option("--cost-budget", s.cost_budget_s,
                  "Seconds of summed evaluation cost over all kernels (alone: the allocator "
                  "weighs each candidate's predicted cost)")
      ->type_name("SECONDS")
      ->check(non_negative());
  app->add_option("--allocate", options->allocate,
                  "utility: the largest calls x expected gain / cost; even: the same number of "
                  "evaluations per kernel; share: in proportion to each kernel's share of the "
                  "default step")
      ->type_name("KIND")
      ->check(CLI::IsMember({"utility", "even", "share"}).description(""))
      ->capture_default_str();
  app->add_option("--strategy", s.strategy, "Each kernel study's search strategy")
      ->type_name("NAME")
      ->capture_default_str();
  app->add_option("--seed", s.seed, "Seed (kernel i uses seed + i)")
      ->type_name("S")
      ->check(whole_number())
      ->capture_default_str();
  app->add_option("--db-dir", s.db_dir,
                  "The folder of the kernels' study files (default <model>.tessel; with several "
                  "--target, one folder per target inside)")
      ->type_name("DIR");
  app->add_flag("--resume", options->resume, "Continue the study files in --db-dir");
  app->add_flag("--overwrite", options->overwrite,
                "Delete the kernels' studies in --db-dir and start over")
      ->excludes("--resume");
  app->add_flag("--no-db", s.no_db, "Keep nothing on disk")
      ->excludes("--db-dir")
      ->excludes("--resume")
      ->excludes("--overwrite");
  app->add_option("--scheduler", s.scheduler,
                  "Each kernel study's scheduler: utility (cost-aware) or fifo")
      ->type_name("KIND")
      ->check(CLI::IsMember({"utility", "fifo"}).description(""))
      ->capture_default_str();
  app->add_flag("--quiet,-q", options->quiet, "No progress on stderr");
  return {app, [options] {
            return report_errors([&] { return run_tune_model(*options); }, options->model.json);
          }};
}

}  // namespace tessel::cli
