// The study file: round trips of every field, state updates, the study
// record and its hash check, errors for files that are not study files, and
// concurrent writers.
#include "storage_fixtures.hpp"

#include <tessel/error.hpp>
#include <tessel/storage.hpp>

#include <doctest/doctest.h>
#include <sqlite3.h>

#include <ctime>
#include <fstream>
#include <limits>
#include <map>
#include <thread>

using namespace tessel;
using namespace tessel::testing;

namespace {

/// Runs SQL on the file with a connection of its own (to tamper with it).
void raw_sql(const std::filesystem::path& path, const char* sql) {
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open(path.string().c_str(), &db) == SQLITE_OK);
  char* message = nullptr;
  const int rc = sqlite3_exec(db, sql, nullptr, nullptr, &message);
  INFO((message ? message : ""));
  sqlite3_free(message);
  sqlite3_close(db);
  REQUIRE(rc == SQLITE_OK);
}

std::map<std::uint64_t, trial> by_id(const std::vector<trial>& trials) {
  std::map<std::uint64_t, trial> out;
  for (const auto& t : trials) out.emplace(t.id, t);
  return out;
}

}  // namespace

TEST_CASE("a new study file has the current schema and no study") {
  const scratch dir;
  const auto path = dir.file("new.tessel.db");
  study_db db(path);
  CHECK(db.path() == path);
  CHECK(study_db::schema_version() >= 1);
  CHECK_FALSE(db.study().has_value());
  CHECK(db.load(storage_space()).empty());
  CHECK_NOTHROW(db.check_integrity());
  CHECK(std::filesystem::exists(path));
}

TEST_CASE("the study record round trips, and begin() on a resume keeps it") {
  const scratch dir;
  const auto path = dir.file("record.tessel.db");
  const auto s = storage_space();
  const auto record = storage_record(s);
  const double before = static_cast<double>(std::time(nullptr)) - 1;
  {
    study_db db(path);
    db.begin(record);
    db.begin(record);  // idempotent
  }
  study_db db(path);
  const auto got = db.study();
  REQUIRE(got.has_value());
  CHECK(got->space_name == record.space_name);
  CHECK(got->space_source == record.space_source);
  CHECK(got->space_hash == record.space_hash);
  CHECK(got->target == record.target);
  CHECK(got->backend == record.backend);
  CHECK(got->strategy == record.strategy);
  CHECK(got->options_json == record.options_json);
  CHECK(got->seed == 0xFEDC'BA98'7654'3210ULL);
  CHECK(got->schema_version == study_db::schema_version());
  CHECK(got->created_at >= before);
  CHECK(got->created_at <= static_cast<double>(std::time(nullptr)) + 1);

  // Same space, other strategy: a resume; the stored record stays.
  auto other = record;
  other.strategy = "random";
  CHECK_NOTHROW(db.begin(other));
  CHECK(db.study()->strategy == "ga");
}

TEST_CASE("begin() refuses a study of another space") {
  const scratch dir;
  const auto path = dir.file("mismatch.tessel.db");
  const auto s = storage_space();
  study_db db(path);
  db.begin(storage_record(s));
  auto other = storage_record(s);
  other.space_name = "conv";
  other.space_hash = "0123456789abcdef";
  CHECK_THROWS_WITH_AS(db.begin(other),
                       ("study file '" + path.string() +
                        "' holds a study of space 'gemm' (hash 9f3a5c0e11d2b7a4), not of space "
                        "'conv' (hash 0123456789abcdef); use another --db, or delete the file to "
                        "start over")
                           .c_str(),
                       error);
}

TEST_CASE("trials round trip with every field") {
  const scratch dir;
  const auto path = dir.file("trials.tessel.db");
  const auto s = storage_space();
  std::vector<trial> want;
  for (std::uint64_t id = 1; id <= 40; ++id) want.push_back(storage_trial(s, id));
  // The fixture covers what must survive: inactive conditional parameters,
  // permutations, keys above 2^63, every status, with and without predictions.
  bool inactive = false, high_key = false;
  for (const auto& t : want) {
    inactive |= !s.value_of(t.config, "prefetch").active;
    high_key |= t.key > std::uint64_t{std::numeric_limits<std::int64_t>::max()};
  }
  REQUIRE(inactive);
  REQUIRE(high_key);
  want[0].key = std::numeric_limits<std::uint64_t>::max();
  want[1].key = 0x8000'0000'0000'0000ULL;
  want[2].key = 0;
  {
    study_db db(path);
    for (std::size_t i = 0; i < 20; ++i) db.save(want[i], s);
    db.save_all({want.begin() + 20, want.end()}, s);
  }
  study_db db(path);  // read back through a fresh connection
  const auto got = db.load(s);
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < want.size(); ++i) check_same_trial(got[i], want[i]);
}

