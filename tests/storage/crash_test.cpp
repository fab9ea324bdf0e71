// Durability: a child process saves trials in a loop and is killed with
// SIGKILL at random moments; every trial it reported as saved (after save()
// returned) must be in the file, intact, and the file must not be corrupt.
#include "storage_fixtures.hpp"

#include <tessel/storage.hpp>

#include <doctest/doctest.h>

#if defined(__unix__) || defined(__APPLE__)

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <random>
#include <set>
#include <thread>

using namespace tessel;
using namespace tessel::testing;

namespace {

/// The child: proposes, starts and finishes trials 1, 2, ... and writes
/// each id to `out` once its finished state is saved. Never returns.
[[noreturn]] void writer_child(const std::filesystem::path& path, int out) {
  try {
    const auto s = storage_space();
    sqlite_store db(path);
    db.begin(storage_record(s));
    for (std::uint64_t id = 1; id < 1'000'000; ++id) {
      db.save(storage_trial(s, id, trial_state::proposed), s);
      db.save(storage_trial(s, id, trial_state::running), s);
      db.save(storage_trial(s, id), s);
      if (write(out, &id, sizeof id) != sizeof id) _exit(3);
    }
  } catch (...) {
    _exit(2);
  }
  _exit(0);
}

/// Reads one id from the pipe; false at end of file.
bool read_id(int in, std::uint64_t& id) {
  char* p = reinterpret_cast<char*>(&id);
  std::size_t got = 0;
  while (got < sizeof id) {
    const auto n = read(in, p + got, sizeof id - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    got += static_cast<std::size_t>(n);
  }
  return true;
}

}  // namespace

TEST_CASE("a writer killed at random moments loses no saved trial") {
  const auto s = storage_space();
  std::mt19937 random(20261129);
  // How many saves to wait for before the kill, then a random extra delay.
  const std::uint64_t waits[] = {1, 2, 5, 13, 40, 90};
  for (const auto wait : waits) {
    const temp_folder dir;
    const auto path = dir.file("crash.tessel.db");
    int fds[2];
    REQUIRE(pipe(fds) == 0);
    const pid_t child = fork();
    REQUIRE(child >= 0);
    if (child == 0) {
      close(fds[0]);
      writer_child(path, fds[1]);
    }
    close(fds[1]);

    std::set<std::uint64_t> reported;
    std::uint64_t id = 0;
    while (reported.size() < wait && read_id(fds[0], id)) reported.insert(id);
    const auto delay = std::uniform_int_distribution<int>(0, 4000)(random);
    std::this_thread::sleep_for(std::chrono::microseconds(delay));
    REQUIRE(kill(child, SIGKILL) == 0);
    int wstatus = 0;
    REQUIRE(waitpid(child, &wstatus, 0) == child);
    while (read_id(fds[0], id)) reported.insert(id);  // written before the kill
    close(fds[0]);

    INFO("waited for ", wait, " saves, then ", delay, " us; child reported ", reported.size());
    REQUIRE(WIFSIGNALED(wstatus));
    CHECK(WTERMSIG(wstatus) == SIGKILL);
    REQUIRE(reported.size() >= wait);

    sqlite_store db(path);  // recovers the WAL of the killed writer
    CHECK_NOTHROW(db.check_integrity());
    REQUIRE(db.study().has_value());
    CHECK(db.study()->space_hash == storage_record(s).space_hash);
    const auto loaded = db.load(s);
    std::set<std::uint64_t> finished;
    for (std::size_t i = 0; i < loaded.size(); ++i) {
      const auto& t = loaded[i];
      CHECK(t.id == i + 1);  // no gaps: trials were saved in id order
      // Every stored trial is one of the states the child wrote, whole.
      check_same_trial(t, storage_trial(s, t.id, t.state));
      if (t.state == trial_state::finished)
        finished.insert(t.id);
      else
        CHECK(i + 1 == loaded.size());  // only the last may be unfinished
    }
    for (const auto r : reported) CHECK(finished.count(r) == 1);
  }
}

#endif
