// tessel/backends.hpp: the general-purpose backends and the backend registry
// (docs/backends.md). Link tessel::backends.
//
// - callback_backend: a user's C++ function.
// - command_backend:  an external program per candidate (config as JSON on
//                     stdin, as TESSEL_<NAME> variables and as {name}
//                     placeholders in its arguments; result as JSON on stdout).
// - replay_backend:   answers from a table of measured configs (a Kernel Tuner
//                     cache file or a T4 results file, optionally gzipped).
// - make_backend("replay:PATH" | "command:CMD" | ...): pick one by scheme;
//   other modules add schemes with register_backend.
#pragma once

#include <tessel/backend.hpp>
#include <tessel/config.hpp>
#include <tessel/gate.hpp>
#include <tessel/measurement.hpp>
#include <tessel/racing.hpp>
#include <tessel/roofline.hpp>
#include <tessel/settings.hpp>
#include <tessel/space.hpp>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace tessel {

// --- callback ------------------------------------------------------------------

/// Options of callback_backend.
struct callback_options {
  std::string name = "callback";  ///< what name() reports
  std::size_t concurrency = 1;    ///< evaluations that may run at once; the function
                                  ///< must be thread-safe when > 1
  /// Expected cost of a config in seconds (backend::estimated_cost); empty: 1 s.
  std::function<double(const space&, const config&)> cost_estimate;
  /// Where the function measures (backend::hardware, recorded in the study
  /// file): the host by default; name the device when it drives one.
  std::string target = "host";
  /// Set: each evaluation calls the function repeatedly, one sample per
  /// call, until the racing rule stops (tessel/racing.hpp); the objective is
  /// the median, with its interval as metrics, and remeasure() takes every
  /// max_repeats sample. Unset: one call.
  std::optional<race_options> racing{};
};

/// A gated callback (docs/backends.md, "Gated callbacks"): the function is
/// the kernel itself. tessel hands it the hidden inputs of a gate session,
/// times every call with a steady clock and judges every call's outputs
/// against `reference`, so a time counts only for outputs that match.
struct callback_gate {
  /// The declared tensors, "A:MxK,B:KxN:bf16" (as command's gate_inputs and
  /// gate_outputs: dims are integers or constants of the space).
  std::string inputs, outputs;
  /// The reference: the whole outputs (fp64, one array per output) from the
  /// inputs' values (one array per input, row-major). Trusted: it runs in
  /// tessel's process, on the gate's own copy of each input set.
  std::function<output_values(const std::vector<std::vector<double>>& inputs)> reference;
  /// The FLOPs one call performs and the bytes it must move at least (a
  /// number, or a `let`/`const` of the space), for the time floor.
  std::string flops, min_bytes;
  /// After the gate's calls, this many more timed calls, each on an input
  /// set of its own drawn from the secret (gate_session::timed_set);
  /// gate_session::spot_check picks the ones judged (the first, the last,
  /// about one in gate.spot_check_every).
  std::size_t timed_calls = 0;
  /// Suites, tolerance scale, secret; `machine` unknown: the space's
  /// target's peaks (the host's measured ones for `cpu`).
  gate_options gate;
};

/// Wraps a user function. Exceptions the function throws propagate out of
/// evaluate() unchanged (the study records them as runtime_error or rethrows
/// them, per its options).
class callback_backend : public backend {
 public:
  using options = callback_options;
  using measure_function = std::function<measurement(const space&, const config&)>;
  /// A gated callback's kernel: config `c`'s whole outputs on `in` (one
  /// array per declared output, row-major).
  using kernel_function =
      std::function<output_values(const space&, const config&, std::span<const hidden_input> in)>;

  /// The general form: the function returns the whole measurement.
  explicit callback_backend(measure_function f, options opts = {});
  /// As above, for a function that does not need the space.
  explicit callback_backend(std::function<measurement(const config&)> f, options opts = {});
  /// The function returns the objective; its wall time (steady clock) is the
  /// run cost, and the status is ok.
  explicit callback_backend(std::function<double(const config&)> f, options opts = {});
  explicit callback_backend(std::function<double(const space&, const config&)> f,
                            options opts = {});
  /// A gated kernel: each evaluation makes a gate session's calls (and
  /// gate.timed_calls more), timing each; the objective is the median call
  /// time in seconds, samples the times of the calls on inputs the kernel
  /// had not been given (every set's first call, every timed call), metrics
  /// gate_calls (every call) and gate_max_error. A failing verdict is the trial's status; a time
  /// below the floor is suspicious. Throws options_error without a reference.
  callback_backend(kernel_function f, callback_gate gate, options opts = {});
  ~callback_backend() override;

