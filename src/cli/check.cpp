// `tessel check FILE`: reads a space and reports what the engine learnt about
// it: parameters and domains, raw and valid sizes, construction time,
// independent groups, what each constraint rejects, and uniform samples; with
// --backend, what the backend refuses in it and the defaults it applies.
#include "command.hpp"
#include "common.hpp"
#include "format.hpp"

#include <tessel/codec.hpp>
#include <tessel/driver.hpp>
#include <tessel/settings.hpp>
#include <tessel/space_check.hpp>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <charconv>
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

/// The backend's review of the space when --backend is given.
std::optional<backend_review> reviewed(const space& s, const check_options& options) {
  if (options.backend.empty()) return std::nullopt;
  return review_backend(s, options.backend,
                        parse_assignments(options.backend_settings, "--backend-set"));
}

/// The most samples --sample accepts.
constexpr std::size_t max_samples = 1'000'000;

std::string target_description(const target& t) {
  return t.base.empty() ? t.name : fmt::format("{} (based on {})", t.name, t.base);
}

// --- text ----------------------------------------------------------------------

void print_header(const loaded_space& loaded, const check_options& options) {
  const space& s = loaded.space;
  std::string where = options.input.spec.file;
  if (loaded.space_names.size() > 1)
    where +=
        fmt::format("; space {} of {}: {}",
                    1 + static_cast<std::size_t>(std::find(loaded.space_names.begin(),
                                                           loaded.space_names.end(), s.name()) -
                                                 loaded.space_names.begin()),
                    loaded.space_names.size(), fmt::join(loaded.space_names, ", "));
  fmt::print("space         {} ({})\n", s.name(), where);
  fmt::print("target        {}\n", target_description(s.def().target));
  if (!s.def().constants.empty()) {
    std::vector<std::string> constants;
    for (const auto& c : s.def().constants)
      constants.push_back(fmt::format("{} = {}", c.name, constant_text(s.def(), c)));
    fmt::print("constants     {}\n", fmt::join(constants, ", "));
  }
}

void print_parameters(const space& s) {
  std::size_t name_width = 4;
  std::size_t size_width = 4;
  for (const auto& p : s.parameters()) {
    name_width = std::max(name_width, p.name.size());
    size_width = std::max(size_width, with_separators(p.dom.size()).size());
  }
  fmt::print("\nparameters ({})\n", s.size());
  fmt::print("  {:<{}}  {:<11}  {:>{}}  {}\n", "name", name_width, "kind", "size", size_width,
             "domain");
  for (const auto& p : s.parameters()) {
    std::string notes;
    if (p.default_index) notes += fmt::format("  default {}", p.dom.label(*p.default_index));
    if (p.when) notes += "  conditional";
    fmt::print("  {:<{}}  {:<11}  {:>{}}  {}{}\n", p.name, name_width, to_string(p.dom.kind),
               with_separators(p.dom.size()), size_width, domain_preview(p.dom), notes);
  }
}

void print_sizes(const loaded_space& loaded) {
  const space& s = loaded.space;
  const auto raw = s.cartesian_size();
  fmt::print(
      "\nraw size      {}\n",
      raw ? with_separators(*raw) : fmt::format("~1e{:.1f} (over 2^64)", s.log10_cartesian_size()));
  fmt::print("valid         {} ({})\n", with_separators(s.count()), percent(valid_fraction(s)));
  fmt::print("construction  {} (parse+check {}, engine {})\n",
             milliseconds(loaded.parse_ms + loaded.build_ms), milliseconds(loaded.parse_ms),
             milliseconds(loaded.build_ms));
}

void print_groups(const space& s) {
  fmt::print("\ngroups ({})\n", s.groups().size());
  std::size_t number = 0;
  for (const auto& g : s.groups()) {
    std::vector<std::string> names;
    for (auto p : g.parameters) names.push_back(parameter_name(s, p));
    fmt::print("  {}  {}: {} valid, {} nodes\n", ++number, fmt::join(names, ", "),
               with_separators(g.valid), with_separators(g.nodes));
  }
}

