// redteam_log.hpp: reading what the red team's kernels and command modes log
// (tests/gate/programs: one line per event, "computed", "pid N", ...), for
// the class12 and class13 tests.
#pragma once

#include <algorithm>
#include <cstddef>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace tessel::testing {

/// The lines of `file` (none when it cannot be read).
inline std::vector<std::string> lines_of(const std::filesystem::path& file) {
  std::ifstream in(file);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

/// How many lines are exactly `what`.
inline std::size_t count(const std::vector<std::string>& lines, const std::string& what) {
  return static_cast<std::size_t>(std::count(lines.begin(), lines.end(), what));
}

/// The rest of each line that starts with `prefix`, in order.
inline std::vector<std::string> starting(const std::vector<std::string>& lines,
                                         const std::string& prefix) {
  std::vector<std::string> out;
  for (const auto& l : lines)
    if (l.rfind(prefix, 0) == 0) out.push_back(l.substr(prefix.size()));
  return out;
}

}  // namespace tessel::testing
