// The study file's writer lock (issue 15): one process writes a study at a
// time; a second writer is refused with a message naming the holder, the lock
// goes with its holder however that ends (kill -9 included), and clear()
// empties a file for a new study.
#include "storage_fixtures.hpp"

#include <tessel/error.hpp>
#include <tessel/storage.hpp>

#include <doctest/doctest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

using namespace tessel;
using namespace tessel::testing;

namespace {

/// In a child process: claims the writer lock on `path`, then exits 0 if it
/// got it, 1 if it was refused (or sleeps `hold_s` holding it, when given).
pid_t claim_in_child(const std::filesystem::path& path, double hold_s = 0) {
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    int code = 0;
    try {
      sqlite_store db(path);
      db.claim_writer();
      if (hold_s > 0) std::this_thread::sleep_for(std::chrono::duration<double>(hold_s));
    } catch (const error&) {
      code = 1;
    }
    _exit(code);
  }
  return pid;
}

int exit_code_of(pid_t pid) {
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

}  // namespace

TEST_CASE("a second writer is refused, in this process or another, until the first is gone") {
  const temp_folder dir;
  const auto path = dir.file("writers.tessel.db");
  const auto lock_file = path.string() + "-lock";
  {
    sqlite_store first(path);
    first.claim_writer();
    first.claim_writer();  // again: the same connection already holds it
    CHECK(std::filesystem::exists(lock_file));
    sqlite_store second(path);
    const auto refusal =
        "is being written by another tessel process (pid " + std::to_string(getpid()) + " on host";
    CHECK_THROWS_WITH_AS(second.claim_writer(), doctest::Contains(refusal.c_str()), error);
    CHECK(exit_code_of(claim_in_child(path)) == 1);
    // Readers need no lock.
    CHECK(second.trial_count() == 0);
  }
  CHECK_FALSE(std::filesystem::exists(lock_file));  // released and removed
  CHECK(exit_code_of(claim_in_child(path)) == 0);
  sqlite_store again(path);
  CHECK_NOTHROW(again.claim_writer());
}

TEST_CASE("a writer killed with -9 releases the lock") {
  const temp_folder dir;
  const auto path = dir.file("killed_writer.tessel.db");
  { sqlite_store create(path); }  // the file exists before the child races for it
  const pid_t holder = claim_in_child(path, 30);
  // Wait until the child holds it: its lock file names it.
  const auto lock_file = path.string() + "-lock";
  const auto holder_text = "pid " + std::to_string(holder) + " ";
  bool held = false;
  for (int i = 0; i < 1000 && !held; ++i) {
    std::ifstream in(lock_file);
    std::string line;
    held = std::getline(in, line) && line.rfind(holder_text, 0) == 0;
    if (!held) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  REQUIRE(held);
  sqlite_store blocked(path);
  CHECK_THROWS_AS(blocked.claim_writer(), error);
  kill(holder, SIGKILL);
  waitpid(holder, nullptr, 0);
  sqlite_store after(path);
  CHECK_NOTHROW(after.claim_writer());
}

TEST_CASE("clear() empties a study file for a new study, and needs the writer lock") {
  const temp_folder dir;
  const auto path = dir.file("clear.tessel.db");
  const auto s = storage_space();
  sqlite_store db(path);
  CHECK_THROWS_WITH_AS(db.clear(), doctest::Contains("needs the writer lock"), error);
  db.claim_writer();
  db.begin(storage_record(s));
  db.save(storage_trial(s, 1), s);
  db.save(storage_trial(s, 2), s);
  CHECK(db.trial_count() == 2);
  db.clear();
  CHECK(db.trial_count() == 0);
  CHECK_FALSE(db.study());
}
