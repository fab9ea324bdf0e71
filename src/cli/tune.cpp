// `tessel tune FILE --backend SPEC ...`: a tuning run until a budget, with a
// progress line on stderr (a live line on a terminal, log lines otherwise),
// the summary at the end, and every trial in the study file.
#include "command.hpp"
#include "common.hpp"
#include "fidelity.hpp"
#include "format.hpp"
#include "learned.hpp"
#include "study_setup.hpp"

#include <tessel/codec.hpp>
#include <tessel/error.hpp>
#include <tessel/study.hpp>

#include <fmt/format.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <unistd.h>
#include <chrono>
#include <cstdio>
#include <map>
#include <memory>
#include <optional>

namespace tessel::cli {
namespace {

struct tune_options {
  study_setup_options study;    ///< its `stop` holds the budgets
  std::size_t high_budget = 0;  ///< --high-budget: high-fidelity evaluations (--fidelity)
  bool json = false;
  bool quiet = false;
};

/// Prints progress: on a terminal one line rewritten in place (with an
/// estimate of the time left when the budget is a number of evaluations);
/// otherwise a log line per improvement and every `every` trials.
class progress_printer final : public observer {
 public:
  progress_printer(std::size_t budget, const space& s)
      : budget_(budget), space_(s), tty_(isatty(fileno(stderr)) != 0) {}

  void on_trial(const trial& t, const progress& p) override {
    ++by_status_[t.result.status];
    if (tty_) {
      fmt::print(stderr, "\r\033[K{}", line(p));
    } else if (p.evaluations % every == 0) {
      fmt::print(stderr, "{}\n", line(p));
    }
  }

  void on_improvement(const trial& t, const progress& p) override {
    if (tty_) return;
    fmt::print(stderr, "[{:>6}] new best {:.6g} from {}: {}\n", p.evaluations, t.result.objective,
               t.provenance.source, space_.to_json(t.config));
  }

  void on_end(const summary&) override {
    if (tty_) fmt::print(stderr, "\n");
  }

 private:
  std::string line(const progress& p) const {
    std::string failures;
    for (const auto& [st, n] : by_status_)
      if (st != status::ok) failures += fmt::format(" {}={}", to_string(st), n);
    std::string eta;
    if (budget_ > 0 && p.evaluations > 0 && p.evaluations < budget_)
      eta = fmt::format(", ~{:.0f} s left", p.wall_s / static_cast<double>(p.evaluations) *
                                                static_cast<double>(budget_ - p.evaluations));
    return fmt::format("[{:>6}{}] best {} | failures:{} | {:.1f} s{}", p.evaluations,
                       budget_ ? fmt::format("/{}", budget_) : "",
                       p.best ? fmt::format("{:.6g}", *p.best) : "-",
                       failures.empty() ? " none" : failures, p.wall_s, eta);
  }

