// Paths that name something other than a file tessel may read and write: a
// study file this user may not write (chmod 444, a folder of mode 555), a
// FIFO that nothing writes to or reads from, a folder, /dev/null, a dangling
// symbolic link. Each is a clear error at once (under `timeout`, so a hang
// fails the test), or works where only reading is asked; nothing stored is
// lost or changed. Tests run as root, who may write any file: the commands
// that must not write run as user `nobody` (setpriv) when the test is root.
#include "tool.hpp"

#include <doctest/doctest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <iterator>
#include <string>

using namespace cli_testing;
namespace fs = std::filesystem;

namespace {

const std::string bowl = "--backend 'command:fixtures/bowl.sh'";

/// A fresh folder under the test's work folder, readable by every user.
fs::path fresh_folder(const std::string& name) {
  const fs::path dir = fs::path(work_folder) / (name + "_" + std::to_string(::getpid()));
  if (fs::exists(dir)) fs::permissions(dir, fs::perms::all);  // a folder of mode 555 left behind
  fs::remove_all(dir);
  fs::create_directories(dir);
  fs::permissions(dir, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                           fs::perms::others_read | fs::perms::others_exec);
  return dir;
}

/// `tessel ARGS` under a 20 s limit, as a user who is not root (nobody, when
/// the test runs as root), so that file modes are enforced.
result as_user(const std::string& args) {
  const std::string drop =
      ::geteuid() == 0 ? "setpriv --reuid=65534 --regid=65534 --clear-groups " : "";
  return run_tessel("timeout 20 " + drop, args, "");
}

/// `tessel ARGS` under a 20 s limit.
result limited(const std::string& args) { return run_tessel("timeout 20 ", args, ""); }

/// A study of 6 trials of fixtures/small.tsl in `db`.
void make_study(const fs::path& db) {
  const auto r = tessel("tune fixtures/small.tsl " + bowl + " --budget 6 --seed 3 --quiet --db '" +
                        db.string() + "'");
  REQUIRE(r.code == 0);
}

/// Every command that only reads the study file `db` works, and every one
/// that would write it is refused at once, naming the file; the file is
/// unchanged and nothing is made beside it.
void check_read_only(const fs::path& db, const std::string& cause) {
  const std::string quoted = "'" + db.string() + "'";
  const auto before = read_text(db.string());
  const auto beside = std::distance(fs::directory_iterator(db.parent_path()), {});
  auto r = as_user("show " + quoted);
  CHECK(r.code == 0);
  CHECK(contains(r.out, "6 finished"));
  r = as_user("export " + quoted + " --format json");
  CHECK(r.code == 0);
  CHECK(std::count(r.out.begin(), r.out.end(), '\n') == 6);
  r = as_user("report " + quoted + " --format svg --plot convergence");
  CHECK(r.code == 0);
  CHECK(contains(r.out, "<svg"));
  r = as_user("check --suggest-constraints " + quoted);
  CHECK(r.code == 0);
  for (const std::string& writer :
       {"tune fixtures/small.tsl " + bowl + " --budget 12 --resume --db " + quoted,
        "tune fixtures/small.tsl " + bowl + " --budget 12 --overwrite --db " + quoted,
        "serve fixtures/small.tsl --resume --db " + quoted + " < /dev/null"}) {
    r = as_user(writer);
    CHECK(r.code == 1);
    CHECK(contains(r.err, "study file " + quoted + ": " + cause));
    CHECK_FALSE(contains(r.out, "evaluations"));  // refused before any was spent
  }
  CHECK(read_text(db.string()) == before);
  CHECK(std::distance(fs::directory_iterator(db.parent_path()), {}) == beside);
}

}  // namespace

TEST_CASE("a study file this user may not write: readers work, writers are refused at once") {
  // Before: show, export and report failed ("attempt to write a readonly
  // database": opening took a write lock), and tune --resume opened it, then
  // failed on its first write.
  const auto dir = fresh_folder("read_only_file");
  const auto db = dir / "x.tessel.db";
  make_study(db);
  fs::permissions(dir, fs::perms::all);  // the folder is writable by all; the file is not
  fs::permissions(db, fs::perms::owner_read | fs::perms::group_read | fs::perms::others_read);
  check_read_only(db, "this process may not write it (Permission denied)");
  fs::permissions(dir, fs::perms::owner_all);
}

TEST_CASE("a study file in a folder this user may not write: read as it is, never written") {
  // SQLite cannot make the -shm index beside it, so a reader opens it as
  // immutable; a writer is refused naming the folder.
  const auto dir = fresh_folder("read_only_folder");
  const auto db = dir / "x.tessel.db";
  make_study(db);
  fs::permissions(db, fs::perms::all);  // the file is writable by all; the folder is not,
  // not even by its owner: the test's user when it is not root (scripts/test_nonroot)
  fs::permissions(dir, fs::perms::owner_write, fs::perm_options::remove);
  check_read_only(db, "cannot write in its folder '" + dir.string() + "' (Permission denied)");
  fs::permissions(dir, fs::perms::owner_all);
}