  [[nodiscard]] std::string name() const override { return options_.name; }
  [[nodiscard]] std::optional<std::string> hardware() const override { return options_.target; }
  /// A gated callback: parses the tensors against the space's constants and
  /// checks the flops and min_bytes settings.
  void prepare(const space& s) override;
  [[nodiscard]] measurement evaluate(const space& s, const config& c) override;
  /// With racing: every max_repeats sample, no racing. Else nullopt.
  [[nodiscard]] std::optional<measurement> remeasure(const space& s, const config& c) override;
  [[nodiscard]] std::size_t concurrency() const override { return options_.concurrency; }
  [[nodiscard]] double estimated_cost(const space& s, const config& c) const override;

 private:
  struct gated;
  measure_function function_;
  options options_;
  std::shared_ptr<racer> racer_;  ///< when options_.racing is set
  std::shared_ptr<gated> gated_;  ///< a gated kernel's state (prepare() completes it)
};

// --- command -------------------------------------------------------------------

/// Options of command_backend. Times are wall seconds.
struct command_options {
  /// The wall-time limit of one run of the program (an ungated candidate, each
  /// repeat, each gate run, each reference run); unset: default_timeout_s;
  /// 0: no limit. On expiry the program's process group gets SIGTERM, then
  /// SIGKILL after kill_grace_s, and the status is timeout (its message says
  /// the limit, whether it was set or the default, and how to change it).
  std::optional<double> timeout_s;
  /// The limit when timeout_s is unset: 600 s, so a candidate that hangs
  /// costs ten minutes, never the run (docs/backends.md, "Options", says why
  /// this number). 0: no limit.
  double default_timeout_s = 600;
  double kill_grace_s = 1.0;                       ///< between SIGTERM and SIGKILL
  std::filesystem::path working_directory;         ///< empty: the caller's
  std::map<std::string, std::string> environment;  ///< added to (overriding) the inherited one
  std::size_t concurrency = 1;                     ///< programs that may run at once
  double estimated_cost_s = 1.0;                   ///< backend::estimated_cost of every config
  std::size_t max_output_bytes = 16u << 20;        ///< stdout kept (its tail) per candidate
  std::size_t stderr_tail_lines = 20;              ///< stderr lines quoted in a failure message
  std::size_t stderr_tail_bytes = 2048;            ///< ... and at most this many bytes of them
  /// Repeats: the program is run once per sample until the racing rule
  /// stops (tessel/racing.hpp), each run's objective one sample; the
  /// objective is their median. The default, 1 and 1, runs it once (what
  /// it reports stands); racing needs min_repeats >= 2, e.g. 3 and 10.
  /// Ungated commands only: a gated command's samples are its gate runs.
  race_options racing{1, 1, 0.0, 0.02, 0.0};

  /// Gated commands (docs/backends.md, "Gated commands"). With gate_outputs
  /// set, each evaluation runs the candidate once per call of a gate
  /// session (every hidden input set, and repeats, in an order drawn from
  /// the secret), every run alike: TESSEL_INPUT_DIR (NAME.npy per input,
  /// float32 or int32) and TESSEL_OUTPUT_DIR (where it writes NAME.npy per
  /// output) in a fresh private folder, the same arguments, environment and
  /// stdin; each run reports its time as an ungated run does. The reference
  /// command runs the same way in a process of its own, once per input set.
  /// Every run's outputs are judged and every run's time counts: the
  /// objective is their median, each must be above the physical floor.
  std::string gate_inputs;     ///< "A:64x32,B:32x64:bf16" (dims: integers or space constants)
  std::string gate_outputs;    ///< "C:64x64"; empty: the command is not gated
  std::string gate_reference;  ///< the reference command (split shell-style)
  /// The FLOPs one run performs and the bytes it must move at least (a
  /// number, or a `let`/`const` of the space), for the time floor; "": unknown
  /// FLOPs, and every input and output once.
  std::string gate_flops, gate_min_bytes;
  /// Suites, tolerance scale, secret; `machine` unknown: the space's target's
  /// peaks (peaks_of: the host's measured ones for `cpu`).
  gate_options gate;

