// `tessel tune-model FILE --budget N`: tunes every kernel of a model under one
// budget, one study file per kernel, each next evaluation given to the
// kernel with the largest expected step-time gain per unit of cost
// (docs/models.md); reports the step before and after, per kernel, and where
// the gap to each kernel's roofline is. Resumable like `tune`.
#include "command.hpp"
#include "common.hpp"
#include "format.hpp"
#include "model_setup.hpp"

#include <tessel/error.hpp>

#include <fmt/format.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <unistd.h>
#include <algorithm>
#include <cstdio>
#include <memory>

namespace tessel::cli {
namespace {

struct tune_model_options {
  model_options model;
  model_study_setup study;
  std::size_t budget = 0;
  double cost_s = 0;
  std::string allocate = "utility";
  bool quiet = false;
};

std::string ms(double seconds) { return milliseconds(seconds * 1e3); }

/// A log line each time the step time improves (a live line on a terminal).
class step_printer final : public model_observer {
 public:
  step_printer(const model_study& m, std::size_t budget)
      : model_(m), budget_(budget), tty_(isatty(fileno(stderr)) != 0) {}
  void on_evaluation(std::size_t kernel, const trial& t, std::optional<double> step_s) override {
    ++done_;
    const bool better = step_s && (!best_ || *step_s < *best_);
    if (better) best_ = step_s;
    const auto line = fmt::format(
        "[{:>6}{}] step {} | {} {}", done_, budget_ ? fmt::format("/{}", budget_) : "",
        best_ ? ms(*best_) : "-", model_.member(kernel).name,
        t.result.ok() ? ms(t.result.objective) : std::string(to_string(t.result.status)));
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

struct kernel_row {
  const kernel_progress* k;
  double roofline_s = 0;  ///< per call, of its best config (0: not reported)
  double gap_s = 0;       ///< per step: calls x (best - roofline)
};

std::vector<kernel_row> rows_of(const model_summary& sum) {
  std::vector<kernel_row> rows;
  for (const auto& k : sum.kernels) {
    kernel_row r{&k};
    if (k.best) {
      const auto it = k.best->result.metrics.find("roofline_s");
      if (it != k.best->result.metrics.end()) r.roofline_s = it->second;
      if (r.roofline_s > 0)
        r.gap_s =
            static_cast<double>(k.calls) * std::max(0.0, k.best->result.objective - r.roofline_s);
    }
    rows.push_back(r);
  }
  return rows;
}

std::string report_text(const model_definition& m, model_study& study, const model_summary& sum,
                        const std::string& policy, const std::string& dir) {
  std::string out = fmt::format("model {} on {}: {} evaluations ({} allocation), {}\n", m.name,
                                m.target, sum.evaluations, policy, sum.stopped);
  if (sum.before_s && sum.after_s)
    out += fmt::format("step {} -> {} ({:+.1f}%, {:.2f}x faster){}\n\n", ms(*sum.before_s),
                       ms(*sum.after_s), 100.0 * (*sum.after_s - *sum.before_s) / *sum.before_s,
                       *sum.before_s / *sum.after_s,
                       dir.empty() ? "" : fmt::format("; study files in {}", dir));
  out += fmt::format("{:<18} {:>6} {:>6} {:>11} {:>11} {:>11} {:>11} {:>11} {:>11}\n", "kernel",
                     "calls", "evals", "before/call", "best/call", "step before", "step after",
                     "roofline", "gap/step");
  const auto rows = rows_of(sum);
  double gap = 0;
  for (const auto& r : rows) {
    const auto& k = *r.k;
    const double calls = static_cast<double>(k.calls);
    auto cell = [&](const trial* t, double times) {
      return t ? ms(times * t->result.objective) : std::string("-");
    };
    out += fmt::format(
        "{:<18} {:>6} {:>6} {:>11} {:>11} {:>11} {:>11} {:>11} {:>11}\n", k.name, k.calls,
        k.evaluations, cell(k.first, 1), cell(k.best, 1), cell(k.first, calls), cell(k.best, calls),
        r.roofline_s > 0 ? ms(r.roofline_s) : "-", r.roofline_s > 0 ? ms(r.gap_s) : "-");
    gap += r.gap_s;
  }
  if (gap > 0) {
    auto sorted = rows;
    std::stable_sort(sorted.begin(), sorted.end(),
                     [](const auto& a, const auto& b) { return a.gap_s > b.gap_s; });
    out += fmt::format("\nthe gap to the roofline left in the step, {}:", ms(gap));
    for (std::size_t i = 0; i < sorted.size() && i < 5 && sorted[i].gap_s > 0; ++i)
      out += fmt::format("{} {} {} ({})", i == 0 ? "" : ",", sorted[i].k->name, ms(sorted[i].gap_s),
                         percent(sorted[i].gap_s / gap));
    out += "\n";
  }
  out += "\nbest configs:\n";
  for (std::size_t i = 0; i < study.size(); ++i)
    out += fmt::format("  {:<16} {}\n", study.member(i).name,
                       study.kernel_study(i).current_summary().best_config_text);
  return out;
}

nlohmann::json report_json(const model_definition& m, model_study& study, const model_summary& sum,
                           const std::string& policy, const std::string& dir) {
  nlohmann::json kernels = nlohmann::json::array();
  const auto rows = rows_of(sum);
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const auto& k = *rows[i].k;
    const auto& s = study.kernel_study(i);
    nlohmann::json j = {{"name", k.name},
                        {"calls", k.calls},
                        {"evaluations", k.evaluations},
                        {"cost_s", k.cost_s},
                        {"done", k.done}};
    if (k.first) j["first_s"] = k.first->result.objective;
    if (k.best) {
      j["best_s"] = k.best->result.objective;
      j["best_config"] = nlohmann::json::parse(s.space().to_json(k.best->config));
    }
    if (rows[i].roofline_s > 0) {
      j["roofline_s"] = rows[i].roofline_s;
      j["gap_s"] = rows[i].gap_s;
    }
    kernels.push_back(std::move(j));
  }
  nlohmann::json out = {{"model", m.name},
                        {"file", m.file},
                        {"target", m.target},
                        {"allocation", policy},
                        {"evaluations", sum.evaluations},
                        {"cost_s", sum.cost_s},
                        {"stopped", sum.stopped},
                        {"kernels", kernels}};
  if (!dir.empty()) out["db_dir"] = dir;
  if (sum.before_s) out["before_s"] = *sum.before_s;
  if (sum.after_s) out["after_s"] = *sum.after_s;
  return out;
}

int run_tune_model(tune_model_options o) {
  const auto policy = parse_allocation(o.allocate);
  if (!policy)
    throw error(fmt::format("--allocate {}: expected utility, even or share", o.allocate));
  if (!o.budget && o.cost_s <= 0)
    throw error("tune-model needs a budget: --budget N (evaluations) or --cost-budget SECONDS");
  o.study.allocator.policy = *policy;
  o.study.allocator.cost_is_seconds = o.budget == 0;
  const bool several = o.model.targets.size() > 1;
  nlohmann::json all = nlohmann::json::array();
  std::vector<target_step> steps;
  for (const auto& target : o.model.targets) {
    const auto m = load_model_for(o.model, target);
    auto setup = o.study;
    if (o.budget) setup.budget_hint = std::max<std::size_t>(1, o.budget / m.kernels.size());
    const auto dir = model_db_dir(m, setup.db_dir, several);
    auto study = open_model_study(m, o.model, setup, dir);
    if (!o.quiet) {
      fmt::print(stderr, "tessel: model '{}' on {}: {} kernels, {} allocation{}\n", m.name, target,
                 m.kernels.size(), o.allocate,
                 setup.no_db ? "" : fmt::format(", study files in {}", dir.string()));
      study.add_observer(std::make_shared<step_printer>(study, o.budget));
    }
    const auto sum = study.run(o.budget, o.cost_s);
    const auto shown_dir = setup.no_db ? std::string() : dir.string();
    if (sum.after_s) steps.push_back({target, *sum.after_s, physical_cores(m)});
    if (o.model.json) {
      all.push_back(report_json(m, study, sum, o.allocate, shown_dir));
    } else {
      fmt::print("{}{}", &target == &o.model.targets.front() ? "" : "\n",
                 report_text(m, study, sum, o.allocate, shown_dir));
    }
  }
  const auto comparison = steps.size() == o.model.targets.size() ? compare_text(steps) : "";
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
  auto& s = options->study;
  app->add_option("--budget", options->budget, "Evaluations over all kernels (resumed ones count)")
      ->type_name("N");
  app->add_option("--cost-budget", options->cost_s,
                  "Seconds of summed evaluation cost over all kernels (alone: the allocator "
                  "weighs each candidate's predicted cost)")
      ->type_name("SECONDS")
      ->check(CLI::NonNegativeNumber);
  app->add_option("--allocate", options->allocate,
                  "utility: the largest calls x expected gain / cost; even: the same number of "
                  "evaluations per kernel; share: in proportion to each kernel's share of the "
                  "default step")
      ->check(CLI::IsMember({"utility", "even", "share"}))
      ->capture_default_str();
  app->add_option("--strategy", s.strategy, "Each kernel study's search strategy")
      ->capture_default_str();
  app->add_option("--seed", s.seed, "Seed (kernel i uses seed + i)")->capture_default_str();
  app->add_option("--db-dir", s.db_dir,
                  "The folder of the kernels' study files (default <model>.tessel; with several "
                  "--target, one folder per target inside)")
      ->type_name("DIR");
  app->add_flag("--resume", s.resume, "Continue the study files in --db-dir");
  app->add_flag("--overwrite", s.overwrite,
                "Delete the kernels' studies in --db-dir and start over")
      ->excludes("--resume");
  app->add_flag("--no-db", s.no_db, "Keep nothing on disk")
      ->excludes("--db-dir")
      ->excludes("--resume")
      ->excludes("--overwrite");
  app->add_option("--scheduler", s.scheduler,
                  "Each kernel study's scheduler: utility (cost-aware) or fifo")
      ->check(CLI::IsMember({"utility", "fifo"}))
      ->capture_default_str();
  app->add_flag("--quiet,-q", options->quiet, "No progress on stderr");
  return {app, [options] {
            return report_errors([&] { return run_tune_model(*options); }, options->model.json);
          }};
}

}  // namespace tessel::cli
