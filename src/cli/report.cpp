// `tessel report DB [-o FILE] [--format html|svg --plot NAME]`: a study
// file seen: one self-contained HTML page of inline SVG plots, or one plot
// as an SVG file (docs/report.md). The parameter importance comes from the
// Gaussian-process surrogate of strategies/bayesian, wired here.
#include "command.hpp"
#include "common.hpp"

#include <tessel/bayesian.hpp>
#include <tessel/constraints.hpp>
#include <tessel/driver.hpp>
#include <tessel/error.hpp>
#include <tessel/interactions.hpp>
#include <tessel/report.hpp>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <CLI/CLI.hpp>

#include <fstream>
#include <iostream>
#include <map>
#include <memory>

namespace tessel::cli {
namespace {

struct report_options {
  std::string db;
  std::string output;
  std::string format = "html";
  std::string plot;
  std::size_t top = report_input{}.top;
};

/// The best config against the baseline, predicted by `model`, except the
/// configs the study itself measured (its baseline and best at least),
/// which keep their stored objective and count as measured.
void add_interactions(const stored_study& stored, const surrogate& model, report_input& in) {
  const auto& s = stored.space;
  const auto base = s.default_config();
  const trial* best = nullptr;
  std::map<std::uint64_t, double> measured;  // key -> objective of the ok trials
  for (const auto& t : stored.trials) {
    if (t.state != trial_state::finished || !t.result.ok() || t.result.low_fidelity()) continue;
    measured.emplace(t.key, t.result.objective);
    if (!best || t.result.objective < best->result.objective) best = &t;
  }
  if (!base || !best) {
    in.interactions_note = !base ? "the baseline is not a valid config" : "no trial finished ok";
    return;
  }
  auto r = analyse_interactions(s, *base, best->config, {}, &model, 0);
  auto from_study = [&](interaction_point& p) {
    const auto found = measured.find(s.key(p.c));
    if (found == measured.end()) return;
    if (p.objective && !p.measured) --r.predicted;
    ++r.measured;  // by the study, at no cost to the report
    p.objective = found->second;
    p.measured = true;
    p.note.clear();
  };
  from_study(r.base);
  from_study(r.target);
  for (auto* design : {&r.alone, &r.without, &r.pairs})
    for (auto& p : *design) from_study(p);
  in.interactions = std::move(r);
}

/// The GP surrogate fed every finished trial, and what it says: the
/// importances and the interactions, or why not.
void add_model_figures(const stored_study& stored, report_input& in) {
  const auto model = make_gp_surrogate(stored.space);
  std::size_t ok = 0;
  for (const auto& t : stored.trials)
    if (t.state == trial_state::finished) {
      model->observe(t);
      ok += t.result.ok() ? 1 : 0;
    }
  in.importance = parameter_importances(stored.space, stored.trials, *model);
  if (in.importance)
    in.importance->method += " (Gaussian-process surrogate, docs/bayesian.md)";
  else
    in.importance_note =
        fmt::format("the Gaussian-process surrogate is not ready ({} ok trials; it needs {})", ok,
                    gp_options{}.min_observations);
  if (model->ready())
    add_interactions(stored, *model, in);
  else
    in.interactions_note = in.importance_note;
}

int run_report(const report_options& o) {
  if (o.format != "html" && o.format != "svg")
    throw error(fmt::format("report: unknown --format '{}' (html or svg)", o.format));
  if (o.format == "svg" && o.plot.empty())
    throw error(fmt::format("report: --format svg draws one plot: name it with --plot ({})",
                            fmt::join(report_plot_names(), ", ")));
  const auto stored = reopen_study(o.db);
  report_input in;
  in.record = &stored.record;
  in.study_space = &stored.space;
  in.trials = &stored.trials;
  in.source = o.db;
  in.top = o.top;
  if (o.format == "html" || o.plot == "importance" || o.plot == "interactions")
    add_model_figures(stored, in);
  for (const auto& rule : learn_constraints(stored.space, stored.trials))
    in.learned_constraints.push_back(rule.line());
  const std::string text = o.format == "html" ? report_html(in) : report_svg(in, o.plot);
  if (o.output.empty() || o.output == "-") {
    std::cout << text;
    return exit_code::success;
  }
  std::ofstream out(o.output, std::ios::binary);
  out << text;
  out.close();
  if (!out) throw error(fmt::format("cannot write '{}'", o.output));
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
  app->add_option("DB", options->db, "The study file")->required()->type_name("PATH");
  app->add_option("--output,-o", options->output, "Where to write (default: stdout)")
      ->type_name("PATH");
  app->add_option("--format,-f", options->format, "html (the page) or svg (one plot, --plot)")
      ->capture_default_str();
  app->add_option("--plot", options->plot,
                  "With --format svg: convergence, convergence_cost, objective_by_parameter, "
                  "importance, interactions, parallel, status, engines or fidelity")
      ->type_name("NAME");
  app->add_option("--top", options->top, "Trials in the parallel-coordinates view and the table")
      ->capture_default_str();
  return {app, [options] { return report_errors([&] { return run_report(*options); }, false); }};
}

}  // namespace tessel::cli