TEST_CASE("a FIFO that nothing writes to or reads from is an error at once, never a hang") {
  const auto dir = fresh_folder("fifo");
  const auto fifo = dir / "pipe";
  REQUIRE(::mkfifo(fifo.c_str(), 0644) == 0);
  const std::string quoted = "'" + fifo.string() + "'";
  const std::string no_writer = quoted + " is a pipe that nothing writes to";
  // Before: each of these blocked in open() until something wrote.
  auto r = limited("check " + quoted);
  CHECK(r.code == 1);
  CHECK(contains(r.err, no_writer));
  r = limited("tune " + quoted + " --backend sim --no-db");
  CHECK(r.code == 1);
  CHECK(contains(r.err, no_writer));
  r = limited("explain ../../examples/rmsnorm.tsl --config @" + quoted);
  CHECK(r.code == 1);
  CHECK(contains(r.err, "--config: " + no_writer));
  // As a study file: refused by its type, read or written.
  const std::string not_study =
      "study file " + quoted + " is a pipe: a study file is a regular file";
  r = limited("tune fixtures/small.tsl " + bowl + " --budget 3 --db " + quoted);
  CHECK(r.code == 1);
  CHECK(contains(r.err, not_study));
  r = limited("show " + quoted);
  CHECK(r.code == 1);
  CHECK(contains(r.err, not_study));
  // As an output: nothing reads from it. Before: blocked in open().
  const auto db = dir / "x.tessel.db";
  make_study(db);
  r = limited("export '" + db.string() + "' --format csv -o " + quoted);
  CHECK(r.code == 1);
  CHECK(contains(r.err, quoted + " is a pipe that nothing reads from"));
  r = limited("report '" + db.string() + "' -o " + quoted);
  CHECK(r.code == 1);
  CHECK(contains(r.err, quoted + " is a pipe that nothing reads from"));
  r = limited("explain ../../examples/matmul.tsl --config '{\"tile_k\": 128}' --trace " + quoted);
  CHECK(r.code == 1);
  CHECK(contains(r.err, "sim: the trace: " + quoted + " is a pipe that nothing reads from"));
}

TEST_CASE("a FIFO with something at its other end is read and written as before") {
  const auto dir = fresh_folder("fifo_live");
  const auto fifo = dir / "pipe";
  REQUIRE(::mkfifo(fifo.c_str(), 0644) == 0);
  const std::string quoted = "'" + fifo.string() + "'";
  // A writer waiting in open() when tessel opens the FIFO.
  auto r = run_tessel("(cat fixtures/small.tsl > " + quoted + " &) && sleep 1 && timeout 20 ",
                      "check " + quoted + " --sample 0", "");
  CHECK(r.code == 0);
  CHECK(contains(r.out, "small (" + fifo.string() + ")"));
  // A reader waiting in open() when tessel writes to it.
  const auto db = dir / "x.tessel.db";
  make_study(db);
  const auto copy = dir / "copy.csv";
  r = run_tessel("(cat " + quoted + " > '" + copy.string() + "' &) && sleep 1 && timeout 20 ",
                 "export '" + db.string() + "' --format csv -o " + quoted, " && sleep 1");
  CHECK(r.code == 0);
  const auto csv = read_text(copy.string());
  CHECK(std::count(csv.begin(), csv.end(), '\n') == 7);
}

TEST_CASE("a folder, /dev/null and a dangling symbolic link as a study file or an output") {
  const auto dir = fresh_folder("special");
  const auto db = dir / "x.tessel.db";
  make_study(db);
  const std::string study = "'" + db.string() + "'";
  const auto link = dir / "dangling";
  fs::create_symlink(dir / "gone" / "x", link);
  const std::string dangling = "'" + link.string() + "' is a symbolic link to '" +
                               (dir / "gone" / "x").string() + "', which does not exist";
  const std::string folder = "'" + dir.string() + "' is a directory, not a file";
  auto r = limited("tune fixtures/small.tsl " + bowl + " --budget 3 --db '" + dir.string() + "'");
  CHECK(r.code == 1);
  CHECK(contains(r.err, "study file " + folder));
  r = limited("tune fixtures/small.tsl " + bowl + " --budget 3 --db /dev/null");
  CHECK(r.code == 1);
  CHECK(contains(r.err, "study file '/dev/null' is a character device: a study file is a regular"));
  r = limited("show '" + link.string() + "'");
  CHECK(r.code == 1);
  CHECK(contains(r.err, "study file " + dangling));
  r = limited("export " + study + " -o '" + dir.string() + "'");
  CHECK(r.code == 1);
  CHECK(contains(r.err, folder));
  r = limited("export " + study + " -o '" + link.string() + "'");
  CHECK(r.code == 1);
  CHECK(contains(r.err, dangling));
  CHECK_FALSE(fs::exists(dir / "gone"));
  // /dev/null takes what is written to it: an output a user discards.
  CHECK(limited("export " + study + " -o /dev/null").code == 0);
  CHECK(limited("report " + study + " -o /dev/null").code == 0);
}
