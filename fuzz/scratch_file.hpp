// fuzz/scratch_file.hpp: the readers under test take a path, so each input is
// written to one file per process (in /dev/shm when it exists: no disk I/O),
// removed with its SQLite side files when the process ends.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

namespace tessel::fuzz {

class scratch_file {
 public:
  explicit scratch_file(const std::string& suffix) {
    std::filesystem::path dir = "/dev/shm";
    if (!std::filesystem::is_directory(dir)) dir = std::filesystem::temp_directory_path();
    path_ = dir / ("tessel-fuzz-" + std::to_string(::getpid()) + suffix);
  }
  ~scratch_file() { remove(); }
  scratch_file(const scratch_file&) = delete;
  scratch_file& operator=(const scratch_file&) = delete;

  /// Replaces the file's bytes (and drops SQLite's -wal / -shm / -journal).
  const std::filesystem::path& write(const std::uint8_t* data, std::size_t size) {
    remove();
    std::ofstream out(path_, std::ios::binary);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
    return path_;
  }

  void remove() {
    std::error_code ignored;
    for (const char* side : {"", "-wal", "-shm", "-journal"})
      std::filesystem::remove(path_.string() + side, ignored);
  }

 private:
  std::filesystem::path path_;
};

}  // namespace tessel::fuzz
