// tessel/driver.hpp: the outer layer's one home (DESIGN.md §10,
// docs/driver.md). A study_spec says everything a study is made of (space,
// target, overrides, backend, fidelity, strategy, scheduler, seed, budgets,
// study file); open_study builds the study from it and records the spec in the
// study file, and reopen_study reads a study file back, space and all. The
// `tessel` tool, `tessel serve`/`mcp` and the Python package are front-ends
// over these; the agent ops they speak are in tessel/ops.hpp. Link
// tessel::driver (tessel::tessel links it).
#pragma once

#include <tessel/backend.hpp>
#include <tessel/constraints.hpp>
#include <tessel/fidelity.hpp>
#include <tessel/interactions.hpp>
#include <tessel/settings.hpp>
#include <tessel/space.hpp>
#include <tessel/storage.hpp>
#include <tessel/study.hpp>
#include <tessel/surrogate.hpp>

#include <nlohmann/json_fwd.hpp>

#include <cstddef>
#include <cstdint>
#include <exception>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace tessel {

struct calibration_result;  // tessel/calibration.hpp
struct parse_options;       // tessel/dsl.hpp
class sim_backend;          // tessel/sim.hpp

/// When a study's run() stops (tune's --budget, --time, ...). Each 0 (or
/// unset) bound is off; several stop at the first that holds.
struct study_budget {
  std::size_t evaluations = 0;       ///< finished trials
  double wall_s = 0;                 ///< seconds of wall time
  double cost_s = 0;                 ///< seconds of summed evaluation cost
  std::optional<double> target;      ///< the best objective is at most this
  std::size_t patience = 0;          ///< evaluations without a new best
  std::size_t high_evaluations = 0;  ///< high-fidelity evaluations (needs fidelity)

  /// Whether any bound is set.
  [[nodiscard]] bool bounded() const noexcept;
};

/// Everything a study is made of, as a person or a program gives it. Its JSON
/// form (to_json) is what a study file records as its annotations, so a study
/// reopens (reopen_study) and resumes as it was made, from the CLI, Python or
/// C++ alike. Field by field, the CLI's options of the same name.
struct study_spec {
  // --- the space ----------------------------------------------------------------
  /// A .tsl file or a replay file (.json, .json.gz: its parameters are the
  /// space). "" when the caller builds the space (open_options::space).
  std::string file;
  std::string space;  ///< the space of `file`; "" = the first
  /// Built-in or declared in `file`; "" = what evaluates decides (resolved()).
  std::string target;
  std::map<std::string, std::string, std::less<>> sets;  ///< const overrides (--set NAME=VALUE)
  /// A replay file's space: "product" (every combination of the recorded
  /// values) or "table" (the stored configs only).
  std::string replay_space = "product";

  // --- what evaluates ---------------------------------------------------------------
  /// "sim", "replay:PATH", "command:CMD", ... (tessel/backends.hpp). "": no
  /// backend, the caller measures and tells, unless `file` is a replay file
  /// (then "replay:FILE").
  std::string backend;
  settings_map backend_settings;
  /// Multi-fidelity instead of `backend`: two specs, the cheap low fidelity
  /// first, each "SCHEME[:ARG][,KEY=VALUE...]" (docs/fidelity.md).
  std::vector<std::string> fidelity;
  settings_map fidelity_settings;  ///< multi_fidelity_options by name
  bool gate = true;                ///< false: simulator backends skip the equivalence gate

  // --- the search ---------------------------------------------------------------
  std::string strategy = "auto";  ///< make_strategy's name or spec
  /// "utility" (rank by expected gain per predicted cost) or "fifo"
  /// (proposal order) (docs/scheduler.md).
  std::string scheduler = "utility";
  double cost_alpha = 2.0;  ///< where the cost exponent cools from (utility)
  /// How cost enters the utility's ranking: "cooled_ei" (expected gain per
  /// price^alpha) or "gittins" (the Pandora's-box Gittins index; docs/scheduler.md).
  std::string cost_rule = "cooled_ei";
  double min_gain = 0;            ///< stop when the best expected gain left is below this fraction
  std::size_t budget_hint = 0;    ///< evaluations the exponent cools over (ask/tell)
  double cost_budget_hint_s = 0;  ///< seconds of cost the exponent cools over (ask/tell)
  double token_price_s = 0;       ///< seconds of cost 1,000 agent tokens are worth
  std::uint64_t seed = 0;
  std::size_t jobs = 0;    ///< threads evaluating (0 = the backend's concurrency)
  std::size_t window = 4;  ///< proposals in flight (0 = jobs)
  bool baseline = true;    ///< evaluate the space's default config first
  bool verify = false;     ///< re-measure agent-reported results (needs a backend)