  /// Throws options_error naming the field and the rule.
  void validate() const;
  /// The limit in force: timeout_s, or default_timeout_s when it is unset.
  [[nodiscard]] double limit_s() const noexcept { return timeout_s.value_or(default_timeout_s); }
};

/// Runs an external program per candidate (docs/backends.md has the protocol).
/// The program gets the config as one JSON line on stdin, as environment
/// variables TESSEL_<NAME> (upper-cased; permutations comma-joined, booleans
/// 0/1; inactive parameters unset), and as `{name}` placeholders in its
/// arguments (`{config}`: the whole JSON; `{{` and `}}`: literal braces). It
/// prints a JSON object (or a bare number: the objective) as its last line of
/// JSON on stdout. Started with fork/exec (never through a shell unless the
/// command is one, e.g. `sh -c '...'`), in its own process group, which is
/// killed when the program exits or times out. Thread-safe.
class command_backend : public backend {
 public:
  using options = command_options;

  /// `command` is split into words shell-style (blanks separate; '...' and
  /// "..." quote; backslash escapes). Throws tessel::error on an unbalanced
  /// quote or an empty command.
  explicit command_backend(std::string_view command, options opts = {});
  explicit command_backend(std::vector<std::string> arguments, options opts = {});

  [[nodiscard]] std::string name() const override;
  /// Checks the placeholders name parameters (or lets/constants) of `s`, the
  /// program can be found, and the working directory exists.
  void prepare(const space& s) override;
  [[nodiscard]] measurement evaluate(const space& s, const config& c) override;
  /// An ungated command with racing (max_repeats > 1): every max_repeats
  /// run, no racing. Else nullopt.
  [[nodiscard]] std::optional<measurement> remeasure(const space& s, const config& c) override;
  [[nodiscard]] std::size_t concurrency() const override { return options_.concurrency; }
  [[nodiscard]] double estimated_cost(const space& s, const config& c) const override;

  [[nodiscard]] const std::vector<std::string>& arguments() const noexcept { return arguments_; }

 private:
  struct gated;
  void prepare_gate(const space& s);
  measurement evaluate(const space& s, const config& c, bool full);
  [[nodiscard]] measurement evaluate_gated(const space& s, const config& c);
  std::vector<std::string> arguments_;
  options options_;
  std::shared_ptr<gated> gated_;  ///< set by prepare() when options_.gate_outputs is
  std::shared_ptr<racer> racer_;
};

/// Shell-like word splitting, as command_backend does it. Throws tessel::error
/// on an unbalanced quote or a trailing backslash.
[[nodiscard]] std::vector<std::string> split_command(std::string_view command);

/// `word` as a POSIX shell (and split_command) reads it back as one word: as
/// is when every byte is one of [A-Za-z0-9_./:=@%+,-] and it is not empty,
/// else in single quotes, each ' written '\''.
[[nodiscard]] std::string shell_quote(std::string_view word);

// --- replay --------------------------------------------------------------------

/// A measured search space read from a Kernel Tuner cache file or a T4 results
/// file (`.json` or `.json.gz`, detected by content). Times are kept in the
/// file's unit, milliseconds (T4 files in seconds are converted to ms), so
/// objectives are comparable across every replay file. Immutable once loaded;
/// share it between backends with a shared_ptr.
class replay_table {
 public:
  enum class file_format : unsigned char { kernel_tuner, t4 };

  struct parameter {
    std::string name;
    /// Every value, normalized to text: integers in decimal ("16", also for
    /// "16" or 16.0 in the file), booleans "0"/"1", null "None", other
    /// numbers in shortest round-trip form, strings as they are. Kernel
    /// Tuner: the declared `tune_params` order; T4 (which declares no
    /// domains): the observed values, numbers ascending.
    std::vector<std::string> values;
  };

