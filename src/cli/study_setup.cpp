#include "study_setup.hpp"

#include "fidelity.hpp"

#include <tessel/backends.hpp>
#include <tessel/bayesian.hpp>
#include <tessel/error.hpp>
#include <tessel/strategies.hpp>

#include <fmt/format.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <chrono>
#include <filesystem>

namespace tessel::cli {
namespace {

/// Stands in when no --backend is given (serve): the caller measures and tells.
class external_backend final : public backend {
 public:
  std::string name() const override { return "external"; }
  measurement evaluate(const space&, const config&) override {
    return measurement::failure(status::invalid,
                                "no backend: evaluate the config yourself and tell the result");
  }
};

bool is_replay_file(const std::filesystem::path& path) {
  const auto ext = path.extension().string();
  return ext == ".json" || ext == ".gz";
}

backend_settings parse_settings(const std::vector<std::string>& assignments) {
  backend_settings out;
  for (const auto& a : assignments) {
    const auto eq = a.find('=');
    if (eq == std::string::npos || eq == 0)
      throw error(fmt::format("--backend-set expects KEY=VALUE, got '{}'", a));
    out[a.substr(0, eq)] = a.substr(eq + 1);
  }
  return out;
}

nlohmann::json stop_json(const stop_options& o) {
  nlohmann::json j = {
      {"budget", o.budget}, {"time_s", o.time_s}, {"cost_s", o.cost_s}, {"patience", o.patience}};
  if (o.target) j["target"] = *o.target;
  return j;
}

/// What the study is made with, stored with it: `show` and `--resume` rebuild
/// the space from it, `tessel worker` the whole study.
std::string annotations(const study_setup_options& o) {
  return nlohmann::json{{"file", o.input.file},
                        {"space", o.input.space},
                        {"target", o.input.target},
                        {"set", o.input.sets},
                        {"backend", o.backend},
                        {"backend_set", o.backend_settings},
                        {"replay_space", o.replay_space},
                        {"strategy", o.strategy},
                        {"fidelity", o.fidelity},
                        {"fidelity_set", o.fidelity_settings},
                        {"scheduler", o.scheduler},
                        {"cost_alpha", o.cost_alpha},
                        {"min_gain", o.min_gain},
                        {"baseline", o.baseline},
                        {"gate", o.gate},
                        {"stop", stop_json(o.stop)}}
      .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);  // --set may be any bytes
}

/// The annotations object of a stored study record (empty when absent).
nlohmann::json stored_annotations(const study_record& record) {
  const auto options = nlohmann::json::parse(record.options_json, nullptr, false);
  if (options.is_object() && options.contains("annotations") && options["annotations"].is_object())
    return options["annotations"];
  return nlohmann::json::object();
}

}  // namespace

