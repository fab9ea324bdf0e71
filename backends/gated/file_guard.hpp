// file_guard.hpp: files a candidate's process must not change, kept as they
// were when the backend was prepared and checked around every run. Shared
// by the cpu backend (the loader and a user reference's library, in the
// user's compile cache) and the gated `command:` (the reference program and
// the files its arguments name). Private to the backends.
#pragma once

#include <filesystem>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace tessel::detail {

/// The candidate runs as the user, and these files are the user's, so it
/// can write them (docs/gate.md, "Round eight": a kernel that copied itself
/// over the reference made the reference agree with it). A backend checks
/// them before a run starts (restoring what changed: by no run of its own)
/// and after it ends: a change made during a run is that run's (suspicious).
class file_guard {
 public:
  /// Keeps `file`'s bytes as they are now. Throws tessel::error when it
  /// cannot be read.
  void add(const std::filesystem::path& file);
  /// The files whose bytes are not the kept ones; each is put back (a new
  /// file with the kept bytes and the file's permissions at add(), renamed
  /// over it), and what was there is kept beside it as
  /// `NAME.changed-PID-N`, so an edit of the user's is never lost.
  /// Thread-safe.
  [[nodiscard]] std::vector<std::filesystem::path> restore_changed() const;
  [[nodiscard]] bool empty() const;

 private:
  struct kept {
    std::filesystem::path path;
    std::string bytes;
    std::filesystem::perms perms;
  };
  std::vector<kept> files_;
  mutable std::mutex mutex_;
};

}  // namespace tessel::detail
