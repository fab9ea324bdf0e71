// cache_files.cpp: private names, their sweep and sealed copies (cache_files.hpp).
#include "cpu/cache_files.hpp"

#include <tessel/error.hpp>

#include <fmt/format.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <ctime>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#ifdef __linux__
#include <sys/sendfile.h>
#endif
#include <unistd.h>

namespace tessel::detail {
namespace fs = std::filesystem;
namespace {

/// What follows PATH.PID-N in a private name: private_name's kinds, and the
/// unkept builds of earlier versions.
constexpr std::array<std::string_view, 4> private_kinds{".tmp", ".d", ".copy", ".uncached.so"};

/// The decimal number that ends `text` (moved before it); nullopt when none.
std::optional<long> trailing_number(std::string_view& text) {
  std::size_t start = text.size();
  while (start > 0 && text[start - 1] >= '0' && text[start - 1] <= '9') --start;
  long value = 0;
  const auto digits = text.substr(start);
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
  if (digits.empty() || ec != std::errc() || end != digits.data() + digits.size())
    return std::nullopt;
  text.remove_suffix(digits.size());
  return value;
}

/// The PID of the process a private name belongs to (NAME.PID-N.KIND), or
/// the file guard's that writes the bytes it puts back under NAME.restore-PID
/// before renaming them over NAME (file_guard::restore_locked); nullopt for
/// any other name.
std::optional<pid_t> owner_of(std::string_view name) {
  constexpr std::string_view restore = ".restore-";
  if (auto rest = name; const auto pid = trailing_number(rest))
    if (*pid > 0 && rest.ends_with(restore) && rest.size() > restore.size())
      return static_cast<pid_t>(*pid);
  for (const auto kind : private_kinds) {
    if (!name.ends_with(kind)) continue;
    name.remove_suffix(kind.size());
    const auto counter = trailing_number(name);
    if (!counter || !name.ends_with('-')) return std::nullopt;
    name.remove_suffix(1);
    const auto pid = trailing_number(name);
    if (!pid || *pid <= 0 || !name.ends_with('.')) return std::nullopt;
    return static_cast<pid_t>(*pid);
  }
  return std::nullopt;
}

bool write_all(int fd, const char* data, std::size_t size) {
  while (size > 0) {
    const auto n = ::write(fd, data, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data += n;
    size -= static_cast<std::size_t>(n);
  }
  return true;
}

/// Copies what remains of `from` to `to`: in the kernel (sendfile) where it
/// can, else through a buffer.
bool copy_all(int from, int to) {
#ifdef __linux__
  for (;;) {
    const auto n = ::sendfile(to, from, nullptr, std::size_t{1} << 30);
    if (n > 0 || (n < 0 && errno == EINTR)) continue;
    if (n == 0) return true;
    if (errno != EINVAL && errno != ENOSYS) return false;
    break;  // not between these files: nothing was copied
  }
#endif
  std::array<char, 1 << 16> buffer;  // NOLINT(cppcoreguidelines-pro-type-member-init): read into
  for (;;) {
    const auto n = ::read(from, buffer.data(), buffer.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return n == 0;
    if (!write_all(to, buffer.data(), static_cast<std::size_t>(n))) return false;
  }
}

/// A descriptor of the regular file `path` to read, locked `lock` (flock);
/// -1 when it cannot be opened or locked, is something else (a link, a
/// FIFO: opened without waiting), or `path` names another file once it is
/// locked (removed or replaced meanwhile).
int open_regular(const fs::path& path, int lock) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) return -1;
  struct stat st {};
  struct stat named {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || ::flock(fd, lock) != 0 ||
      ::lstat(path.c_str(), &named) != 0 || named.st_ino != st.st_ino ||
      named.st_dev != st.st_dev) {
    ::close(fd);
    return -1;
  }
  return fd;
}

#ifdef __linux__
/// A sealed read-only memfd holding what remains of `from`; -1 when memfds
/// cannot be made or sealed here.
int sealed_copy(int from) {
  // MFD_EXEC (Linux 6.3; older headers lack it): executable even where the
  // system makes memfds non-executable by default. An older kernel refuses it.
  constexpr unsigned exec = 0x10U;
  int fd = ::memfd_create("tessel-build", MFD_CLOEXEC | MFD_ALLOW_SEALING | exec);
  if (fd < 0 && errno == EINVAL)
    fd = ::memfd_create("tessel-build", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) return -1;
  // Sealed, then opened again read-only and the writable descriptor
  // closed: exec refuses a file that something holds open to write.
  constexpr int seals = F_SEAL_WRITE | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL;
  const int read_only =
      copy_all(from, fd) && ::fcntl(fd, F_ADD_SEALS, seals) == 0
          ? ::open(fmt::format("/proc/self/fd/{}", fd).c_str(), O_RDONLY | O_CLOEXEC)
          : -1;
  ::close(fd);
  return read_only;
}
#endif

}  // namespace

std::optional<std::string> read_regular(const fs::path& path, struct stat* status) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return std::nullopt;
  struct stat st {};
  std::optional<std::string> out;
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
    // Sized by the fstat, one byte more to see the end in the same read; a
    // file that grew meanwhile is read on.
    std::string text(static_cast<std::size_t>(st.st_size) + 1, '\0');
    std::size_t have = 0;
    for (;;) {
      if (have == text.size()) text.resize(text.size() * 2);
      const auto n = ::read(fd, text.data() + have, text.size() - have);
      if (n < 0 && errno == EINTR) continue;
      if (n == 0) {
        text.resize(have);
        out = std::move(text);
      }
      if (n <= 0) break;
      have += static_cast<std::size_t>(n);
    }
  }
  ::close(fd);
  if (out && status != nullptr) *status = st;
  return out;
}

