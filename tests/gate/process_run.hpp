// process_run.hpp: what class17_test.cpp and class18_test.cpp share: a
// kernel of programs/process_kernels.cpp run gated on the cpu backend as a
// user's kernel, and the checks of a refused call (docs/gate.md, "Round
// thirteen", "Round fourteen"). Each test's target sets its own compile
// cache (TESSEL_CPU_TEST_CACHE) and log prefix.
#pragma once

#include <tessel/backends.hpp>
#include <tessel/cpu.hpp>
#include <tessel/dsl.hpp>

#include "as_user.hpp"
#include "redteam_log.hpp"
#include "temp_folder.hpp"
#include "work_dir.hpp"

#include <doctest/doctest.h>

#include <filesystem>
#include <functional>
#include <map>
#include <string>

#include <unistd.h>

namespace tessel::testing {

using cpu_run = twice_run;

/// Evaluates process_kernels.cpp's `function` on the cpu backend, gated, as
/// a user's kernel with its reference, compiled with `flags`, the loader's
/// environment holding `environment` too, with its compile cache in `cache`
/// (the test's own by default), its log in a folder named `log_prefix`-...,
/// its process run as `kernel_user` where the test is root (cpu_options).
inline cpu_run run_process_kernel(
    const std::string& log_prefix, const std::string& function, const std::string& flags = "-O1",
    const std::map<std::string, std::string>& environment = {},
    const std::string& cache = test_dirs::work_dir(TESSEL_CPU_TEST_CACHE),
    const std::string& cpus = "off", const std::string& kernel_user = "nobody") {
  tessel::cpu_options o;
  o.kernel =
      std::string(TESSEL_SOURCE_DIR) + "/tests/gate/programs/process_kernels.cpp:" + function;
  o.reference = redteam_kernel("twice_reference");
  o.flags = flags;
  o.cache_dir = cache;
  o.min_sample_s = 2e-4;
  o.run_timeout_s = 10;
  o.gate_settings.secret = 17;
  o.environment = environment;
  o.kernel_user = kernel_user;
  return run_twice(o, log_prefix, cpus);
}

/// run_process_kernel, its outcome told (doctest's MESSAGE: not in a forked child).
inline cpu_run run_told(const std::string& log_prefix, const std::string& function,
                        const std::string& flags = "-O1",
                        const std::map<std::string, std::string>& environment = {},
                        const std::string& cpus = "off",
                        const std::string& kernel_user = "nobody") {
  auto r = run_process_kernel(log_prefix, function, flags, environment,
                              test_dirs::work_dir(TESSEL_CPU_TEST_CACHE), cpus, kernel_user);
  MESSAGE(function << ": " << to_string(r.m.status) << ", objective " << r.m.objective << ": "
                   << r.m.message);
  return r;
}

inline bool has(const cpu_run& r, const std::string& text) {
  return r.m.message.find(text) != std::string::npos;
}

/// Whether every process of the run that logged its seccomp mode had the
/// filter (mode 2), and one did at least.
inline bool filtered(const cpu_run& r) {
  return count(r.log, "seccomp 2") > 0 && count(r.log, "seccomp 0") == 0;
}

/// Checks that `r`'s kernel was refused for trying to `what` (the loader's
/// words), that it did not log `done` (what it logs when the call works),
/// and that it logged the call `call` failing with EPERM.
inline void check_refused(const cpu_run& r, const std::string& what, const std::string& done,
                          const std::string& call) {
  CHECK(r.m.status == status::suspicious);
  CHECK(has(r, "tried to " + what));
  CHECK(count(r.log, done) == 0);
  CHECK(count(r.log, call + " failed: Operation not permitted") > 0);
}

/// Runs `body` in a forked child that gives up root for `nobody`, given a
/// compile cache of its own (in a folder named `prefix`-...): its exit code,
/// 0 when all was well. Where the test is not root, 0 without running it.
inline int exit_code_as_nobody(const std::string& prefix,
                               const std::function<int(const std::string& cache)>& body) {
  if (::geteuid() != 0) {
    MESSAGE("skipped: not root, so not able to become another user");
    return 0;
  }
  const temp_folder folder(prefix);
  std::filesystem::permissions(folder.path(), std::filesystem::perms::all);
  const std::string cache = (folder.path() / "cache").string();
  return exit_code_as_user(nobody, [&body, &cache] { return body(cache); });
}

}  // namespace tessel::testing
