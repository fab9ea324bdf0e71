#include "model_setup.hpp"

#include "format.hpp"

#include <tessel/backends.hpp>
#include <tessel/dsl.hpp>
#include <tessel/error.hpp>
#include <tessel/settings.hpp>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <map>

namespace tessel::cli {
namespace {

parse_options parse_options_for(const model_options& o, const std::string& target) {
  parse_options p;
  p.file = o.file;
  p.target = target;
  for (const auto& assignment : o.sets) {
    const auto eq = assignment.find('=');
    p.overrides[assignment.substr(0, eq)] = assignment.substr(eq + 1);  // last one wins
  }
  return p;
}

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

/// Each group's step seconds, largest first; kernels without a group are
/// "(no group)". Empty when no kernel has one.
std::vector<std::pair<std::string, double>> groups_of(const model_definition& m,
                                                      const step_breakdown& step) {
  std::map<std::string, double> by;
  bool any = false;
  for (std::size_t i = 0; i < m.kernels.size(); ++i) {
    any = any || !m.kernels[i].group.empty();
    const auto& g = m.kernels[i].group;
    by[g.empty() ? "(no group)" : g] += step.kernels[i].step_s;
  }
  if (!any) return {};
  std::vector<std::pair<std::string, double>> out(by.begin(), by.end());
  std::stable_sort(out.begin(), out.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
  return out;
}

}  // namespace

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

model_definition load_model_for(const model_options& o, const std::string& target) {
  return load_model(o.file, parse_options_for(o, target), o.model);
}

std::shared_ptr<backend> kernel_backend(const model_options& o) {
  auto settings = o.backend_settings;
  if (!o.gate && o.backend.rfind("sim", 0) == 0) settings.emplace_back("gate=false");
  return make_backend(o.backend, parse_assignments(settings, "--backend-set"));
}

timed_kernels time_defaults(const model_definition& m, const model_options& o) {
  timed_kernels out;
  for (const auto& k : m.kernels) {
    const auto b = kernel_backend(o);
    b->prepare(k.space);
    auto c = k.space.default_config();
    if (!c && k.space.count() > 0) {  // the space's first valid config stands in
      c = k.space.at(0);
      out.notes.push_back(fmt::format(
          "{}: the space's default config is not valid at these shapes; its first valid config "
          "is timed instead ({})",
          k.name, k.space.to_json(*c)));
    }
    out.results.push_back(b->evaluate(k.space, *c));
  }
  return out;
}

step_breakdown step_for(const model_definition& m, const timed_kernels& timed) {
  const auto& results = timed.results;
  std::vector<kernel_result> rows;
  for (std::size_t i = 0; i < m.kernels.size(); ++i)
    rows.push_back({m.kernels[i].name, m.kernels[i].calls, &results.at(i)});
  return step_of(rows);
}

std::filesystem::path model_db_dir(const model_definition& m, const std::string& db_dir,
                                   bool several_targets) {
  const std::filesystem::path base = db_dir.empty() ? m.name + ".tessel" : db_dir;
  return several_targets ? base / m.target : base;
}

std::string member_name(const model_definition& m, const std::vector<std::size_t>& instances) {
  std::string name;
  for (auto i : instances) name += (name.empty() ? "" : "+") + m.kernels[i].name;
  return name;
}

model_study open_model_study(const model_definition& m, const model_options& o,
                             const model_study_setup& s, const std::filesystem::path& dir) {
  if (!s.no_db) std::filesystem::create_directories(dir);
  std::vector<model_member> members;
  const auto distinct = distinct_kernels(m);
  for (std::size_t i = 0; i < distinct.size(); ++i) {
    const auto& k = m.kernels[distinct[i].front()];
    std::int64_t calls = 0;
    for (auto j : distinct[i]) calls += m.kernels[j].calls;
    const auto name = member_name(m, distinct[i]);
    study_spec so;
    so.file = k.space_file;
    so.space = k.space_name;
    so.target = m.target;
    for (const auto& [set, value] : k.sets) so.sets[set] = value;
    so.backend = o.backend;
    so.backend_settings = parse_assignments(o.backend_settings, "--backend-set");
    so.gate = o.gate;
    so.strategy = s.strategy;
    so.seed = s.seed + i;  // kernels do not share a random stream
    so.window = 1;         // the allocator evaluates one candidate at a time
    if (!s.no_db) so.db = (dir / (name + ".tessel.db")).string();
    so.scheduler = s.scheduler;
    so.budget_hint = s.budget_hint;
    auto opened = open_study(std::move(so), s.resume      ? open_mode::resume
                                            : s.overwrite ? open_mode::overwrite
                                                          : open_mode::create);
    members.push_back({name, calls, std::move(opened.study)});
  }
  return model_study(std::move(members), s.allocator);
}

timed_kernels time_bests(const model_definition& m, const model_options& o,
                         const std::filesystem::path& dir) {
  timed_kernels out;
  std::vector<std::string> file_of(m.kernels.size());  // instance -> its study's name
  for (const auto& instances : distinct_kernels(m))
    for (auto i : instances) file_of[i] = member_name(m, instances);
  for (std::size_t i = 0; i < m.kernels.size(); ++i) {
    const auto& k = m.kernels[i];
    const auto path = dir / (file_of[i] + ".tessel.db");
    const trial* best = nullptr;
    std::optional<stored_study> stored;
    if (std::filesystem::exists(path)) {
      stored = reopen_study(path.string());
      for (const auto& t : stored->trials)
        if (t.state == trial_state::finished && t.result.ok() && !t.result.low_fidelity() &&
            (!best || t.result.objective < best->result.objective))
          best = &t;
    }
    if (!best) {
      out.results.push_back(
          measurement::failure(status::invalid, stored ? "no ok trial in " + path.string()
                                                       : "no study file " + path.string()));
      continue;
    }
    const auto b = kernel_backend(o);
    b->prepare(k.space);
    out.results.push_back(b->evaluate(k.space, best->config));
  }
  return out;
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

nlohmann::json step_json(const model_definition& m, const step_breakdown& step) {
  auto categories = [](const category_seconds& s) {
    nlohmann::json j = nlohmann::json::object();
    for (auto c : all_time_categories())
      j[std::string(to_string(c))] = s[static_cast<std::size_t>(c)];
    return j;
  };
  nlohmann::json kernels = nlohmann::json::array();
  for (std::size_t i = 0; i < step.kernels.size(); ++i) {
    const auto& k = step.kernels[i];
    const auto& def = m.kernels[i];
    nlohmann::json sets = nlohmann::json::object();
    for (const auto& [name, value] : def.sets) sets[name] = value;
    kernels.push_back({{"name", k.name},
                       {"group", def.group},
                       {"space", def.space_name},
                       {"space_file", def.space_file},
                       {"sets", sets},
                       {"dtype", def.dtype},
                       {"calls", k.calls},
                       {"calls_text", def.calls_text},
                       {"timed", k.timed},
                       {"per_call_s", k.per_call_s},
                       {"step_s", k.step_s},
                       {"share", k.share},
                       {"by_category_s", categories(k.by_category)},
                       {"flops", k.flops},
                       {"hbm_bytes", k.hbm_bytes},
                       {"roofline_s", k.roofline_s}});
  }
  nlohmann::json groups = nlohmann::json::object();
  for (const auto& [name, s] : groups_of(m, step)) groups[name] = s;
  return {{"model", m.name},
          {"file", m.file},
          {"target", m.target},
          {"step_s", step.step_s},
          {"by_category_s", categories(step.by_category)},
          {"by_group_s", groups},
          {"flops", step.flops},
          {"hbm_bytes", step.hbm_bytes},
          {"roofline_s", step.roofline_s},
          {"untimed", step.untimed},
          {"kernels", kernels}};
}

std::int64_t physical_cores(const model_definition& m) {
  if (m.kernels.empty()) return 1;
  return m.kernels.front().space.def().target.find("lnc").value_or(1);
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
