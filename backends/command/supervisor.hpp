// supervisor.hpp: the per-run supervisor process of run_process
// (process.cpp): what tessel hands it across fork, and the records it and
// the command write back on the report pipe. Private to the command backend.
#pragma once

#include <climits>
#include <cstdint>

namespace tessel::detail {

/// One record on the report pipe, tagged with who wrote it and why: the
/// supervisor writes the command's pid once it has forked it, or errno when
/// it could not; the command writes errno when chdir or exec fails. Each is
/// written whole by one write(2) of its fixed 8 bytes, which a pipe keeps
/// atomic (at most PIPE_BUF), so the two writers' records never mix; tessel
/// reads them all in one place (process.cpp). The pipe is close-on-exec: its
/// EOF means the command's exec succeeded (or it never will).
struct report_record {
  enum class kind : std::int32_t {
    command_pid = 1,  ///< value: the command's pid (its process group's id)
    exec_error = 2,   ///< value: errno of the command's chdir or exec
    fork_error = 3,   ///< value: errno of the supervisor's fork of the command
  };
  kind tag = kind::command_pid;
  std::int32_t value = 0;
};
static_assert(sizeof(report_record) == 8 && sizeof(report_record) <= PIPE_BUF);

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
