// process.hpp: run one program to completion with fork/exec, its own process
// group (and PID namespace, where the system allows one), stdin fed and
// stdout/stderr captured through pipes, and a wall-clock limit that kills
// the whole group. Private to the command backend.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace tessel::detail {

struct process_request {
  std::vector<std::string>
      arguments;  ///< arguments[0]: the program (a path, or a name looked up in PATH)
  std::vector<std::string> environment;      ///< the complete environment, "NAME=VALUE"
  std::string working_directory;             ///< "" : the caller's
  std::string input;                         ///< written to stdin, which is then closed
  double timeout_s = 0;                      ///< 0: none
  double kill_grace_s = 1.0;                 ///< SIGTERM to SIGKILL
  std::size_t max_output_bytes = 16u << 20;  ///< stdout kept (the tail)
  std::size_t max_error_bytes = 64u << 10;   ///< stderr kept (the tail)
  /// Linux: the CPUs the program may run on (sched_setaffinity before exec;
  /// its threads inherit them); empty: not pinned. Ignored elsewhere.
  std::vector<int> cpus;
  /// Descriptors of tessel's the program keeps, under the same numbers, at
  /// most `max_inherited` (every other one is closed in the program, as
  /// always): a sealed file it runs or loads as /proc/self/fd/N, which the
  /// program of a run in a user namespace could not open in tessel's /proc.
  std::vector<int> inherited;
};

inline constexpr std::size_t max_inherited = 8;

struct process_result {
  bool started = false;
  std::string start_error;  ///< why it did not start ("No such file or directory")
  int exit_code = -1;       ///< when it exited
  int signal = 0;           ///< when a signal ended it
  bool timed_out = false;   ///< the limit expired and the group was killed
  std::string output;       ///< stdout (its tail when longer than max_output_bytes)
  std::string errors;       ///< stderr (its tail)
  bool output_truncated = false;
  double wall_s = 0;  ///< from start to exit
  /// The run had a PID namespace of its own, its supervisor as init
  /// (Linux, where the system allows one and TESSEL_NO_PID_NAMESPACE is not
  /// set): nothing of the run outlives it, and it cannot signal a process
  /// outside it. false: the supervisor alone (docs/backends.md).
  bool pid_namespace = false;
  bool user_namespace = false;  ///< ... inside a user namespace of its own
};

/// Runs the program. Never throws for the program's behaviour; failures to
/// start are reported in the result. Thread-safe: concurrent calls do not
/// leak each other's pipe ends into their children. Whichever way it
/// leaves once the run has started (an exception included: an allocation
/// for the output that fails), the run is over: its supervisor, the
/// program and what they left are killed and reaped.
[[nodiscard]] process_result run_process(const process_request& request);

/// Where a run's tessel side can throw once the run has started, for
/// throw_in_next_runs.
enum class run_step {
  output,      ///< a read of the program's stdout or stderr (its buffer grows)
  time_limit,  ///< the time limit's expiry, before its signals are sent
};

/// For tests only (tests/backends/supervisor_test.cpp): the next `count`
/// times a run reaches `step`, it throws std::bad_alloc there, as an
/// allocation that fails would; the rest of run_process is as with a real
/// exception.
void throw_in_next_runs(run_step step, int count);

/// For tests only (tests/backends/supervisor_test.cpp): the supervisors of
/// the next `count` runs wait `ms` milliseconds before they ask to be told
/// of tessel's end (Linux: PR_SET_PDEATHSIG, the tether), so that a test
/// can kill tessel in that window.
void delay_next_supervisors(int ms, int count);

/// The file exec would run for `program` given `path_variable` (PATH's value):
/// `program` itself when it holds a '/', else the first executable match.
[[nodiscard]] std::optional<std::string> find_program(const std::string& program,
                                                      const std::string& path_variable);

/// "SIGSEGV" for 11, ...; "signal N" for one it does not know.
[[nodiscard]] std::string signal_name(int signal);

}  // namespace tessel::detail
