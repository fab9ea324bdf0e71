// The study file's writer lock: one process at a time appends trials to a
// study. An advisory lock (flock) on a sidecar file `<study>-lock`, so the OS
// releases it when the holder exits, however it exits (kill -9 included),
// and SQLite's own locks on the study file are never touched. The sidecar
// holds the holder's pid, host and start time for the refusal message.
// Private to src/storage/.
#pragma once

#include <filesystem>

namespace tessel::detail::storage {

class writer_lock {
 public:
  /// Takes the lock on `study_file`, or throws tessel::error naming the
  /// process that holds it. Never waits.
  explicit writer_lock(const std::filesystem::path& study_file);
  /// Removes the sidecar and releases the lock.
  ~writer_lock();
  writer_lock(const writer_lock&) = delete;
  writer_lock& operator=(const writer_lock&) = delete;

 private:
  std::filesystem::path path_;
  int fd_ = -1;
};

}  // namespace tessel::detail::storage