void print_constraints(const space& s) {
  const auto& constraints = s.def().constraints;
  const auto& stats = s.constraint_stats();
  fmt::print("\nconstraints ({})\n", constraints.size());
  for (std::size_t i = 0; i < constraints.size(); ++i) {
    const auto& c = constraints[i];
    const std::string label =
        c.message.empty() ? c.text : fmt::format("\"{}\": {}", c.message, c.text);
    fmt::print("  {}  {}\n",
               c.line > 0 ? fmt::format("line {}", c.line) : fmt::format("#{}", i + 1), label);
    if (i < stats.size())
      fmt::print("      attached to {}, rejects {} ({} of raw)\n",
                 parameter_name(s, stats[i].attached_to), with_separators(stats[i].rejected),
                 percent(raw_fraction(s, stats[i].rejected)));
  }
}

/// A JSON value on one line, arrays spaced: `["k", "m", "n"]`.
std::string spaced(const json& value) {
  if (!value.is_array()) return value.dump();
  std::vector<std::string> items;
  for (const auto& item : value) items.push_back(spaced(item));
  return fmt::format("[{}]", fmt::join(items, ", "));
}

/// `{"tile": 16, "unroll": 4, "order": ["k", "m", "n"]}`: one line, spaced for reading.
std::string sample_line(const space& s, const config& c) {
  std::vector<std::string> fields;
  const json sample = sample_json(s, c);
  for (const auto& [name, value] : sample.items())
    fields.push_back(fmt::format("\"{}\": {}", name, spaced(value)));
  return fmt::format("{{{}}}", fmt::join(fields, ", "));
}

void print_samples(const space& s, const std::vector<config>& samples,
                   const check_options& options) {
  if (samples.empty()) return;
  fmt::print("\nsamples ({}, seed {})\n", samples.size(), options.seed);
  for (const auto& c : samples) fmt::print("  {}\n", sample_line(s, c));
}

void print_backend(const std::optional<backend_review>& report) {
  if (!report) return;
  fmt::print("\nbackend       {}\n", report->name);
  for (const auto& note : report->notes) fmt::print("  {}\n", note);
}

void print_text(const loaded_space& loaded, const check_options& options) {
  const space& s = loaded.space;
  // Before printing: either may throw.
  const std::vector<config> samples = draw_samples(s, options.samples, options.seed);
  const auto backend = reviewed(s, options);
  print_header(loaded, options);
  print_parameters(s);
  print_sizes(loaded);
  print_groups(s);
  print_constraints(s);
  print_backend(backend);
  print_samples(s, samples, options);
}

void print_json(const loaded_space& loaded, const check_options& options, bool one_line) {
  const json out = check_json(loaded, {options.input.spec.file, options.samples, options.seed,
                                       reviewed(loaded.space, options)});
  fmt::print("{}\n",
             out.dump(one_line ? -1 : 2, ' ', false, nlohmann::json::error_handler_t::replace));
}

/// A 64-bit unsigned integer in decimal: CLI11 alone would wrap "-3" around
/// to 2^64 - 3 and saturate values past 2^64 - 1.
std::string check_unsigned(const std::string& text) {
  std::uint64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec == std::errc{} && end == text.data() + text.size()) return {};
  return "expected an integer from 0 to 18446744073709551615, got '" + text + "'";
}

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
  if (rules.empty()) {
    fmt::print(
        "# {}: no constraint learned (too few failures, or none that a rule on the "
        "parameters separates from the successes)\n",
        options.suggest_from);
    return exit_code::success;
  }
  fmt::print("# learned from {} ({} trials): paste the lines you agree with into space {}\n",
             options.suggest_from, stored.trials.size(), stored.record.space_name);
  for (const auto& r : rules) fmt::print("{}\n", r.line());
  return exit_code::success;
}

/// Checks one FILE (options.input.spec.file).
int check_file(const check_options& options, bool several) {
  const loaded_space loaded = read_space(options.input.resolved());
  if (options.json)
    print_json(loaded, options, several);
  else
    print_text(loaded, options);
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
      ->check(CLI::Range(std::size_t{0}, max_samples).description(""));
  check
      ->add_option("--seed", options->seed,
                   "Seed of the sampling engine (any 64-bit unsigned integer)")
      ->type_name("S")
      ->capture_default_str()
      ->check(CLI::Validator(check_unsigned, "", "unsigned"));
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
      ->type_name("KEY=VALUE");
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
