// `tessel worker STUDY_URL`: one more process working a shared study
// (docs/distributed.md). It rebuilds the study from what the store recorded
// (space, backend, strategy, scheduler, budgets), then claims trials,
// evaluates them on its own backend, stores the results and proposes when
// its turn comes, until the study's stop condition holds.
#include "command.hpp"
#include "common.hpp"

#include <tessel/codec.hpp>
#include <tessel/driver.hpp>
#include <tessel/settings.hpp>

#include <fmt/format.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <memory>

namespace tessel::cli {
namespace {

struct worker_options {
  std::string url;
  std::string backend;                        ///< "" = the study's
  std::vector<std::string> backend_settings;  ///< added to the study's
  std::size_t jobs = 0;
  std::optional<std::uint64_t> seed;
  double wait_s = 0;  ///< how long to wait for the study to be created
  worker_info worker;
  bool json = false;
  bool quiet = false;
};

int run_worker(const worker_options& o) {
  auto joined =
      join_study({o.url, o.backend, parse_assignments(o.backend_settings, "--backend-set"), o.jobs,
                  o.seed, o.wait_s, o.worker});
  auto& opened = joined.opened;
  const auto& name = joined.name;
  const auto until = opened.until();
  // Before the start line, which tells a watcher (the tests) the run is on.
  announce_worker_interrupts(name, opened.db->location(), o.worker.lease_s, *opened.study);
  if (!o.quiet)
    fmt::print(stderr,
               "tessel worker {}: study '{}' (space '{}', {} trials so far), backend {}, {} "
               "job{}, stops at: {}\n",
               name, opened.db->location(), joined.space_name, opened.study->trials().size(),
               opened.backend->name(), o.jobs ? fmt::format("{}", o.jobs) : std::string("auto"),
               o.jobs == 1 ? "" : "s", until(progress{}) ? "now" : "the study's budget");
  const auto sum = opened.study->run(until);
  stop_announcing_interrupts();
  const auto counts = opened.db->shared()->counts();
  if (o.json) {
    const nlohmann::json out = {{"ok", true},
                                {"worker", name},
                                {"summary", codec::to_json(sum, opened.study->space())},
                                {"claims", counts.claims},
                                {"requeues", counts.requeues},
                                {"discarded", counts.discarded},
                                {"workers", counts.workers}};
    fmt::print("{}\n", out.dump(2, ' ', false, nlohmann::json::error_handler_t::replace));
  } else {
    fmt::print("{}\n{} claims, {} re-queued, {} late results discarded, {} workers so far\n",
               sum.brief_report(), counts.claims, counts.requeues, counts.discarded,
               counts.workers);
  }
  return exit_code::success;
}

}  // namespace

command add_worker_command(CLI::App& tool) {
  auto o = std::make_shared<worker_options>();
  auto* app = tool.add_subcommand(
      "worker",
      "Work a shared study (a PostgreSQL --db): claim trials, evaluate them here, store the "
      "results, until the study's budget is spent");
  app->add_option("STUDY_URL", o->url,
                  "postgresql://[USER[:PASSWORD]@]HOST[:PORT]/DATABASE[?study=NAME]: the study "
                  "`tessel tune --db` made")
      ->type_name("URL")
      ->required();
  app->add_option("--backend", o->backend,
                  "Evaluate on this backend instead of the study's (e.g. trainium with this "
                  "host's NeuronCores)")
      ->type_name("SPEC");
  app->add_option("--backend-set", o->backend_settings,
                  "A backend setting added to the study's, e.g. --backend-set timeout=30")
      ->type_name("KEY=VALUE")
      ->allow_extra_args(false);
  app->add_option("--jobs,-j", o->jobs,
                  "Trials this worker evaluates at once (0 = the backend's concurrency)")
      ->type_name("N")
      ->check(whole_number())
      ->capture_default_str();
  app->add_option("--seed", o->seed,
                  "Seed of this worker's proposals (default: from the study's seed and the "
                  "worker's name)")
      ->type_name("S")
      ->check(whole_number());
  app->add_option("--wait", o->wait_s,
                  "Seconds to wait for the study to be created (by `tessel tune --db URL`), "
                  "when it is not there yet")
      ->type_name("SECONDS")
      ->check(non_negative())
      ->capture_default_str();
  app->add_option("--name", o->worker.name, "What other workers and `tessel show` call it")
      ->type_name("NAME");
  app->add_option("--heartbeat", o->worker.heartbeat_s, "Seconds between heartbeats")
      ->type_name("SECONDS")
      ->check(positive())
      ->capture_default_str();
  app->add_option("--lease", o->worker.lease_s,
                  "Seconds without a heartbeat after which this worker's running trials go "
                  "back to the queue (more than --heartbeat)")
      ->type_name("SECONDS")
      ->check(positive())
      ->capture_default_str();
  app->add_flag("--json", o->json, "Print the summary as JSON on stdout");
  app->add_flag("--quiet,-q", o->quiet, "No start line on stderr");
  return {app, [o] { return report_errors([&] { return run_worker(*o); }, o->json); }};
}

}  // namespace tessel::cli
