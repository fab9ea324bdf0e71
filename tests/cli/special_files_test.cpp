// Paths that name something other than a file tessel may read and write: a
// study file this user may not write (chmod 444, a folder of mode 555), a
// FIFO that nothing writes to or reads from, a folder, /dev/null, a dangling
// symbolic link. Each is a clear error at once (under `timeout`, so a hang
// fails the test), or works where only reading is asked; nothing stored is
// lost or changed. Tests run as root, who may write any file: the commands
// that must not write run as user `nobody` (setpriv) when the test is root.
#include "tool.hpp"

#include <doctest/doctest.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <filesystem>
#include <iterator>
#include <string>
#include <thread>

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

/// The other end of the FIFO `fifo`: a child process that opens it, to
/// write `text` into it (O_WRONLY) or to copy what it reads to `copy`
/// (O_RDONLY). Made once the child waits in that open(), which /proc says
/// (its syscall: openat): what the test runs next finds it waiting there,
/// however loaded the machine (a sleep, before, could end first).
class fifo_end {
 public:
  fifo_end(const fs::path& fifo, int flags, const std::string& text, const fs::path& copy = {})
      : pid_(::fork()) {
    REQUIRE(pid_ >= 0);
    if (pid_ == 0) {  // open, read, write and _exit only: async-signal-safe after fork
      const int fd = ::open(fifo.c_str(), flags | O_CLOEXEC);
      const int to = flags == O_RDONLY
                         ? ::open(copy.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644)
                         : fd;
      std::array<char, 4096> block{};
      if (fd < 0 || to < 0) ::_exit(1);
      if (flags == O_WRONLY) ::_exit(write_all(fd, text.data(), text.size()) ? 0 : 2);
      for (ssize_t n = 0; (n = ::read(fd, block.data(), block.size())) > 0;)
        if (!write_all(to, block.data(), static_cast<std::size_t>(n))) ::_exit(2);
      ::_exit(0);
    }
    // 20 s: a bound for a child that never gets there, not a timing.
    const auto path = "/proc/" + std::to_string(pid_) + "/syscall";
    const auto opening = std::to_string(SYS_openat) + " ";
    for (int i = 0; i < 20000 && read_text(path).rfind(opening, 0) != 0; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    REQUIRE_MESSAGE(read_text(path).rfind(opening, 0) == 0, "never waited in open(): ", path);
  }
  fifo_end(const fifo_end&) = delete;
  fifo_end& operator=(const fifo_end&) = delete;
  ~fifo_end() {
    if (pid_ > 0 && ::waitpid(pid_, nullptr, WNOHANG) == 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }
  /// Waits for it to finish (20 s at most); true when it read or wrote all.
  bool finished() {
    int status = 0;
    for (int i = 0; i < 20000; ++i, std::this_thread::sleep_for(std::chrono::milliseconds(1)))
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return WIFEXITED(status) && WEXITSTATUS(status) == 0;
      }
    return false;
  }

 private:
  static bool write_all(int fd, const char* data, std::size_t size) {
    while (size > 0) {
      const auto n = ::write(fd, data, size);
      if (n <= 0) return false;
      data += n;
      size -= static_cast<std::size_t>(n);
    }
    return true;
  }
  pid_t pid_;
};

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
  {
    fifo_end writer(fifo, O_WRONLY,
                    read_text(std::string(TESSEL_CLI_TESTS_DIR) + "/fixtures/small.tsl"));
    const auto r = limited("check " + quoted + " --sample 0");
    CHECK(r.code == 0);
    CHECK(contains(r.out, "small (" + fifo.string() + ")"));
    CHECK(writer.finished());
  }
  // A reader waiting in open() when tessel writes to it.
  const auto db = dir / "x.tessel.db";
  make_study(db);
  const auto copy = dir / "copy.csv";
  fifo_end reader(fifo, O_RDONLY, "", copy);
  const auto r = limited("export '" + db.string() + "' --format csv -o " + quoted);
  CHECK(r.code == 0);
  REQUIRE(reader.finished());  // it has read to the end and written all it read
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
