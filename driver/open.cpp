// open.cpp: a study from its spec (tessel/driver.hpp): the space, the
// backend, the strategy, the scheduler, the study file.
#include <tessel/backends.hpp>
#include <tessel/bayesian.hpp>
#include <tessel/driver.hpp>
#include <tessel/dsl.hpp>
#include <tessel/error.hpp>
#include <tessel/sim.hpp>
#include <tessel/strategies.hpp>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace tessel {
namespace {

using clock = std::chrono::steady_clock;

double ms_since(clock::time_point from) {
  return std::chrono::duration<double, std::milli>(clock::now() - from).count();
}

/// Stands in when no backend is given: the caller measures and tells.
class external_backend final : public backend {
 public:
  std::string name() const override { return "external"; }
  measurement evaluate(const space&, const config&) override {
    return measurement::failure(status::invalid,
                                "no backend: evaluate the config yourself and tell the result");
  }
};

/// The backend the spec names (none: an external one that the caller tells).
std::shared_ptr<backend> backend_of(const study_spec& spec) {
  if (spec.backend.empty()) return std::make_shared<external_backend>();
  auto settings = spec.backend_settings;
  const bool simulator = spec.backend == "sim" || spec.backend.starts_with("sim:");
  if (!spec.gate && simulator) settings.emplace("gate", "false");
  return make_backend(spec.backend, settings);
}

/// The study file, claimed for writing: cleared with open_mode::overwrite; a
/// file whose study has trials needs open_mode::resume.
std::shared_ptr<study_store> writable_store(const std::string& location, open_mode mode) {
  auto db = open_store(location, store_access::write);
  if (mode == open_mode::overwrite) {
    db->clear();
    return db;
  }
  const auto stored = db->study();
  const auto trials = stored ? db->trial_count() : 0;
  if (trials > 0 && mode != open_mode::resume)
    throw error(fmt::format(
        "'{0}' already holds a study of space '{1}' with {2} trial{3} (see "
        "`tessel show {0}`): pass --resume to continue it, --overwrite to delete it and start "
        "over, --db PATH to keep it and start another, or --no-db",
        db->location(), stored->space_name, trials, trials == 1 ? "" : "s"));
  return db;
}

study_options study_options_of(const study_spec& spec, const space& s, open_mode mode) {
  study_options so;
  so.seed = spec.seed;
  so.jobs = spec.jobs;
  so.window = spec.window;
  so.resume = mode == open_mode::resume;
  so.evaluate_baseline = spec.baseline;
  so.annotations = spec.to_json().dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  if (spec.scheduler == "utility") {
    so.surrogate = make_gp_surrogate(s);
    so.costs = make_cost_model(s);
  }
  so.min_gain_fraction = spec.min_gain;
  so.cost_alpha_start = spec.cost_alpha;
  so.cost_rule = spec.cost_rule == "gittins" ? study_options::cost_rule_kind::gittins
                                             : study_options::cost_rule_kind::cooled_ei;
  so.budget_hint = spec.budget_hint;
  so.cost_budget_hint_s = spec.cost_budget_hint_s;
  so.token_price_s = spec.token_price_s;
  so.verify_reported = spec.verify;
  return so;
}

}  // namespace

parse_options space_parse_options(const std::string& file, const study_spec& spec) {
  parse_options parse;
  parse.file = file;
  parse.target = spec.resolved().target;
  for (const auto& [name, value] : spec.sets) parse.overrides[name] = value;
  return parse;
}

loaded_space read_space(const study_spec& spec) {
  const auto started = clock::now();
  if (spec.replay_space == "table")
    return {replay_space(spec.file, replay_space_kind::table), {}, ms_since(started), 0};
  if (is_replay_file(spec.file)) {
    auto s = parse_space(replay_space_source(spec.file), space_parse_options(spec.file, spec),
                         spec.space);
    return {std::move(s), {}, ms_since(started), 0};
  }
  const std::string text = read_text_file(spec.file);
  const auto parsing = clock::now();
  std::vector<std::string> names;
  auto chosen = parse_definition(text, space_parse_options(spec.file, spec), spec.space, &names);
  const double parse_ms = ms_since(parsing);
  const auto building = clock::now();
  tessel::space built(std::move(chosen));
  return {std::move(built), std::move(names), parse_ms, ms_since(building)};
}

bool names_space(std::string_view db) noexcept { return db.find("{space}") != db.npos; }

std::string study_location(std::string db, std::string_view space_name) {
  if (const auto at = db.find("{space}"); at != std::string::npos)
    db.replace(at, std::string_view("{space}").size(), space_name);
  return db;
}

