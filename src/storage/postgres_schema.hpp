// The PostgreSQL study's schema: the SQLite study file's tables with the
// same columns and meaning (schema.cpp), plus what a shared study needs:
// `workers` (who is working it, their heartbeats and leases) and, per trial,
// the worker running it and counts of claims, re-queues and discarded
// results. Private to src/storage/; docs/distributed.md describes it.
#pragma once

#include "storage/postgres.hpp"

namespace tessel::detail::storage::postgres {

/// The schema this build writes in a PostgreSQL study. Raise it with each
/// migration added in postgres_schema.cpp; a newer study is refused.
inline constexpr int schema_version = 1;

/// Advisory-lock class ids ("TSL1", "TSL2"): the second key is the hash of
/// the schema name, so studies in one database do not share locks.
inline constexpr int proposer_lock_class = 0x54534C31;
inline constexpr int schema_lock_class = 0x54534C32;

/// Creates the study's PostgreSQL schema and brings it to schema_version,
/// in one transaction serialized with every other process doing the same.
/// Throws tessel::error for a schema that holds tables of another program,
/// or one with a newer version.
void prepare(const pg::connection& c);

}  // namespace tessel::detail::storage::postgres
