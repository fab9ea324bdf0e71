// file_guard.cpp: keeps files' bytes and puts them back (file_guard.hpp).
#include "gated/file_guard.hpp"

#include <tessel/error.hpp>

#include <fmt/format.h>

#include <fstream>
#include <sstream>

#include <unistd.h>

namespace tessel::detail {
namespace fs = std::filesystem;
namespace {

std::string read_whole(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return {};
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
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
    const bool same = fs::file_size(path, ec) == bytes.size() && !ec && read_whole(path) == bytes;
    if (same) continue;
    changed.push_back(path);
    const auto fresh = fs::path(path.string() + fmt::format(".restore-{}", ::getpid()));
    std::ofstream(fresh, std::ios::binary | std::ios::trunc)
        .write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    fs::permissions(fresh, perms, ec);
    fs::rename(fresh, path, ec);  // a new file: a process that has the old one mapped keeps it
  }
  return changed;
}

}  // namespace tessel::detail
