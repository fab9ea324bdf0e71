#include "storage/writer_lock.hpp"

#include <tessel/error.hpp>

#include <fmt/format.h>

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <string>

namespace tessel::detail::storage {
namespace {

std::string holder_of(int fd) {
  std::array<char, 256> text{};
  const auto n = ::pread(fd, text.data(), text.size() - 1, 0);
  std::string holder = n > 0 ? std::string(text.data(), static_cast<std::size_t>(n)) : "";
  while (!holder.empty() && (holder.back() == '\n' || holder.back() == ' ')) holder.pop_back();
  return holder.empty() ? "another process" : holder;
}

std::string describe_self() {
  std::array<char, 256> host{};
  if (::gethostname(host.data(), host.size() - 1) != 0) host[0] = '\0';
  const std::time_t now = std::time(nullptr);
  std::array<char, 32> when{};
  std::strftime(when.data(), when.size(), "%Y-%m-%d %H:%M:%S UTC", std::gmtime(&now));
  return fmt::format("pid {} on host {}, since {}\n", ::getpid(), host.data(), when.data());
}

/// Whether `fd` is still the file at `path`: a holder that released the lock
/// removes the sidecar, so a lock taken on the removed file means nothing.
bool still_linked(int fd, const std::filesystem::path& path) {
  struct stat by_fd {};
  struct stat by_path {};
  if (::fstat(fd, &by_fd) != 0 || ::stat(path.c_str(), &by_path) != 0) return false;
  return by_fd.st_dev == by_path.st_dev && by_fd.st_ino == by_path.st_ino;
}

}  // namespace

writer_lock::writer_lock(const std::filesystem::path& study_file)
    : path_(study_file.string() + "-lock") {
  while (true) {
    const int fd = ::open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0)
      throw error(fmt::format("study file '{}': cannot open its lock file '{}': {}",
                              study_file.string(), path_.string(), std::strerror(errno)));
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
      const int err = errno;
      const auto holder = err == EWOULDBLOCK ? holder_of(fd) : "";
      ::close(fd);
      if (err == EINTR) continue;
      if (err != EWOULDBLOCK)
        throw error(fmt::format("study file '{}': cannot lock '{}': {}", study_file.string(),
                                path_.string(), std::strerror(err)));
      throw error(fmt::format(
          "study file '{}' is being written by another tessel process ({}): one process "
          "writes a study at a time; wait for it to end, or pass another --db",
          study_file.string(), holder));
    }
    if (!still_linked(fd, path_)) {
      ::close(fd);
      continue;
    }
    const auto self = describe_self();
    const bool described = ::ftruncate(fd, 0) == 0 && ::pwrite(fd, self.data(), self.size(), 0) ==
                                                          static_cast<ssize_t>(self.size());
    (void)described;  // without it the lock still holds; a refusal just says less
    fd_ = fd;
    return;
  }
}

writer_lock::~writer_lock() {
  ::unlink(path_.c_str());
  ::close(fd_);
}

}  // namespace tessel::detail::storage
