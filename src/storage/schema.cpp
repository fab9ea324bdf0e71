// The study file's schema and its migrations (schema.hpp).
#include "storage/schema.hpp"

#include "storage/migration.hpp"

#include <tessel/error.hpp>

#include <string>

#ifndef TESSEL_VERSION
#define TESSEL_VERSION "unknown"
#endif

namespace tessel::detail::storage {
namespace {

// Conventions (docs/storage.md): 64-bit unsigned values (trial keys, seeds)
// are stored as the int64 with the same bit pattern; times are REAL seconds;
// a NULL REAL reads back as NaN; result columns are NULL until a trial is
// finished.
constexpr migration migrations[] = {
    {1, "initial schema", R"sql(
CREATE TABLE meta (
  id INTEGER PRIMARY KEY CHECK (id = 1),
  schema_version INTEGER NOT NULL,
  created_at REAL NOT NULL,          -- Unix seconds, UTC
  tessel_version TEXT NOT NULL       -- the tessel that created the file
);
CREATE TABLE migrations (
  version INTEGER PRIMARY KEY,
  summary TEXT NOT NULL,
  applied_at REAL NOT NULL,          -- Unix seconds, UTC
  tessel_version TEXT NOT NULL
);
CREATE TABLE study (
  id INTEGER PRIMARY KEY CHECK (id = 1),
  space_name TEXT NOT NULL,
  space_source TEXT NOT NULL,
  space_hash TEXT NOT NULL,
  target TEXT NOT NULL,
  backend TEXT NOT NULL,
  strategy TEXT NOT NULL,
  options_json TEXT NOT NULL,
  seed INTEGER NOT NULL              -- uint64 bit pattern
);
CREATE TABLE trials (
  id INTEGER PRIMARY KEY,            -- 1-based, in proposal order
  key INTEGER NOT NULL,              -- space::key, uint64 bit pattern
  config_json TEXT NOT NULL,
  state TEXT NOT NULL CHECK (state IN ('proposed', 'running', 'finished')),
  source TEXT NOT NULL,
  tokens REAL,
  note TEXT NOT NULL,
  predicted_mean REAL,               -- the prediction: all NULL when there was none
  predicted_sigma REAL,
  predicted_p_feasible REAL,
  predicted_gain REAL,
  predicted_cost_s REAL,
  predicted_utility REAL,
  status TEXT,                       -- the result: NULL until finished
  objective REAL,
  samples_json TEXT,
  compile_s REAL,
  gate_s REAL,
  run_s REAL,
  metrics_json TEXT,
  message TEXT,
  proposed_at REAL,                  -- seconds after the study started
  finished_at REAL
);
CREATE INDEX trials_by_key ON trials (key);
)sql"},
};

int query_int(const sqlite::connection& c, const char* sql, const char* doing) {
  auto s = c.prepare(sql);
  sqlite::statement q(c, s.get(), doing);
  return q.step() ? static_cast<int>(q.integer(0)) : 0;
}

/// The file's schema version: 0 for an empty file; throws for a SQLite file
/// that some other program wrote.
int current_version(const sqlite::connection& c) {
  const int app = query_int(c, "PRAGMA application_id", "reading the application id");
  const int has_meta =
      query_int(c, "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'meta'",
                "reading the schema");
  const int objects = query_int(c, "SELECT count(*) FROM sqlite_master", "reading the schema");
  if ((app != 0 && app != application_id) || (!has_meta && objects > 0))
    throw error("study file '" + c.path().string() +
                "' is a SQLite database of another program, not a tessel study file; "
                "pass the path of a tessel study file, or a new one");
  if (!has_meta) return 0;
  return query_int(c, "SELECT schema_version FROM meta WHERE id = 1", "reading the schema version");
}

void apply(const sqlite::connection& c, const migration& m, double now) {
  c.exec(m.sql, "migrating to schema version " + std::to_string(m.version));
  auto s = c.prepare(
      "INSERT INTO migrations (version, summary, applied_at, tessel_version) VALUES (?, ?, ?, ?)");
  sqlite::statement q(c, s.get(), "recording a migration");
  q.bind(1, std::int64_t{m.version});
  q.bind(2, std::string_view(m.summary));
  q.bind(3, now);
  q.bind(4, std::string_view(TESSEL_VERSION));
  q.step();
}

void write_meta(const sqlite::connection& c, bool created, double now) {
  const char* sql = created ? "INSERT INTO meta (id, schema_version, created_at, tessel_version) "
                              "VALUES (1, ?1, ?2, ?3)"
                            : "UPDATE meta SET schema_version = ?1 WHERE id = 1";
  auto s = c.prepare(sql);
  sqlite::statement q(c, s.get(), "writing the schema version");
  q.bind(1, std::int64_t{schema_version});
  if (created) {
    q.bind(2, now);
    q.bind(3, std::string_view(TESSEL_VERSION));
  }
  q.step();
}

/// current_version(c), refused when newer than this build understands.
int known_version(const sqlite::connection& c) {
  const int version = current_version(c);
  if (version > schema_version)
    throw error("study file '" + c.path().string() + "' has schema version " +
                std::to_string(version) +
                ", newer than this tessel (" TESSEL_VERSION ") understands (" +
                std::to_string(schema_version) + "); open it with a newer tessel");
  return version;
}

}  // namespace

void check_readable(const sqlite::connection& c) {
  const int version = known_version(c);
  if (version == 0) throw error("study file '" + c.path().string() + "' holds no study yet");
  if (version < schema_version)
    throw error("study file '" + c.path().string() + "' has schema version " +
                std::to_string(version) + ", older than this tessel's (" +
                std::to_string(schema_version) +
                "), and was opened to read: open it once to write (tessel tune --resume) to "
                "bring it up to date");
}

void prepare(const sqlite::connection& c) {
  sqlite::transaction t(c);
  const int version = known_version(c);
  if (version == schema_version) return;  // nothing to write; the transaction rolls back
  const double now = now_unix();
  for (const auto& m : migrations)
    if (m.version > version) apply(c, m, now);
  write_meta(c, version == 0, now);
  if (version == 0)
    c.exec(("PRAGMA application_id = " + std::to_string(application_id)).c_str(),
           "setting the application id");
  t.commit();
}

meta_row read_meta(const sqlite::connection& c) {
  auto s = c.prepare("SELECT schema_version, created_at FROM meta WHERE id = 1");
  sqlite::statement q(c, s.get(), "reading the study file's meta table");
  if (!q.step()) throw error("study file '" + c.path().string() + "' has no meta row");
  return {static_cast<int>(q.integer(0)), q.real(1)};
}

}  // namespace tessel::detail::storage
