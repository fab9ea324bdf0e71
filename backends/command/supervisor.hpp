// supervisor.hpp: the per-run supervisor process of run_process
// (process.cpp): what tessel hands it across fork, and the records it and
// the command write back on the report pipe. Private to the command backend.
#pragma once

namespace tessel::detail {

/// A record on the report pipe: the supervisor writes the command's pid once
/// it has forked it, or errno when it could not; the command writes errno
/// when chdir or exec fails. Each is one write of 8 bytes (atomic on a pipe),
/// so the two writers' records never mix. The pipe is close-on-exec: its EOF
/// means the command's exec succeeded (or it never will).
struct report_record {
  int kind = 0;
  int value = 0;
};
constexpr int report_pid = 1, report_exec_error = 2, report_fork_error = 3;

/// What the supervisor and the command need, built before fork and only
/// read after it.
struct launch {
  int in, out, err, report;  ///< the child ends of the pipes
  int life;                  ///< held by the supervisor until it exits
  const char* directory;     ///< nullptr: the caller's
  const char* path;
  char* const* argv;
  char* const* envp;
  const void* cpus;  ///< a cpu_set_t, or nullptr
};

/// The supervisor, in the child of tessel's fork: it never returns. Calls
/// only async-signal-safe functions (tessel may have other threads).
[[noreturn]] void supervise(const launch& l);

}  // namespace tessel::detail
