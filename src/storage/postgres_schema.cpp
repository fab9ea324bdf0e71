// The PostgreSQL study's schema and its migrations (postgres_schema.hpp).
#include "storage/postgres_schema.hpp"

#include "storage/migration.hpp"

#include <tessel/error.hpp>

#include <fmt/format.h>

#include <string>

#ifndef TESSEL_VERSION
#define TESSEL_VERSION "unknown"
#endif

namespace tessel::detail::storage::postgres {
namespace {

// The conventions of the SQLite study file (docs/storage.md): 64-bit
// unsigned values as the int64 of the same bit pattern, times as seconds in
// DOUBLE PRECISION, NaN as NULL, result columns NULL until finished. Server
// times (heartbeats, leases) are timestamptz on the server's clock, so hosts
// whose clocks disagree still agree on who is late.
constexpr migration migrations[] = {
    {1, "initial schema, shared", R"sql(
CREATE TABLE meta (
  id INTEGER PRIMARY KEY CHECK (id = 1),
  schema_version INTEGER NOT NULL,
  created_at DOUBLE PRECISION NOT NULL,  -- Unix seconds, UTC
  tessel_version TEXT NOT NULL
);
CREATE TABLE migrations (
  version INTEGER PRIMARY KEY,
  summary TEXT NOT NULL,
  applied_at DOUBLE PRECISION NOT NULL,
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
  seed BIGINT NOT NULL                   -- uint64 bit pattern
);
CREATE TABLE workers (
  id BIGSERIAL PRIMARY KEY,
  name TEXT NOT NULL,                    -- host:pid unless named
  jobs INTEGER NOT NULL,
  heartbeat_s DOUBLE PRECISION NOT NULL,
  lease_s DOUBLE PRECISION NOT NULL,     -- its trials are re-queued after this long unheard
  state TEXT NOT NULL CHECK (state IN ('live', 'lost', 'left')),
  joined_at TIMESTAMPTZ NOT NULL DEFAULT now(),
  heartbeat_at TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE TABLE trials (
  id BIGINT PRIMARY KEY,                 -- 1-based, in proposal order
  key BIGINT NOT NULL,
  config_json TEXT NOT NULL,
  state TEXT NOT NULL CHECK (state IN ('proposed', 'running', 'finished')),
  source TEXT NOT NULL,
  tokens DOUBLE PRECISION,
  note TEXT NOT NULL,
  predicted_mean DOUBLE PRECISION,
  predicted_sigma DOUBLE PRECISION,
  predicted_p_feasible DOUBLE PRECISION,
  predicted_gain DOUBLE PRECISION,
  predicted_cost_s DOUBLE PRECISION,
  predicted_utility DOUBLE PRECISION,
  status TEXT,
  objective DOUBLE PRECISION,
  samples_json TEXT,
  compile_s DOUBLE PRECISION,
  gate_s DOUBLE PRECISION,
  run_s DOUBLE PRECISION,
  metrics_json TEXT,
  message TEXT,
  proposed_at DOUBLE PRECISION,
  finished_at DOUBLE PRECISION,
  worker_id BIGINT REFERENCES workers (id),  -- who runs it; finished: who evaluated it
  claims INTEGER NOT NULL DEFAULT 0,         -- evaluations started
  requeues INTEGER NOT NULL DEFAULT 0,       -- times it went back to the queue
  discarded INTEGER NOT NULL DEFAULT 0       -- results not kept (it was finished already)
);
CREATE INDEX trials_by_key ON trials (key);
CREATE INDEX trials_open ON trials (id) WHERE state <> 'finished';
)sql"},
};

/// The study's schema version: 0 for a new (or empty) PostgreSQL schema.
int current_version(const pg::connection& c) {
  const auto tables = c.exec(
      "SELECT count(*), count(*) FILTER (WHERE table_name = 'meta') FROM "
      "information_schema.tables WHERE table_schema = current_schema()",
      "reading the schema");
  const auto row = tables.at(0);
  if (row.integer(1) == 0) {
    if (row.integer(0) > 0)
      throw error(c.subject() +
                  ": its PostgreSQL schema holds tables of another program, not a tessel study; "
                  "name another with ?study=NAME");
    return 0;
  }
  return static_cast<int>(
      c.exec("SELECT schema_version FROM meta WHERE id = 1", "reading the schema version")
          .at(0)
          .integer(0));
}

}  // namespace

void prepare(const pg::connection& c) {
  pg::transaction tx(c);
  pg::params key;
  key.bind(1, std::string_view(c.where().schema));
  c.exec(fmt::format("SELECT pg_advisory_xact_lock({}, hashtext($1))", schema_lock_class), key,
         "waiting for other processes preparing the study");
  c.exec("CREATE SCHEMA IF NOT EXISTS " + pg::quoted_identifier(c.where().schema),
         "creating the schema");
  const int version = current_version(c);
  if (version > schema_version)
    throw error(fmt::format("{} has schema version {}, newer than this tessel (" TESSEL_VERSION
                            ") understands ({}); open it with a newer tessel",
                            c.subject(), version, schema_version));
  if (version == schema_version) return;  // nothing to write; the transaction rolls back
  const double now = now_unix();
  for (const auto& m : migrations) {
    if (m.version <= version) continue;
    c.exec(m.sql, fmt::format("migrating to schema version {}", m.version));
    pg::params p;
    p.bind(1, std::int64_t{m.version});
    p.bind(2, std::string_view(m.summary));
    p.bind(3, now);
    p.bind(4, std::string_view(TESSEL_VERSION));
    c.exec(
        "INSERT INTO migrations (version, summary, applied_at, tessel_version) VALUES ($1, "
        "$2, $3, $4)",
        p, "recording a migration");
  }
  pg::params meta;
  meta.bind(1, std::int64_t{schema_version});
  if (version == 0) {
    meta.bind(2, now);
    meta.bind(3, std::string_view(TESSEL_VERSION));
    c.exec(
        "INSERT INTO meta (id, schema_version, created_at, tessel_version) VALUES (1, $1, $2, "
        "$3)",
        meta, "writing the schema version");
  } else {
    c.exec("UPDATE meta SET schema_version = $1 WHERE id = 1", meta, "writing the schema version");
  }
  tx.commit();
}

}  // namespace tessel::detail::storage::postgres
