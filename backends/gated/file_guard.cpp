// file_guard.cpp: keeps files' bytes and puts them back (file_guard.hpp).
#include "gated/file_guard.hpp"

#include <tessel/error.hpp>

#include <fmt/format.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <sstream>

#include <unistd.h>

namespace tessel::detail {
namespace fs = std::filesystem;
namespace {

/// Numbers the copies of changed files kept aside, per process.
std::atomic<std::uint64_t> asides{0};

std::string read_whole(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return {};
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

/// Whether `path` holds exactly `bytes`: read in chunks and compared, with
/// no copy of the whole file (it is checked twice around every run).
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

}  // namespace

void file_guard::add(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) throw error(fmt::format("cannot read {} to guard it", file.string()));
  std::error_code ec;
  auto perms = fs::status(file, ec).permissions();
  if (ec) perms = fs::perms::owner_read | fs::perms::owner_write;
  const std::lock_guard lock(mutex_);
  files_.push_back({file, read_whole(file), perms});
}

bool file_guard::empty() const {
  const std::lock_guard lock(mutex_);
  return files_.empty();
}

std::vector<fs::path> file_guard::restore_changed() const {
  const std::lock_guard lock(mutex_);
  std::vector<fs::path> changed;
  for (const auto& [path, bytes, perms] : files_) {
    std::error_code ec;
    const bool same = fs::file_size(path, ec) == bytes.size() && !ec && holds(path, bytes);
    if (same) continue;
    changed.push_back(path);
    // The changed file is kept beside, not lost (a person may have edited
    // it): a second name for its bytes before the kept ones replace it.
    if (fs::exists(path, ec)) {
      const auto aside = fs::path(
          path.string() + fmt::format(".changed-{}-{}", ::getpid(), asides.fetch_add(1) + 1));
      fs::create_hard_link(path, aside, ec);
      if (ec) fs::copy_file(path, aside, ec);
    }
    const auto fresh = fs::path(path.string() + fmt::format(".restore-{}", ::getpid()));
    std::ofstream(fresh, std::ios::binary | std::ios::trunc)
        .write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    fs::permissions(fresh, perms, ec);
    fs::rename(fresh, path, ec);  // a new file: a process that has the old one mapped keeps it
  }
  return changed;
}

}  // namespace tessel::detail
