// A run's end, whichever way tessel's side of it ends (docs/backends.md,
// "Whichever way tessel leaves a run", "A killed tessel"): run_process
// leaving by an exception, a tessel that is gone before its run's
// supervisor asked to be told; and a time limit too long for the clock.
#include "command/process.hpp"
#include "run_fixtures.hpp"

#include <doctest/doctest.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <new>
#include <string>
#include <thread>
#include <vector>

#ifdef __linux__
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

using namespace tessel;
namespace fs = std::filesystem;

namespace {

/// Whether this process has no child left, running or unreaped.
bool no_child_left() {
  siginfo_t info{};
  return ::waitid(P_ALL, 0, &info, WEXITED | WNOHANG | WNOWAIT) != 0 && errno == ECHILD;
}

/// The users whose runs a case tries: root (as the tests run), and nobody
/// where this process may become it (its runs' namespaces are in user
/// namespaces of their own).
std::vector<int> users() {
  std::vector<int> out{testing::as_is};
  if (::geteuid() == 0) out.push_back(testing::nobody);
  return out;
}

}  // namespace

TEST_CASE("command: a run whose tessel side throws is killed and reaped") {
  // The command leaves a daemon (a double fork into a session of its own),
  // writes its own pid, prints a line and sleeps 300 s under a 2 s limit
  // (long enough for the pids to be written on a loaded machine before it
  // expires); the run throws where the hook says (std::bad_alloc, as a buffer that
  // cannot grow), in a forked child as root and as nobody, with the
  // namespace where allowed and with the fallback. Before, the exception
  // left the supervisor unreaped and the command running with no limit.
  for (const int uid : users()) {
    for (const bool fallback : {false, true}) {
      for (const auto step : {detail::run_step::output, detail::run_step::time_limit}) {
        CAPTURE(uid);
        CAPTURE(fallback);
        CAPTURE(static_cast<int>(step));
        const testing::temp_folder folder;
        ::chmod(folder.path().c_str(), 0777);
        const auto pid_file = folder.path() / "run.pid";
        const auto daemon_file = folder.path() / "daemon.pid";
        const testing::kill_at_exit run_killed(pid_file), daemon_killed(daemon_file);
        CHECK(testing::exit_code_as_user(uid, [&] {
                const testing::fallback_forced off(fallback);
                detail::process_request request;
                request.arguments = {"/bin/sh", "-c",
                                     testing::start_daemon(daemon_file) + "; " +
                                         testing::write_own_pid(pid_file) +
                                         "; echo started; exec sleep 300"};
                request.environment = {"PATH=/usr/bin:/bin"};
                request.timeout_s = 2;
                detail::throw_in_next_runs(step, 1);
                try {
                  (void)detail::run_process(request);
                  return 1;  // it did not throw
                } catch (const std::bad_alloc&) {
                }
                const auto pid = testing::read_pid(pid_file);
                const auto daemon = testing::read_pid(daemon_file);
                if (pid <= 0 || daemon <= 0) return 2;
                if (!testing::process_gone(pid)) return 3;
                if (!testing::process_gone(daemon)) return 4;
                return no_child_left() ? 0 : 5;  // the supervisor reaped
              }) == 0);
      }
    }
  }
}

TEST_CASE("command: a time limit too long for the clock is no limit, not one already past") {
  // 1e300 s is finite, so the options accept it; converted to the steady
  // clock's nanoseconds it overflowed, and the deadline came before the
  // start: the run timed out at once.
  detail::process_request request;
  request.arguments = {"/bin/sh", "-c", "sleep 0.1; echo 1"};
  request.environment = {"PATH=/usr/bin:/bin"};
  for (const double limit : {1e300, 1e12, 9.3e9}) {
    CAPTURE(limit);
    request.timeout_s = limit;
    const auto r = detail::run_process(request);
    CHECK_FALSE(r.timed_out);
    CHECK(r.exit_code == 0);
    CHECK(r.output == "1\n");
  }
}

TEST_CASE("command: a tessel killed before its run's supervisor asked to be told ends the run") {
  // A process standing for tessel starts a run whose supervisor waits
  // 0.5 s (delay_next_supervisors) before it asks for a death signal, and
  // is SIGKILLed as soon as that supervisor exists. In a PID namespace the
  // supervisor's getppid() is 0 whoever its parent is: before session 18
  // nothing told it that tessel was gone, and the run went on with no time
  // limit. Now the tether (a pipe whose write end only tessel keeps) has
  // hung up, and the command is never started. As root and as nobody,
  // namespace and fallback.
  for (const int uid : users()) {
    for (const bool fallback : {false, true}) {
      CAPTURE(uid);
      CAPTURE(fallback);
      const testing::temp_folder folder;
      ::chmod(folder.path().c_str(), 0777);
      const auto pid_file = folder.path() / "run.pid";
      const testing::kill_at_exit run_killed(pid_file);
      CHECK(testing::exit_code_as_user(uid, [&] {
              const testing::fallback_forced off(fallback);
              const pid_t tessel_process = ::fork();
              if (tessel_process == 0) {
                detail::process_request request;
                request.arguments = {"/bin/sh", "-c",
                                     testing::write_own_pid(pid_file) + "; exec sleep 300"};
                request.environment = {"PATH=/usr/bin:/bin"};
                detail::delay_next_supervisors(500, 1);
                (void)detail::run_process(request);
                ::_exit(0);
              }
              if (tessel_process < 0) return 1;
              const auto children = "/proc/" + std::to_string(tessel_process) + "/task/" +
                                    std::to_string(tessel_process) + "/children";
              const pid_t supervisor = testing::wait_for_pid(children, 2000, 1);
              testing::kill_and_reap(tessel_process);
              if (supervisor <= 0) return 2;
              if (!testing::process_gone(supervisor, 5)) return 3;
              const auto command = testing::read_pid(pid_file);  // none: never started
              return command > 0 && !testing::process_gone(command) ? 4 : 0;
            }) == 0);
    }
  }
}
#endif