std::optional<study_spec> begun_with(const std::string& db) {
  if (db.find("://") == std::string::npos && !std::filesystem::exists(db)) return std::nullopt;
  std::optional<study_record> record;
  try {
    record = open_store(db, store_access::read)->study();
  } catch (const error&) {  // being made by another process, or unreadable: writing it says why
    return std::nullopt;
  }
  if (!record) return std::nullopt;
  return recorded_spec(*record);
}

opened_study open_study(study_spec spec, open_options options) {
  spec = spec.resolved();
  if (spec.backend.empty() && spec.fidelity.empty() && !options.backend &&
      is_replay_file(spec.file))
    spec.backend = "replay:" + spec.file;
  if (options.backend && spec.backend.empty()) spec.backend = options.backend_label;
  spec.validate();
  opened_study out;
  auto space = options.space ? std::move(*options.space) : [&] {
    auto loaded = read_space(spec);
    out.space_names = std::move(loaded.space_names);
    out.parse_ms = loaded.parse_ms;
    out.build_ms = loaded.build_ms;
    return std::move(loaded.space);
  }();
  spec.db = study_location(std::move(spec.db), space.name());
  // A resume may take from the file what the caller left unsaid, before
  // anything is made of the spec.
  if (options.mode == open_mode::resume && options.resuming && !spec.db.empty())
    if (const auto recorded = begun_with(spec.db)) {
      const auto target = spec.target;
      options.resuming(spec, *recorded);
      spec.validate();
      if (spec.target != target && !options.space) space = read_space(spec).space;  // its own
    }
  if (!spec.fidelity.empty()) {
    auto settings = spec.fidelity_settings;  // never more promotions than the budget allows
    if (spec.budget.high_evaluations)
      settings.emplace("max_high", std::to_string(spec.budget.high_evaluations));
    out.fidelity = make_fidelity_backend(spec.fidelity, settings, spec.gate);
    out.backend = out.fidelity;
  } else {
    out.backend = options.backend ? options.backend : backend_of(spec);
    out.evaluates = options.backend || !spec.backend.empty();
  }
  auto strategy = make_strategy(spec.strategy);  // a bad one refused before the file is written
  if (!spec.db.empty()) out.db = writable_store(spec.db, options.mode);
  auto so = study_options_of(spec, space, options.mode);
  so.worker = options.worker;
  out.study = std::make_unique<tessel::study>(std::move(space), out.backend, std::move(strategy),
                                              std::move(so), out.db);
  if (out.fidelity) {  // a resumed study's correction and agreement continue
    std::vector<measurement> earlier;
    for (const auto& t : out.study->trials())
      if (t.state == trial_state::finished) earlier.push_back(t.result);
    out.fidelity->restore(earlier);
  }
  out.spec = std::move(spec);
  return out;
}

opened_study open_study(study_spec spec, open_mode mode) {
  open_options options;
  options.mode = mode;
  return open_study(std::move(spec), std::move(options));
}

std::shared_ptr<sim_backend> simulator_for(const space& s, const std::string& spec,
                                           const settings_map& settings) {
  auto sim = std::dynamic_pointer_cast<sim_backend>(make_backend(spec, settings));
  if (!sim)
    throw error(fmt::format(
        "explain needs the simulator (--backend sim or sim:WORKLOAD); '{}' cannot say why a "
        "config is slow",
        spec));
  sim->prepare(s);
  return sim;
}

stop_condition opened_study::until() const {
  std::optional<stop_condition> all;
  auto add = [&](stop_condition c) { all = all ? (*all || std::move(c)) : std::move(c); };
  const auto& b = spec.budget;
  if (b.high_evaluations && fidelity) {
    const auto n = b.high_evaluations;
    auto done = [f = fidelity, n] {
      return std::min(1.0,
                      static_cast<double>(f->stats().high_evaluations) / static_cast<double>(n));
    };
    add(stop_condition([done](const progress&) { return done() >= 1.0; },
                       fmt::format("{} high-fidelity evaluations done", n),
                       termination::evaluations, {},
                       [done](const progress&) -> std::optional<double> { return done(); }));
  }
  if (b.evaluations) add(stop::evaluations(b.evaluations));
  if (b.wall_s > 0) add(stop::wall_seconds(b.wall_s));
  if (b.cost_s > 0) add(stop::cost_seconds(b.cost_s));
  if (b.target) add(stop::target(*b.target));
  if (b.patience) add(stop::no_improvement(b.patience));
  return all ? *all : stop::never();
}

}  // namespace tessel
