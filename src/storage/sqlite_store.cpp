// sqlite_store: the study file over SQLite's C API (storage.hpp). One connection
// per sqlite_store, guarded by a mutex; every write is a transaction that has
// committed when the call returns. docs/storage.md gives the durability
// argument.
#include "storage/schema.hpp"
#include "storage/sqlite.hpp"
#include "storage/trial_row.hpp"
#include "storage/writer_lock.hpp"

#include <tessel/error.hpp>
#include <tessel/files.hpp>
#include <tessel/storage.hpp>

#include <fmt/format.h>

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>

namespace tessel {

using detail::sqlite::statement;
using detail::sqlite::statement_ptr;
using detail::sqlite::transaction;

struct sqlite_store::impl {
  impl(const std::filesystem::path& p, detail::sqlite::open_mode mode)
      : path(p), read_only(mode != detail::sqlite::open_mode::read_write), db(p, mode) {}

  /// Wraps errors raised while reading or writing trials with the file's path.
  template <class F>
  auto with_path(F&& f) const {
    try {
      return f();
    } catch (const error& e) {
      const std::string what = e.what();
      const std::string prefix = "study file '" + path.string() + "'";
      if (what.rfind(prefix, 0) == 0) throw;
      throw error(prefix + ": " + what);
    }
  }

