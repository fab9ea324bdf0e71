// `tessel export DB --format t4|csv|json [-o FILE]`: a study's trials for other tools.
#include "command.hpp"
#include "common.hpp"

#include <tessel/driver.hpp>
#include <tessel/error.hpp>
#include <tessel/files.hpp>
#include <tessel/storage.hpp>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <iostream>
#include <memory>
#include <sstream>

namespace tessel::cli {
namespace {

struct export_options {
  std::string db;
  std::string format = "t4";
  std::string output;
};

int run_export(const export_options& o) {
  const auto format = parse_export_format(o.format);
  const auto stored = reopen_study(o.db);
  if (o.output.empty() || o.output == "-") {
    export_trials(std::cout, format, stored.record, stored.trials, stored.space);
    return exit_code::success;
  }
  std::ostringstream text;
  export_trials(text, format, stored.record, stored.trials, stored.space);
  write_file(o.output, text.str());
  fmt::print(stderr, "tessel: wrote {} trials to {}\n", stored.trials.size(), o.output);
  return exit_code::success;
}

}  // namespace

command add_export_command(CLI::App& tool) {
  auto options = std::make_shared<export_options>();
  auto* app = tool.add_subcommand(
      "export", "Write a study's trials as T4 (Kernel Tuner's schema), CSV or JSON lines");
  app->add_option("DB", options->db, "The study: a study file, or a postgresql:// URL")
      ->required()
      ->type_name("DB");
  app->add_option("--format,-f", options->format, "t4, csv or json")
      ->type_name("FORMAT")
      ->capture_default_str();
  app->add_option("--output,-o", options->output, "Where to write (default: stdout)")
      ->type_name("PATH");
  return {app, [options] { return report_errors([&] { return run_export(*options); }, false); }};
}

}  // namespace tessel::cli
