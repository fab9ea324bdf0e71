// Shared by the tests of a run's supervisor and PID namespace
// (namespace_test.cpp, supervisor_test.cpp): the fallback forced, whether
// the system allows namespaces, a daemon killed whatever a case checked,
// and shell code that records a process's pid as this machine names it.
#pragma once
#ifdef __linux__

#include "as_user.hpp"
#include "backend_fixtures.hpp"

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>
#include <utility>

#include <sched.h>
#include <sys/wait.h>

namespace tessel::testing {

/// Sets (or unsets) TESSEL_NO_PID_NAMESPACE for the life of the guard.
class fallback_forced {
 public:
  explicit fallback_forced(bool on) {
    if (on) ::setenv("TESSEL_NO_PID_NAMESPACE", "1", 1);
  }
  fallback_forced(const fallback_forced&) = delete;
  fallback_forced& operator=(const fallback_forced&) = delete;
  ~fallback_forced() { ::unsetenv("TESSEL_NO_PID_NAMESPACE"); }
};

/// Whether this process, as `uid` (as_is: as it is), may make a PID
/// namespace, alone or inside a user namespace: asked in a forked child, as
/// tessel's runs would ask the kernel.
inline bool namespaces_allowed(int uid = as_is) {
  return exit_code_as_user(uid, [] {
           const bool alone = ::unshare(CLONE_NEWPID) == 0;
           return alone || ::unshare(CLONE_NEWUSER | CLONE_NEWPID) == 0 ? 0 : 1;
         }) == 0;
}

/// SIGKILLs the process whose pid is in `file` (if any) when it goes out of
/// scope: a daemon a case started must not outlive it, whatever it checked.
class kill_at_exit {
 public:
  explicit kill_at_exit(std::filesystem::path file) : file_(std::move(file)) {}
  kill_at_exit(const kill_at_exit&) = delete;
  kill_at_exit& operator=(const kill_at_exit&) = delete;
  ~kill_at_exit() {
    if (const auto pid = read_pid(file_); pid > 0) ::kill(pid, SIGKILL);
  }

 private:
  std::filesystem::path file_;
};

/// Shell code (sh) that writes the pid of the shell running it to `file`,
/// whole (a rename), as this machine's /proc names it.
inline std::string write_own_pid(const std::filesystem::path& file) {
  return "read -r p _ < /proc/self/stat; echo $p > " + file.string() + ".tmp && mv " +
         file.string() + ".tmp " + file.string();
}

/// Shell code (sh) that starts a daemon (a double fork into a session of its
/// own, which sleeps 300 s) that writes its pid to `file`, and waits for it.
inline std::string start_daemon(const std::filesystem::path& file) {
  return "(setsid sh -c '" + write_own_pid(file) + "; exec sleep 300' > /dev/null 2>&1 &); " +
         "while [ ! -s " + file.string() + " ]; do sleep 0.01; done";
}

/// The pid `file` holds once it holds one, looked at every `step_ms` up
/// to `tries` times; -1 when it never did.
inline pid_t wait_for_pid(const std::filesystem::path& file, int tries, int step_ms) {
  pid_t pid = read_pid(file);
  for (int tried = 0; tried < tries && pid <= 0; ++tried) {
    std::this_thread::sleep_for(std::chrono::milliseconds(step_ms));
    pid = read_pid(file);
  }
  return pid;
}

/// SIGKILLs the child `pid` (a process standing for tessel) and reaps it.
inline void kill_and_reap(pid_t pid) {
  ::kill(pid, SIGKILL);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
}

}  // namespace tessel::testing
#endif