void add_study_options(CLI::App& command, study_setup_options& o, bool backend_required) {
  add_space_options(command, o.input);
  auto* b = command
                .add_option("--backend", o.backend,
                            "What evaluates configs: replay:PATH, command:'CMD {param}', sim, ... "
                            "(a replay FILE defaults to replay:FILE)")
                ->type_name("SPEC");
  if (backend_required)
    b->description(b->get_description() + "; required unless FILE is a replay file");
  command
      .add_option("--replay-space", o.replay_space,
                  "A replay FILE's space: product (every combination of the recorded values; "
                  "a config the table lacks answers invalid, as a compiler would reject it) or "
                  "table (the stored configs only: the kernel's restrictions known)")
      ->check(CLI::IsMember({"product", "table"}))
      ->capture_default_str();
  command
      .add_option("--backend-set", o.backend_settings,
                  "A backend setting, e.g. --backend-set timeout=30; repeatable")
      ->type_name("KEY=VALUE")
      ->allow_extra_args(false);
  command
      .add_option("--fidelity", o.fidelity,
                  "Multi-fidelity instead of --backend: give it twice, the cheap low fidelity "
                  "first (e.g. --fidelity sim:target=trn2 --fidelity replay:device.json); every "
                  "config is screened at the first, promising ones measured at the second "
                  "(docs/fidelity.md)")
      ->type_name("SPEC")
      ->allow_extra_args(false)
      ->excludes(b);
  command
      .add_option("--fidelity-set", o.fidelity_settings,
                  "A multi-fidelity setting: warmup, z, min_agreement, audit_every, "
                  "promote_failures; repeatable")
      ->type_name("KEY=VALUE")
      ->allow_extra_args(false);
  command
      .add_option("--strategy", o.strategy,
                  "Search strategy: auto, random, exhaustive, local, annealing, ga, ...")
      ->capture_default_str();
  command.add_option("--seed", o.seed, "Seed of every random choice (recorded in the study file)")
      ->capture_default_str();
  command
      .add_option("--jobs,-j", o.jobs,
                  "Threads evaluating at once (0 = the backend's concurrency); the trials are "
                  "the same at any --jobs")
      ->capture_default_str();
  command
      .add_option("--window", o.window,
                  "Proposals in flight at once: each is made knowing all results but the last "
                  "N-1, so at most N evaluations run in parallel (0 = as many as --jobs: more "
                  "parallel, but the trials then depend on --jobs)")
      ->capture_default_str();
  command
      .add_option("--db", o.db,
                  "Where the study is stored: a SQLite file (default <space>.tessel.db), or a "
                  "postgresql:// URL, a study that `tessel worker` processes share "
                  "(docs/distributed.md)")
      ->type_name("PATH|URL");
  command.add_flag("--resume", o.resume,
                   "Continue the study in --db: keep finished trials, re-run interrupted ones");
  command
      .add_flag("--overwrite", o.overwrite,
                "Delete the study in --db (all its trials) and start a new one there")
      ->excludes("--resume");
  command.add_flag("--no-db", o.no_db, "Keep nothing on disk")
      ->excludes("--db")
      ->excludes("--resume")
      ->excludes("--overwrite");
  command.add_flag("!--no-baseline", o.baseline,
                   "Do not evaluate the space's default config first");
  command
      .add_option("--scheduler", o.scheduler,
                  "utility: rank candidates by expected gain per predicted second (cost-aware); "
                  "fifo: evaluate proposals in the order the strategy made them")
      ->check(CLI::IsMember({"utility", "fifo"}))
      ->capture_default_str();
  command
      .add_option("--cost-alpha", o.cost_alpha,
                  "How strongly the utility scheduler prefers cheap candidates at the start: "
                  "expected gain / cost^A, A cooling to 0 over the budget (0 = ignore cost)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  command
      .add_option("--min-gain", o.min_gain,
                  "Stop when the best expected gain left is below this fraction of the best "
                  "objective (utility scheduler; 0 = never)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  command.add_flag("!--no-gate", o.gate,
                   "--backend sim: time configs without checking their outputs in the "
                   "equivalence gate (docs/simulator.md)");
}

void add_session_options(CLI::App& command, study_setup_options& o) {
  // A session has no stop condition, so the cost-aware scheduler cannot tell
  // how much of the budget is spent unless it is told (docs/scheduler.md).
  command
      .add_option("--budget-hint", o.budget_hint,
                  "Evaluations the session expects: the cost weight cools from 1 to 0 over "
                  "them (utility scheduler; the session does not stop there)")
      ->check(CLI::NonNegativeNumber);
  command
      .add_option("--cost-budget-hint", o.cost_budget_hint_s,
                  "Seconds of evaluation cost the session expects, as --budget-hint")
      ->check(CLI::NonNegativeNumber);
  command
      .add_option("--token-price", o.token_price_s,
                  "Seconds of evaluation cost 1,000 agent tokens are worth: the scheduler weighs "
                  "a candidate's device time plus its tokens (0 = record tokens only)")
      ->check(CLI::NonNegativeNumber)
      ->type_name("S");
  command.add_flag("--verify", o.verify,
                   "Re-measure agent-reported results (tell) on the backend before they can be "
                   "the best (needs --backend)");
}

loaded_space load_any(const space_options& options) {
  if (!is_replay_file(options.file)) return load(options);
  const auto started = std::chrono::steady_clock::now();
  const auto text = replay_space_source(options.file);
  parse_options parse;
  parse.file = options.file;
  parse.target = options.target;
  auto s = parse_space(text, parse, options.space);
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started).count();
  return loaded_space{.space = std::move(s), .space_names = {}, .parse_ms = ms, .build_ms = 0};
}