TEST_CASE("load() returns trials by id whatever the order they were saved in") {
  const scratch dir;
  const auto s = storage_space();
  study_db db(dir.file("order.tessel.db"));
  for (std::uint64_t id : {5, 3, 9, 1, 7}) db.save(storage_trial(s, id), s);
  std::vector<std::uint64_t> ids;
  for (const auto& t : db.load(s)) ids.push_back(t.id);
  CHECK(ids == std::vector<std::uint64_t>{1, 3, 5, 7, 9});
}

TEST_CASE("non-finite doubles survive") {
  const scratch dir;
  const auto s = storage_space();
  auto t = storage_trial(s, 2);
  const double inf = std::numeric_limits<double>::infinity();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  t.result.objective = inf;
  t.result.samples = {inf, -inf, nan, -0.0, std::numeric_limits<double>::denorm_min()};
  t.result.metrics["roofline"] = -inf;
  t.result.cost.gate_s = nan;
  t.prediction = prediction{nan, inf, 0.5, -inf, 0, 0};
  study_db db(dir.file("nonfinite.tessel.db"));
  db.save(t, s);
  const auto got = db.load(s);
  REQUIRE(got.size() == 1);
  check_same_trial(got[0], t);
}

TEST_CASE("a trial moves from proposed to running to finished") {
  const scratch dir;
  const auto path = dir.file("states.tessel.db");
  const auto s = storage_space();
  study_db db(path);
  const auto finished = storage_trial(s, 3);

  db.save(storage_trial(s, 3, trial_state::proposed), s);
  auto got = db.load(s);
  REQUIRE(got.size() == 1);
  check_same_trial(got[0], storage_trial(s, 3, trial_state::proposed));
  // Unfinished: the result is not stored, whatever the struct held.
  CHECK(got[0].result.samples.empty());
  CHECK(got[0].finished_at == 0);

  db.save(storage_trial(s, 3, trial_state::running), s);
  got = db.load(s);
  REQUIRE(got.size() == 1);
  CHECK(got[0].state == trial_state::running);

  db.save(finished, s);
  got = db.load(s);
  REQUIRE(got.size() == 1);
  check_same_trial(got[0], finished);

  // A fresh connection sees the last state.
  study_db again(path);
  got = again.load(s);
  REQUIRE(got.size() == 1);
  check_same_trial(got[0], finished);
}

TEST_CASE("save() refuses trials it cannot store faithfully") {
  const scratch dir;
  const auto path = dir.file("bad.tessel.db");
  const auto s = storage_space();
  study_db db(path);
  auto t = storage_trial(s, 1);
  t.id = 0;
  CHECK_THROWS_WITH_AS(db.save(t, s),
                       ("study file '" + path.string() +
                        "': cannot store trial id 0: trial ids are 1-based and below 2^63")
                           .c_str(),
                       error);
  t.id = 4;
  t.config = config{0, 0};
  CHECK_THROWS_WITH_AS(db.save(t, s),
                       ("study file '" + path.string() +
                        "': cannot store trial 4: its config has 2 values, space 'gemm' has 5 "
                        "parameters")
                           .c_str(),
                       error);
  // save_all() is all or nothing.
  auto good = storage_trial(s, 5);
  CHECK_THROWS_AS(db.save_all({good, t}, s), error);
  CHECK(db.load(s).empty());
}

TEST_CASE("a stored config the space no longer has names its trial") {
  const scratch dir;
  const auto path = dir.file("drift.tessel.db");
  const auto s = storage_space();
  study_db db(path);
  for (std::uint64_t id = 1; id <= 30; ++id) db.save(storage_trial(s, id), s);
  const auto narrower = storage_space({128, 256});
  std::uint64_t first_512 = 0;
  for (std::uint64_t id = 1; id <= 30 && !first_512; ++id)
    if (s.integer(storage_trial(s, id).config, "tile") == 512) first_512 = id;
  REQUIRE(first_512 != 0);
  CHECK_THROWS_WITH_AS(
      (void)db.load(narrower),
      ("study file '" + path.string() + "': trial " + std::to_string(first_512) +
       " does not read back through space 'gemm': parameter 'tile': 512 is not one of {128, 256}")
          .c_str(),
      error);
}

