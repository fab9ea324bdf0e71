// The SQLite study file's own behaviour: its schema and migrations, WAL, and
// errors for files that are not study files. What every store does (round
// trips, states, the study record, concurrent writers) is store_test.cpp.
#include "storage_fixtures.hpp"

#include <tessel/error.hpp>
#include <tessel/storage.hpp>

#include <doctest/doctest.h>
#include <sqlite3.h>

#include <fstream>

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

}  // namespace

TEST_CASE("a new study file has the current schema and no study") {
  const temp_folder dir;
  const auto path = dir.file("new.tessel.db");
  sqlite_store db(path);
  CHECK(db.path() == path);
  CHECK(sqlite_store::schema_version() >= 1);
  CHECK_FALSE(db.study().has_value());
  CHECK(db.load(storage_space()).empty());
  CHECK_NOTHROW(db.check_integrity());
  CHECK(std::filesystem::exists(path));
}

TEST_CASE("a file that is not a SQLite database is refused") {
  const temp_folder dir;
  const auto path = dir.file("notes.txt");
  {
    std::ofstream out(path);
    for (int i = 0; i < 100; ++i) out << "these are notes, not a database\n";
  }
  CHECK_THROWS_WITH_AS(sqlite_store{path},
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
  const temp_folder dir;
  const auto path = dir.file("other.db");
  raw_sql(path, "CREATE TABLE songs (title TEXT); INSERT INTO songs VALUES ('so what');");
  CHECK_THROWS_WITH_AS(sqlite_store{path},
                       ("study file '" + path.string() +
                        "' is a SQLite database of another program, not a tessel study file; "
                        "pass the path of a tessel study file, or a new one")
                           .c_str(),
                       error);
}

TEST_CASE("a study file with a newer schema is refused") {
  const temp_folder dir;
  const auto path = dir.file("future.tessel.db");
  { sqlite_store db(path); }
  raw_sql(path, "UPDATE meta SET schema_version = 99 WHERE id = 1");
  CHECK_THROWS_WITH_AS(sqlite_store{path},
                       doctest::Contains("has schema version 99, newer than this tessel"), error);
}

TEST_CASE("the schema records its migrations") {
  const temp_folder dir;
  const auto path = dir.file("migrations.tessel.db");
  { sqlite_store db(path); }
  sqlite3* raw = nullptr;
  REQUIRE(sqlite3_open(path.string().c_str(), &raw) == SQLITE_OK);
  sqlite3_stmt* q = nullptr;
  REQUIRE(sqlite3_prepare_v2(raw, "SELECT max(version), count(*) FROM migrations", -1, &q,
                             nullptr) == SQLITE_OK);
  REQUIRE(sqlite3_step(q) == SQLITE_ROW);
  CHECK(sqlite3_column_int(q, 0) == sqlite_store::schema_version());
  CHECK(sqlite3_column_int(q, 1) == sqlite_store::schema_version());
  sqlite3_finalize(q);
  REQUIRE(sqlite3_prepare_v2(raw, "PRAGMA journal_mode", -1, &q, nullptr) == SQLITE_OK);
  REQUIRE(sqlite3_step(q) == SQLITE_ROW);
  CHECK(std::string(reinterpret_cast<const char*>(sqlite3_column_text(q, 0))) == "wal");
  sqlite3_finalize(q);
  sqlite3_close(raw);
}

TEST_CASE("a study file in a missing folder is a clear error") {
  const temp_folder dir;
  const auto path = dir.file("no/such/folder/x.tessel.db");
  CHECK_THROWS_WITH_AS(sqlite_store{path}, doctest::Contains("does its folder exist"), error);
}