  std::filesystem::path path;
  bool read_only;
  std::unique_ptr<detail::storage::writer_lock> writer;  ///< held from claim_writer() on
  detail::sqlite::connection db;
  mutable std::mutex mutex;
  statement_ptr upsert;  ///< INSERT ... ON CONFLICT(id) DO UPDATE, every column
  statement_ptr select;  ///< every trial, by id
};

namespace {

namespace fs = std::filesystem;
using detail::sqlite::open_mode;

/// 0 when this process (its effective ids) may access `path` as `how`
/// (R_OK, W_OK...), else the OS's errno.
int may(const fs::path& path, int how) {
  return ::faccessat(AT_FDCWD, path.c_str(), how, AT_EACCESS) == 0 ? 0 : errno;
}

/// Looks at the file and its folder before SQLite opens them, so that what
/// this process may not do is said at once, naming the cause: how to open it.
open_mode checked_mode(const fs::path& path, store_access access) {
  const std::string where = "study file '" + path.string() + "'";
  try {
    check_path(path, file_use::study);
  } catch (const error& e) {
    throw error("study file " + std::string(e.what()));
  }
  const fs::path folder = path.parent_path().empty() ? fs::path(".") : path.parent_path();
  std::error_code ec;
  const bool exists = fs::exists(path, ec);
  if (access == store_access::read) {
    if (!exists) throw error("no study file '" + path.string() + "'");
    if (const int err = may(path, R_OK))
      throw error(fmt::format("{}: cannot read it ({})", where, std::strerror(err)));
    if (may(path, W_OK) == 0 && may(folder, W_OK | X_OK) == 0) return open_mode::query_only;
    // A reader that may not write the file or its folder must leave nothing
    // beside it (a -shm or -wal it made would be its own, of the file's mode,
    // in the way of the file's writer; in a folder it may not write, SQLite
    // cannot make them at all). With no journal there, no connection is
    // open on the file: it is read as it is (immutable). With one, a writer
    // is live or was killed with trials in it: it is followed (mode=ro).
    if (!fs::exists(path.string() + "-wal", ec)) return open_mode::immutable;
    if (!fs::exists(path.string() + "-shm", ec) && may(folder, W_OK | X_OK) != 0)
      throw error(where +
                  ": its journal (-wal) holds trials not yet merged into it, and SQLite cannot "
                  "make the index it needs to read them (-shm) in a folder this process may "
                  "not write; open it once where it may be written (tessel show as its owner)");
    return open_mode::read_only;
  }
  if (const int err = exists ? may(path, R_OK | W_OK) : 0)
    throw error(fmt::format(
        "{}: this process may not write it ({}); tune, serve and mcp store every trial in it: "
        "read it with show, export or report, or copy it (tessel copy {} NEW.db) and "
        "resume the copy",
        where, std::strerror(err), path.string()));
  if (const int err = may(folder, W_OK | X_OK))
    throw error(fmt::format(
        "{}: cannot write in its folder '{}' ({}): SQLite keeps the file's journal ({}-wal) "
        "there, and tessel its writer lock ({}-lock); does its folder exist, and may this "
        "process write there?",
        where, folder.string(), std::strerror(err), path.string(), path.string()));
  return open_mode::read_write;
}

/// How long a writer waits for another connection's lock before failing.
constexpr int busy_timeout_ms = 10'000;

std::optional<study_record> read_study(const detail::sqlite::connection& c) {
  auto s = c.prepare(
      "SELECT space_name, space_source, space_hash, target, backend, strategy, options_json, "
      "seed FROM study WHERE id = 1");
  statement q(c, s.get(), "reading the study record");
  if (!q.step()) return std::nullopt;
  study_record r = detail::storage::read_study_columns(q);
  const auto meta = detail::storage::read_meta(c);
  r.schema_version = meta.schema_version;
  r.created_at = meta.created_at;
  return r;
}

void configure(const detail::sqlite::connection& c) {
  sqlite3_busy_timeout(c.get(), busy_timeout_ms);
  // WAL: a commit appends to the -wal file before returning, so a killed
  // process loses nothing committed; NORMAL syncs at checkpoints, so only an
  // OS crash or power loss can drop the last commits (never corrupting).
  // Switching a new file to WAL needs its exclusive lock and, unlike other
  // statements, gives up at once (SQLITE_BUSY) while another connection is
  // opening the same new file: retry it for up to the busy timeout.
  for (int waited_ms = 0;; waited_ms += 5) {
    const int rc = sqlite3_exec(c.get(), "PRAGMA journal_mode = WAL", nullptr, nullptr, nullptr);
    if (rc != SQLITE_BUSY || waited_ms >= busy_timeout_ms) {
      c.check(rc, "switching to WAL");
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  c.exec("PRAGMA synchronous = NORMAL", "setting synchronous");
}

}  // namespace

sqlite_store::sqlite_store(const std::filesystem::path& path, store_access access)
    : impl_(std::make_unique<impl>(path, checked_mode(path, access))) {
  if (access == store_access::read) {
    sqlite3_busy_timeout(impl_->db.get(), busy_timeout_ms);
    detail::storage::check_readable(impl_->db);
  } else {
    configure(impl_->db);
    detail::storage::prepare(impl_->db);
  }
  impl_->upsert = impl_->db.prepare(detail::storage::upsert_sql(false));
  impl_->select = impl_->db.prepare(std::string("SELECT ") + detail::storage::trial_columns +
                                    " FROM trials ORDER BY id");
}

sqlite_store::~sqlite_store() = default;

const std::filesystem::path& sqlite_store::path() const noexcept { return impl_->path; }

std::string sqlite_store::location() const { return impl_->path.string(); }

int sqlite_store::schema_version() noexcept { return detail::storage::schema_version; }

std::optional<study_record> sqlite_store::study() const {
  std::lock_guard lock(impl_->mutex);
  return read_study(impl_->db);
}

void sqlite_store::claim_writer() {
  std::lock_guard lock(impl_->mutex);
  if (impl_->read_only)
    throw error("study file '" + impl_->path.string() +
                "' was opened to read (store_access::read): it takes no writer's claim");
  if (!impl_->writer) impl_->writer = std::make_unique<detail::storage::writer_lock>(impl_->path);
}

void sqlite_store::begin(const study_record& record) {
  std::lock_guard lock(impl_->mutex);
  const auto& c = impl_->db;
  transaction tx(c);  // read and write under one lock: two processes cannot both insert
  if (const auto stored = read_study(c)) {
    if (stored->space_hash == record.space_hash) return;
    throw error("study file '" + impl_->path.string() + "' holds a study of space '" +
                stored->space_name + "' (hash " + stored->space_hash + "), not of space '" +
                record.space_name + "' (hash " + record.space_hash +
                "); use another --db, or delete the file to start over");
  }
  auto s = c.prepare(
      "INSERT INTO study (id, space_name, space_source, space_hash, target, backend, strategy, "
      "options_json, seed) VALUES (1, ?, ?, ?, ?, ?, ?, ?, ?)");
  {
    statement q(c, s.get(), "storing the study record");
    q.bind(1, std::string_view(record.space_name));
    q.bind(2, std::string_view(record.space_source));
    q.bind(3, std::string_view(record.space_hash));
    q.bind(4, std::string_view(record.target));
    q.bind(5, std::string_view(record.backend));
    q.bind(6, std::string_view(record.strategy));
    q.bind(7, std::string_view(record.options_json));
    q.bind(8, static_cast<std::int64_t>(record.seed));  // the bit pattern (docs/storage.md)
    q.step();
  }
  if (record.created_at > 0) {  // a copied study keeps its clock
    auto m = c.prepare("UPDATE meta SET created_at = ? WHERE id = 1");
    statement q(c, m.get(), "keeping the study's creation time");
    q.bind(1, record.created_at);
    q.step();
  }
  tx.commit();
}

void sqlite_store::save(const trial& t, const space& s) {
  const detail::storage::trial_row row =
      impl_->with_path([&] { return detail::storage::trial_row(t, s); });
  std::lock_guard lock(impl_->mutex);
  statement q(impl_->db, impl_->upsert.get(), "saving a trial");
  row.bind(q);
  q.step();  // autocommit: its own transaction, committed on return
}

void sqlite_store::save_all(const std::vector<trial>& trials, const space& s) {
  std::vector<detail::storage::trial_row> rows;
  rows.reserve(trials.size());
  impl_->with_path([&] {
    for (const auto& t : trials) rows.emplace_back(t, s);
  });
  std::lock_guard lock(impl_->mutex);
  transaction tx(impl_->db);
  for (const auto& row : rows) {
    statement q(impl_->db, impl_->upsert.get(), "saving a trial");
    row.bind(q);
    q.step();
  }
  tx.commit();
}

std::size_t sqlite_store::trial_count() const {
  std::lock_guard lock(impl_->mutex);
  auto s = impl_->db.prepare("SELECT COUNT(*) FROM trials");
  statement q(impl_->db, s.get(), "counting trials");
  return q.step() ? static_cast<std::size_t>(q.integer(0)) : 0;
}

void sqlite_store::clear() {
  std::lock_guard lock(impl_->mutex);
  if (!impl_->writer)
    throw error("study file '" + impl_->path.string() +
                "': clear() needs the writer lock (claim_writer())");
  transaction tx(impl_->db);
  impl_->db.exec("DELETE FROM trials", "deleting the trials");
  impl_->db.exec("DELETE FROM study", "deleting the study record");
  tx.commit();
}

std::vector<trial> sqlite_store::load(const space& s) const {
  std::lock_guard lock(impl_->mutex);
  return impl_->with_path([&] {
    std::vector<trial> out;
    statement q(impl_->db, impl_->select.get(), "loading trials");
    while (q.step()) out.push_back(detail::storage::read_trial(q, s));
    return out;
  });
}

void sqlite_store::check_integrity() const {
  std::lock_guard lock(impl_->mutex);
  const auto& c = impl_->db;
  auto s = c.prepare("PRAGMA integrity_check");
  statement q(c, s.get(), "checking integrity");
  std::string problems;
  while (q.step()) {
    const auto line = q.text(0);
    if (line != "ok") problems += "\n  " + line;
  }
  if (!problems.empty())
    throw error("study file '" + impl_->path.string() + "' is damaged:" + problems);
}

}  // namespace tessel