  /// One stored configuration. Costs are the recorded wall times in ms.
  struct entry {
    std::vector<std::uint32_t> values;  ///< index into parameters()[p].values
    tessel::status status = tessel::status::ok;
    std::string failure;           ///< the recorded failure ("RuntimeFailedConfig"), or ""
    double time_ms = 0;            ///< the objective (ok only)
    std::vector<double> times_ms;  ///< repeated runs (ok only)
    double compile_ms = 0, verification_ms = 0, benchmark_ms = 0;
    double framework_ms = 0, strategy_ms = 0;
    std::map<std::string, double> metrics;  ///< other numbers in the record ("GFLOP/s")
    /// compile + verification + benchmark (+ framework + strategy), in seconds.
    [[nodiscard]] double cost_s(bool with_framework = false) const noexcept;
  };

  /// Reads `path`. Throws tessel::error (with the path) when the file cannot
  /// be read, is not JSON, or is neither format.
  [[nodiscard]] static std::shared_ptr<const replay_table> load(const std::filesystem::path& path);

  [[nodiscard]] const std::filesystem::path& path() const noexcept { return path_; }
  [[nodiscard]] file_format format() const noexcept { return format_; }
  [[nodiscard]] const std::string& device_name() const noexcept { return device_name_; }
  [[nodiscard]] const std::string& kernel_name() const noexcept { return kernel_name_; }
  [[nodiscard]] std::string_view unit() const noexcept { return "ms"; }
  [[nodiscard]] const std::vector<parameter>& parameters() const noexcept { return parameters_; }
  [[nodiscard]] const std::vector<entry>& entries() const noexcept { return entries_; }

  /// The entry with these value indices (one per parameter), or nullptr.
  [[nodiscard]] const entry* find(const std::vector<std::uint32_t>& values) const;
  /// The entry with these values as text (normalized as parameter::values), or nullptr.
  [[nodiscard]] const entry* find_text(const std::vector<std::string>& values) const;

  /// The index of `text` (normalized as parameter::values) among the values of
  /// parameters()[column], or nullopt.
  [[nodiscard]] std::optional<std::uint32_t> value_index(std::size_t column,
                                                         std::string_view text) const;

  /// Configs stored (ok or failed).
  [[nodiscard]] std::size_t stored_count() const noexcept { return entries_.size(); }
  /// Configs stored with status ok.
  [[nodiscard]] std::size_t valid_count() const noexcept { return valid_times_.size(); }
  /// Product of the domain sizes (saturates at 2^64-1).
  [[nodiscard]] std::uint64_t cartesian_size() const noexcept;
  /// Best (lowest) ok time, in ms. Throws tessel::error when none is ok.
  [[nodiscard]] double optimum() const;
  /// Median of the ok times (mean of the middle two for an even count), in ms.
  [[nodiscard]] double median() const;
  /// Every ok time, ascending, in ms.
  [[nodiscard]] const std::vector<double>& valid_times() const noexcept { return valid_times_; }

  /// A `.tsl` text with one space: each parameter as an integer set (a symbol
  /// set when a value is not an integer), no constraints; named after the
  /// file. Throws tessel::error when a value fits neither (e.g. 0.5).
  [[nodiscard]] std::string space_source() const;
  /// The same space as a definition, built without the language module.
  [[nodiscard]] space::definition space_definition() const;
  /// The same parameters, constrained to the stored configs (ok or failed):
  /// the space a tuner sees when the kernel's restrictions are known. One
  /// constraint per prefix of the parameters (`key_k in {...}`, key_k a
  /// mixed-radix number of the first k values), so the engine's prefix tree
  /// is the table's. Throws tessel::error when a key would overflow 63 bits.
  [[nodiscard]] space::definition table_space_definition() const;

 private:
  replay_table() = default;
  friend struct replay_loader;
  std::filesystem::path path_;
  file_format format_ = file_format::kernel_tuner;
  std::string device_name_, kernel_name_;
  std::vector<parameter> parameters_;
  std::vector<std::unordered_map<std::string, std::uint32_t>> value_index_;
  std::vector<entry> entries_;
  std::unordered_map<config, std::uint32_t, config_hash> by_values_;  ///< value indices -> entry
  std::vector<double> valid_times_;
};

/// Options of replay_backend.
struct replay_options {
  std::size_t concurrency = 1;
  /// Add the recorded framework and strategy times to run_s (the FGCS 2024
  /// methodology counts them; off by default: they are Kernel Tuner's, not the kernel's).
  bool count_framework_time = false;
  /// estimated_cost: false: the median recorded cost of the stored configs, the
  /// same for every config (no peeking); true: the config's own recorded cost.
  bool exact_cost_estimate = false;
};

