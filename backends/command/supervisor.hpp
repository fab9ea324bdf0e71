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
    /// value: the command's wait status, the supervisor's last words on the
    /// life pipe (not the report pipe) before it exits: as the init of a PID
    /// namespace it cannot end by the command's signal (the kernel ignores
    /// an init's own default-action signals), so tessel takes the
    /// command's end from this record when there is one.
    command_status = 4,
    /// value: errno of the supervisor's uid or gid map in its user
    /// namespace (tessel then runs the command without namespaces)
    map_error = 5,
  };
  kind tag = kind::command_pid;
  std::int32_t value = 0;
};
static_assert(sizeof(report_record) == 8 && sizeof(report_record) <= PIPE_BUF);

/// What the supervisor and the command need, built before fork and only
/// read after it.
struct launch {
  int in, out, err, report;  ///< the child ends of the pipes
  int life;  ///< held by the supervisor until it exits; its last record: the command's end
  /// The read end of the tether, a pipe whose write end tessel alone keeps
  /// (the supervisor closes its copy): hung up, tessel is gone, or done
  /// with the run (run_process leaving early). The supervisor asks for
  /// SIGHUP when it hangs up (O_ASYNC), and looks once after asking.
  int tether;
  const char* directory;  ///< nullptr: the caller's
  const char* path;
  char* const* argv;
  char* const* envp;
  const void* cpus;                ///< a cpu_set_t, or nullptr
  const int* inherited = nullptr;  ///< process_request::inherited, kept open in the command
  std::size_t inherited_count = 0;
  /// The supervisor is the init (pid 1) of a PID namespace of its own
  /// (tessel cloned it with CLONE_NEWPID): the run cannot signal it, and
  /// when it exits the kernel kills whatever is left in the namespace.
  bool pid_namespace = false;
  /// ... in a user namespace of its own too (CLONE_NEWUSER, where tessel
  /// may not make a PID namespace alone): the supervisor maps `uid` and
  /// `gid` (tessel's) to themselves before it forks the command.
  bool user_namespace = false;
  unsigned uid = 0, gid = 0;
  /// tessel's pid, outside a PID namespace: the fallback's supervisor ends
  /// the run once its parent is another (tessel is gone).
  int parent = 0;
  /// For tests only (delay_next_supervisors): milliseconds the supervisor
  /// waits before it asks to be told of tessel's end.
  int delay_ms = 0;
};

/// The supervisor, in the child of tessel's fork or clone: it never
/// returns. Calls only async-signal-safe functions (tessel may have other
/// threads).
[[noreturn]] void supervise(const launch& l);

}  // namespace tessel::detail
