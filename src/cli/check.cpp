// `tessel check FILE`: reads a space and reports what the engine learnt about
// it: parameters and domains, raw and valid sizes, construction time,
// independent groups, what each constraint rejects, and uniform samples; with
// --backend, what the backend refuses in it and the defaults it applies.
#include "command.hpp"
#include "common.hpp"

#include <tessel/driver.hpp>
#include <tessel/settings.hpp>
#include <tessel/space_check.hpp>

#include <fmt/format.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace tessel::cli {
namespace {

/// JSON objects keep the order they are written in: "ok" first, parameters in order.
using json = nlohmann::ordered_json;

struct check_options {
  spec_options input;
  std::vector<std::string> files;  ///< FILE...: checked in turn into input.spec.file
  std::size_t samples = 3;
  std::uint64_t seed = 0;
  bool json = false;
  std::string suggest_from;  ///< --suggest-constraints DB
  std::string backend;       ///< --backend: check the space against it too
  std::vector<std::string> backend_settings;
};

/// The most samples --sample accepts.
constexpr std::size_t max_samples = 1'000'000;

/// `check --suggest-constraints DB`: the rules the study's failures teach,
/// as `require` lines to paste into the .tsl (tessel/constraints.hpp).
int run_suggest(const check_options& options) {
  const auto stored = reopen_study(options.suggest_from);
  const auto rules = learn_constraints(stored.space, stored.trials);
  if (options.json) {
    fmt::print("{}\n", json{{"ok", true},
                            {"study", options.suggest_from},
                            {"space", stored.record.space_name},
                            {"learned_constraints", learned_json(rules)}}
                           .dump(2));
    return exit_code::success;
  }
  fmt::print("{}", suggested_constraints_text(stored, rules, options.suggest_from));
  return exit_code::success;
}

/// Checks one FILE (options.input.spec.file).
int check_file(const check_options& o, bool several) {
  const loaded_space loaded = read_space(o.input.resolved());
  std::optional<backend_review> review;
  if (!o.backend.empty())
    review = review_backend(loaded.space, o.backend,
                            parse_assignments(o.backend_settings, "--backend-set"));
  const check_request request{o.input.spec.file, o.samples, o.seed, std::move(review)};
  if (o.json)
    fmt::print("{}\n",
               check_json(loaded, request)
                   .dump(several ? -1 : 2, ' ', false, nlohmann::json::error_handler_t::replace));
  else
    fmt::print("{}", check_text(loaded, request));
  return exit_code::success;
}

/// Every FILE in turn (text separated by a blank line; with --json one JSON
/// object per line when there are several); the exit code is the worst.
int run_check(const check_options& options) {
  if (!options.suggest_from.empty())
    return report_errors([&] { return run_suggest(options); }, options.json);
  const bool several = options.files.size() > 1;
  int worst = exit_code::success;
  for (std::size_t i = 0; i < options.files.size(); ++i) {
    auto one = options;
    one.input.spec.file = options.files[i];
    if (several && !options.json) fmt::print("{}", i > 0 ? "\n" : "");
    std::fflush(stdout);
    worst = std::max(
        worst, report_errors([&] { return check_file(one, several); }, options.json, several));
  }
  return worst;
}

}  // namespace

command add_check_command(CLI::App& tool) {
  auto options = std::make_shared<check_options>();
  CLI::App* check = tool.add_subcommand("check",
                                        "Check a space: parameters, raw and valid sizes, groups, "
                                        "what each constraint rejects, samples");
  add_space_options(*check, options->input);
  check->remove_option(check->get_option("FILE"));
  check->add_option("FILE", options->files, "The .tsl files to check, one after another")
      ->type_name("PATH...")
      ->check(CLI::ExistingFile.description(""));
  check
      ->add_option("--sample", options->samples,
                   "Print N configs drawn uniformly from the valid ones (at most 1,000,000)")
      ->type_name("N")
      ->capture_default_str()
      ->check(whole_number())
      ->check(CLI::Range(std::size_t{0}, max_samples).description(""));
  check
      ->add_option("--seed", options->seed,
                   "Seed of the sampling engine (any 64-bit unsigned integer)")
      ->type_name("S")
      ->capture_default_str()
      ->check(whole_number());
  check->add_flag("--json", options->json,
                  "Print one JSON object instead of text (one per line for several FILEs)");
  check
      ->add_option("--backend", options->backend,
                   "Also check the space against a backend (e.g. sim: the workload's names, "
                   "kinds and values) and list the defaults it applies")
      ->type_name("SPEC");
  check
      ->add_option("--backend-set", options->backend_settings,
                   "A backend setting, e.g. --backend-set model=analytic; repeatable")
      ->type_name("KEY=VALUE")
      ->needs("--backend");  // else it was ignored without a word
  check
      ->add_option("--suggest-constraints", options->suggest_from,
                   "Print the constraints a study file's failures teach, as require lines "
                   "(FILE is then not needed)")
      ->type_name("DB");
  check->parse_complete_callback([options] {
    if (options->files.empty() && options->suggest_from.empty())
      throw CLI::RequiredError("FILE (or --suggest-constraints DB)");
  });
  return {check, [options] { return run_check(*options); }};
}

}  // namespace tessel::cli
