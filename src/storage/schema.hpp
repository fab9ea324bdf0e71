// The study file's schema: its version, and how a file is brought to it.
// Private to src/storage/; docs/storage.md describes the tables.
#pragma once

#include "storage/sqlite.hpp"

namespace tessel::detail::storage {

/// The schema this build writes. Raise it with each migration added in
/// schema.cpp; a file with a higher version is refused, never downgraded.
inline constexpr int schema_version = 1;

/// `PRAGMA application_id` of every study file ("TSL1"), so a SQLite file
/// of some other program is recognised as such.
inline constexpr int application_id = 0x54534C31;

/// Brings the file to `schema_version` in one transaction: creates every
/// table in a new (empty) file, applies the missing migrations to an older
/// one, and records each in the `migrations` table. Throws tessel::error for
/// a SQLite file that is not a study file, or one with a newer schema.
void prepare(const sqlite::connection& c);

/// What prepare() checks, for a file opened to read (nothing is written):
/// throws tessel::error for a file that is not a study file, holds no study
/// yet, or has a schema other than this build's.
void check_readable(const sqlite::connection& c);

/// The file's schema version and creation time (Unix seconds), from `meta`.
struct meta_row {
  int schema_version = 0;
  double created_at = 0;
};
[[nodiscard]] meta_row read_meta(const sqlite::connection& c);

}  // namespace tessel::detail::storage
