// `tessel tune FILE --backend SPEC ...`: a tuning run until a budget, with a
// progress line on stderr (a live line on a terminal, log lines otherwise),
// the summary at the end, and every trial in the study file.
#include "command.hpp"
#include "common.hpp"

#include <tessel/driver.hpp>
#include <tessel/error.hpp>
#include <tessel/text.hpp>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <unistd.h>
#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <optional>

namespace tessel::cli {
namespace {

struct tune_options {
  spec_options study;
  bool json = false;
  bool quiet = false;
};

/// Prints progress: on a terminal one line rewritten in place; otherwise a
/// log line per improvement, and a status line every `every` trials or, in
/// a slow run, after any trial that ends `quiet_s` seconds after the last
/// line. Each status line estimates the time left from the fraction of the
/// budget spent (evaluations, seconds of wall time or of cost, whichever is
/// closest to its end: stop_condition::spent).
class progress_printer final : public observer {
 public:
  progress_printer(stop_condition until, std::size_t evaluations, const space& s)
      : until_(std::move(until)),
        evaluations_(evaluations),
        space_(s),
        tty_(isatty(fileno(stderr)) != 0) {}

  void on_trial(const trial& t, const progress& p) override {
    ++by_status_[t.result.status];
    if (tty_) {
      fmt::print(stderr, "\r\033[K{}", line(p));
    } else if (p.evaluations % every == 0 || p.wall_s - printed_at_ >= quiet_s) {
      fmt::print(stderr, "{}\n", line(p));
      printed_at_ = p.wall_s;
    }
  }

  void on_improvement(const trial& t, const progress& p) override {
    if (tty_) return;
    fmt::print(stderr, "[{:>6}] new best {} from {}: {}\n", p.evaluations,
               seconds_text(t.result.objective), t.provenance.source, space_.to_json(t.config));
    printed_at_ = p.wall_s;
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
    if (const auto spent = until_.spent(p); spent && *spent > 0 && *spent < 1)
      eta = fmt::format(", ~{:.0f} s left", p.wall_s * (1 - *spent) / *spent);
    return fmt::format("[{:>6}{}] best {} | failures:{} | {:.1f} s{}", p.evaluations,
                       evaluations_ ? fmt::format("/{}", evaluations_) : "",
                       p.best ? seconds_text(*p.best) : "-", failures.empty() ? " none" : failures,
                       p.wall_s, eta);
  }

  static constexpr std::size_t every = 50;
  static constexpr double quiet_s = 10;
  stop_condition until_;
  std::size_t evaluations_;
  const space& space_;
  bool tty_;
  double printed_at_ = 0;
  std::map<status, std::size_t> by_status_;
};

/// Whether `spec` leaves what evaluates to the study file it resumes (whose
/// backend open_as_given takes); throws when that file has none to give.
void check_backend(const study_spec& spec, open_mode mode) {
  if (!spec.backend.empty() || !spec.fidelity.empty() || is_replay_file(spec.file)) return;
  const std::string needs =
      "tune needs --backend SPEC (sim, replay:PATH, command:'CMD {param}', ...), or a replay "
      "file as FILE";
  if (mode != open_mode::resume) throw error(needs);
  std::string name;  // the study file is named after the space, whatever the target
  if (names_space(spec.db)) {
    try {
      name = read_space(spec).space.name();
    } catch (const std::exception&) {
      throw error(needs +
                  "; --resume takes it from the study file, which --db names (the space "
                  "could not be read to find its default name)");
    }
  }
  const auto db = study_location(spec.db, name);
  const auto recorded = begun_with(db);
  if (!recorded)
    throw error(
        fmt::format("{}; --resume takes it from the study file, and '{}' holds no study "
                    "yet",
                    needs, db));
  if (!recorded->fidelity.empty())
    throw error(fmt::format("'{}' was begun with --fidelity {}: give them again to resume it", db,
                            fmt::join(recorded->fidelity, " --fidelity ")));
  if (recorded->backend.empty())
    throw error(fmt::format("{}: '{}' records none to resume with", needs, db));
}

int run_tune(const tune_options& o) {
  const auto spec = o.study.resolved();
  check_backend(spec, o.study.mode());
  auto opened = open_as_given(o.study, spec);
  const auto& s = opened.study->space();
  if (!spec.budget.bounded())
    fmt::print(stderr,
               "tessel: no --budget, --time, --cost-budget, --target-objective or --patience: "
               "running until the strategy stops or the space is exhausted\n");
  if (!o.quiet)
    opened.study->add_observer(
        std::make_shared<progress_printer>(opened.until(), spec.budget.evaluations, s));
  if (!o.quiet && opened.db)
    fmt::print(stderr, "tessel: space '{}' ({} valid configs), backend {}, strategy {}, {} {}\n",
               s.name(), with_separators(s.count()), opened.backend->name(), opened.spec.strategy,
               study_kind(opened.db->location()), opened.db->location());
  announce_interrupts(opened.db ? opened.db->location() : std::string(), {opened.study.get()});
  const auto sum = opened.study->run(opened.until());
  stop_announcing_interrupts();
  // A noisy backend (trainium) times the best config again, fully, so one
  // lucky measurement does not decide what is reported.
  std::optional<measurement> again;
  if (sum.best) again = opened.backend->remeasure(s, sum.best->config);
  if (o.json) {
    fmt::print("{}\n", run_json(sum, s, again, opened.fidelity.get())
                           .dump(2, ' ', false, nlohmann::json::error_handler_t::replace));
    return exit_code::success;
  }
  fmt::print("{}\n\n{}", sum.brief_report(), sum.full_report());
  const auto& trials = opened.study->trials();
  const auto text = learned_text(learn_constraints(s, trials), trials);
  if (!text.empty()) fmt::print("\n{}", text);
  if (opened.fidelity) fmt::print("\nfidelity\n{}", opened.fidelity->stats().text());
  if (again) fmt::print("\n{}\n", remeasured_text(*again, sum.best->result.objective));
  return exit_code::success;
}

}  // namespace

command add_tune_command(CLI::App& tool) {
  auto options = std::make_shared<tune_options>();
  auto* app = tool.add_subcommand(
      "tune", "Tune a space: search it with a strategy, evaluating configs on a backend");
  add_study_options(*app, options->study);
  auto& budget = options->study.spec.budget;
  app->add_option("--budget,-n", budget.evaluations, "Stop after this many evaluations")
      ->type_name("N")
      ->check(whole_number());
  app->add_option("--time", budget.wall_s, "Stop after this many wall-clock seconds")
      ->type_name("SECONDS")
      ->check(non_negative());
  app->add_option("--cost-budget", budget.cost_s,
                  "Stop when the evaluations' summed cost reaches this many seconds")
      ->type_name("SECONDS")
      ->check(non_negative());
  app->add_option("--target-objective", budget.target,
                  "Stop when the best objective is at most this")
      ->type_name("X")
      ->check(finite());
  app->add_option("--patience", budget.patience,
                  "Stop after this many evaluations without improvement")
      ->type_name("N")
      ->check(whole_number());
  app->add_option("--high-budget", budget.high_evaluations,
                  "With --fidelity: stop after this many high-fidelity evaluations")
      ->type_name("N")
      ->check(whole_number());
  app->add_flag("--json", options->json, "Print the summary as JSON on stdout");
  app->add_flag("--quiet,-q", options->quiet, "No progress on stderr");
  return {app,
          [options] { return report_errors([&] { return run_tune(*options); }, options->json); }};
}

}  // namespace tessel::cli
