// Running the built `tessel` tool from tests, as a user would.
#pragma once

#include "work_dir.hpp"

#include <doctest/doctest.h>

#include <sys/wait.h>
#include <unistd.h>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

namespace cli_testing {

/// Where the tests write (TESSEL_CLI_WORK_DIR, the build's tests/cli/, or that
/// path under TESSEL_TEST_WORK_DIR: work_dir.hpp).
inline const std::string work_folder = test_dirs::work_dir(TESSEL_CLI_WORK_DIR);

struct result {
  int code = -1;
  std::string out;
  std::string err;
};

/// The file's bytes, "" when it cannot be read. Not tessel::read_file: this
/// test runs the tool as a binary and links no library, and its callers poll
/// files that do not exist yet (a missing file reads as "", not an error).
inline std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

/// Runs the shell command `before 'tessel' ARGS after` from tests/cli/, its
/// stdout and stderr captured.
inline result run_tessel(const std::string& before, const std::string& args,
                         const std::string& after) {
  const std::string base = work_folder + "/run_" + std::to_string(::getpid());
  const std::string command = std::string("cd '") + TESSEL_CLI_TESTS_DIR + "' && " + before + "'" +
                              TESSEL_CLI_PATH + "' " + args + after + " >'" + base + ".out' 2>'" +
                              base + ".err'";
  const int status = std::system(command.c_str());
  result r;
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = read_text(base + ".out");
  r.err = read_text(base + ".err");
  INFO("tessel ", args, "\nstdout:\n", r.out, "\nstderr:\n", r.err);
  return r;
}

/// Runs `tessel ARGS` (ARGS as a shell would split them) from tests/cli/.
inline result tessel(const std::string& args) { return run_tessel("", args, ""); }

/// tessel(args) under `ulimit -v memory_kib` and `timeout seconds`, so input
/// that would take unbounded memory or time fails the test instead of hanging it.
/// Under AddressSanitizer (the fuzz preset builds the tool with it too) only
/// the time is limited: its shadow memory is terabytes of address space.
inline result tessel_limited(const std::string& args, long memory_kib, int seconds) {
#if defined(__SANITIZE_ADDRESS__)
  constexpr bool asan = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
  constexpr bool asan = true;
#else
  constexpr bool asan = false;
#endif
#else
  constexpr bool asan = false;
#endif
  const std::string memory = asan ? "" : "ulimit -v " + std::to_string(memory_kib) + "; ";
  return run_tessel("(" + memory + "timeout " + std::to_string(seconds) + " ", args, ")");
}

inline bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

}  // namespace cli_testing