/// Answers from a replay_table. A stored ok config: objective = recorded mean
/// time converted to seconds (the table's ms / 1000), samples = the recorded
/// runs, also in seconds; a stored failure: compile_error (CompilationFailedConfig),
/// invalid (InvalidConfig) or runtime_error (anything else); cost = recorded
/// compile / verification / benchmark ms as compile_s / gate_s / run_s. A
/// config not in the table violated the kernel's restrictions: invalid, zero
/// cost. Thread-safe.
class replay_backend : public backend {
 public:
  using options = replay_options;

  explicit replay_backend(const std::filesystem::path& path, options opts = {});
  explicit replay_backend(std::shared_ptr<const replay_table> table, options opts = {});

  [[nodiscard]] std::string name() const override;
  /// The device the table was measured on ("replay of NVIDIA RTX 3090").
  [[nodiscard]] std::optional<std::string> hardware() const override;
  /// Throws tessel::error when the space's parameters are not the table's
  /// (listing those missing on either side).
  void prepare(const space& s) override;
  [[nodiscard]] measurement evaluate(const space& s, const config& c) override;
  [[nodiscard]] std::size_t concurrency() const override { return options_.concurrency; }
  [[nodiscard]] double estimated_cost(const space& s, const config& c) const override;

  [[nodiscard]] const replay_table& table() const noexcept { return *table_; }
  /// The stored entry for `c`, or nullptr (not in the table).
  [[nodiscard]] const replay_table::entry* lookup(const space& s, const config& c) const;

 private:
  struct mapping;
  [[nodiscard]] std::shared_ptr<const mapping> mapping_for(const space& s) const;
  std::shared_ptr<const replay_table> table_;
  options options_;
  double median_cost_s_ = 1.0;
  mutable std::mutex mutex_;
  mutable std::shared_ptr<const mapping> mapping_;
};

/// The `.tsl` space text of the replay file at `path` (replay_table::space_source).
[[nodiscard]] std::string replay_space_source(const std::filesystem::path& path);
/// Which space a replay file is tuned over: `product`, every combination of
/// the recorded values (the kernel's restrictions unknown: a config outside
/// the table answers invalid), or `table`, the stored configs only (the
/// restrictions known: replay_table::table_space_definition).
enum class replay_space_kind : unsigned char { product, table };
/// The space of the replay file at `path`, built directly (no .tsl parsing).
[[nodiscard]] space replay_space(const std::filesystem::path& path,
                                 replay_space_kind kind = replay_space_kind::product);

// --- registry ------------------------------------------------------------------

/// Settings passed to a backend factory as text ("timeout" -> "5"). Each
/// scheme documents the keys it accepts and rejects others.
using backend_settings = settings_map;
using backend_factory = std::function<std::shared_ptr<backend>(std::string_view argument,
                                                               const backend_settings& settings)>;

/// Adds (or replaces) the factory of `scheme` ("sim"). Thread-safe.
void register_backend(std::string scheme, backend_factory factory);
/// Registered schemes, sorted.
[[nodiscard]] std::vector<std::string> backend_schemes();
/// Makes a backend from "SCHEME:ARGUMENT" (or "SCHEME"): `replay:PATH`
/// (settings: concurrency, count_framework_time, exact_cost_estimate),
/// `command:CMD` (settings: timeout, kill_grace, workdir, concurrency,
/// estimated_cost, env.NAME, gate_inputs, gate_outputs, gate_reference,
/// gate_flops, gate_min_bytes, gate_secret, tolerance_scale, min_repeats, max_repeats,
/// race_margin, target_ci, race_seconds), `cpu[:KERNEL][,KEY=VALUE...]` (tessel/cpu.hpp,
/// docs/cpu.md), `trainium:kernel=...,reference=...`
/// (tessel/trainium.hpp, docs/trainium.md). Throws tessel::error for an unknown scheme
/// (listing the known ones), an unknown setting, or a bad argument.
[[nodiscard]] std::shared_ptr<backend> make_backend(std::string_view spec,
                                                    const backend_settings& settings = {});

}  // namespace tessel
