// A throwaway PostgreSQL cluster for the tests: scripts/pg_cluster starts it
// on a free loopback port at the first use in a test program, and stops it
// (deleting its folder) when the program ends, however it ends: a watchdog
// process waits on a pipe that closes when this process is gone, then stops
// the cluster. Each test names its own study (a PostgreSQL schema), so tests
// share one server without seeing each other's data.
//
// When the server cannot start, PG_CLUSTER_OR_SKIP() skips the test with
// the reason; with TESSEL_REQUIRE_POSTGRES=1 in the environment (CI:
// scripts/test sets it) it fails instead.
#pragma once

#include <doctest/doctest.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>
#include <array>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#ifndef TESSEL_SOURCE_DIR
#error "pg_cluster.hpp needs TESSEL_SOURCE_DIR (tests/CMakeLists.txt defines it)"
#endif

namespace tessel::testing {

class pg_cluster {
 public:
  /// This program's cluster, started at the first call.
  static pg_cluster& instance() {
    static pg_cluster cluster;
    return cluster;
  }

  [[nodiscard]] bool running() const { return !url_.empty(); }
  /// Why the cluster did not start (the script's message).
  [[nodiscard]] const std::string& why_not() const { return why_not_; }
  /// postgresql://tessel@127.0.0.1:PORT/tessel
  [[nodiscard]] const std::string& url() const { return url_; }
  /// The URL of a study of its own: `prefix` plus a number unique in this
  /// program, as the PostgreSQL schema.
  [[nodiscard]] std::string study_url(const std::string& prefix) const {
    static std::atomic<int> counter{0};
    return url_ + "?study=" + prefix + "_" + std::to_string(counter++);
  }
  /// Stops the server abruptly (as a crash) and starts it again on its port.
  void restart() const { (void)run(script() + " restart " + dir_.string() + " 2>&1"); }
  /// Runs `sql` through psql against the cluster's database; its output.
  [[nodiscard]] std::string psql(const std::string& sql) const {
    return run("psql -qAtX '" + url_ + "' -c \"" + sql + "\" 2>&1");
  }

  ~pg_cluster() {
    if (watchdog_ < 0) return;
    ::close(pipe_write_);  // the watchdog stops the cluster ...
    int status = 0;
    ::waitpid(watchdog_, &status, 0);  // ... before this program exits
  }
  pg_cluster(const pg_cluster&) = delete;
  pg_cluster& operator=(const pg_cluster&) = delete;

 private:
  pg_cluster() {
    dir_ = std::filesystem::temp_directory_path() / ("tessel_pg_" + std::to_string(::getpid()));
    const auto out = run(script() + " start " + dir_.string() + " 2>&1");
    if (out.rfind("postgresql://", 0) != 0) {
      why_not_ = out.empty() ? "scripts/pg_cluster printed nothing" : out;
      std::error_code ignored;
      std::filesystem::remove_all(dir_, ignored);
      return;
    }
    url_ = out;
    start_watchdog();
  }

  static std::string script() { return std::string(TESSEL_SOURCE_DIR) + "/scripts/pg_cluster"; }

  /// stdout of `command`, without the trailing newline.
  static std::string run(const std::string& command) {
    std::string out;
    if (FILE* p = ::popen(command.c_str(), "r")) {
      std::array<char, 512> buffer{};
      while (std::fgets(buffer.data(), buffer.size(), p)) out += buffer.data();
      ::pclose(p);
    }
    while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
    return out;
  }

  void start_watchdog() {
    int fds[2];
    if (::pipe(fds) != 0) return;
    const std::string stop = script();
    const std::string dir = dir_.string();
    watchdog_ = ::fork();
    if (watchdog_ == 0) {
      // Out of the test's process group, deaf to the signals that stop it:
      // a test killed by a timeout or ^C still has its cluster stopped.
      ::setsid();
      ::signal(SIGINT, SIG_IGN);
      ::signal(SIGTERM, SIG_IGN);
      ::signal(SIGHUP, SIG_IGN);
      ::close(fds[1]);
      char byte = 0;
      while (::read(fds[0], &byte, 1) > 0) {
      }
      ::execl(stop.c_str(), stop.c_str(), "stop", dir.c_str(), static_cast<char*>(nullptr));
      ::_exit(127);
    }
    ::close(fds[0]);
    ::fcntl(fds[1], F_SETFD, FD_CLOEXEC);  // programs the tests start do not hold it open
    pipe_write_ = fds[1];
  }

  std::filesystem::path dir_;
  std::string url_, why_not_;
  pid_t watchdog_ = -1;
  int pipe_write_ = -1;
};

/// Whether the tests must have the server (CI), not skip without one.
inline bool postgres_required() {
  const char* v = std::getenv("TESSEL_REQUIRE_POSTGRES");
  return v && std::string(v) == "1";
}

}  // namespace tessel::testing

/// At the start of a test that needs the server: skips it, with the reason,
/// when the cluster could not start (fails it under TESSEL_REQUIRE_POSTGRES=1).
#define PG_CLUSTER_OR_SKIP()                                                                 \
  do {                                                                                       \
    const auto& pg_cluster_ = ::tessel::testing::pg_cluster::instance();                     \
    if (!pg_cluster_.running()) {                                                            \
      if (::tessel::testing::postgres_required())                                            \
        FAIL("no PostgreSQL server (TESSEL_REQUIRE_POSTGRES=1): " << pg_cluster_.why_not()); \
      MESSAGE("skipped: no PostgreSQL server: " << pg_cluster_.why_not());                   \
      return;                                                                                \
    }                                                                                        \
  } while (false)