  // --- where it is kept, and when run() stops -----------------------------------------
  /// The study file (open_store). "": none. "{space}" in it stands for the space's name.
  std::string db;
  study_budget budget;

  /// The study file the CLI uses when none is named (`tessel tune` without --db).
  static constexpr std::string_view default_db = "{space}.tessel.db";

  /// The spec with its defaults applied: without a target, `cpu` when the
  /// backend (or the high fidelity) is the cpu backend, whose kernels run on
  /// the host (docs/cpu.md), else trn2. open_study, read_space and
  /// reopen_study apply it, so the CLI, Python and C++ agree.
  [[nodiscard]] study_spec resolved() const;
  /// Throws options_error naming the field and the rule.
  void validate() const;
  /// The JSON form (docs/driver.md lists the fields).
  [[nodiscard]] nlohmann::json to_json() const;
  /// Reads to_json's form and the annotations older study files carry: the
  /// CLI's {file, space, target, set: ["N=V"], backend, replay_space,
  /// strategy, fidelity} and Python's {target, backend, strategy}. Absent
  /// fields keep their defaults. Throws tessel::error naming a field of the
  /// wrong type.
  [[nodiscard]] static study_spec from_json(const nlohmann::json& j);
};

/// Whether `path` names a replay file (.json, .gz) rather than a .tsl text.
[[nodiscard]] bool is_replay_file(const std::filesystem::path& path);

/// How the language reads spec's space: `file` named in diagnostics, the
/// spec's target (resolved), its overrides.
[[nodiscard]] parse_options space_parse_options(const std::string& file, const study_spec& spec);

/// A space read from a spec, with what it took to build it.
struct loaded_space {
  tessel::space space;
  std::vector<std::string> space_names;  ///< every space the file declares, in file order
  double parse_ms = 0;                   ///< reading, parsing and checking the text
  double build_ms = 0;                   ///< building the engine
};

/// Reads and builds the space of spec.file (a .tsl text or a replay file).
/// Throws tessel::error (unreadable file), space_error or empty_space_error.
[[nodiscard]] loaded_space read_space(const study_spec& spec);

/// How open_study treats a study file that already holds trials: create
/// refuses it (naming the alternatives), resume continues it, overwrite
/// deletes its study first.
enum class open_mode : unsigned char { create, resume, overwrite };

struct open_options {
  open_mode mode = open_mode::create;
  /// A space built by the caller (Python, C++); read from spec.file otherwise.
  std::optional<tessel::space> space;
  /// A backend made by the caller (a Python callable); made from spec.backend otherwise.
  std::shared_ptr<tessel::backend> backend;
  /// What the caller's backend is called in the spec it records ("python").
  std::string backend_label;
  /// How this process works a shared study (a postgresql:// spec.db;
  /// docs/distributed.md): its name, heartbeat and lease.
  worker_info worker;
  /// With open_mode::resume, on a study file that already holds a study:
  /// called once the space is read, before the backend, the strategy and the
  /// study are made and before the file is written (it is read for this),
  /// with the spec this open was given and the one the study was begun with
  /// (recorded_spec), so
  /// a front-end can take from the file what its caller left unsaid (the
  /// CLI's --seed, --strategy, ...: docs/cli.md). May change `spec`.
  std::function<void(study_spec& spec, const study_spec& recorded)> resuming;
};

/// A study built from a spec, with the parts front-ends report on.
struct opened_study {
  study_spec spec;  ///< as opened: db resolved, a replay file's backend filled in
  std::vector<std::string> space_names;
  double parse_ms = 0, build_ms = 0;
  std::shared_ptr<tessel::backend> backend;
  std::shared_ptr<multi_fidelity_backend> fidelity;  ///< the backend, with spec.fidelity
  std::shared_ptr<study_store> db;                   ///< null without one
  std::unique_ptr<tessel::study> study;
  /// Whether the backend measures (false: the caller measures and tells).
  bool evaluates = true;

  /// The spec's budget as a stop condition (stop::never() when unbounded).
  [[nodiscard]] stop_condition until() const;
};

