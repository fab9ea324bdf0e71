// file_guard_test.cpp: the guard of the reference's files (backends/gated/
// file_guard.hpp): checked by stat, compared byte by byte only when the
// stamps moved, a reset mtime still caught by ctime, and when runs overlap
// only the runs in progress when a change was made blamed for it.
#include "gated/file_guard.hpp"
#include "temp_folder.hpp"

#include <tessel/error.hpp>

#include <doctest/doctest.h>
#include <fmt/format.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace {

namespace fs = std::filesystem;
using tessel::detail::file_guard;
using paths = std::vector<fs::path>;
using tessel::testing::temp_folder;

void write(const fs::path& file, const std::string& bytes) {
  std::ofstream(file, std::ios::binary | std::ios::trunc)
      .write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::string read(const fs::path& file) {
  std::error_code ec;
  std::string bytes(static_cast<std::size_t>(fs::file_size(file, ec)), '\0');
  std::ifstream(file, std::ios::binary)
      .read(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  return ec ? std::string() : bytes;
}

std::size_t asides(const fs::path& dir) {
  std::size_t n = 0;
  for (const auto& entry : fs::directory_iterator(dir))
    if (entry.path().filename().string().find(".changed-") != std::string::npos) ++n;
  return n;
}

/// Past the guard's slack for `file` twice: a change made before is told
/// apart from one made after, and stamps taken after are trusted.
void past_slack(const file_guard& guard, const fs::path& file) {
  std::this_thread::sleep_for(std::chrono::nanoseconds(2 * guard.slack(file)) +
                              std::chrono::milliseconds(5));
}

// A run's checks change the guard (what it kept, what it found): a guard
// held const cannot be watched.
static_assert(std::is_constructible_v<file_guard::run_scope, file_guard*>);
static_assert(!std::is_constructible_v<file_guard::run_scope, const file_guard*>);

/// One run with nothing changed: what it is blamed for.
paths quiet_run(file_guard& guard) {
  file_guard::run_scope run(&guard);
  return run.changed();
}

/// A guard of one file `ref` (8 KB) in `dir`, its stamps trusted.
struct guarded {
  fs::path file;
  file_guard guard;
  std::string bytes = std::string(8192, 'r');
  explicit guarded(const temp_folder& dir) : file(dir.path() / "ref") {
    write(file, bytes);
    guard.add(file);
    past_slack(guard, file);
    (void)quiet_run(guard);  // stamps taken once the ctime is old enough
  }
};

}  // namespace

TEST_CASE("file_guard: a check whose stat matches reads no byte") {
  const temp_folder dir;
  guarded g(dir);
  CHECK(g.guard.slack(g.file) > 0);
  CHECK(g.guard.slack(dir.path() / "other") == 0);  // not guarded
  const auto reads = g.guard.reads();
  for (int i = 0; i < 5; ++i) CHECK(quiet_run(g.guard).empty());
  CHECK(g.guard.reads() == reads);  // ten checks, all by stat
}

TEST_CASE("file_guard: a change during a run is that run's, and is put back") {
  const temp_folder dir;
  guarded g(dir);
  const auto before = g.guard.reads();
  file_guard::run_scope run(&g.guard);
  write(g.file, std::string(8192, 'w'));  // the same size
  CHECK(run.changed() == paths{g.file});
  CHECK(g.guard.reads() == before + 1);
  CHECK(read(g.file) == g.bytes);
  CHECK(asides(dir.path()) == 1);  // what was there, kept beside
  CHECK(run.changed().empty());    // asked once
  CHECK(quiet_run(g.guard).empty());
}

TEST_CASE("file_guard: a deleted file is a change, and is written again") {
  const temp_folder dir;
  guarded g(dir);
  file_guard::run_scope run(&g.guard);
  fs::remove(g.file);
  CHECK(run.changed() == paths{g.file});
  CHECK(read(g.file) == g.bytes);
}

TEST_CASE("file_guard: the same bytes written again are no change, and their stamps are kept") {
  const temp_folder dir;
  guarded g(dir);
  struct stat old {};
  REQUIRE(::stat(g.file.c_str(), &old) == 0);
  const auto before = g.guard.reads();
  {
    file_guard::run_scope run(&g.guard);
    write(g.file, g.bytes);
    CHECK(run.changed().empty());
  }
  CHECK(g.guard.reads() == before + 1);  // compared once
  CHECK(asides(dir.path()) == 0);        // not put back
  struct stat now {};
  REQUIRE(::stat(g.file.c_str(), &now) == 0);
  CHECK(now.st_ino == old.st_ino);
  // The new stamps are kept once the ctime is old enough: read no more.
  past_slack(g.guard, g.file);
  (void)quiet_run(g.guard);
  const auto kept = g.guard.reads();
  CHECK(quiet_run(g.guard).empty());
  CHECK(quiet_run(g.guard).empty());
  CHECK(g.guard.reads() == kept);
}

TEST_CASE("file_guard: an mtime set back (touch -d) is caught by ctime") {
  const temp_folder dir;
  guarded g(dir);
  struct stat old {};
  REQUIRE(::stat(g.file.c_str(), &old) == 0);
  file_guard::run_scope run(&g.guard);
  write(g.file, std::string(8192, 'w'));
  const timespec times[2] = {old.st_atim, old.st_mtim};
  REQUIRE(::utimensat(AT_FDCWD, g.file.c_str(), times, 0) == 0);
  struct stat now {};
  REQUIRE(::stat(g.file.c_str(), &now) == 0);
  REQUIRE(now.st_size == old.st_size);  // size, mtime, inode as they were: only ctime moved
  REQUIRE(now.st_mtim.tv_sec == old.st_mtim.tv_sec);
  REQUIRE(now.st_mtim.tv_nsec == old.st_mtim.tv_nsec);
  REQUIRE(now.st_ino == old.st_ino);
  CHECK(run.changed() == paths{g.file});
  CHECK(read(g.file) == g.bytes);
}

TEST_CASE("file_guard: when runs overlap, only the runs in progress at the change are blamed") {
  const temp_folder dir;
  guarded g(dir);
  const auto changed = std::string(8192, 'w');

  SUBCASE("a change found by a later run's first check is the earlier run's") {
    // Before: the later run's check put the file back as "by no run", and the
    // run that made the change was never told.
    file_guard::run_scope a(&g.guard);
    past_slack(g.guard, g.file);
    write(g.file, changed);  // by a's process
    past_slack(g.guard, g.file);
    file_guard::run_scope b(&g.guard);  // finds it, puts it back
    CHECK(read(g.file) == g.bytes);
    past_slack(g.guard, g.file);
    CHECK(b.changed().empty());
    CHECK(a.changed() == paths{g.file});
  }
  SUBCASE("a change found by a third run's check is the run in progress, not one that ended") {
    file_guard::run_scope a(&g.guard);
    file_guard::run_scope b(&g.guard);
    past_slack(g.guard, g.file);
    CHECK(a.changed().empty());  // ended before the change
    past_slack(g.guard, g.file);
    write(g.file, changed);  // by b's process
    past_slack(g.guard, g.file);
    file_guard::run_scope c(&g.guard);  // finds it
    past_slack(g.guard, g.file);
    CHECK(c.changed().empty());  // started after it
    CHECK(b.changed() == paths{g.file});
  }
  SUBCASE("a run that ends after the change finds it for the run that made it") {
    file_guard::run_scope a(&g.guard);
    past_slack(g.guard, g.file);
    file_guard::run_scope b(&g.guard);
    past_slack(g.guard, g.file);
    write(g.file, changed);  // both in progress: both blamed, neither can be cleared
    past_slack(g.guard, g.file);
    CHECK(b.changed() == paths{g.file});
    past_slack(g.guard, g.file);
    file_guard::run_scope c(&g.guard);
    CHECK(c.changed().empty());
    CHECK(a.changed() == paths{g.file});
  }
  CHECK(quiet_run(g.guard).empty());
}

TEST_CASE("file_guard: add() refuses a file it cannot keep, with a clear error") {
  const temp_folder dir;
  file_guard guard;
  const auto refused = [&guard](const fs::path& file) -> std::string {
    try {
      guard.add(file);
    } catch (const tessel::error& e) {
      return e.what();
    }
    return "";
  };
  CHECK(refused(dir.path() / "missing") ==
        fmt::format("cannot read {} to guard it", (dir.path() / "missing").string()));
  const auto big = dir.path() / "big";
  write(big, "");
  fs::resize_file(big, file_guard::max_bytes + 1);  // sparse: nothing written
  const auto message = refused(big);
  CHECK(message.starts_with(fmt::format(
      "cannot guard {} (its bytes are kept in memory, at most 1024 MiB): ", big.string())));
  CHECK(message.find("1073741825 bytes") != std::string::npos);
  CHECK(guard.empty());
  CHECK(quiet_run(guard).empty());
  file_guard::run_scope none(nullptr);  // no guard: watches nothing
  CHECK(none.changed().empty());
}

TEST_CASE(
    "file_guard: a page written through a shared mapping is caught after its stamps stop moving") {
  // Linux stamps a write through a shared writable mapping at the page's
  // first write fault only: a run that wrote the page once (the same bytes)
  // can write it again with no stamp moving. Stamps seen while it is in
  // progress are not taken for the bytes.
  const temp_folder dir;
  guarded g(dir);
  file_guard::run_scope a(&g.guard);
  const int fd = ::open(g.file.c_str(), O_RDWR);
  REQUIRE(fd >= 0);
  void* map = ::mmap(nullptr, g.bytes.size(), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  REQUIRE(map != MAP_FAILED);
  auto* page = static_cast<char*>(map);
  page[0] = 'r';  // the same byte: the page is dirty and writable now
  past_slack(g.guard, g.file);
  CHECK(quiet_run(g.guard).empty());  // a check while `a` is in progress: the same bytes
  page[0] = 'w';                      // no fault, no stamp
  CHECK(quiet_run(g.guard).empty());  // neither run in progress at the change: not blamed
  CHECK(read(g.file) == g.bytes);     // put back
  CHECK(a.changed() == paths{g.file});
  ::munmap(map, g.bytes.size());
  ::close(fd);
}