TEST_CASE("a file that is not a SQLite database is refused") {
  const scratch dir;
  const auto path = dir.file("notes.txt");
  {
    std::ofstream out(path);
    for (int i = 0; i < 100; ++i) out << "these are notes, not a database\n";
  }
  CHECK_THROWS_WITH_AS(study_db{path},
                       ("study file '" + path.string() +
                        "' is not a SQLite database (SQLite: file is not a database); pass the "
                        "path of a tessel study file, or a new one")
                           .c_str(),
                       error);
  // Untouched.
  std::ifstream in(path);
  std::string first;
  std::getline(in, first);
  CHECK(first == "these are notes, not a database");
}

TEST_CASE("a SQLite database of another program is refused") {
  const scratch dir;
  const auto path = dir.file("other.db");
  raw_sql(path, "CREATE TABLE songs (title TEXT); INSERT INTO songs VALUES ('so what');");
  CHECK_THROWS_WITH_AS(study_db{path},
                       ("study file '" + path.string() +
                        "' is a SQLite database of another program, not a tessel study file; "
                        "pass the path of a tessel study file, or a new one")
                           .c_str(),
                       error);
}

TEST_CASE("a study file with a newer schema is refused") {
  const scratch dir;
  const auto path = dir.file("future.tessel.db");
  { study_db db(path); }
  raw_sql(path, "UPDATE meta SET schema_version = 99 WHERE id = 1");
  CHECK_THROWS_WITH_AS(study_db{path},
                       doctest::Contains("has schema version 99, newer than this tessel"), error);
}

TEST_CASE("the schema records its migrations") {
  const scratch dir;
  const auto path = dir.file("migrations.tessel.db");
  { study_db db(path); }
  sqlite3* raw = nullptr;
  REQUIRE(sqlite3_open(path.string().c_str(), &raw) == SQLITE_OK);
  sqlite3_stmt* q = nullptr;
  REQUIRE(sqlite3_prepare_v2(raw, "SELECT max(version), count(*) FROM migrations", -1, &q,
                             nullptr) == SQLITE_OK);
  REQUIRE(sqlite3_step(q) == SQLITE_ROW);
  CHECK(sqlite3_column_int(q, 0) == study_db::schema_version());
  CHECK(sqlite3_column_int(q, 1) == study_db::schema_version());
  sqlite3_finalize(q);
  REQUIRE(sqlite3_prepare_v2(raw, "PRAGMA journal_mode", -1, &q, nullptr) == SQLITE_OK);
  REQUIRE(sqlite3_step(q) == SQLITE_ROW);
  CHECK(std::string(reinterpret_cast<const char*>(sqlite3_column_text(q, 0))) == "wal");
  sqlite3_finalize(q);
  sqlite3_close(raw);
}

TEST_CASE("a study file in a missing folder is a clear error") {
  const scratch dir;
  const auto path = dir.file("no/such/folder/x.tessel.db");
  CHECK_THROWS_WITH_AS(study_db{path}, doctest::Contains("does its folder exist"), error);
}

TEST_CASE("save() from two threads, on one connection and on two") {
  const scratch dir;
  const auto path = dir.file("threads.tessel.db");
  const auto s = storage_space();
  constexpr std::uint64_t per_thread = 150;
  study_db shared(path);
  study_db second(path);  // another connection to the same file
  auto writer = [&](study_db& db, std::uint64_t first) {
    for (std::uint64_t i = 0; i < per_thread; ++i) {
      const auto id = first + 3 * i;  // the three writers interleave ids
      db.save(storage_trial(s, id, trial_state::running), s);
      db.save(storage_trial(s, id), s);
    }
  };
  std::thread a(writer, std::ref(shared), 1);
  std::thread b(writer, std::ref(shared), 2);
  std::thread c(writer, std::ref(second), 3);
  std::size_t loads = 0;
  std::thread reader([&] {
    for (int i = 0; i < 20; ++i) loads += shared.load(s).size() > 0 ? 1 : 0;
  });
  a.join();
  b.join();
  c.join();
  reader.join();
  const auto got = by_id(study_db(path).load(s));
  REQUIRE(got.size() == 3 * per_thread);
  for (std::uint64_t id = 1; id <= 3 * per_thread; ++id) {
    REQUIRE(got.count(id) == 1);
    check_same_trial(got.at(id), storage_trial(s, id));
  }
  CHECK_NOTHROW(shared.check_integrity());
}
