// tessel/storage.hpp: where a study is stored. A store holds the space
// source text and its hash, target, backend, strategy, options and seed, and
// every trial as it is proposed, started and finished, with raw samples and
// provenance. study_store is the interface; sqlite_store (one file, one
// writer) is the embedded default, and a PostgreSQL store (open_store) is a
// study shared by many workers (shared_store). docs/storage.md describes the
// schema, the durability argument and the export formats;
// docs/distributed.md the shared study.
#pragma once

#include <tessel/error.hpp>
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

class shared_store;

/// Where a study lives (DESIGN.md §10): the embedded default is one SQLite
/// file (sqlite_store); a PostgreSQL database holds a study that many
/// processes on many hosts work at once (its shared() is not null).
/// open_store() picks one from a string. Every method throws tessel::error
/// naming location() on failure. docs/storage.md and docs/distributed.md.
class study_store {
 public:
  virtual ~study_store() = default;

  /// Where the study is, for messages: the file's path, or the PostgreSQL
  /// URL without its password.
  [[nodiscard]] virtual std::string location() const = 0;

  /// The stored study, or nullopt for a new store.
  [[nodiscard]] virtual std::optional<study_record> study() const = 0;
  /// Makes this connection the study's one writer, where a store has one:
  /// a SQLite file appends trials from one process at a time, and a second
  /// one would interleave ids and repeat configs. Throws tessel::error naming
  /// the holder (pid, host, since when) when another process, or another
  /// store object of this file, holds it; never waits. Held until the store
  /// is destroyed or its process ends (however it ends). A shared store has
  /// no one writer (its workers claim trials): a no-op there.
  virtual void claim_writer() = 0;
  /// Stores the study record of a new store; on an existing one, throws
  /// tessel::error when the space hash differs (a different space). A record
  /// whose created_at is set (a copied study) keeps that creation time.
  virtual void begin(const study_record& record) = 0;

  /// Inserts or updates one trial (by id) with its state and result, in its
  /// own transaction: committed when the call returns. Thread-safe. Throws
  /// tessel::error for id 0 (ids are 1-based) or a config not of `s`.
  virtual void save(const trial& t, const space& s) = 0;
  /// save() for several trials in one transaction: all or none are stored.
  virtual void save_all(const std::vector<trial>& trials, const space& s) = 0;
  /// How many trials are stored (any state), without reading them.
  [[nodiscard]] virtual std::size_t trial_count() const = 0;
  /// Deletes the study record and every trial, in one transaction, so the
  /// store can hold a new study (the CLI's --overwrite). Needs claim_writer()
  /// on a SQLite file; refused on a shared store while workers are live.
  virtual void clear() = 0;
  /// Every stored trial, by id, with configs read back through `s`.
  [[nodiscard]] virtual std::vector<trial> load(const space& s) const = 0;
  /// Checks the stored data (SQLite's integrity check; on PostgreSQL, the
  /// study's own invariants); throws tessel::error listing the problems.
  virtual void check_integrity() const = 0;

  /// The operations of a study that many processes work at once (claims,
  /// the proposer lock, heartbeats), or null for a store with one writer.
  [[nodiscard]] virtual shared_store* shared() noexcept { return nullptr; }
};

/// A worker of a shared study, as it registers (shared_store::join).
struct worker_info {
  std::string name;        ///< for people: "host:pid" by default
  std::size_t jobs = 1;    ///< trials it evaluates at once (sizes the proposer's batches)
  double heartbeat_s = 2;  ///< seconds between its heartbeats
  /// Seconds without a heartbeat after which its running trials go back to
  /// the queue (measured on the server's clock). More than heartbeat_s.
  double lease_s = 30;
};

/// A shared study's bookkeeping, for people and benchmarks.
struct shared_counts {
  std::size_t proposed = 0, running = 0, finished = 0;  ///< trials by state
  std::size_t claims = 0;     ///< times any trial was claimed (evaluations started)
  std::size_t requeues = 0;   ///< times a running trial went back to the queue
  std::size_t discarded = 0;  ///< results not kept: their trial was finished already
  std::size_t workers = 0;    ///< workers that ever joined
  std::size_t live_workers = 0, live_jobs = 0;  ///< heartbeating now, and their jobs
};

/// What a study that many processes work at once needs of its store
/// (DESIGN.md §10, docs/distributed.md). Workers claim trials from the store,
/// never from each other; one process at a time proposes, under a lock, from
/// the whole study's history; heartbeats and re-queueing live in the store.
/// Not thread-safe beyond study_store's guarantee; the heartbeat runs on a
/// connection of its own. Operations survive a restart of the server: they
/// reconnect and retry (for up to a minute), except propose().
class shared_store {
 public:
  virtual ~shared_store() = default;

  /// Registers this process as a worker and heartbeats from a thread of its
  /// own until leave() or destruction. Returns the worker's id (1-based).
  virtual std::uint64_t join(const worker_info& w) = 0;
  /// Stops heartbeating; the trials this worker still runs go back to the
  /// queue at once.
  virtual void leave() = 0;

