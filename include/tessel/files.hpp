// tessel/files.hpp: the one check before tessel opens a path a person gave
// it (a .tsl, a study file, a JSON or calibration file, an output). What the
// path names is looked at first, so that a directory, a dangling symbolic
// link, a socket, or a FIFO that nothing writes to (or reads from) is a clear
// error at once, never a hang or a confusing failure later. A pipe that
// something writes to (`<(...)`, a FIFO with a writer) is read as before.
// docs/limits.md, "Special files".
#pragma once

#include <cstddef>
#include <filesystem>
#include <string>
#include <string_view>

namespace tessel {

/// What tessel is about to do with a path (check_path).
enum class file_use : unsigned char {
  /// Read it to its end: a regular file, a character device or a pipe.
  read,
  /// Write it, creating it when missing: a regular file, a character device
  /// (/dev/null, /dev/stdout) or a pipe.
  write,
  /// Keep a study in it: a regular file, or nothing yet (SQLite reads and
  /// writes it in place, which a pipe or a device cannot do).
  study,
};

/// Checks what `path` names, without opening it, for `use`. Throws
/// tessel::error naming the path and the cause: "'P' is a directory, not a
/// file", "'P' is a symbolic link to 'T', which does not exist", "cannot read
/// 'P': No such file or directory" (read), "'P' is a socket, not a file", "'P' is a pipe: a
/// study file is a regular file (...)" (study). A pipe passes here: whether something is at its
/// other end is known only on opening it (read_file_at_most, write_file).
void check_path(const std::filesystem::path& path, file_use use);

/// The first bytes of the file at `path`, at most `limit` + 1 of them (one
/// past the limit tells a caller that the file is larger). check_path(read),
/// then an open that never waits: a FIFO nothing writes to is refused with
/// "'P' is a pipe that nothing writes to; tessel does not wait for a
/// writer", one with a writer is read as it comes. Throws tessel::error with
/// the cause (the OS's message) when it cannot be opened or read.
[[nodiscard]] std::string read_file_at_most_bytes(const std::filesystem::path& path,
                                                  std::size_t limit);

/// The whole file at `path`: read_file_at_most_bytes with no limit (the
/// same checks, the same errors). For files tessel wrote or was given to
/// read whole (a kernel's source, a cached build, a test's output).
[[nodiscard]] std::string read_file(const std::filesystem::path& path);

/// Writes `text` to `path` (created, or truncated): check_path(write), then
/// an open that never waits, so a FIFO nothing reads from is refused with
/// "'P' is a pipe that nothing reads from" instead of blocking. Throws
/// tessel::error "cannot write 'P': <the OS's message>" on failure.
void write_file(const std::filesystem::path& path, std::string_view text);

}  // namespace tessel
