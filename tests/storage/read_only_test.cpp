// A study file opened to read (store_access::read: show, export, report)
// and study paths that name no regular file. Files a process may not write
// are in tests/cli/special_files_test.cpp, which drops root to test them.
#include "storage_fixtures.hpp"

#include <tessel/error.hpp>
#include <tessel/files.hpp>
#include <tessel/storage.hpp>

#include <doctest/doctest.h>

#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

using namespace tessel;
using namespace tessel::testing;

namespace {

/// A study file holding the record and `n` finished trials, closed.
void write_study(const std::filesystem::path& path, std::uint64_t n) {
  const auto s = storage_space();
  sqlite_store db(path);
  db.begin(storage_record(s));
  for (std::uint64_t id = 1; id <= n; ++id) db.save(storage_trial(s, id, trial_state::finished), s);
}

}  // namespace

TEST_CASE("a study file opened to read reads everything and changes nothing") {
  const temp_folder dir;
  const auto path = dir.file("x.tessel.db");
  const auto s = storage_space();
  write_study(path, 5);
  const auto before = read_file(path);
  {
    const auto db = open_store(path.string(), store_access::read);
    REQUIRE(db->study().has_value());
    CHECK(db->study()->space_hash == storage_record(s).space_hash);
    CHECK(db->trial_count() == 5);
    const auto trials = db->load(s);
    REQUIRE(trials.size() == 5);
    check_same_trial(trials[4], storage_trial(s, 5, trial_state::finished));
    CHECK_NOTHROW(db->check_integrity());
    // Every write is refused, naming the file and why.
    const std::string refused = "study file '" + path.string() + "'";
    CHECK_THROWS_WITH_AS(db->save(storage_trial(s, 6, trial_state::finished), s),
                         doctest::Contains(refused.c_str()), error);
    CHECK_THROWS_WITH_AS(db->save(storage_trial(s, 6, trial_state::finished), s),
                         doctest::Contains("it was opened to read"), error);
    CHECK_THROWS_WITH_AS(db->claim_writer(), doctest::Contains("was opened to read"), error);
    CHECK_FALSE(std::filesystem::exists(path.string() + "-lock"));
  }
  CHECK(read_file(path) == before);
  CHECK(sqlite_store(path).trial_count() == 5);
}

TEST_CASE("a reader sees the trials a live writer has committed (its journal is followed)") {
  const temp_folder dir;
  const auto path = dir.file("live.tessel.db");
  const auto s = storage_space();
  sqlite_store writer(path);
  writer.claim_writer();
  writer.begin(storage_record(s));
  for (std::uint64_t id = 1; id <= 3; ++id)
    writer.save(storage_trial(s, id, trial_state::finished), s);
  REQUIRE(std::filesystem::exists(path.string() + "-wal"));
  const sqlite_store reader(path, store_access::read);  // no writer's claim needed
  CHECK(reader.load(s).size() == 3);
  writer.save(storage_trial(s, 4, trial_state::finished), s);
  CHECK(reader.load(s).size() == 4);
}

TEST_CASE("opened to read: a missing file, an empty one and a path with URI characters") {
  const temp_folder dir;
  const auto missing = dir.file("none.db");
  CHECK_THROWS_WITH_AS((void)open_store(missing.string(), store_access::read),
                       ("no study file '" + missing.string() + "'").c_str(), error);
  CHECK_FALSE(std::filesystem::exists(missing));  // never created
  const auto empty = dir.file("empty.db");
  std::ofstream{empty};
  CHECK_THROWS_WITH_AS(sqlite_store(empty, store_access::read),
                       ("study file '" + empty.string() + "' holds no study yet").c_str(), error);
  CHECK(std::filesystem::file_size(empty) == 0);
  // SQLite reads a read-only file through a URI: '?', '#' and '%' are escaped.
  const auto odd = dir.file("a?b#c%20d.db");
  write_study(odd, 2);
  CHECK(sqlite_store(odd, store_access::read).trial_count() == 2);
  CHECK_FALSE(std::filesystem::exists(dir.file("a")));
}

TEST_CASE("a study path that names no regular file is refused at once, naming it") {
  const temp_folder dir;
  const auto fifo = dir.file("pipe.db");
  REQUIRE(::mkfifo(fifo.c_str(), 0644) == 0);
  const auto is_pipe =
      "study file '" + fifo.string() + "' is a pipe: a study file is a regular file";
  CHECK_THROWS_WITH_AS(sqlite_store{fifo}, doctest::Contains(is_pipe.c_str()), error);
  CHECK_THROWS_WITH_AS(sqlite_store(fifo, store_access::read), doctest::Contains(is_pipe.c_str()),
                       error);
  CHECK_THROWS_WITH_AS(sqlite_store{"/dev/null"},
                       doctest::Contains("study file '/dev/null' is a character device"), error);
  const auto folder = dir.file("folder.db");
  std::filesystem::create_directory(folder);
  CHECK_THROWS_WITH_AS(sqlite_store{folder},
                       ("study file '" + folder.string() + "' is a directory, not a file").c_str(),
                       error);
  const auto link = dir.file("dangling.db");
  std::filesystem::create_symlink(dir.file("gone/x.db"), link);
  CHECK_THROWS_WITH_AS(sqlite_store{link},
                       ("study file '" + link.string() + "' is a symbolic link to '" +
                        dir.file("gone/x.db").string() + "', which does not exist")
                           .c_str(),
                       error);
  CHECK_FALSE(std::filesystem::exists(dir.file("gone")));
}