/// Builds the study `spec` describes: the space, the backend (or the
/// multi-fidelity pair, or none), the strategy, the scheduler and the study
/// file, which records the spec. Throws options_error or tessel::error with a
/// message a person can act on (an unknown backend or strategy, a study file
/// that holds another study or trials without open_mode::resume).
[[nodiscard]] opened_study open_study(study_spec spec, open_options options = {});
/// open_study with the space and backend the spec names.
[[nodiscard]] opened_study open_study(study_spec spec, open_mode mode);

// open_store(db, store_access) (tessel/storage.hpp) opens the study store
// `db` names for reading (show, export) or writing (one study appends).

/// A study read back from its file: its record, the spec it was made with,
/// its space rebuilt from the stored source with the spec's target and
/// overrides, and every trial.
struct stored_study {
  study_record record;
  study_spec spec;
  tessel::space space;
  std::vector<trial> trials;
};

/// Reads the study file `db`. Throws tessel::error naming it when it does
/// not exist or holds no study yet.
[[nodiscard]] stored_study reopen_study(const std::string& db);

/// The spec a stored study was begun with: its record's annotations
/// (study_spec::from_json; what an older file leaves out keeps its default),
/// with the seed, jobs, window and baseline the study itself recorded
/// (resolved).
[[nodiscard]] study_spec recorded_spec(const study_record& record);
/// The spec the study in `db` was begun with (recorded_spec), read without
/// writing; nullopt when there is no such file yet, it holds no study, or it
/// cannot be read (another process is making it; opening it to write says
/// what else is wrong).
[[nodiscard]] std::optional<study_spec> begun_with(const std::string& db);
/// Whether study_spec::db `db` is named after the space ("{space}" in it).
[[nodiscard]] bool names_space(std::string_view db) noexcept;
/// study_spec::db `db` with "{space}" replaced by `space_name`.
[[nodiscard]] std::string study_location(std::string db, std::string_view space_name);

/// How a caller resuming a study said one option of its spec (take_recorded).
enum class option_said : unsigned char {
  cannot,    ///< the caller has no such option: neither taken nor compared
  left_out,  ///< taken from the study file
  given,     ///< kept as given
};

/// One option a study file records that decides which trials come next,
/// where the spec given and the one the study began with differ.
struct resumed_option {
  std::string field;     ///< its key in study_spec::to_json
  std::string given;     ///< the value given, as JSON text
  std::string recorded;  ///< the value the study began with, as JSON text
  bool taken = false;    ///< left out: `spec` now holds the recorded value
};

/// One option a study file records that decides which trials come next,
/// and how each front-end spells it: the one list take_recorded takes from.
struct recorded_field {
  std::string_view field;    ///< its key in study_spec::to_json
  std::string_view option;   ///< the `tessel` option ("--seed"; for a boolean, its flag)
  std::string_view keyword;  ///< tessel.Study's keyword (or the spec field Python records)
  /// The option whose presence says a command has this field, when not
  /// `option` itself (serve's and mcp's --budget-hint: tune's --budget stops
  /// the run instead); either name gives it.
  std::string_view only_with = {};
  /// What evaluates (the backend, the target): taken only where the study
  /// measures by itself (`tune`), never where a caller left it out to
  /// measure and tell (`serve`, `mcp`, Python).
  bool evaluates = false;
};

/// The options take_recorded takes, in the order it takes them: backend
/// (with its settings), target, strategy, seed, scheduler, cost_alpha,
/// cost_rule, min_gain, window, jobs (with window 0), baseline, budget_hint,
/// cost_budget_hint_s, token_price_s.
[[nodiscard]] std::span<const recorded_field> recorded_fields();

/// What every front-end's open_options::resuming does (the CLI's `--resume`,
/// Python's `Study(resume=True)`): takes into `spec` from `recorded` each
/// of recorded_fields() that the caller left out, as `said(field)` tells;
/// one it gave stays. Returns those that differ, in that order, each marked
/// taken or not, for the caller's notes.
[[nodiscard]] std::vector<resumed_option> take_recorded(
    study_spec& spec, const study_spec& recorded,
    const std::function<option_said(const recorded_field& field)>& said);

/// The notes a front-end prints for take_recorded's `options`: what was
/// taken from the study file, and what was given that differs from how the
/// study began. `text(field, value_json)` writes one option as the front-end
/// spells it (`--seed 7`, `seed=7`), joined by `separator`; `proposer` is
/// who goes on ("this run", "this study").
[[nodiscard]] std::vector<std::string> resume_notes(
    const std::vector<resumed_option>& options,
    const std::function<std::string(const recorded_field& field, const std::string& value_json)>&
        text,
    std::string_view separator, std::string_view proposer);

