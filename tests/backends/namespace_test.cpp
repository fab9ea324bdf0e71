// Each run's PID namespace (docs/backends.md, "Process groups"; docs/gate.md,
// "What a kernel leaves running"): a run that kills its supervisor or every
// process it can signal, with the namespace and with the fallback forced by
// TESSEL_NO_PID_NAMESPACE.
#include "command/namespaces.hpp"
#include "run_fixtures.hpp"

#include <tessel/backends.hpp>
#include <tessel/dsl.hpp>

#include <doctest/doctest.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#ifdef __linux__
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

using namespace tessel;
namespace fs = std::filesystem;

namespace {

using testing::fallback_forced;
using testing::kill_at_exit;
using testing::namespaces_allowed;

measurement run(const std::string& script, double timeout_s = 30) {
  const auto s = testing::small_space();
  command_options options;
  options.timeout_s = timeout_s;
  return command_backend(std::vector<std::string>{"/bin/sh", "-c", script}, options)
      .evaluate(s, testing::small_config(s, 32, "k,m,n", true, "beta", 3));
}

/// The run's own pid as it sees it ($$), and the isolation it got.
measurement whoami() { return run("echo $$"); }

std::uintmax_t size_of(const fs::path& file) {
  std::error_code ignored;
  const auto n = fs::file_size(file, ignored);
  return ignored ? 0 : n;
}

}  // namespace

TEST_CASE("command: each run gets a PID namespace of its own, unless turned off") {
  const bool allowed = namespaces_allowed();
  SUBCASE("the default: the run is pid 2, after its supervisor (pid 1)") {
    const auto m = whoami();
    REQUIRE_MESSAGE(m.ok(), m.message);
    CHECK(m.metrics.at("pid_namespace") == (allowed ? 1 : 0));
    if (allowed) CHECK(m.objective == 2);
  }
  SUBCASE("a command that ends by a signal is reported so (not as its supervisor's exit code)") {
    // The supervisor, pid 1, cannot end by the command's signal as it does
    // outside a namespace: it reports the command's end on the life pipe,
    // which tessel reads even when it saw the supervisor exit first.
    for (int i = 0; i < 20; ++i) {
      const auto m = run("kill -SEGV $$");
      CHECK(m.status == status::runtime_error);
      CHECK(m.message.rfind("killed by signal 11 (SIGSEGV)", 0) == 0);
    }
  }
  SUBCASE("TESSEL_NO_PID_NAMESPACE=1: the supervisor alone, pids of this machine") {
    const fallback_forced off(true);
    const auto m = whoami();
    REQUIRE_MESSAGE(m.ok(), m.message);
    CHECK(m.metrics.at("pid_namespace") == 0);
    CHECK(m.objective > 2);
  }
  SUBCASE("as a user who is not root: inside a user namespace, its uid mapped to itself") {
    if (!testing::may_become_another_user()) return;
    // A forked child gives up root (the tests run as root here) and runs a
    // command that reports its pid and uid; its exit code says what it saw.
    // Giving up root made it not dumpable: its /proc files would be root's,
    // and its supervisor could not write its uid_map, so it is made dumpable
    // again, as a user's own process is (exit_code_as_user). Then, not
    // dumpable again, its runs fall back and still run.
    const bool user_allowed = namespaces_allowed(testing::nobody);
    CHECK(testing::exit_code_as_user(testing::nobody, [user_allowed] {
            const auto seen = [](bool namespaced) {
              const auto m = run("echo $(( $$ * 100000 + $(id -u) ))");
              if (!m.ok()) {
                std::fprintf(stderr, "%s\n", m.message.c_str());
                return 1;
              }
              const double pid = std::floor(m.objective / 100000), uid = m.objective - pid * 100000;
              const bool right = uid == testing::nobody &&
                                 m.metrics.at("pid_namespace") == (namespaced ? 1 : 0) &&
                                 (!namespaced || pid == 2);
              return right ? 0 : 2;
            };
            if (const int code = seen(user_allowed); code != 0) return 10 + code;
            ::prctl(PR_SET_DUMPABLE, 0L, 0L, 0L, 0L);
            if (const int code = seen(false); code != 0) return 20 + code;
            return 0;
          }) == 0);
  }
}