  /// What changed since a reader last looked: every trial with id > `known`,
  /// and those among `pending` (ids the reader holds unfinished) that are
  /// finished now; by id.
  [[nodiscard]] virtual std::vector<trial> changes(
      const space& s, std::uint64_t known, const std::vector<std::uint64_t>& pending) const = 0;
  /// Takes the study's proposer lock if no other process holds it; never
  /// waits. Held until unlock_proposer(), leave() or the connection ends
  /// (a killed holder releases it with its connection).
  [[nodiscard]] virtual bool try_lock_proposer() = 0;
  virtual void unlock_proposer() = 0;
  /// Inserts new trials in state proposed, in one transaction; the caller
  /// holds the proposer lock and read every change first, so ids follow on.
  /// Throws store_interrupted when the connection was lost on the way.
  virtual void propose(const std::vector<trial>& trials, const space& s) = 0;
  /// Re-queues the running trials of workers whose lease ran out, then
  /// claims the queued trial of lowest id for this worker (state running);
  /// never the same trial to two workers. nullopt when none is queued.
  /// Needs join().
  [[nodiscard]] virtual std::optional<trial> claim(const space& s) = 0;
  /// Stores the result of a claimed trial (state finished), unless the trial
  /// is finished already (it was re-queued and another worker finished it
  /// first): then the result is counted as discarded. Returns whether it was
  /// kept. A result is kept once, never twice.
  virtual bool finish(const trial& t, const space& s) = 0;
  [[nodiscard]] virtual shared_counts counts() const = 0;
};

/// Thrown by shared_store::propose() when the connection to the server was
/// lost on the way: the proposals may or may not be stored, and the proposer
/// lock is gone. Read the changes and propose again.
class store_interrupted : public error {
 public:
  using error::error;
};

/// Opens (creating if needed) the store `location` names: a path, or
/// `sqlite:PATH`, is a SQLite file; `postgresql://...` or `postgres://...` a
/// PostgreSQL database (a libpq connection URI, plus an optional `study=NAME`
/// query parameter naming the PostgreSQL schema that holds the study;
/// default `tessel`). Throws tessel::error naming the location and why.
[[nodiscard]] std::shared_ptr<study_store> open_store(std::string_view location);

/// Which use a study store is opened for: read (show, export, report; any
/// number at once, and a file this process may not write) or write (one
/// study appends: the file must be writable, and the writer's claim is taken).
enum class store_access : unsigned char { read, write };

/// open_store(location) for `access`. read: a SQLite file must exist and
/// hold a study, and nothing stored in it is changed (sqlite_store below);
/// a file or folder this process may not write is read as it is. write: a SQLite file must be
/// writable, and so must its folder (its journal and lock live there), else tessel::error names the
/// file and the cause before anything is evaluated; then claim_writer(). A PostgreSQL study is
/// opened as by open_store(location) either way, and claimed for write.
[[nodiscard]] std::shared_ptr<study_store> open_store(std::string_view location,
                                                      store_access access);
/// Whether open_store(location) would open a PostgreSQL study.
[[nodiscard]] bool is_postgres_location(std::string_view location) noexcept;
/// What output and errors call the study at `location`: "shared study" (PostgreSQL) or
/// "study file" (SQLite).
[[nodiscard]] std::string_view study_kind(std::string_view location) noexcept;

/// The study file: one SQLite file per study. Writes are durable when the
/// call returns (WAL, synchronous=NORMAL at commit points), so a process
/// killed at any moment resumes with every finished trial.
class sqlite_store final : public study_store {
 public:
  /// Opens (creating if needed) the study file at `path`. Throws tessel::error
  /// with the path and SQLite's message on failure, when the path names no
  /// regular file (a folder, a pipe, a device: check_path, tessel/files.hpp),
  /// or when the file's schema version is newer than this build understands.
  /// With store_access::read nothing is written through this store (every
  /// write throws): a file this process may write is opened with PRAGMA
  /// query_only; one it may not (the file or its folder) read-only, as
  /// immutable=1 when no journal is beside it, so nothing is made there. With store_access::write
  /// (the default) a file or folder this process may not write is refused
  /// here, naming the file and the cause.
  explicit sqlite_store(const std::filesystem::path& path,
                        store_access access = store_access::write);
  ~sqlite_store() override;
  sqlite_store(const sqlite_store&) = delete;
  sqlite_store& operator=(const sqlite_store&) = delete;

  [[nodiscard]] const std::filesystem::path& path() const noexcept;
  [[nodiscard]] static int schema_version() noexcept;

  [[nodiscard]] std::string location() const override;
  [[nodiscard]] std::optional<study_record> study() const override;
  void claim_writer() override;
  void begin(const study_record& record) override;
  void save(const trial& t, const space& s) override;
  void save_all(const std::vector<trial>& trials, const space& s) override;
  [[nodiscard]] std::size_t trial_count() const override;
  void clear() override;
  [[nodiscard]] std::vector<trial> load(const space& s) const override;
  void check_integrity() const override;

  struct impl;

 private:
  std::unique_ptr<impl> impl_;
};

/// Copies the study in `from` (its record and every trial, configs read
/// through `s`; the trials in one transaction) into `to`, between stores of any kind:
/// SQLite to PostgreSQL and back. The copy keeps the study's creation time,
/// so trial times mean the same. Throws tessel::error when `from` holds no
/// study or `to` holds trials already.
void copy_study(const study_store& from, study_store& to, const space& s);

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
