// src/cli/common.hpp: what the subcommands share: their options as a
// study_spec (tessel/driver.hpp), and turning exceptions into diagnostics on
// stderr and an exit code.
#pragma once

#include <tessel/driver.hpp>
#include <tessel/model_driver.hpp>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace CLI {
class App;
class Validator;
}  // namespace CLI

namespace tessel::cli {

/// The process exit codes of every subcommand (docs/cli.md).
enum exit_code : int {
  success = 0,
  bad_input = 1,  ///< diagnostics in the .tsl text, an empty space, an unreadable file
  usage = 2,      ///< the command line itself is wrong (reported by CLI11)
  internal = 3,   ///< an unexpected exception: a bug in tessel
};

/// A study_spec as the command line gives it: the KEY=VALUE options as
/// written, and what to do with an existing study file.
struct spec_options {
  study_spec spec;
  std::vector<std::string> sets;               ///< --set NAME=VALUE
  std::vector<std::string> backend_settings;   ///< --backend-set KEY=VALUE
  std::vector<std::string> fidelity_settings;  ///< --fidelity-set KEY=VALUE
  bool resume = false, overwrite = false, no_db = false;
  /// The command these options belong to (add_study_options sets it): which
  /// options its command line gave.
  const CLI::App* command = nullptr;

  /// The spec with the assignments read, the study file defaulted
  /// (study_spec::default_db, none with --no-db) and the spec's own
  /// defaults applied (study_spec::resolved). Throws tessel::error.
  [[nodiscard]] study_spec resolved() const;
  [[nodiscard]] open_mode mode() const;
};

/// Validators for numeric options, so a bad value is a usage error (exit 2)
/// that names the option: CLI11 alone wraps "-1" around to 2^64 - 1 for an
/// unsigned option, saturates values past 2^64 - 1, reads "010" as octal 8,
/// and lets nan and inf through a range check.
/// A whole number in decimal without a leading 0, 0 to 2^64 - 1 (any count,
/// seed or id).
[[nodiscard]] const CLI::Validator& whole_number();
/// A finite number >= 0 (seconds, weights, fractions).
[[nodiscard]] const CLI::Validator& non_negative();
/// A finite number > 0.
[[nodiscard]] const CLI::Validator& positive();
/// A finite number.
[[nodiscard]] const CLI::Validator& finite();

/// The target a command checks against without --target, for a `backend`
/// spec: study_spec::resolved's rule (cpu on the cpu backend, else trn2),
/// the one place every command's default comes from.
[[nodiscard]] std::string default_target(const std::string& backend = "");

/// `FILE [--space NAME] [--target T] [--set K=V]...`, into `o` (which must
/// outlive parsing). A --set without '=' is a usage error.
void add_space_options(CLI::App& command, spec_options& o);
/// The space options and those of a study: backend, fidelity, strategy,
/// scheduler, seed, jobs, window, study file (tune, serve, mcp).
void add_study_options(CLI::App& command, spec_options& o);
/// What a session an agent drives needs besides (serve, mcp): the budget
/// hints, --token-price and --verify.
void add_session_options(CLI::App& command, spec_options& o);

/// Which config of a space a command works on (explain, emit):
/// `--config JSON|@PATH` or `--best DB`, exactly one of them.
struct config_choice {
  std::string config;  ///< JSON text, or @PATH
  std::string best;    ///< a study file whose best successful trial to use
  /// The chosen config of `s` (tessel::chosen_config). Throws tessel::error
  /// naming `command` when neither or both were given.
  [[nodiscard]] tessel::config in(const space& s, const std::string& command) const;
};
/// `--config` and `--best` into `o` (which must outlive parsing); `verb`
/// starts --best's description ("Explain", "Emit").
void add_config_options(CLI::App& command, config_choice& o, const std::string& verb);

/// A model's options (`tessel model`, `tessel tune-model`, docs/models.md):
/// `FILE [--model NAME] [--target T]... [--set K=V]... [--backend SPEC] ...`
struct model_options {
  std::string file;
  std::string model;                 ///< "" selects the first model of FILE
  std::vector<std::string> targets;  ///< none given: default_target(backend)
  std::vector<std::string> sets;     ///< the model's consts, "NAME=VALUE"
  std::string backend = "sim";
  std::vector<std::string> backend_settings;  ///< "KEY=VALUE"
  bool gate = true;
  bool json = false;

  /// The targets given, or the one the other commands default to for
  /// `backend` (default_target).
  [[nodiscard]] std::vector<std::string> chosen_targets() const;
  /// The model part of a model_spec for one of the targets. Throws
  /// tessel::error for an assignment without '='.
  [[nodiscard]] model_spec spec_for(const std::string& target) const;
};
void add_model_options(CLI::App& command, model_options& options);

/// open_study(spec, o.mode()) for tune, serve and mcp (`spec`: o.resolved(),
/// perhaps checked). With --resume, the options the study file records that
/// decide which trials come next (--strategy, --seed, --scheduler, --window,
/// ...) and that this command line leaves out are taken from the file, so the
/// run goes on as it began; one it gives that differs wins. Either is said
/// in a line on stderr ("tessel: note: ...").
[[nodiscard]] opened_study open_as_given(const spec_options& o, study_spec spec);
/// model_spec::resuming for `command` (open_as_given's too): what its
/// command line leaves out of recorded_fields() is taken from the study
/// file; returns the notes to print (`command` must outlive opening).
[[nodiscard]] std::function<std::vector<std::string>(study_spec&, const study_spec&)>
resume_as_given(const CLI::App& command);
/// Each note on stderr: "tessel: note: WHERE: NOTE".
void print_notes(const std::string& where, const std::vector<std::string>& notes);

/// The command line as typed, argv[0] first (main sets it): what an
/// interrupted `tessel tune` prints to resume the run.
[[nodiscard]] std::vector<std::string>& command_line();

/// Until stop_announcing_interrupts(): when SIGINT or SIGTERM ends the run,
/// one line on stderr, "tessel: interrupted; N finished trials are stored in
/// WHERE; resume with: COMMAND" (command_line() with --overwrite dropped and
/// --resume added; "nothing is stored (--no-db)" when `where` is ""), then
/// the signal's default action ends the process as before. N counts the
/// finished trials of `studies` (one, or a model's kernels), now and as they
/// finish (an observer added to each).
void announce_interrupts(const std::string& where, const std::vector<study*>& studies);
/// As announce_interrupts, for `tessel worker` WORKER of the shared study
/// at `where`: "tessel: interrupted; worker WORKER stops; N finished trials
/// of this worker are stored in WHERE; the trials it was running go back
/// to the queue when its lease (L s) runs out". N counts the results this
/// worker measured and the store kept (trial::worker is its id), not the
/// other workers' results its observers also see.
void announce_worker_interrupts(const std::string& worker, const std::string& where, double lease_s,
                                study& shared);
void stop_announcing_interrupts();

/// Runs `body`; on an exception prints what a person needs on stderr (every
/// rendered diagnostic, the constraint that emptied a space) and returns the
/// matching exit_code. With `json`, also prints one JSON object
/// `{"ok": false, "error": {...}}` on stdout so scripts can parse failures
/// (on one line with `one_line`, as `serve` needs). Never exits the process:
/// bad input is exit_code::bad_input, only a bug is exit_code::internal.
[[nodiscard]] int report_errors(const std::function<int()>& body, bool json, bool one_line = false);

}  // namespace tessel::cli
