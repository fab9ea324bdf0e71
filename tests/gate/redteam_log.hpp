// redteam_log.hpp: what the class12 and class13 tests share: reading what
// the red team's kernels and command modes log (tests/gate/programs: one
// line per event, "computed", "pid N", ...), and the gated command that runs
// a mode of programs/gate_program.cpp.
#pragma once

#include <tessel/backends.hpp>
#include <tessel/cpu.hpp>
#include <tessel/dsl.hpp>

#include "temp_folder.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <linux/capability.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace tessel::testing {

/// Gives up CAP_SYS_PTRACE (bounding, effective and permitted) on the calling thread,
/// and so in every process it starts after: the rights of a user who is not
/// root, which may read the memory and open the files of its own dumpable
/// processes only. A no-op when the test does not run as root; false when
/// it could not. (A cpu kernel's process holds no capability since round
/// fifteen, so it no longer reaches a tessel that gave up only this one, as
/// it reaches a tessel of a user who is not root where the ptrace policy
/// allows: docs/gate.md, "Round fifteen".)
inline bool as_a_user() {
  if (::geteuid() == 0 &&  // root's exec would give it back: from the bounding set too
      ::prctl(PR_CAPBSET_DROP, CAP_SYS_PTRACE, 0L, 0L, 0L) != 0)
    return false;
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2]{};
  if (::syscall(SYS_capget, &header, data) != 0) return false;
  data[CAP_TO_INDEX(CAP_SYS_PTRACE)].effective &= ~CAP_TO_MASK(CAP_SYS_PTRACE);
  data[CAP_TO_INDEX(CAP_SYS_PTRACE)].permitted &= ~CAP_TO_MASK(CAP_SYS_PTRACE);
  data[CAP_TO_INDEX(CAP_SYS_PTRACE)].inheritable &= ~CAP_TO_MASK(CAP_SYS_PTRACE);
  return ::syscall(SYS_capset, &header, data) == 0;
}

/// `folder`/log, the folder made writable by every user (mode 0777): a cpu
/// kernel that tessel runs as root runs as another user
/// (nobody: docs/gate.md, "Round sixteen") and writes its log there itself.
inline std::filesystem::path kernel_log(const temp_folder& folder) {
  std::filesystem::permissions(folder.path(), std::filesystem::perms::all);
  return folder.path() / "log";
}

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

/// What a red-team kernel's evaluation gave: its measurement and the lines
/// its processes logged.
struct twice_run {
  tessel::measurement m;
  std::vector<std::string> log;
};

/// Evaluates `o`'s kernel and reference (y = 2 x over 4096 floats, the
/// honest kernel 200 us a call), gated, unpinned unless `cpus` says (a
/// shared test machine: pinning would only add contention), 3 to 8 samples, with
/// $TESSEL_REDTEAM_LOG (added to `o`'s environment) in a new folder named
/// `log_prefix`-...; its log lines come back.
inline twice_run run_twice(tessel::cpu_options o, std::string_view log_prefix,
                           const std::string& cpus = "off") {
  const temp_folder logs(log_prefix);
  const auto log = kernel_log(logs);
  o.inputs = "x:N";
  o.outputs = "y:N";
  o.cpus = cpus;
  o.racing = {3, 8, 0.0, 0.02, 2.0};
  o.kill_grace_s = 0.2;
  o.environment["TESSEL_REDTEAM_LOG"] = log.string();  // beside any of the caller's
  const auto s = tessel::parse_space("space twice { const N = 4096  param us : {200} }");
  tessel::cpu_backend b(o);
  b.prepare(s);
  twice_run r;
  r.m = b.evaluate(s, *s.default_config());
  r.log = lines_of(log);
  return r;
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

/// One evaluation of a gated command and what its runs logged.
struct command_run {
  measurement m;
  std::vector<std::string> log;
};

/// gated_command(`mode`, default options, `secret`) evaluated once on a
/// 48x40x32 matmul, its runs logging to a file of their own
/// (TESSEL_REDTEAM_LOG), in a folder made in TMPDIR.
inline command_run run_logged(const std::string& mode, std::uint64_t secret) {
  const temp_folder logs;
  command_options o;
  o.environment = {{"TESSEL_REDTEAM_LOG", (logs.path() / "log").string()}};
  auto b = gated_command(mode, o, secret);
  const auto s =
      parse_space("space t { const M = 48  const K = 40  const N = 32  param tile : {1} }");
  b.prepare(s);
  command_run r{b.evaluate(s, *s.default_config()), {}};
  r.log = lines_of(logs.path() / "log");
  return r;
}
#endif

}  // namespace tessel::testing
