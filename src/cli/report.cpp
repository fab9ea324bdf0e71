// `tessel report DB [-o FILE] [--format html|svg --plot NAME]`: a study
// file seen: one self-contained HTML page of inline SVG plots, or one plot
// as an SVG file (docs/report.md), drawn by the driver's study_report.
#include "command.hpp"
#include "common.hpp"

#include <tessel/driver.hpp>
#include <tessel/error.hpp>
#include <tessel/files.hpp>
#include <tessel/report.hpp>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <CLI/CLI.hpp>

#include <iostream>
#include <memory>

namespace tessel::cli {
namespace {

struct report_options {
  std::string db;
  std::string output;
  std::string format = "html";
  std::string plot;
  std::size_t top = report_request{}.top;
};

int run_report(const report_options& o) {
  if (o.format != "html" && o.format != "svg")
    throw error(fmt::format("report: unknown --format '{}' (html or svg)", o.format));
  if (o.format == "svg" && o.plot.empty())
    throw error(fmt::format("report: --format svg draws one plot: name it with --plot ({})",
                            fmt::join(report_plot_names(), ", ")));
  const auto stored = reopen_study(o.db);
  const std::string text = study_report(stored, {o.format, o.plot, o.top, o.db});
  if (o.output.empty() || o.output == "-") {
    std::cout << text;
    return exit_code::success;
  }
  write_file(o.output, text);
  fmt::print(stderr, "tessel: wrote the report of {} ({} trials) to {}\n", o.db,
             stored.trials.size(), o.output);
  return exit_code::success;
}

}  // namespace

command add_report_command(CLI::App& tool) {
  auto options = std::make_shared<report_options>();
  auto* app = tool.add_subcommand(
      "report",
      "Draw a study file: one self-contained HTML page of SVG plots (convergence, objective "
      "per parameter, importance, best trials, status, engines), or one plot as SVG");
  app->add_option("DB", options->db, "The study: a study file, or a postgresql:// URL")
      ->required()
      ->type_name("DB");
  app->add_option("--output,-o", options->output, "Where to write (default: stdout)")
      ->type_name("PATH");
  app->add_option("--format,-f", options->format, "html (the page) or svg (one plot, --plot)")
      ->type_name("FORMAT")
      ->capture_default_str();
  app->add_option("--plot", options->plot,
                  "With --format svg: convergence, convergence_cost, objective_by_parameter, "
                  "importance, interactions, parallel, status, engines or fidelity")
      ->type_name("NAME");
  app->add_option("--top", options->top, "Trials in the parallel-coordinates view and the table")
      ->type_name("N")
      ->check(whole_number())
      ->capture_default_str();
  return {app, [options] { return report_errors([&] { return run_report(*options); }, false); }};
}

}  // namespace tessel::cli