TEST_CASE("command: a passing refusal falls back for a while, a lasting one for good") {
  // The kernel's refusal is stood for by refuse_next_namespaces (the next
  // clones fail with that errno without asking it). Each case runs in a
  // forked child (exit_code_as_user), so what it teaches tessel's
  // process-wide state stays out of this runner; as root, and as nobody
  // (whose runs' PID namespaces are in user namespaces) where allowed.
  if (!namespaces_allowed()) {
    MESSAGE("skipped: this system allows no PID namespace");
    return;
  }
  // 1: the run had a namespace, 0: the fallback, -1: it failed or its
  // pid_namespace metric says otherwise than the pid it saw.
  const auto isolated = [] {
    const auto m = whoami();
    const bool namespaced = m.ok() && m.metrics.at("pid_namespace") == 1;
    return !m.ok() || namespaced != (m.objective == 2) ? -1 : (namespaced ? 1 : 0);
  };
  const auto ms = [](int n) { return std::chrono::milliseconds(n); };
  // Whether a run that ended now asked within `pause` of a refusal made
  // after `since`: the back-off runs from the refused clone, so a run that
  // asked (1) where less than `pause` has passed since `since` asked too
  // soon. A run that outlasted the pause (a loaded machine: the refused
  // run itself may take longer) may ask, and is granted: right too, and
  // not a sign of anything (the CI's 2 cores). On a quiet machine the two
  // runs take a few ms, far within the pause, and each step is checked.
  const auto asked_too_soon = [](int seen, std::chrono::steady_clock::time_point since,
                                 std::chrono::milliseconds pause) {
    return seen == 1 && std::chrono::steady_clock::now() - since < pause;
  };
  std::vector<int> users{testing::as_is};
  if (namespaces_allowed(testing::nobody)) users.push_back(testing::nobody);
  SUBCASE("ENOSPC (too many namespaces now): the fallback, asked again after a back-off") {
    for (const int uid : users) {
      CAPTURE(uid);
      CHECK(testing::exit_code_as_user(uid, [&] {
              if (isolated() != 1) return 1;
              detail::refuse_next_namespaces(ENOSPC, 1);
              const auto first = std::chrono::steady_clock::now();
              if (isolated() != 0) return 2;  // refused: 250 ms without asking
              const int next = isolated();
              if (next == -1 || asked_too_soon(next, first, ms(250))) return 3;
              std::this_thread::sleep_for(ms(300));
              if (isolated() != 1) return 4;  // asked, granted: the back-off starts over
              detail::refuse_next_namespaces(ENOSPC, 2);
              if (isolated() != 0) return 5;  // 250 ms
              std::this_thread::sleep_for(ms(300));
              const auto before = std::chrono::steady_clock::now();
              if (isolated() != 0) return 6;  // refused again, in a row: 500 ms
              std::this_thread::sleep_until(before + ms(300));
              const int later = isolated();  // past the first pause's 250 ms
              if (later == -1 || asked_too_soon(later, before, ms(500))) return 7;
              std::this_thread::sleep_for(ms(500));
              return isolated() == 1 ? 0 : 8;
            }) == 0);
    }
  }
  SUBCASE("EPERM, EINVAL, ENOSYS, EACCES, EUSERS: the fallback for the process's life") {
    for (const int uid : users) {
      for (const int e : {EPERM, EINVAL, ENOSYS, EACCES, EUSERS}) {
        if (uid != testing::as_is && e != EPERM) continue;  // a user's: EPERM alone
        CAPTURE(uid);
        CAPTURE(e);
        CHECK(testing::exit_code_as_user(uid, [&] {
                detail::refuse_next_namespaces(e, 2);  // alone, then in a user namespace
                if (isolated() != 0) return 1;
                std::this_thread::sleep_for(ms(300));  // past a passing refusal's back-off
                return isolated() == 0 ? 0 : 2;
              }) == 0);
      }
    }
  }
}

