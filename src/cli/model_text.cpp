// src/cli/model_text.cpp: the options and tables of `tessel model` and
// `tessel tune-model` (docs/models.md); the work is tessel/model_driver.hpp's.
#include "model_text.hpp"

#include "format.hpp"

#include <tessel/settings.hpp>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <algorithm>

namespace tessel::cli {
namespace {

std::string ms(double seconds) { return milliseconds(seconds * 1e3); }

/// The categories any kernel spends time in, in declaration order.
std::vector<time_category> used_categories(const step_breakdown& step) {
  std::vector<time_category> out;
  for (auto c : all_time_categories())
    if (step.by_category[static_cast<std::size_t>(c)] > 0) out.push_back(c);
  return out;
}

std::string short_name(time_category c) {
  switch (c) {
    case time_category::elementwise: return "elemwise";
    case time_category::collective: return "collect";
    default: return std::string(to_string(c));
  }
}

}  // namespace

model_spec model_options::spec_for(const std::string& target) const {
  model_spec s;
  s.file = file;
  s.model = model;
  s.target = target;
  s.sets = parse_assignments(sets, "--set");
  s.backend = backend;
  s.backend_settings = parse_assignments(backend_settings, "--backend-set");
  s.gate = gate;
  return s;
}

void add_model_options(CLI::App& command, model_options& o) {
  command.add_option("FILE", o.file, "A .tsl file with a model block (docs/models.md)")
      ->required()
      ->type_name("PATH");
  command.add_option("--model", o.model, "Which model of FILE (default: the first)")
      ->type_name("NAME");
  command
      .add_option("--target", o.targets,
                  "Target(s) every kernel is checked and timed on; give two (trn2, trn2_lnc2) to "
                  "compare them")
      ->type_name("NAME")
      ->capture_default_str();
  command.add_option("--set", o.sets, "Override a const of the model, e.g. --set layers=12")
      ->type_name("NAME=VALUE")
      ->allow_extra_args(false);
  command.add_option("--backend", o.backend, "What times each kernel (default sim)")
      ->type_name("SPEC")
      ->capture_default_str();
  command
      .add_option("--backend-set", o.backend_settings,
                  "A backend setting for every kernel, e.g. --backend-set model=analytic")
      ->type_name("KEY=VALUE")
      ->allow_extra_args(false);
  command.add_flag("!--no-gate", o.gate,
                   "--backend sim: time configs without the equivalence gate");
  command.add_flag("--json", o.json, "Print one JSON object instead of the tables");
}

std::string step_text(const model_definition& m, const step_breakdown& step,
                      const timed_kernels& timed) {
  const auto cats = used_categories(step);
  std::string out = fmt::format("{:<18} {:>6} {:>10} {:>10} {:>7}", "kernel", "calls", "per call",
                                "per step", "share");
  for (auto c : cats) out += fmt::format(" {:>8}", short_name(c));
  out += fmt::format(" {:>9} {:>8} {:>10}\n", "GFLOP", "GB", "roofline");
  for (const auto& k : step.kernels) {
    if (!k.timed) {
      out += fmt::format("{:<18} {:>6} {:>10}\n", k.name, k.calls, "no time");
      continue;
    }
    out += fmt::format("{:<18} {:>6} {:>10} {:>10} {:>7}", k.name, k.calls, ms(k.per_call_s),
                       ms(k.step_s), percent(k.share));
    for (auto c : cats)
      out += fmt::format(" {:>8}", percent(k.by_category[static_cast<std::size_t>(c)] / k.step_s));
    out += fmt::format(" {:>9.3g} {:>8.3g} {:>10}\n", k.flops * 1e-9, k.hbm_bytes * 1e-9,
                       k.roofline_s > 0 ? ms(k.roofline_s) : "-");
  }
  out += fmt::format("{:<18} {:>6} {:>10} {:>10} {:>7}", "step", "", "", ms(step.step_s), "100%");
  for (auto c : cats)
    out +=
        fmt::format(" {:>8}", percent(step.by_category[static_cast<std::size_t>(c)] / step.step_s));
  out += fmt::format(" {:>9.3g} {:>8.3g} {:>10}\n", step.flops * 1e-9, step.hbm_bytes * 1e-9,
                     step.roofline_s > 0 ? ms(step.roofline_s) : "-");

  out += "\nby category:";
  for (auto c : all_time_categories()) {
    const double s = step.by_category[static_cast<std::size_t>(c)];
    if (c == time_category::other && s <= 0) continue;
    out += fmt::format(" {} {} ({}){}", to_string(c), ms(s),
                       percent(step.step_s > 0 ? s / step.step_s : 0),
                       c == time_category::other ? "" : ",");
  }
  if (out.back() == ',') out.pop_back();
  out += "\n";
  if (const auto groups = groups_of(m, step); !groups.empty()) {
    out += "by group:";
    for (std::size_t i = 0; i < groups.size(); ++i)
      out += fmt::format("{} {} {} ({})", i == 0 ? "" : ",", groups[i].first, ms(groups[i].second),
                         percent(groups[i].second / step.step_s));
    out += "\n";
    if (groups.size() >= 2 && groups[1].second > 0)
      out += fmt::format("{} takes {:.2f}x the time of {}\n", groups[0].first,
                         groups[0].second / groups[1].second, groups[1].first);
  }
  if (step.roofline_s > 0)
    out += fmt::format("roofline: every kernel at its roofline would take {} ({:.2f}x faster)\n",
                       ms(step.roofline_s), step.step_s / step.roofline_s);
  if (!step.untimed.empty())
    out += fmt::format("not timed (left out of the step): {}\n", fmt::join(step.untimed, ", "));
  for (std::size_t i = 0; i < step.kernels.size(); ++i)
    if (!step.kernels[i].timed)
      out += fmt::format("  {}: {}: {}\n", step.kernels[i].name, to_string(timed.results[i].status),
                         timed.results[i].message);
  for (const auto& note : timed.notes) out += fmt::format("note: {}\n", note);
  return out;
}

std::string compare_text(const std::vector<target_step>& steps) {
  if (steps.size() < 2) return {};
  std::size_t fastest = 0, cheapest = 0;
  auto core_s = [](const target_step& t) { return t.step_s * static_cast<double>(t.cores); };
  for (std::size_t i = 1; i < steps.size(); ++i) {
    if (steps[i].step_s < steps[fastest].step_s) fastest = i;
    if (core_s(steps[i]) < core_s(steps[cheapest])) cheapest = i;
  }
  const auto& f = steps[fastest];
  std::string out = fmt::format("shortest step: {}, {} on {} physical core{}", f.target,
                                ms(f.step_s), f.cores, f.cores == 1 ? "" : "s");
  for (std::size_t i = 0; i < steps.size(); ++i)
    if (i != fastest)
      out +=
          fmt::format("; {} takes {} ({:.2f}x, {:+.1f}%)", steps[i].target, ms(steps[i].step_s),
                      steps[i].step_s / f.step_s, 100.0 * (steps[i].step_s - f.step_s) / f.step_s);
  out += "\nper physical core (step time x cores, what a chip's throughput follows):";
  for (std::size_t i = 0; i < steps.size(); ++i)
    out += fmt::format("{} {} {}", i == 0 ? "" : ",", steps[i].target, ms(core_s(steps[i])));
  return out + fmt::format(": {} gives the most steps per chip\n", steps[cheapest].target);
}

}  // namespace tessel::cli
