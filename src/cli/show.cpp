// `tessel show DB`: a study file's summary and its best trials.
#include "command.hpp"
#include "common.hpp"
#include "format.hpp"

#include <tessel/codec.hpp>
#include <tessel/driver.hpp>

#include <fmt/format.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <map>
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
  std::map<status, std::size_t> by_status;
  std::size_t finished = 0, pending = 0;
  double cost = 0;
  std::vector<const trial*> ok;
  for (const auto& t : stored.trials) {
    if (t.state != trial_state::finished) {
      ++pending;
      continue;
    }
    ++finished;
    ++by_status[t.result.status];
    cost += t.result.cost.total();
    if (t.result.ok() && !t.result.low_fidelity()) ok.push_back(&t);  // screens predict
  }
  std::vector<measurement> results;
  for (const auto& t : stored.trials)
    if (t.state == trial_state::finished) results.push_back(t.result);
  const auto fidelity = fidelity_stats(results);
  std::stable_sort(ok.begin(), ok.end(),
                   [](auto* a, auto* b) { return a->result.objective < b->result.objective; });
  if (ok.size() > o.top) ok.resize(o.top);
  const auto learned = learn_constraints(s, stored.trials);

  if (o.json) {
    nlohmann::json best = nlohmann::json::array();
    for (const auto* t : ok) best.push_back(codec::to_json(s, *t));
    fmt::print("{}\n", nlohmann::json{{"ok", true},
                                      {"space", stored.record.space_name},
                                      {"target", stored.record.target},
                                      {"backend", stored.record.backend},
                                      {"strategy", stored.record.strategy},
                                      {"seed", stored.record.seed},
                                      {"valid_configs", s.count()},
                                      {"spec", stored.spec.to_json()},
                                      {"finished", finished},
                                      {"pending", pending},
                                      {"by_status", codec::counts_json(by_status)},
                                      {"cost_s", cost},
                                      {"best", best},
                                      {"learned_constraints", learned_json(learned)},
                                      {"fidelity", fidelity ? fidelity_json(*fidelity)
                                                            : nlohmann::json(nullptr)}}
                           .dump(2, ' ', false, nlohmann::json::error_handler_t::replace));
    return exit_code::success;
  }
  fmt::print(
      "study file   {}\nspace        {} ({} valid configs), target {}\nbackend      {}\nstrategy   "
      "  {} (seed {})\n",
      o.db, stored.record.space_name, with_separators(s.count()), stored.record.target,
      stored.record.backend, stored.record.strategy, stored.record.seed);
  fmt::print(
      "trials       {} finished, {} interrupted (re-run on --resume), evaluation cost {:.3f} s\n",
      finished, pending, cost);
  for (const auto& [st, n] : by_status) fmt::print("  {:<16}{:>8}\n", to_string(st), n);
  if (const auto text = learned_text(learned, stored.trials); !text.empty())
    fmt::print("\n{}", text);
  if (fidelity) fmt::print("\nfidelity\n{}", fidelity->text());
  fmt::print("\nbest {} {}trials\n", ok.size(), fidelity ? "high-fidelity " : "");
  fmt::print("{:>6}  {:>12}  {:<14}  {}\n", "trial", "objective", "source", "config");
  for (const auto* t : ok)
    fmt::print("{:>6}  {:>12}  {:<14}  {}\n", t->id, seconds_text(t->result.objective),
               t->provenance.source, s.to_json(t->config));
  return exit_code::success;
}

}  // namespace

command add_show_command(CLI::App& tool) {
  auto options = std::make_shared<show_options>();
  auto* app = tool.add_subcommand("show", "Print a study file's summary and best trials");
  app->add_option("DB", options->db, "The study file")->required()->type_name("PATH");
  app->add_option("--top", options->top, "How many of the best trials to list")
      ->capture_default_str();
  app->add_flag("--json", options->json, "Print JSON on stdout");
  return {app,
          [options] { return report_errors([&] { return run_show(*options); }, options->json); }};
}

}  // namespace tessel::cli
