// src/cli/study_setup.hpp: what `tune` and `serve` share: the space (from a
// .tsl file or a replay file), the backend, the strategy and the study file.
#pragma once

#include "common.hpp"

#include <tessel/backend.hpp>
#include <tessel/fidelity.hpp>
#include <tessel/storage.hpp>
#include <tessel/study.hpp>

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace tessel::cli {

/// The budgets of `tune`, recorded with the study so that `tessel worker`
/// stops where the study does.
struct stop_options {
  std::size_t budget = 0;  ///< evaluations
  double time_s = 0;       ///< wall seconds (each process's own run)
  double cost_s = 0;       ///< summed evaluation cost, seconds
  std::optional<double> target;
  std::size_t patience = 0;
};
/// The stop condition of `o`: its clauses or'ed, stop::never() without one.
[[nodiscard]] stop_condition stop_for(const stop_options& o);

struct study_setup_options {
  space_options input;
  std::string backend;  ///< "replay:PATH", "command:CMD", "sim", ...; "" = none
  /// A replay FILE's space: "product" (every combination of the recorded
  /// values) or "table" (the stored configs only: replay_space_kind).
  std::string replay_space = "product";
  std::vector<std::string> backend_settings;  ///< "KEY=VALUE"
  /// --fidelity: "SCHEME[:ARG][,KEY=VALUE...]", low first (docs/fidelity.md);
  /// replaces --backend.
  std::vector<std::string> fidelity;
  std::vector<std::string> fidelity_settings;  ///< --fidelity-set KEY=VALUE
  std::string strategy = "auto";
  std::uint64_t seed = 0;
  std::size_t jobs = 0;
  std::size_t window = study_options{}.window;  ///< proposals in flight (0 = jobs)
  std::string db;                               ///< "" = <space>.tessel.db
  bool resume = false;
  bool overwrite = false;  ///< --overwrite: delete the study in --db and start over
  bool no_db = false;
  bool needs_backend = false;  ///< tune: no --backend (and no replay FILE) is an error
  bool baseline = true;
  bool gate = true;                   ///< --no-gate: the simulator skips the equivalence gate
  std::string scheduler = "utility";  ///< "utility" (cost-aware) or "fifo"
  double min_gain = 0;                ///< study_options::min_gain_fraction
  double cost_alpha = study_options{}.cost_alpha_start;  ///< where the cost exponent cools from
  /// serve: the budget the cost exponent cools over (study_options::budget_hint,
  /// cost_budget_hint_s); tune takes it from its stop condition instead.
  std::size_t budget_hint = 0;
  double cost_budget_hint_s = 0;
  double token_price_s = 0;  ///< study_options::token_price_s
  bool verify = false;       ///< study_options::verify_reported (needs a backend)
  stop_options stop;         ///< tune's budgets (recorded; make_study does not read them)
  worker_info worker;        ///< on a shared study (--db postgresql://...): how this process works
};

/// Adds the options above to `command` (FILE and the space options too).
/// `backend_required`: whether --backend must be given.
void add_study_options(CLI::App& command, study_setup_options& options, bool backend_required);
/// Adds what a session an agent drives needs besides (serve, mcp): the
/// budget hints, --token-price and --verify.
void add_session_options(CLI::App& command, study_setup_options& options);

struct study_setup {
  loaded_space space;
  std::shared_ptr<tessel::backend> backend;
  std::shared_ptr<multi_fidelity_backend> fidelity;  ///< the backend, with --fidelity
  std::shared_ptr<study_store> db;                   ///< null with --no-db
  std::unique_ptr<tessel::study> study;
  bool evaluates = true;  ///< false: no backend given (the caller tells results)
};

/// Builds everything; throws tessel::error with a message a person can act
/// on (unknown backend or strategy, a study file that holds another study, a
/// study file with trials but no --resume). `space`: the space to tune,
/// when not FILE's (a worker's, rebuilt from the store).
[[nodiscard]] study_setup make_study(const study_setup_options& options,
                                     std::optional<loaded_space> space = std::nullopt);

/// The options a study was made with, as `make_study` recorded them in its
/// annotations (backend, settings, strategy, scheduler, budgets), for a
/// worker that joins it. Throws tessel::error for a study the CLI did not make.
[[nodiscard]] study_setup_options recorded_options(const study_record& record);
/// The study's space, rebuilt from its stored source and the target and
/// --set values recorded with it. Throws tessel::error (or space_error).
[[nodiscard]] tessel::space stored_space(const study_record& record, const std::string& where);

/// Reads FILE: a .tsl text, or a replay file (.json / .json.gz) whose
/// parameters become the space.
[[nodiscard]] loaded_space load_any(const space_options& options);

/// A study read back from its file, for `show` and `export`.
struct stored_study {
  study_record record;
  tessel::space space;
  std::vector<trial> trials;
};

/// Opens the study file at `path` and rebuilds its space from the stored
/// source and the command line the CLI stored with it. Throws tessel::error.
[[nodiscard]] stored_study load_stored(const std::string& path);

/// The config `explain` and `emit` act on: `config_spec` is a JSON object
/// of parameter values (or @PATH of a file holding one; parameters it leaves
/// out take their declared default), or, when `best_db` is given, the best
/// successful trial of that study file. Throws tessel::error saying why.
[[nodiscard]] config chosen_config(const space& s, const std::string& config_spec,
                                   const std::string& best_db);

}  // namespace tessel::cli