namespace {

/// Opens the study file as its one writer (refused while another process
/// writes it), cleared with --overwrite; a file whose study has trials needs
/// --resume (or --overwrite), one whose study has none is taken as new.
std::shared_ptr<study_store> open_study_file(const study_setup_options& o, const space& s) {
  const std::string path = o.db.empty() ? s.name() + ".tessel.db" : o.db;
  auto db = open_store(path);
  db->claim_writer();
  if (o.overwrite) {
    db->clear();
    return db;
  }
  const auto stored = db->study();
  const auto trials = stored ? db->trial_count() : 0;
  if (trials > 0 && !o.resume)
    throw error(fmt::format(
        "'{0}' already holds a study of space '{1}' with {2} trial{3} (see "
        "`tessel show {0}`): pass --resume to continue it, --overwrite to delete it and start "
        "over, --db PATH to keep it and start another, or --no-db",
        db->location(), stored->space_name, trials, trials == 1 ? "" : "s"));
  return db;
}

}  // namespace

stop_condition stop_for(const stop_options& o) {
  std::optional<stop_condition> until;
  auto add = [&](stop_condition c) { until = until ? (*until || std::move(c)) : std::move(c); };
  if (o.budget) add(stop::evaluations(o.budget));
  if (o.time_s > 0) add(stop::wall_seconds(o.time_s));
  if (o.cost_s > 0) add(stop::cost_seconds(o.cost_s));
  if (o.target) add(stop::target(*o.target));
  if (o.patience) add(stop::no_improvement(o.patience));
  return until ? *until : stop::never();
}

study_setup_options recorded_options(const study_record& record) {
  const auto a = stored_annotations(record);
  if (a.empty() || !a.contains("backend"))
    throw error(fmt::format(
        "study of space '{}' was not made by `tessel tune` (its options are not recorded): a "
        "worker cannot rebuild it",
        record.space_name));
  study_setup_options o;
  try {
    o.input.file = a.value("file", "");
    o.input.space = a.value("space", "");
    o.input.target = a.value("target", o.input.target);
    o.input.sets = a.value("set", o.input.sets);
    o.backend = a.value("backend", "");
    o.backend_settings = a.value("backend_set", o.backend_settings);
    o.replay_space = a.value("replay_space", o.replay_space);
    o.strategy = a.value("strategy", o.strategy);
    o.fidelity = a.value("fidelity", o.fidelity);
    o.fidelity_settings = a.value("fidelity_set", o.fidelity_settings);
    o.scheduler = a.value("scheduler", o.scheduler);
    o.cost_alpha = a.value("cost_alpha", o.cost_alpha);
    o.min_gain = a.value("min_gain", o.min_gain);
    o.baseline = a.value("baseline", o.baseline);
    o.gate = a.value("gate", o.gate);
    const auto stop = a.value("stop", nlohmann::json::object());
    o.stop.budget = stop.value("budget", o.stop.budget);
    o.stop.time_s = stop.value("time_s", o.stop.time_s);
    o.stop.cost_s = stop.value("cost_s", o.stop.cost_s);
    o.stop.patience = stop.value("patience", o.stop.patience);
    if (stop.contains("target")) o.stop.target = stop["target"].get<double>();
  } catch (const nlohmann::json::exception& e) {
    throw error(fmt::format("the study's recorded options do not read back: {}", e.what()));
  }
  o.seed = record.seed;
  return o;
}

