// tessel/storage.hpp: the study file. One SQLite file per study (the
// embedded default): the space source text and its hash, target, backend,
// strategy, options and seed, and every trial as it is proposed, started
// and finished, with raw samples and provenance. Writes are durable when the
// call returns (WAL, synchronous=NORMAL at commit points), so a process
// killed at any moment resumes with every finished trial. docs/storage.md
// describes the schema, the durability argument and the export formats.
#pragma once

#include <tessel/space.hpp>
#include <tessel/trial.hpp>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

namespace tessel {

/// What a study is: stored once, checked on resume.
struct study_record {
  std::string space_name;
  std::string space_source;  ///< the .tsl text (or "" for a C++-built space)
  std::string space_hash;    ///< hex FNV-1a of the source and overrides
  std::string target;
  std::string backend;
  std::string strategy;
  std::string options_json;  ///< study and CLI options as given
  std::uint64_t seed = 0;
  int schema_version = 0;  ///< filled by the db
  double created_at = 0;   ///< when the file was created, Unix seconds (UTC); filled by
                           ///< the db. Trial times are seconds after it in exports.
};

class study_db {
 public:
  /// Opens (creating if needed) the study file at `path`. Throws tessel::error
  /// with the path and SQLite's message on failure, or when the file's
  /// schema version is newer than this build understands.
  explicit study_db(const std::filesystem::path& path);
  ~study_db();
  study_db(const study_db&) = delete;
  study_db& operator=(const study_db&) = delete;

  [[nodiscard]] const std::filesystem::path& path() const noexcept;
  [[nodiscard]] static int schema_version() noexcept;

  /// The stored study, or nullopt for a new file.
  [[nodiscard]] std::optional<study_record> study() const;
  /// Makes this connection the study's one writer: a study appends trials from
  /// one process at a time, and a second one would interleave ids and repeat
  /// configs. Throws tessel::error naming the holder (pid, host, since when)
  /// when another process, or another study_db of this one, holds the file;
  /// never waits. Held until this study_db is destroyed or its process ends
  /// (however it ends). tessel::study claims it; readers (show, export) don't.
  void claim_writer();
  /// Stores the study record of a new file; on an existing one, throws
  /// tessel::error when the space hash differs (a different space).
  void begin(const study_record& record);

  /// Inserts or updates one trial (by id) with its state and result, in its
  /// own transaction: committed when the call returns. Thread-safe. Throws
  /// tessel::error for id 0 (ids are 1-based) or a config not of `s`.
  void save(const trial& t, const space& s);
  /// save() for several trials in one transaction: all or none are stored.
  void save_all(const std::vector<trial>& trials, const space& s);
  /// How many trials are stored (any state), without reading them.
  [[nodiscard]] std::size_t trial_count() const;
  /// Deletes the study record and every trial, in one transaction, so the
  /// file can hold a new study (the CLI's --overwrite). Needs claim_writer().
  void clear();
  /// Every stored trial, by id, with configs read back through `s`.
  [[nodiscard]] std::vector<trial> load(const space& s) const;

  /// SQLite's integrity check of the file; throws tessel::error listing the
  /// problems it finds.
  void check_integrity() const;

  struct impl;

 private:
  std::unique_ptr<impl> impl_;
};

enum class export_format : unsigned char { t4, csv, json };
/// "t4", "csv" or "json" ("jsonl" is accepted for json): the CLI's --format.
/// Throws tessel::error naming the known formats for anything else.
[[nodiscard]] export_format parse_export_format(std::string_view name);
[[nodiscard]] std::string_view to_string(export_format f) noexcept;

/// Writes the trials of a study: T4 (Kernel Tuner's results schema; finished
/// trials only), CSV (one row per trial, one column per parameter) or JSON
/// lines (one object per trial), each trial in the order given.
void export_trials(std::ostream& out, export_format format, const study_record& record,
                   const std::vector<trial>& trials, const space& s);

}  // namespace tessel
