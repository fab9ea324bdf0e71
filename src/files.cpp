// The check before opening a path a person gave (tessel/files.hpp).
#include <tessel/error.hpp>
#include <tessel/files.hpp>

#include <fmt/format.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <limits>
#include <utility>

namespace tessel {
namespace {

std::string quoted(const std::filesystem::path& path) { return "'" + path.string() + "'"; }

[[noreturn]] void fail_with_errno(std::string_view doing, const std::filesystem::path& path,
                                  int err) {
  throw error(fmt::format("cannot {} {}: {}", doing, quoted(path), std::strerror(err)));
}

/// What a file of type `mode` is, for messages; "" for a regular file.
std::string_view kind_of(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a pipe";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  return "";
}

/// Closes a descriptor when it goes out of scope.
class descriptor {
 public:
  explicit descriptor(int fd) : fd_(fd) {}
  ~descriptor() {
    if (fd_ >= 0) ::close(fd_);
  }
  descriptor(descriptor&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  descriptor(const descriptor&) = delete;
  descriptor& operator=(const descriptor&) = delete;
  descriptor& operator=(descriptor&&) = delete;
  [[nodiscard]] int get() const noexcept { return fd_; }
  /// Closes it now; the OS's errno on failure (a write that failed late), else 0.
  int close() noexcept {
    const int rc = ::close(fd_);
    fd_ = -1;
    return rc == 0 ? 0 : errno;
  }

 private:
  int fd_;
};

/// Opens `path` with O_NONBLOCK, so that a FIFO without its other end never
/// waits, then makes the descriptor blocking again for the reads or writes.
descriptor open_without_waiting(const std::filesystem::path& path, int flags, int missing_end,
                                std::string_view doing, std::string_view nobody) {
  descriptor fd(::open(path.c_str(), flags | O_NONBLOCK | O_CLOEXEC, 0666));
  if (fd.get() < 0) {
    const int err = errno;
    if (err == missing_end)  // ENXIO: a FIFO opened to write that nothing reads from
      throw error(fmt::format("{} is a pipe that nothing {}; tessel does not wait for one",
                              quoted(path), nobody));
    fail_with_errno(doing, path, err);
  }
  const int status = ::fcntl(fd.get(), F_GETFL);
  if (status < 0 || ::fcntl(fd.get(), F_SETFL, status & ~O_NONBLOCK) < 0)
    fail_with_errno(doing, path, errno);
  return fd;
}

}  // namespace

void check_path(const std::filesystem::path& path, file_use use) {
  struct stat link {};
  if (::lstat(path.c_str(), &link) != 0) {
    const int err = errno;
    if (err == ENOENT && use != file_use::read) return;  // created on opening
    fail_with_errno(use == file_use::read ? "read" : "look at", path, err);
  }
  struct stat target = link;
  if (S_ISLNK(link.st_mode) && ::stat(path.c_str(), &target) != 0) {
    std::error_code ec;
    const auto to = std::filesystem::read_symlink(path, ec);
    throw error(
        fmt::format("{} is a symbolic link to {}, which does not exist", quoted(path), quoted(to)));
  }
  const auto kind = kind_of(target.st_mode);
  if (kind.empty()) return;
  if (S_ISDIR(target.st_mode))
    throw error(fmt::format("{} is a directory, not a file", quoted(path)));
  if (S_ISSOCK(target.st_mode) || S_ISBLK(target.st_mode))
    throw error(fmt::format("{} is {}, not a file", quoted(path), kind));
  if (use == file_use::study)
    throw error(fmt::format(
        "{} is {}: a study file is a regular file (SQLite reads and writes it in place, "
        "with a journal beside it)",
        quoted(path), kind));
}

std::string read_file_at_most_bytes(const std::filesystem::path& path, std::size_t limit) {
  check_path(path, file_use::read);
  const auto fd = open_without_waiting(path, O_RDONLY, 0, "open", "");
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) fail_with_errno("read", path, errno);
  if (S_ISDIR(st.st_mode))  // it changed since check_path looked
    throw error(fmt::format("{} is a directory, not a file", quoted(path)));
  std::string text;
  std::array<char, 1 << 16> block{};
  bool first = true;
  while (text.size() <= limit) {
    const std::size_t want = std::min(block.size(), limit + 1 - text.size());
    const auto n = ::read(fd.get(), block.data(), want);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fail_with_errno("read", path, errno);
    // A FIFO opened while nothing had it open to write reads as empty at
    // once: say so, rather than parse an empty text.
    if (n == 0 && first && S_ISFIFO(st.st_mode))
      throw error(fmt::format(
          "{} is a pipe that nothing writes to; tessel does not wait for a writer", quoted(path)));
    if (n == 0) break;
    first = false;
    text.append(block.data(), static_cast<std::size_t>(n));
  }
  return text;
}

std::string read_file(const std::filesystem::path& path) {
  // One below the largest size: read_file_at_most_bytes reads up to limit + 1.
  return read_file_at_most_bytes(path, std::numeric_limits<std::size_t>::max() - 1);
}

void write_file(const std::filesystem::path& path, std::string_view text) {
  check_path(path, file_use::write);
  auto fd = open_without_waiting(path, O_WRONLY | O_CREAT | O_TRUNC, ENXIO, "write", "reads from");
  while (!text.empty()) {
    const auto n = ::write(fd.get(), text.data(), text.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) fail_with_errno("write", path, n < 0 ? errno : EIO);
    text.remove_prefix(static_cast<std::size_t>(n));
  }
  if (const int err = fd.close(); err != 0) fail_with_errno("write", path, err);
}

}  // namespace tessel
