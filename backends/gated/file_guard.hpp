// file_guard.hpp: files a candidate's process must not change, kept as they
// were when the backend was prepared and checked around every run. Shared
// by the cpu backend (the loader and a user reference's library, in the
// user's compile cache) and the gated `command:` (the reference program and
// the files its arguments name). Private to the backends.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

struct stat;

namespace tessel::detail {

/// The candidate runs as the user, and these files are the user's, so it
/// can write them (docs/gate.md, "Round eight": a kernel that copied itself
/// over the reference made the reference agree with it). A run is watched
/// by a run_scope taken just before its process starts: the scope puts back
/// what changed since the last check, and its changed() after the process
/// ended names the files changed while the run was in progress (suspicious).
///
/// A check stats each file first: when its device, inode, size, mtime and
/// ctime are the ones kept, the file is unchanged and its bytes are not read.
/// A process can set mtime back (utimensat, `touch -d`) but not ctime: any
/// write, rename or utime sets ctime to the kernel's clock, now. Only when
/// the stat differs are the bytes compared: the same bytes written again are
/// no change. New stamps are taken only when no run is in progress (a run's
/// process could hold the file mapped shared and writable: a page it has
/// written once can be written again with no stamp moving) and when they
/// were taken slack() or more after the file's ctime (a second write in the
/// same tick of the clock could leave them all as they were); until then
/// the file is compared byte by byte at each check. This trusts the clock
/// ctime is stamped with: a process allowed to set the system's clock
/// (CAP_SYS_TIME), or a network file system's server, could stamp a change
/// with a kept ctime.
///
/// When runs overlap (the cpu backend's gate runs beside the timed one, a
/// gated command at concurrency > 1), a change belongs to the runs in
/// progress when it was made. Every run's start and end is a check of every
/// file, one at a time under one lock, so a change was made after the last
/// check that saw the file intact (or put it back) and before the check that
/// found it, and no run started or ended in between: the runs in progress
/// then are the ones whose first check came before the one that found it and
/// whose changed() came after. Each of them is blamed, whichever check found
/// it; any other is not, even when its own check found the change (the file
/// is put back all the same). This needs no clock: a change's ctime could
/// not narrow it further (its slack, a tick of the kernel's clock, is longer
/// than a check) and would be stamped by the server's clock on a network
/// file system. Runs in progress at the same time cannot be told apart:
/// each is blamed.
class file_guard {
 public:
  /// The largest file guarded: its bytes are kept in memory (1 GiB).
  static constexpr std::size_t max_bytes = std::size_t{1} << 30;

  /// What a guard holds on a file besides its bytes.
  enum class hold {
    bytes,
    /// Also a shared flock on the file as long as the guard lives, taken
    /// on each file it puts back before that file gets the name: the cpu
    /// compile cache's size limit removes no file a process holds so
    /// (cpu/cache_files.hpp, remove_unless_in_use), so a reference's build
    /// the guard put back is as safe from it as the one it replaced. A
    /// file that cannot be opened to lock is guarded by its bytes alone.
    shared_lock,
  };

  file_guard() = default;
  file_guard(const file_guard&) = delete;
  file_guard& operator=(const file_guard&) = delete;
  file_guard(file_guard&&) = delete;
  file_guard& operator=(file_guard&&) = delete;
  ~file_guard();

  /// Keeps `file`'s bytes and stamps as they are now. Throws tessel::error
  /// when it cannot be read or holds more than max_bytes.
  void add(const std::filesystem::path& file, hold what = hold::bytes);
  [[nodiscard]] bool empty() const;

  /// One run, watched from just before its process starts until changed().
  /// The guard must outlive it. Thread-safe with other scopes of the guard.
  class run_scope {
   public:
    /// Puts back the files changed since the last check (a change of the
    /// runs in progress, not this one's). `guard` null: watches nothing.
    explicit run_scope(file_guard* guard);
    run_scope(const run_scope&) = delete;
    run_scope& operator=(const run_scope&) = delete;
    ~run_scope();
    /// Called once its process has ended (its descendants too): puts back
    /// the files that changed, and names each file a change of which was
    /// made while the run was in progress (found by this check or by another
    /// scope's), in the order they were added.
    /// Each changed file is put back as a new file with the kept bytes and
    /// the permissions the file had at add(), renamed over it, and what was
    /// there is kept beside it as `NAME.changed-PID-N`, so an edit of the
    /// user's is never lost. A second call names nothing.
    [[nodiscard]] std::vector<std::filesystem::path> changed();

   private:
    file_guard* guard_;
    std::uint64_t id_ = 0;
    std::uint64_t start_ = 0;  ///< the check before its process started
    bool open_ = false;
  };

  /// How long after a change of `file` its ctime may still be what a later
  /// change stamps, in ns: a tick of the kernel's coarse clock plus the
  /// timestamp granularity of the file's file system, as its stamps show it.
  /// Stamps are trusted once the ctime is older than this. 0 for a file not
  /// guarded.
  [[nodiscard]] std::int64_t slack(const std::filesystem::path& file) const;
  /// How many times a check read a guarded file's bytes (add() not counted):
  /// a check whose stat matched reads none. For tests.
  [[nodiscard]] std::uint64_t reads() const;

 private:
  /// What stat says of a file: its identity and change stamps.
  struct stamps {
    std::uint64_t dev = 0, ino = 0;
    std::int64_t size = 0, mtime_ns = 0, ctime_ns = 0;
    bool operator==(const stamps&) const = default;
  };
  struct kept {
    std::filesystem::path path;
    std::string bytes;
    std::filesystem::perms perms;
    std::int64_t slack_ns = 0;
    /// Stamps a check may take for the bytes; none: compare the bytes.
    std::optional<stamps> trusted;
    int lock = -1;  ///< hold::shared_lock: a descriptor of the file, flocked shared
  };
  /// A change found by check `found_at` (numbered from 1) while a scope
  /// was open.
  struct change {
    std::size_t file;
    std::uint64_t found_at;
  };

  /// Checks every file, puts back what changed and, while a scope is open,
  /// keeps each change with the number of the check that found it. Returns
  /// that number. Called with mutex_ held.
  std::uint64_t check_locked();
  static stamps stamps_of(const struct stat& st);
  /// `now`, taken by a stat after time `before` (ns) that the bytes
  /// matched, when a check may take it for the bytes. Called with mutex_
  /// held.
  std::optional<stamps> trust(const stamps& now, std::int64_t before, std::int64_t slack_ns) const;
  static void restore_locked(kept& file);
  /// Forgets scope `id` and the changes no open scope can be blamed for.
  void close_locked(std::uint64_t id);

  std::vector<kept> files_;
  std::vector<change> changes_;
  std::map<std::uint64_t, std::uint64_t> open_;  ///< scope id -> its first check
  std::uint64_t checks_ = 0;
  std::uint64_t next_scope_ = 0;
  std::uint64_t reads_ = 0;
  /// Guards every member above; mutable so that the const readers (empty(),
  /// slack(), reads()) can take it.
  mutable std::mutex mutex_;
};

}  // namespace tessel::detail