/// A recorded field as a keyword with its value as Python writes it
/// (`seed=7`, `strategy='random'`, `baseline=False`): resume_notes' `text`
/// for tessel.Study, Model.tune and the tune_model op.
[[nodiscard]] std::string keyword_text(const recorded_field& field, const std::string& value_json);

/// The best trial of a stored study: finished, ok and measured at full
/// fidelity; null when it has none.
[[nodiscard]] const trial* best_trial(const stored_study& stored);

/// The config a person names for `s`: `config_spec`, a JSON object of
/// parameter values (or @PATH of a file holding one; parameters it leaves
/// out take their default), or, when `best_db` is given, the best trial of
/// that study file. Throws tessel::error saying why it cannot be used.
[[nodiscard]] config chosen_config(const space& s, const std::string& config_spec,
                                   const std::string& best_db);

/// An exception as a person reads it on stderr: every rendered diagnostic
/// of a space_error, the constraint that emptied a space, "tessel: error:
/// ..." for another tessel::error, "tessel: internal error: ..." for anything
/// else (a bug); each line ends in a newline.
[[nodiscard]] std::string failure_text(const std::exception& e);
/// The same as the CLI's `--json` errors give it: {"kind": "diagnostics" |
/// "empty_space" | "error" | "internal", "message", and "diagnostics" (each
/// with severity, file, line, column, message, hint, rendered) or
/// "constraint" and "rejected"}.
[[nodiscard]] nlohmann::ordered_json failure_json(const std::exception& e);

/// The simulator backend `spec` names ("sim" or "sim:WORKLOAD") with
/// `settings`, prepared for `s`: what says why a config is as fast as it is
/// (`tessel explain`, Python's Space.explain). Throws tessel::error naming
/// `spec` when it is another backend.
[[nodiscard]] std::shared_ptr<sim_backend> simulator_for(const space& s, const std::string& spec,
                                                         const settings_map& settings = {});

// --- shared studies ---------------------------------------------------------------------

/// How a process joins a shared study (`tessel worker`, docs/distributed.md).
struct join_request {
  std::string url;                    ///< the study's postgresql:// location
  std::string backend;                ///< "" = the study's; else replaces its backend and fidelity
  settings_map backend_settings;      ///< added to the study's
  std::size_t jobs = 0;               ///< trials evaluated at once (0 = the backend's concurrency)
  std::optional<std::uint64_t> seed;  ///< default: from the study's seed and the worker's name
  double wait_s = 0;                  ///< how long to wait for the study to be created
  worker_info worker;                 ///< an empty name becomes "host:pid"
};

/// A shared study opened by one more worker.
struct joined_study {
  opened_study opened;
  std::string name;        ///< the worker's
  std::string space_name;  ///< as the study records it
};

/// Rebuilds the shared study at r.url from what its store recorded (space,
/// backend, strategy, scheduler, budgets), with this worker's backend, jobs
/// and seed, ready to run until its stop condition holds. Throws
/// options_error for r.worker's heartbeat_s not > 0 or lease_s not more than
/// it (before connecting), tessel::error for a location that is not
/// PostgreSQL, a study not created within r.wait_s, or a study without a
/// backend when r.backend is empty.
[[nodiscard]] joined_study join_study(const join_request& r);

// --- multi-fidelity specs --------------------------------------------------------------

/// "SCHEME[:ARGUMENT][,KEY=VALUE...]" -> ("SCHEME:ARGUMENT", settings): after
/// the scheme, comma-separated pieces NAME=VALUE (NAME of letters, digits,
/// '_', '.') are settings; the other pieces, commas restored, are the
/// argument ("replay:t.json,concurrency=2").
[[nodiscard]] std::pair<std::string, settings_map> split_fidelity_spec(std::string_view spec);

/// The multi-fidelity backend of two specs (low, then high) and its settings
/// (warmup, z, min_agreement, top_fraction, top_patience, audit_every,
/// max_high, promote_failures). `gate` false adds gate=false to simulator
/// specs. Throws tessel::error for another count of specs or a bad setting.
[[nodiscard]] std::shared_ptr<multi_fidelity_backend> make_fidelity_backend(
    const std::vector<std::string>& specs, const settings_map& settings, bool gate);

// --- reports ----------------------------------------------------------------------------

/// What a study's failures taught (learn_constraints), as a titled block of
/// candidate `require` lines and what bo's tests of them found; "" when
/// nothing was learned or tested. `tune`, `show` and `explain --best` print it.
[[nodiscard]] std::string learned_text(const std::vector<learned_constraint>& rules,
                                       const std::vector<trial>& trials);