std::string private_name(const fs::path& path, std::string_view what) {
  static std::atomic<std::uint64_t> counter{0};
  return path.string() + fmt::format(".{}-{}.{}", ::getpid(), counter.fetch_add(1), what);
}

namespace {

/// The number after the next `skip` words of `in`; nullopt when none.
std::optional<double> number_after(std::istream&& in, int skip) {
  std::string word;
  for (int i = 0; i < skip; ++i)
    if (!(in >> word)) return std::nullopt;
  double value = 0;
  if (!(in >> value)) return std::nullopt;
  return value;
}

/// Seconds since the process `pid` started, by /proc (the time since boot,
/// less its start time after boot); nullopt when /proc does not say.
std::optional<double> age_s(pid_t pid) {
  const auto stat = read_regular(fs::path("/proc") / std::to_string(pid) / "stat");
  const auto up = number_after(std::ifstream("/proc/uptime"), 0);
  const long per_s = ::sysconf(_SC_CLK_TCK);
  // The fields after the command's name, in parentheses (it may hold
  // spaces): the start time, in clock ticks, is the 20th.
  const auto name_end = stat ? stat->rfind(')') : std::string::npos;
  if (!up || per_s <= 0 || name_end == std::string::npos) return std::nullopt;
  const auto ticks = number_after(std::istringstream(stat->substr(name_end + 1)), 19);
  if (!ticks) return std::nullopt;
  return *up - *ticks / static_cast<double>(per_s);
}

/// Whether the process running as `pid` started more than 2 s after `file`
/// was last written, so that it cannot have written it (its PID was used
/// again; 2 s: the clocks' ticks and a second's rounding); false where /proc
/// does not say.
bool started_after(pid_t pid, const fs::path& file) {
  struct stat st {};
  timespec now{};
  const auto age = age_s(pid);
  if (!age || ::stat(file.c_str(), &st) != 0 || ::clock_gettime(CLOCK_REALTIME, &now) != 0)
    return false;
  const double written_s_ago = static_cast<double>(now.tv_sec - st.st_mtim.tv_sec) +
                               static_cast<double>(now.tv_nsec - st.st_mtim.tv_nsec) * 1e-9;
  return *age + 2 < written_s_ago;
}

}  // namespace

