// `tessel show DB`: a study's (file or shared) summary and its best trials.
#include "command.hpp"
#include "common.hpp"

#include <tessel/driver.hpp>
#include <tessel/text.hpp>

#include <fmt/format.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <memory>

namespace tessel::cli {
namespace {

struct show_options {
  std::string db;
  std::size_t top = 10;
  bool json = false;
};

int run_show(const show_options& o) {
  const auto stored = reopen_study(o.db);
  const auto& s = stored.space;
  const auto seen = overview_of(stored, o.top);
  if (o.json) {
    fmt::print("{}\n",
               seen.to_json(stored).dump(2, ' ', false, nlohmann::json::error_handler_t::replace));
    return exit_code::success;
  }
  fmt::print(
      "{:<12} {}\nspace        {} ({} valid configs), target {}\nbackend      {}\nstrategy   "
      "  {} (seed {})\n",
      study_kind(o.db), o.db, stored.record.space_name, with_separators(s.count()),
      stored.record.target, stored.record.backend, stored.record.strategy, stored.record.seed);
  fmt::print(
      "trials       {} finished, {} interrupted (re-run on --resume), evaluation cost {:.3f} s\n",
      seen.finished, seen.pending, seen.cost_s);
  for (const auto& [st, n] : seen.by_status) fmt::print("  {:<16}{:>8}\n", to_string(st), n);
  if (const auto text = learned_text(seen.learned, stored.trials); !text.empty())
    fmt::print("\n{}", text);
  if (seen.fidelity) fmt::print("\nfidelity\n{}", seen.fidelity->text());
  fmt::print("\nbest {} {}trials\n", seen.best.size(), seen.fidelity ? "high-fidelity " : "");
  fmt::print("{:>6}  {:>12}  {:<14}  {}\n", "trial", "objective", "source", "config");
  for (const auto* t : seen.best)
    fmt::print("{:>6}  {:>12}  {:<14}  {}\n", t->id, seconds_text(t->result.objective),
               t->provenance.source, s.to_json(t->config));
  return exit_code::success;
}

}  // namespace

command add_show_command(CLI::App& tool) {
  auto options = std::make_shared<show_options>();
  auto* app = tool.add_subcommand("show", "Print a study's summary and best trials");
  app->add_option("DB", options->db, "The study: a study file, or a postgresql:// URL")
      ->required()
      ->type_name("DB");
  app->add_option("--top", options->top, "How many of the best trials to list")
      ->type_name("N")
      ->check(whole_number())
      ->capture_default_str();
  app->add_flag("--json", options->json, "Print JSON on stdout");
  return {app,
          [options] { return report_errors([&] { return run_show(*options); }, options->json); }};
}

}  // namespace tessel::cli