  static constexpr std::size_t every = 50;
  std::size_t budget_;
  const space& space_;
  bool tty_;
  std::map<status, std::size_t> by_status_;
};

stop_condition stop_for(const tune_options& o,
                        const std::shared_ptr<multi_fidelity_backend>& fidelity) {
  auto until = cli::stop_for(o.study.stop);
  if (o.high_budget && fidelity)
    until = until ||
            stop_condition(
                [fidelity, n = o.high_budget](const progress&) {
                  return fidelity->stats().high_evaluations >= n;
                },
                fmt::format("{} high-fidelity evaluations done", o.high_budget),
                termination::evaluations, {},
                [fidelity, n = o.high_budget](const progress&) -> std::optional<double> {
                  return std::min(1.0, static_cast<double>(fidelity->stats().high_evaluations) /
                                           static_cast<double>(n));
                });
  return until;
}

/// `{"ok": true, "summary": {...}}`: the summary as serve's `summary` op and
/// Python's Study.run() give it (tessel/codec.hpp), with what only tune has:
/// the best config re-measured, and the multi-fidelity statistics.
nlohmann::json tune_json(const summary& sum, const space& s,
                         const std::optional<measurement>& again,
                         const std::shared_ptr<multi_fidelity_backend>& fidelity) {
  nlohmann::json out = {{"ok", true}, {"summary", codec::to_json(sum, s)}};
  if (again) {
    auto remeasured = codec::to_json(*again);
    for (const auto* key : {"ci_low_s", "ci_high_s"})
      if (const auto it = again->metrics.find(key); it != again->metrics.end())
        remeasured[key] = it->second;
    out["remeasured"] = std::move(remeasured);
  }
  if (fidelity) out["fidelity"] = fidelity_json(fidelity->stats());
  return out;
}

std::string remeasured_text(const measurement& m, double searched) {
  if (!m.ok())
    return fmt::format("best config re-measured: {} ({})", to_string(m.status), m.message);
  const auto at = [&m](const char* key) {
    const auto it = m.metrics.find(key);
    return it == m.metrics.end() ? m.objective : it->second;
  };
  return fmt::format(
      "best config re-measured: median {:.6g} s over {} samples, 95% CI [{:.6g}, {:.6g}] "
      "(the search measured {:.6g})",
      m.objective, m.samples.size(), at("ci_low_s"), at("ci_high_s"), searched);
}

int run_tune(const tune_options& o) {
  auto study_options = o.study;
  if (o.high_budget)  // never more promotions than that, even with evaluations in flight
    study_options.fidelity_settings.push_back(fmt::format("max_high={}", o.high_budget));
  auto setup = make_study(study_options);
  if (o.high_budget && !setup.fidelity)
    throw error("--high-budget counts high-fidelity evaluations: it needs --fidelity");
  const auto& budgets = o.study.stop;
  if (!budgets.budget && budgets.time_s <= 0 && budgets.cost_s <= 0 && !budgets.target &&
      !budgets.patience && !o.high_budget)
    fmt::print(stderr,
               "tessel: no --budget, --time, --cost-budget, --target-objective or --patience: "
               "running until the strategy stops or the space is exhausted\n");
  if (!o.quiet)
    setup.study->add_observer(
        std::make_shared<progress_printer>(budgets.budget, setup.space.space));
  if (!o.quiet && setup.db)
    fmt::print(stderr,
               "tessel: space '{}' ({} valid configs), backend {}, strategy {}, study file {}\n",
               setup.space.space.name(), with_separators(setup.space.space.count()),
               setup.backend->name(), o.study.strategy, setup.db->location());
  const auto sum = setup.study->run(stop_for(o, setup.fidelity));
  // A noisy backend (trainium) times the best config again, fully, so one
  // lucky measurement does not decide what is reported.
  std::optional<measurement> again;
  if (sum.best) again = setup.backend->remeasure(setup.space.space, sum.best->config);
  if (o.json) {
    fmt::print("{}\n", tune_json(sum, setup.space.space, again, setup.fidelity)
                           .dump(2, ' ', false, nlohmann::json::error_handler_t::replace));
  } else {
    fmt::print("{}\n\n{}", sum.brief_report(), sum.full_report());
    const auto& trials = setup.study->trials();
    const auto text = learned_text(learned_from(setup.space.space, trials), trials);
    if (!text.empty()) fmt::print("\n{}", text);
    if (setup.fidelity) fmt::print("\n{}", fidelity_text(setup.fidelity->stats()));
  }
  if (again && !o.json) fmt::print("\n{}\n", remeasured_text(*again, sum.best->result.objective));
  return exit_code::success;
}

}  // namespace

command add_tune_command(CLI::App& tool) {
  auto options = std::make_shared<tune_options>();
  auto* app = tool.add_subcommand(
      "tune", "Tune a space: search it with a strategy, evaluating configs on a backend");
  add_study_options(*app, options->study, true);
  options->study.needs_backend = true;
  auto& stop = options->study.stop;
  app->add_option("--budget,-n", stop.budget, "Stop after this many evaluations")->type_name("N");
  app->add_option("--time", stop.time_s, "Stop after this many wall-clock seconds")
      ->type_name("SECONDS");
  app->add_option("--cost-budget", stop.cost_s,
                  "Stop when the evaluations' summed cost reaches this many seconds")
      ->type_name("SECONDS");
  app->add_option("--target-objective", stop.target, "Stop when the best objective is at most this")
      ->type_name("X");
  app->add_option("--patience", stop.patience,
                  "Stop after this many evaluations without improvement")
      ->type_name("N");
  app->add_option("--high-budget", options->high_budget,
                  "With --fidelity: stop after this many high-fidelity evaluations")
      ->type_name("N");
  app->add_flag("--json", options->json, "Print the summary as JSON on stdout");
  app->add_flag("--quiet,-q", options->quiet, "No progress on stderr");
  return {app,
          [options] { return report_errors([&] { return run_tune(*options); }, options->json); }};
}

}  // namespace tessel::cli