std::size_t remove_leftovers_of_dead(const fs::path& dir) {
  std::size_t removed = 0;
  std::error_code ec;
  for (auto it =
           fs::recursive_directory_iterator(dir, fs::directory_options::skip_permission_denied, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    const auto name = it->path().filename().string();
    const auto pid = owner_of(name);
    if (!pid) continue;
    // A guard writes BUILD.restore-PID afresh (its mtime: when), so a
    // process that started after that is not its writer. A private name
    // may be a copy or a link that keeps an older mtime: only ESRCH says.
    const bool gone =
        (::kill(*pid, 0) != 0 && errno == ESRCH) ||
        (name.find(".restore-") != std::string::npos && started_after(*pid, it->path()));
    std::error_code failed;
    if (gone && fs::remove(it->path(), failed)) ++removed;
  }
  return removed;
}

bool remove_unless_in_use(const fs::path& file) {
  const int fd = open_regular(file, LOCK_EX | LOCK_NB);
  std::error_code ec;
  const bool removed = fd >= 0 ? fs::remove(file, ec) : !fs::exists(file, ec);
  if (fd >= 0) ::close(fd);
  return removed;
}

std::shared_ptr<const sealed_file> sealed_file::copy_of(const fs::path& from) {
  const int source = open_regular(from, LOCK_SH);
  if (source < 0) return nullptr;
  std::shared_ptr<sealed_file> out(new sealed_file());
  out->lease_ = source;
#ifdef __linux__
  out->fd_ = sealed_copy(source);
  // /proc/self: tessel's own descriptor here, and the run's, which inherits
  // it under the same number: a run in a user namespace of its own may not
  // open tessel's /proc/PID/fd.
  if (out->fd_ >= 0) out->path_ = fmt::format("/proc/self/fd/{}", out->fd_);
#endif
  int mapped = out->fd_;
  struct stat written {};
  if (mapped < 0) {
    out->path_ = private_name(from, "copy");
    mapped = ::open(out->path_.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, S_IRWXU);
    // Read-only once written (r-x: the loader is exec'd): a process that
    // opens it to write is refused unless it changes the mode first (as
    // its owner can) or is root. Every user's r-x: a root tessel's kernel
    // runs as another user (docs/cpu.md, "The kernel's user") and loads it.
    const bool copied =
        mapped >= 0 && ::lseek(source, 0, SEEK_SET) == 0 && copy_all(source, mapped) &&
        ::fchmod(mapped, S_IRUSR | S_IXUSR | S_IRGRP | S_IXGRP | S_IROTH | S_IXOTH) == 0 &&
        ::fstat(mapped, &written) == 0;
    if (!copied) {
      const auto why = std::strerror(errno);  // NOLINT(concurrency-mt-unsafe): a message
      if (mapped >= 0) ::close(mapped);
      throw error(fmt::format("backend cpu: cannot copy {} to {}: {}", from.string(),
                              out->path_.string(), why));
    }
    // Mapped from a read-only descriptor: a mapping holds its file open,
    // and exec refuses a file that something holds open to write.
    ::close(mapped);
    mapped = ::open(out->path_.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  }
  struct stat st {};
  const bool sized = mapped >= 0 && ::fstat(mapped, &st) == 0;
  // The file it wrote, not one another process renamed over its name
  // between the two opens: what is mapped is what a caller checks (and a
  // fresh compile's manifest records).
  if (sized && mapped != out->fd_ && (st.st_ino != written.st_ino || st.st_dev != written.st_dev)) {
    ::close(mapped);
    throw error(fmt::format(
        "backend cpu: the private copy {} of {} was replaced before it was opened again (a "
        "process of the same user writes the cache)",
        out->path_.string(), from.string()));
  }
  if (sized && st.st_size > 0) {
    out->size_ = static_cast<std::size_t>(st.st_size);
    out->map_ = ::mmap(nullptr, out->size_, PROT_READ, MAP_PRIVATE, mapped, 0);
  }
  const int why = errno;  // words only for the message, when there is one
  if (mapped >= 0 && mapped != out->fd_) ::close(mapped);
  if (!sized || out->map_ == MAP_FAILED) {
    out->map_ = nullptr;
    throw error(fmt::format("backend cpu: cannot map the copy of {}: {}", from.string(),
                            std::strerror(why)));  // NOLINT(concurrency-mt-unsafe): a message
  }
  return out;
}

std::string_view sealed_file::bytes() const noexcept {
  return map_ == nullptr ? std::string_view() : std::string_view(static_cast<char*>(map_), size_);
}

sealed_file::~sealed_file() {
  if (map_ != nullptr) ::munmap(map_, size_);
  if (lease_ >= 0) ::close(lease_);
  std::error_code ec;
  if (fd_ >= 0)
    ::close(fd_);
  else if (!path_.empty())
    fs::remove(path_, ec);
}

}  // namespace tessel::detail