TEST_CASE("command: a run that kills its supervisor leaves no daemon behind") {
  // The command starts a daemon (a double fork into a session of its own)
  // that appends to a file, then SIGKILLs its parent, the run's supervisor.
  // In a PID namespace that parent is the namespace's init, whom the run
  // cannot signal: the command goes on, and when it exits the rest of the
  // namespace is killed. Before, the supervisor died, and the daemon (its
  // orphan) went to init and outlived the run.
  const testing::temp_folder folder;
  const auto grows = folder.path() / "grows";
  const auto pid_file = folder.path() / "daemon.pid";
  const std::string daemon = "(setsid sh -c 'read -r p _ < /proc/self/stat; echo $p > " +
                             pid_file.string() + "; while :; do echo x >> " + grows.string() +
                             "; sleep 0.02; done' > /dev/null 2>&1 &)";
  const std::string script = daemon + "; while [ ! -s " + pid_file.string() +
                             " ]; do sleep 0.01; done; kill -9 $PPID; sleep 0.2; echo 1";
  const auto stops_growing = [&] {
    auto before = size_of(grows);
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    return size_of(grows) == before;
  };
  // Whether it grows within 30 s (a bound: a daemon that runs appends every
  // 20 ms, but a loaded machine may not run it for 300 ms).
  const auto still_grows = [&] {
    const auto before = size_of(grows);
    for (int i = 0; i < 3000 && size_of(grows) == before; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    return size_of(grows) != before;
  };
  SUBCASE("in a PID namespace: the run goes on, and its daemon is killed when it ends") {
    if (!namespaces_allowed()) {
      MESSAGE("skipped: this system allows no PID namespace");
      return;
    }
    const kill_at_exit daemon_killed(pid_file);
    const auto m = run(script);
    REQUIRE_MESSAGE(m.ok(), m.message);
    CHECK(m.objective == 1);
    CHECK(m.metrics.at("pid_namespace") == 1);
    const auto pid = testing::read_pid(pid_file);
    REQUIRE(pid > 0);
    CHECK(testing::process_gone(pid));
    CHECK(stops_growing());
  }
  SUBCASE("the fallback: the supervisor dies, the run is a failure, the daemon escapes") {
    const fallback_forced off(true);
    const kill_at_exit daemon_killed(pid_file);
    const auto m = run(script);
    CHECK(m.status == status::runtime_error);
    CHECK(m.message.rfind("killed by signal 9 (SIGKILL)", 0) == 0);
    CHECK(m.metrics.at("pid_namespace") == 0);
    const auto pid = testing::read_pid(pid_file);
    REQUIRE(pid > 0);
    CHECK_FALSE(testing::process_gone(pid, 0.2));  // the limit docs/gate.md states
    CHECK(still_grows());
  }
}

TEST_CASE("command: a run ends when its tessel is killed") {
  // A process standing for tessel starts a run that would last 300 s, after
  // it left a daemon (a double fork into a session of its own), and is
  // SIGKILLed while it waits: its run's time limit dies with it. In a PID
  // namespace the init gets SIGKILL when tessel goes (PR_SET_PDEATHSIG), and
  // the kernel kills the run with it; in the fallback the supervisor gets
  // SIGHUP, sees that its parent is gone, and kills the command's group and
  // what the run left among its children, as at a normal end. Before, the
  // run and its daemon went on (in the fallback until session 17).
  const auto killed_tessel_ends_its_run = [] {
    const testing::temp_folder folder;
    const auto pid_file = folder.path() / "run.pid";
    const auto daemon_file = folder.path() / "daemon.pid";
    const kill_at_exit run_killed(pid_file), daemon_killed(daemon_file);
    const pid_t tessel_process = ::fork();
    if (tessel_process == 0) {
      (void)run(testing::start_daemon(daemon_file) + "; " + testing::write_own_pid(pid_file) +
                "; exec sleep 300");
      ::_exit(0);
    }
    REQUIRE(tessel_process > 0);
    const pid_t pid = testing::wait_for_pid(pid_file, 1000, 10);
    testing::kill_and_reap(tessel_process);
    REQUIRE(pid > 0);
    CHECK(testing::process_gone(pid));
    const auto daemon = testing::read_pid(daemon_file);
    REQUIRE(daemon > 0);
    CHECK(testing::process_gone(daemon));
  };
  SUBCASE("in a PID namespace") {
    if (!namespaces_allowed()) {
      MESSAGE("skipped: this system allows no PID namespace");
      return;
    }
    killed_tessel_ends_its_run();
  }
  SUBCASE("the fallback: the supervisor alone") {
    const fallback_forced off(true);
    killed_tessel_ends_its_run();
  }
  SUBCASE("the fallback: a SIGHUP the run sends its supervisor is not tessel's end") {
    // The death signal can be sent by anyone of the run's user: the
    // supervisor acts on it only once its parent is another.
    const fallback_forced off(true);
    const auto m = run("kill -HUP $PPID; sleep 0.2; echo 1");
    REQUIRE_MESSAGE(m.ok(), m.message);
    CHECK(m.objective == 1);
    CHECK(m.metrics.at("pid_namespace") == 0);
  }
}

TEST_CASE("command: a run that kills every process it may signal kills only its own") {
  // kill(-1, SIGKILL) reaches every process its user may signal: outside a
  // PID namespace, as root here, every process on the machine (this test,
  // the other tests, everyone's work). So it runs only once a run has been
  // seen to be pid 2 of a namespace of its own, and the command checks that
  // again itself ($$ is 2) before it sends anything.
  if (!namespaces_allowed()) {
    MESSAGE("skipped: this system allows no PID namespace (kill(-1) would reach this machine)");
    return;
  }
  const char* forced = std::getenv("TESSEL_NO_PID_NAMESPACE");
  REQUIRE((forced == nullptr || *forced == '\0'));
  const auto probe = whoami();
  REQUIRE_MESSAGE(probe.ok(), probe.message);
  REQUIRE(probe.metrics.at("pid_namespace") == 1);
  REQUIRE(probe.objective == 2);

  // Another run at the same time, and a process of this test's own: both
  // outlive the kill.
  const pid_t own = ::fork();
  if (own == 0) {
    ::execl("/bin/sleep", "sleep", "30", static_cast<char*>(nullptr));
    ::_exit(127);
  }
  REQUIRE(own > 0);
  measurement other;
  std::thread beside([&] { other = run("sleep 1; echo 5"); });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const auto m = run("[ \"$$\" = 2 ] || exit 99; sleep 100 & /bin/kill -9 -1; sleep 5; echo 1");
  beside.join();
  CHECK(m.status == status::runtime_error);
  CHECK(m.message.rfind("killed by signal 9 (SIGKILL)", 0) == 0);
  REQUIRE_MESSAGE(other.ok(), other.message);
  CHECK(other.objective == 5);
  CHECK(::kill(own, 0) == 0);
  int status = 0;
  CHECK(::waitpid(own, &status, WNOHANG) == 0);  // still running
  ::kill(own, SIGKILL);
  ::waitpid(own, &status, 0);
}
#endif
