// file_guard.cpp: keeps files' bytes and stamps, checks them by stat and
// puts them back (file_guard.hpp).
#include "gated/file_guard.hpp"

#include <tessel/dsl.hpp>
#include <tessel/error.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstring>
#include <ctime>
#include <fstream>
#include <utility>

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

namespace tessel::detail {
namespace fs = std::filesystem;
namespace {

/// Numbers the copies of changed files kept aside, per process.
std::atomic<std::uint64_t> asides{0};

constexpr std::int64_t ns_per_s = 1'000'000'000;

/// CLOCK_REALTIME in ns: the clock the kernel stamps ctime with.
std::int64_t now_ns() {
  timespec t{};
  ::clock_gettime(CLOCK_REALTIME, &t);
  return std::int64_t{t.tv_sec} * ns_per_s + t.tv_nsec;
}

std::int64_t ns_of(const timespec& t) { return std::int64_t{t.tv_sec} * ns_per_s + t.tv_nsec; }

/// How long after a change its ctime may still be the one a second change
/// stamps: the kernel stamps ctime from its coarse clock, which lags by up
/// to a tick (10 ms at HZ = 100; 20 ms allowed), truncated to the file
/// system's granularity. That granularity is not exposed; the stamps are
/// multiples of it, so it is taken as the largest power of ten of ns (up to
/// 100 ms) dividing both, or 2 s when both are whole seconds (ext3's 1 s,
/// FAT's 2 s): never less than a granularity of 1 s or 2 s or of a power of
/// ten, the others being below the tick's 20 ms.
std::int64_t slack_of(const struct stat& st) {
  constexpr std::int64_t tick = 20'000'000;
  const auto a = st.st_mtim.tv_nsec, b = st.st_ctim.tv_nsec;
  if (a == 0 && b == 0) return tick + 2 * ns_per_s;
  std::int64_t grain = 1;
  while (grain < 100'000'000 && a % (grain * 10) == 0 && b % (grain * 10) == 0) grain *= 10;
  return tick + grain;
}

/// Whether `path` holds exactly `bytes`: read in chunks and compared, with
/// no copy of the whole file.
bool holds(const fs::path& path, const std::string& bytes) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::array<char, 65536> chunk{};
  std::size_t at = 0;
  for (;;) {
    in.read(chunk.data(), chunk.size());
    const auto n = static_cast<std::size_t>(in.gcount());
    if (n == 0) break;
    if (n > bytes.size() - at || std::memcmp(chunk.data(), bytes.data() + at, n) != 0) return false;
    at += n;
  }
  return at == bytes.size();
}

/// A descriptor of `path` holding a shared flock on it; -1 when it cannot
/// be opened or locked.
int shared_lock_on(const fs::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd >= 0 && ::flock(fd, LOCK_SH) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

}  // namespace

file_guard::~file_guard() {
  for (const auto& f : files_)
    if (f.lock >= 0) ::close(f.lock);
}

void file_guard::add(const fs::path& file, hold what) {
  const auto before = now_ns();
  struct stat st {};
  if (::stat(file.c_str(), &st) != 0 || !S_ISREG(st.st_mode))
    throw error(fmt::format("cannot read {} to guard it", file.string()));
  // Read after the stat: a write between them is seen at the first check.
  std::string bytes;
  try {
    bytes = read_text_file(file, max_bytes);
  } catch (const error& e) {
    throw error(fmt::format("cannot guard {} (its bytes are kept in memory, at most {} MiB): {}",
                            file.string(), max_bytes >> 20, e.what()));
  }
  std::error_code ec;
  auto perms = fs::status(file, ec).permissions();
  if (ec) perms = fs::perms::owner_read | fs::perms::owner_write;
  kept k{file, std::move(bytes), perms, slack_of(st), std::nullopt, -1};
  if (what == hold::shared_lock) k.lock = shared_lock_on(file);
  const std::lock_guard lock(mutex_);
  k.trusted = trust(stamps_of(st), before, k.slack_ns);
  files_.push_back(std::move(k));
}

bool file_guard::empty() const {
  const std::lock_guard lock(mutex_);
  return files_.empty();
}

std::int64_t file_guard::slack(const fs::path& file) const {
  const std::lock_guard lock(mutex_);
  for (const auto& f : files_)
    if (f.path == file) return f.slack_ns;
  return 0;
}

std::uint64_t file_guard::reads() const {
  const std::lock_guard lock(mutex_);
  return reads_;
}

void file_guard::restore_locked(kept& file) {
  const auto& path = file.path;
  std::error_code ec;
  // The changed file is kept beside, not lost (a person may have edited
  // it): a second name for its bytes before the kept ones replace it.
  if (fs::exists(path, ec)) {
    const auto aside = fs::path(path.string() +
                                fmt::format(".changed-{}-{}", ::getpid(), asides.fetch_add(1) + 1));
    fs::create_hard_link(path, aside, ec);
    if (ec) fs::copy_file(path, aside, ec);
  }
  const auto fresh = fs::path(path.string() + fmt::format(".restore-{}", ::getpid()));
  std::ofstream(fresh, std::ios::binary | std::ios::trunc)
      .write(file.bytes.data(), static_cast<std::streamsize>(file.bytes.size()));
  fs::permissions(fresh, file.perms, ec);
  // Locked before it has the name: never a moment without the lock there.
  int lock = file.lock >= 0 ? shared_lock_on(fresh) : -1;
  fs::rename(fresh, path, ec);  // a new file: a process that has the old one mapped keeps it
  if (lock >= 0 && !ec) std::swap(lock, file.lock);
  if (lock >= 0) ::close(lock);
}

file_guard::stamps file_guard::stamps_of(const struct stat& st) {
  return {static_cast<std::uint64_t>(st.st_dev), static_cast<std::uint64_t>(st.st_ino),
          static_cast<std::int64_t>(st.st_size), ns_of(st.st_mtim), ns_of(st.st_ctim)};
}

std::optional<file_guard::stamps> file_guard::trust(const stamps& now, std::int64_t before,
                                                    std::int64_t slack_ns) const {
  // A run in progress could hold the file mapped shared and writable: Linux
  // stamps a mapped page's write at its first write fault only, so once it
  // has written the page (the same bytes, say) it can change it again with
  // no stamp moving. With no run in progress its processes and their
  // mappings are gone, and any write moves ctime.
  if (!open_.empty()) return std::nullopt;
  // A second write within the slack could stamp the same ctime.
  if (now.ctime_ns > before - slack_ns) return std::nullopt;
  return now;
}

std::uint64_t file_guard::check_locked() {
  const auto check = ++checks_;
  const auto before = now_ns();
  std::vector<change> found;
  for (std::size_t i = 0; i < files_.size(); ++i) {
    auto& f = files_[i];
    struct stat st {};
    std::optional<stamps> now;
    if (::stat(f.path.c_str(), &st) == 0) now = stamps_of(st);
    if (now && now == f.trusted) continue;
    // The bytes are read after the stat: a write after it changes the
    // stamps again, and the next check sees it.
    ++reads_;
    if (now && now->size == static_cast<std::int64_t>(f.bytes.size()) && holds(f.path, f.bytes)) {
      f.trusted = trust(*now, before, f.slack_ns);
      continue;
    }
    found.push_back({i, check});
    restore_locked(f);
    // The restored file's stamps are taken at a later check that compares
    // its bytes (trust()): its ctime is now, too recent to trust yet.
    f.trusted.reset();
  }
  if (!open_.empty()) changes_.insert(changes_.end(), found.begin(), found.end());
  return check;
}

void file_guard::close_locked(std::uint64_t id) {
  open_.erase(id);
  auto first = UINT64_MAX;
  for (const auto& [other, start] : open_) first = std::min(first, start);
  std::erase_if(changes_, [first](const change& c) { return c.found_at <= first; });
}

file_guard::run_scope::run_scope(file_guard* guard) : guard_(guard) {
  if (guard_ == nullptr) return;
  const std::lock_guard lock(guard_->mutex_);
  start_ = guard_->check_locked();
  id_ = guard_->next_scope_++;
  guard_->open_.emplace(id_, start_);
  open_ = true;
}

file_guard::run_scope::~run_scope() {
  if (!open_) return;
  const std::lock_guard lock(guard_->mutex_);
  guard_->close_locked(id_);
}

std::vector<fs::path> file_guard::run_scope::changed() {
  if (!open_) return {};
  const std::lock_guard lock(guard_->mutex_);
  (void)guard_->check_locked();
  // A change found after this run's first check was made after it (which
  // saw the file intact or put it back), while the run was in progress.
  std::vector<bool> blamed(guard_->files_.size(), false);
  for (const auto& c : guard_->changes_)
    if (start_ < c.found_at) blamed[c.file] = true;
  guard_->close_locked(id_);
  open_ = false;
  std::vector<fs::path> names;
  for (std::size_t i = 0; i < blamed.size(); ++i)
    if (blamed[i]) names.push_back(guard_->files_[i].path);
  return names;
}

}  // namespace tessel::detail
