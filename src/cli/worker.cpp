// `tessel worker STUDY_URL`: one more process working a shared study
// (docs/distributed.md). It rebuilds the study from what the store recorded
// (space, backend, strategy, scheduler, budgets), then claims trials,
// evaluates them on its own backend, stores the results and proposes when
// its turn comes, until the study's stop condition holds.
#include "command.hpp"
#include "common.hpp"

#include <tessel/codec.hpp>
#include <tessel/driver.hpp>
#include <tessel/error.hpp>
#include <tessel/settings.hpp>
#include <tessel/study.hpp>

#include <fmt/format.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <unistd.h>
#include <chrono>
#include <functional>
#include <memory>
#include <thread>

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

/// A seed of this worker's own: workers that proposed the same random
/// candidates would only find them taken.
std::uint64_t worker_seed(std::uint64_t study_seed, const std::string& name) {
  return study_seed ^ (std::hash<std::string>{}(name)*0x9E3779B97F4A7C15ULL);
}

int run_worker(const worker_options& o) {
  if (!is_postgres_location(o.url))
    throw error(fmt::format(
        "tessel worker joins a shared study: give a postgresql:// URL, not '{}' (a SQLite study "
        "file has one writer; continue it with `tessel tune FILE --db PATH --resume`)",
        o.url));
  const auto store = open_store(o.url);
  auto record = store->study();
  // Workers may be started before `tune` has made the study.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(o.wait_s);
  while (!record && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    record = store->study();
  }
  if (!record)
    throw error(fmt::format(
        "'{}' holds no study yet: create it with `tessel tune FILE --backend SPEC --db URL "
        "--budget N`, then start workers",
        o.url));
  auto stored = reopen_study(o.url);  // the spec tune recorded, the space rebuilt from its text
  auto spec = std::move(stored.spec);
  if (!o.backend.empty()) {
    spec.backend = o.backend;
    spec.fidelity.clear();
  }
  for (auto& [key, value] : parse_assignments(o.backend_settings, "--backend-set"))
    spec.backend_settings[key] = std::move(value);
  spec.db = o.url;
  spec.jobs = o.jobs;
  open_options opening;
  opening.mode = open_mode::resume;
  opening.space = std::move(stored.space);  // the hosts need no copy of the .tsl file
  opening.worker = o.worker;
  if (opening.worker.name.empty())
    opening.worker.name = fmt::format(
        "{}:{}",
        [] {
          char host[256] = {};
          return ::gethostname(host, sizeof host - 1) == 0 ? std::string(host) : "localhost";
        }(),
        ::getpid());
  const auto name = opening.worker.name;
  spec.seed = o.seed.value_or(worker_seed(stored.record.seed, name));
  auto opened = open_study(std::move(spec), std::move(opening));
  if (!opened.evaluates)
    throw error("the study records no backend: give this worker one with --backend SPEC");
  const auto until = opened.until();
  if (!o.quiet)
    fmt::print(stderr,
               "tessel worker {}: study '{}' (space '{}', {} trials so far), backend {}, {} "
               "job{}, stops at: {}\n",
               name, opened.db->location(), stored.record.space_name, opened.study->trials().size(),
               opened.backend->name(), o.jobs ? fmt::format("{}", o.jobs) : std::string("auto"),
               o.jobs == 1 ? "" : "s", until(progress{}) ? "now" : "the study's budget");
  const auto sum = opened.study->run(until);
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
      ->capture_default_str();
  app->add_option("--seed", o->seed,
                  "Seed of this worker's proposals (default: from the study's seed and the "
                  "worker's name)");
  app->add_option("--wait", o->wait_s,
                  "Seconds to wait for the study to be created (by `tessel tune --db URL`), "
                  "when it is not there yet")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app->add_option("--name", o->worker.name, "What other workers and `tessel show` call it")
      ->type_name("NAME");
  app->add_option("--heartbeat", o->worker.heartbeat_s, "Seconds between heartbeats")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app->add_option("--lease", o->worker.lease_s,
                  "Seconds without a heartbeat after which this worker's running trials go "
                  "back to the queue (more than --heartbeat)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app->add_flag("--json", o->json, "Print the summary as JSON on stdout");
  app->add_flag("--quiet,-q", o->quiet, "No start line on stderr");
  return {app, [o] { return report_errors([&] { return run_worker(*o); }, o->json); }};
}

}  // namespace tessel::cli