/// `rules` learned from `stored` as lines to paste into its space: a
/// comment naming `source` (where the study came from) and the trial count,
/// then one `require` line per rule; a comment saying why when there is none.
[[nodiscard]] std::string suggested_constraints_text(const stored_study& stored,
                                                     const std::vector<learned_constraint>& rules,
                                                     const std::string& source);
/// The same rules as JSON: require, rejects, kind, and the counts behind them.
[[nodiscard]] nlohmann::json learned_json(const std::vector<learned_constraint>& rules);

/// The Gaussian-process surrogate (strategies/bayesian) fed every finished
/// trial: what reports and the interaction analysis predict with. Check
/// ready() before asking it (gp_options::min_observations).
[[nodiscard]] std::unique_ptr<surrogate> fitted_surrogate(const space& s,
                                                          const std::vector<trial>& trials);

/// analyse_interactions of `target` against `base`: up to `budget` configs
/// measured on `b` (outside any study), the figures in `known` reused, the
/// rest predicted by the surrogate fitted to `known` (`explain
/// --interactions`; the `interactions` op measures through its study).
[[nodiscard]] interaction_report interactions_measured_on(backend& b, const space& s,
                                                          const config& base, const config& target,
                                                          std::size_t budget,
                                                          const std::vector<trial>& known);

/// What study_report draws (`tessel report`'s options).
struct report_request {
  std::string format = "html";  ///< "html" (the page) or "svg" (one plot)
  std::string plot;             ///< with "svg": one of report_plot_names()
  std::size_t top = 12;         ///< trials in the parallel-coordinates view and the table
  std::string source;           ///< where the study came from, shown in the header
};

/// A stored study seen (tessel/report.hpp, docs/report.md): the page or one
/// plot, with the surrogate's parameter importance, the interactions of the
/// best config against the baseline (the study's own figures measured, the
/// rest predicted; nothing evaluated) and the learned constraints. Throws
/// tessel::error for an unknown format or plot.
[[nodiscard]] std::string study_report(const stored_study& stored, const report_request& r);

/// `tune --json`'s object: {"ok": true, "summary": codec::to_json(sum, s)},
/// with "remeasured" (the best config measured again: a measurement with
/// its interval, ci_low_s and ci_high_s) and "fidelity" (fidelity_json) when
/// given. Python's Study.run() and serve's `summary` give the same summary.
[[nodiscard]] nlohmann::json run_json(const summary& sum, const space& s,
                                      const std::optional<measurement>& remeasured,
                                      const multi_fidelity_backend* fidelity);
/// "best config re-measured: median 1.2 ms over 20 samples, 95% CI [...]
/// (the search measured 1.1 ms)", or the failure; `searched` is the
/// objective the search recorded.
[[nodiscard]] std::string remeasured_text(const measurement& m, double searched);

/// What `tessel show` says of a stored study. `best` points into the
/// stored_study's trials it was made from.
struct study_overview {
  std::size_t finished = 0;  ///< trials with a result
  std::size_t pending = 0;   ///< interrupted: re-run on resume
  std::map<status, std::size_t> by_status;
  double cost_s = 0;  ///< summed evaluation cost
  /// The best ok trials measured at full fidelity, best first, at most `top`.
  std::vector<const trial*> best;
  std::optional<multi_fidelity_stats> fidelity;  ///< with fidelity metrics in the trials
  std::vector<learned_constraint> learned;       ///< what the failures taught

  /// `show --json`'s object: ok, space, target, backend, strategy, seed,
  /// valid_configs, spec, finished, pending, by_status, cost_s, best,
  /// learned_constraints, fidelity (null without).
  [[nodiscard]] nlohmann::json to_json(const stored_study& stored) const;
};
/// The overview of `stored` with its `top` best trials.
[[nodiscard]] study_overview overview_of(const stored_study& stored, std::size_t top);

/// The multi-fidelity statistics as `tune --json` and `show --json` give them.
[[nodiscard]] nlohmann::json fidelity_json(const multi_fidelity_stats& s);
/// A simulator calibration (tessel/calibration.hpp) as `calibrate --json`
/// gives it: ok, the RMS log errors before and after, the start and fitted
/// constants, the insensitive ones, evaluations, sim_settings, the target
/// text and every case measured, before and after.
[[nodiscard]] nlohmann::json calibration_json(const calibration_result& r);

}  // namespace tessel