study_setup make_study(const study_setup_options& o, std::optional<loaded_space> space) {
  if (o.needs_backend && o.backend.empty() && o.fidelity.empty() && !is_replay_file(o.input.file))
    throw error(
        "tune needs --backend SPEC (sim, replay:PATH, command:'CMD {param}', ...), "
        "or a replay file as FILE");
  if (!space && o.replay_space != "product" && !is_replay_file(o.input.file))
    throw error(
        fmt::format("--replay-space {} applies to a replay FILE (.json or .json.gz), not '{}'",
                    o.replay_space, o.input.file));
  study_setup out{space ? std::move(*space)
                  : o.replay_space == "table"
                      ? loaded_space{.space = replay_space(o.input.file, replay_space_kind::table),
                                     .space_names = {},
                                     .parse_ms = 0,
                                     .build_ms = 0}
                      : load_any(o.input),
                  nullptr,
                  nullptr,
                  nullptr,
                  nullptr,
                  true};
  std::string spec = o.backend;
  if (spec.empty() && is_replay_file(o.input.file)) spec = "replay:" + o.input.file;
  if (!o.fidelity.empty()) {
    out.fidelity = make_fidelity_backend(o.fidelity, o.fidelity_settings, o.gate);
    out.backend = out.fidelity;
  } else if (spec.empty()) {
    out.backend = std::make_shared<external_backend>();
    out.evaluates = false;
  } else {
    auto settings = o.backend_settings;
    if (!o.gate && spec.rfind("sim", 0) == 0 && (spec.size() == 3 || spec[3] == ':'))
      settings.emplace_back("gate=false");
    out.backend = make_backend(spec, parse_settings(settings));
  }
  if (o.verify && !out.evaluates)
    throw error(
        "--verify re-measures agent-reported results on the backend: give one with --backend "
        "SPEC");
  auto strategy = make_strategy(o.strategy);
  if (!o.no_db) out.db = open_study_file(o, out.space.space);
  study::options so;
  so.seed = o.seed;
  so.jobs = o.jobs;
  so.window = o.window;
  so.resume = o.resume;
  so.evaluate_baseline = o.baseline;
  so.annotations = annotations(o);
  if (o.scheduler == "utility") {
    so.surrogate = make_gp_surrogate(out.space.space);
    so.costs = make_cost_model(out.space.space);
  }
  so.min_gain_fraction = o.min_gain;
  so.cost_alpha_start = o.cost_alpha;
  so.budget_hint = o.budget_hint;
  so.cost_budget_hint_s = o.cost_budget_hint_s;
  so.token_price_s = o.token_price_s;
  so.verify_reported = o.verify;
  so.worker = o.worker;
  out.study = std::make_unique<tessel::study>(out.space.space, out.backend, std::move(strategy), so,
                                              out.db);
  if (out.fidelity) {  // a resumed study's correction and agreement continue
    std::vector<measurement> earlier;
    for (const auto& t : out.study->trials())
      if (t.state == trial_state::finished) earlier.push_back(t.result);
    out.fidelity->restore(earlier);
  }
  return out;
}

tessel::space stored_space(const study_record& record, const std::string& where) {
  parse_options parse;
  parse.file = where;
  const auto a = stored_annotations(record);
  parse.target = a.value("target", parse.target);
  for (const auto& assignment : a.value("set", std::vector<std::string>{})) {
    const auto eq = assignment.find('=');
    if (eq != std::string::npos)
      parse.overrides[assignment.substr(0, eq)] = assignment.substr(eq + 1);
  }
  return parse_space(record.space_source, parse, record.space_name);
}

stored_study load_stored(const std::string& path) {
  if (!is_postgres_location(path) && !std::filesystem::exists(path))
    throw error(fmt::format("no study file '{}'", path));
  const auto db = open_store(path);
  auto record = db->study();
  if (!record) throw error(fmt::format("'{}' holds no study yet", db->location()));
  auto s = stored_space(*record, path);
  auto trials = db->load(s);
  return {std::move(*record), std::move(s), std::move(trials)};
}

}  // namespace tessel::cli
