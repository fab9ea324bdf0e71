// cache_files.hpp: the files of the cpu backend's compile cache that belong
// to one process: private names (a temporary, a dependency list, a copy),
// the sweep of those a process that is gone left, and the sealed copy of a
// build that is what a run loads. Private to the cpu backend.
#pragma once

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

struct stat;

namespace tessel::detail {

/// The bytes of the regular file `path` (links followed), and its status in
/// `*status` when given; nullopt when it cannot be opened or read or is no
/// regular file (a FIFO is opened without waiting and never read). In the
/// cache that is a miss, never an error. One open, fstat and read: a hit
/// reads its manifest and every file it lists with this.
[[nodiscard]] std::optional<std::string> read_regular(const std::filesystem::path& path,
                                                      struct stat* status = nullptr);

/// A name beside `path` that no other thread or process uses:
/// PATH.PID-N.WHAT, WHAT one of "tmp", "d", "copy" (what
/// remove_leftovers_of_dead knows).
[[nodiscard]] std::string private_name(const std::filesystem::path& path, std::string_view what);

/// Removes, under `dir` (recursively), the private names (and the
/// KEY.PID-N.uncached.so builds earlier versions left unkept) of processes
/// that are no longer running: a compile's temporaries and dependency lists,
/// a run's private copy, left by a process that was killed; and a file
/// guard's BUILD.restore-PID (the bytes it puts back, before their rename)
/// whose PID no longer runs or now names a process that started after it was
/// written. A process that runs keeps its own; the PIDs are this PID
/// namespace's, so processes that share a cache must see each other's.
/// Returns how many it removed.
std::size_t remove_leftovers_of_dead(const std::filesystem::path& dir);

/// Removes the build `file` unless a process holds it in use (a
/// sealed_file copied from it, or a file_guard guarding it with
/// hold::shared_lock, in any process: their shared lock); true when it is
/// gone.
bool remove_unless_in_use(const std::filesystem::path& file);

/// Bytes no process can change, for a run: a memfd sealed against every
/// write (Linux), named /proc/self/fd/N, a path that opens it in tessel and
/// in a run that inherits descriptor N (fd(); process_request::inherited:
/// the loader execs it, dlopen opens it). Where memfds cannot be made or
/// sealed (memfd_create refused, as a seccomp filter may), a private file
/// beside the copied one, removed with this; a process of the same user
/// can still write that one.
class sealed_file {
 public:
  /// A copy of the bytes of the regular file `from` (opened without
  /// following a link, never waiting on a FIFO); nullptr when it cannot be
  /// opened, is no regular file or was removed meanwhile (in the cache: a
  /// miss, not an error). `from` stays in use while this lives (a shared
  /// lock, which remove_unless_in_use respects). Throws tessel::error when
  /// no copy can be made.
  [[nodiscard]] static std::shared_ptr<const sealed_file> copy_of(
      const std::filesystem::path& from);
  ~sealed_file();
  sealed_file(const sealed_file&) = delete;
  sealed_file& operator=(const sealed_file&) = delete;
  sealed_file(sealed_file&&) = delete;
  sealed_file& operator=(sealed_file&&) = delete;

  /// What a run opens: /proc/self/fd/N, or the private file.
  [[nodiscard]] const std::filesystem::path& path() const noexcept { return path_; }
  /// The descriptor a run inherits to open path(); -1 for the private file.
  [[nodiscard]] int fd() const noexcept { return fd_; }
  /// Whether it is a sealed memfd (else the private file).
  [[nodiscard]] bool sealed() const noexcept { return fd_ >= 0; }
  /// The copy's own bytes (a read-only mapping of it): what a run loads,
  /// for a caller to check.
  [[nodiscard]] std::string_view bytes() const noexcept;

 private:
  sealed_file() = default;
  int fd_ = -1;
  int lease_ = -1;  ///< `from`, locked shared
  std::filesystem::path path_;
  void* map_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace tessel::detail
