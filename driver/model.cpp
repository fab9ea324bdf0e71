// model.cpp: a model opened, timed and tuned from a model_spec
// (tessel/model_driver.hpp, docs/models.md).
#include "json_fields.hpp"

#include <tessel/backends.hpp>
#include <tessel/dsl.hpp>
#include <tessel/error.hpp>
#include <tessel/model_driver.hpp>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <map>
#include <set>

namespace tessel {
namespace {

using json = nlohmann::json;

template <class T>
void read(const json& j, const char* key, T& out) {
  json_fields::read("model spec", j, key, out);
}

/// The fields model_spec::from_json reads (the rest are refused, named).
const std::set<std::string, std::less<>>& spec_fields() {
  static const std::set<std::string, std::less<>> fields{
      "file",   "model",     "target", "set",         "backend", "backend_set",
      "gate",   "strategy",  "seed",   "scheduler",   "db_dir",  "no_db",
      "resume", "overwrite", "budget", "cost_budget", "allocate"};
  return fields;
}

}  // namespace

void model_spec::validate() const {
  if (file.empty()) throw options_error("model_spec.file", "give the .tsl file of the model");
  if (scheduler != "utility" && scheduler != "fifo")
    throw options_error("model_spec.scheduler",
                        fmt::format("must be utility or fifo, not '{}'", scheduler));
  if (!(cost_budget_s >= 0) || !std::isfinite(cost_budget_s))
    throw options_error("model_spec.cost_budget_s",
                        fmt::format("must be finite and >= 0, not {}", cost_budget_s));
  if (no_db && mode != open_mode::create)
    throw options_error("model_spec.no_db",
                        "keeps nothing on disk, so there is nothing to resume or overwrite");
}

model_spec model_spec::from_json(const json& j) {
  if (!j.is_object()) throw error("model spec: expected a JSON object");
  for (const auto& [key, value] : j.items())
    if (!spec_fields().contains(key))
      throw error(fmt::format("model spec: unknown field \"{}\"", key));
  model_spec s;
  read(j, "file", s.file);
  read(j, "model", s.model);
  read(j, "target", s.target);
  json_fields::read_assignments("model spec", j, "set", s.sets);
  read(j, "backend", s.backend);
  json_fields::read_assignments("model spec", j, "backend_set", s.backend_settings);
  read(j, "gate", s.gate);
  read(j, "strategy", s.strategy);
  read(j, "seed", s.seed);
  read(j, "scheduler", s.scheduler);
  read(j, "db_dir", s.db_dir);
  read(j, "no_db", s.no_db);
  bool resume = false, overwrite = false;
  read(j, "resume", resume);
  read(j, "overwrite", overwrite);
  if (resume && overwrite)
    throw error("model spec: \"resume\" and \"overwrite\" exclude each other");
  s.mode = resume ? open_mode::resume : overwrite ? open_mode::overwrite : open_mode::create;
  if (resume) {  // what it leaves out is each kernel study's own, as tune-model --resume takes it
    s.resuming = [j](study_spec& spec, const study_spec& recorded) {
      const auto said = [&j](const recorded_field& r) {
        if (r.field != "strategy" && r.field != "seed" && r.field != "scheduler")
          return option_said::cannot;  // not a model spec's to give
        return j.contains(r.field) ? option_said::given : option_said::left_out;
      };
      return resume_notes(take_recorded(spec, recorded, said), keyword_text, ", ", "this tuning");
    };
  }
  read(j, "budget", s.budget);
  read(j, "cost_budget", s.cost_budget_s);
  std::string policy(to_string(s.policy));
  read(j, "allocate", policy);
  const auto p = parse_allocation(policy);
  if (!p)
    throw error(
        fmt::format("model spec: \"allocate\" must be utility, even or share, not "
                    "'{}'",
                    policy));
  s.policy = *p;
  return s;
}

model_definition read_model(const model_spec& spec) {
  parse_options p;
  p.file = spec.file;
  p.target = spec.target;
  for (const auto& [name, value] : spec.sets) p.overrides[name] = value;
  return load_model(spec.file, p, spec.model);
}

std::shared_ptr<backend> kernel_backend(const model_spec& spec) {
  auto settings = spec.backend_settings;
  if (!spec.gate && spec.backend.rfind("sim", 0) == 0) settings["gate"] = "false";
  return make_backend(spec.backend, settings);
}

timed_kernels time_defaults(const model_definition& m, const model_spec& spec) {
  timed_kernels out;
  for (const auto& k : m.kernels) {
    const auto b = kernel_backend(spec);
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

timed_kernels time_bests(const model_definition& m, const model_spec& spec,
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
      best = best_trial(*stored);
    }
    if (!best) {
      out.results.push_back(
          measurement::failure(status::invalid, stored ? "no ok trial in " + path.string()
                                                       : "no study file " + path.string()));
      continue;
    }
    const auto b = kernel_backend(spec);
    b->prepare(k.space);
    out.results.push_back(b->evaluate(k.space, best->config));
  }
  return out;
}

step_breakdown step_for(const model_definition& m, const timed_kernels& timed) {
  std::vector<kernel_result> rows;
  for (std::size_t i = 0; i < m.kernels.size(); ++i)
    rows.push_back({m.kernels[i].name, m.kernels[i].calls, &timed.results.at(i)});
  return step_of(rows);
}

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

json step_json(const model_definition& m, const step_breakdown& step) {
  auto categories = [](const category_seconds& s) {
    json j = json::object();
    for (auto c : all_time_categories())
      j[std::string(to_string(c))] = s[static_cast<std::size_t>(c)];
    return j;
  };
  json kernels = json::array();
  for (std::size_t i = 0; i < step.kernels.size(); ++i) {
    const auto& k = step.kernels[i];
    const auto& def = m.kernels[i];
    json sets = json::object();
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
  json groups = json::object();
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

json default_step_json(const model_spec& spec) { return model_step(spec).to_json(); }

std::int64_t physical_cores(const model_definition& m) {
  if (m.kernels.empty()) return 1;
  return m.kernels.front().space.def().target.find("lnc").value_or(1);
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

model_study open_model_study(const model_definition& m, const model_spec& spec,
                             const std::filesystem::path& dir, std::vector<std::string>* notes) {
  spec.validate();
  if (!spec.no_db) std::filesystem::create_directories(dir);
  model_study_options allocator;
  allocator.policy = spec.policy;
  allocator.cost_is_seconds = spec.budget == 0;
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
    so.backend = spec.backend;
    so.backend_settings = spec.backend_settings;
    so.gate = spec.gate;
    so.strategy = spec.strategy;
    so.seed = spec.seed + i;  // kernels do not share a random stream
    so.window = 1;            // the allocator evaluates one candidate at a time
    if (!spec.no_db) so.db = (dir / (name + ".tessel.db")).string();
    so.scheduler = spec.scheduler;
    // the evaluation budget each kernel's cost weight cools over
    if (spec.budget) so.budget_hint = std::max<std::size_t>(1, spec.budget / distinct.size());
    open_options opening;
    opening.mode = spec.mode;
    if (spec.resuming)
      opening.resuming = [&spec, notes](study_spec& s, const study_spec& r) {
        auto mine = spec.resuming(s, r);  // one model spec began them all (seed + i)
        if (notes && notes->empty()) *notes = std::move(mine);
      };
    auto opened = open_study(std::move(so), std::move(opening));
    members.push_back({name, calls, std::move(opened.study)});
  }
  return model_study(std::move(members), allocator);
}

std::vector<kernel_gap> roofline_gaps(const model_summary& sum) {
  std::vector<kernel_gap> out;
  for (const auto& k : sum.kernels) {
    kernel_gap g;
    if (k.best) {
      const auto it = k.best->result.metrics.find("roofline_s");
      if (it != k.best->result.metrics.end()) g.roofline_s = it->second;
      if (g.roofline_s > 0)
        g.gap_s =
            static_cast<double>(k.calls) * std::max(0.0, k.best->result.objective - g.roofline_s);
    }
    out.push_back(g);
  }
  return out;
}

model_tuning open_model_tuning(const model_spec& spec, bool folder_per_target) {
  if (!spec.budget && spec.cost_budget_s <= 0)
    throw options_error("tune-model",
                        "needs a budget: --budget N (evaluations) or --cost-budget SECONDS");
  auto m = read_model(spec);
  const auto dir = model_db_dir(m, spec.db_dir, folder_per_target);
  std::vector<std::string> notes;
  auto study = open_model_study(m, spec, dir, &notes);
  return {spec, std::move(m), std::move(study), {}, spec.no_db ? std::string() : dir.string(),
          notes};
}

const model_summary& model_tuning::run() {
  summary = study.run(spec.budget, spec.cost_budget_s);
  return summary;
}

json model_tuning::to_json() const {
  json kernels = json::array();
  const auto gaps = roofline_gaps(summary);
  for (std::size_t i = 0; i < summary.kernels.size(); ++i) {
    const auto& k = summary.kernels[i];
    json j = {{"name", k.name},
              {"calls", k.calls},
              {"evaluations", k.evaluations},
              {"cost_s", k.cost_s},
              {"done", k.done}};
    if (k.first) j["first_s"] = k.first->result.objective;
    if (k.best) {
      j["best_s"] = k.best->result.objective;
      j["best_config"] = json::parse(study.member(i).study->space().to_json(k.best->config));
    }
    if (gaps[i].roofline_s > 0) {
      j["roofline_s"] = gaps[i].roofline_s;
      j["gap_s"] = gaps[i].gap_s;
    }
    kernels.push_back(std::move(j));
  }
  json out = {{"model", model.name},
              {"file", model.file},
              {"target", model.target},
              {"allocation", to_string(spec.policy)},
              {"evaluations", summary.evaluations},
              {"cost_s", summary.cost_s},
              {"stopped", summary.stopped},
              {"kernels", kernels}};
  if (!db_dir.empty()) out["db_dir"] = db_dir;
  if (!notes.empty()) out["notes"] = notes;
  if (summary.before_s) out["before_s"] = *summary.before_s;
  if (summary.after_s) out["after_s"] = *summary.after_s;
  return out;
}

}  // namespace tessel
