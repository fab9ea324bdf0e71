// redteam_log.hpp: what the class12 and class13 tests share: reading what
// the red team's kernels and command modes log (tests/gate/programs: one
// line per event, "computed", "pid N", ...), and the gated command that runs
// a mode of programs/gate_program.cpp.
#pragma once

#include <tessel/backends.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
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

/// `function` of programs/redteam_kernels.cpp, named as the cpu backend's
/// kernel and reference options name a user's.
inline std::string redteam_kernel(const std::string& function) {
  return std::string(TESSEL_SOURCE_DIR) + "/tests/gate/programs/redteam_kernels.cpp:" + function;
}

#ifdef TESSEL_GATE_PROGRAM
/// gate_program's `mode` as a gated command (C = A B, its reference the
/// program's honest mode), its gate keyed by `secret`.
inline command_backend gated_command(const std::string& mode, command_options o,
                                     std::uint64_t secret) {
  o.gate_inputs = "A:MxK,B:KxN";
  o.gate_outputs = "C:MxN";
  o.gate_reference = fmt::format("{} reference", TESSEL_GATE_PROGRAM);
  o.gate.secret = secret;
  return command_backend(fmt::format("{} {}", TESSEL_GATE_PROGRAM, mode), std::move(o));
}
#endif

}  // namespace tessel::testing
