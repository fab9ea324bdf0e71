// class16_test.cpp: round twelve, host kernels that forge the cpu loader's
// answer (docs/gate.md, "Round twelve: the answer"). Until this round the
// loader called the kernel in its own process and wrote its answer (the
// samples, the calls made) on a pipe the kernel held too; the backend took
// the last JSON line it read. A kernel that computed right and wrote a line
// of small samples with the calls it counted was timed at its forged time.
// Now the loader times from a process the kernel is not in (the kernel runs
// in its child, which holds no answer channel), and the backend accepts
// exactly one answer line, the one that carries the run's token. Each
// kernel is real (programs/forge_kernels.cpp), compiled and run by the
// backend as a user's kernel is, beside the honest control.
#include <tessel/backends.hpp>
#include <tessel/cpu.hpp>
#include <tessel/dsl.hpp>

#include "redteam_log.hpp"
#include "temp_folder.hpp"

#include <doctest/doctest.h>

#include <string>

namespace {

using tessel::status;
using tessel::testing::as_a_user;
using tessel::testing::count;
using tessel::testing::lines_of;
using tessel::testing::starting;
using tessel::testing::temp_folder;

struct cpu_run {
  tessel::measurement m;
  std::vector<std::string> log;
};

/// Evaluates forge_kernels.cpp's `function` on the cpu backend, gated, as a
/// user's kernel with its reference (y = 2 x over 4096 floats, 200 us a call).
cpu_run run_cpu(const std::string& function) {
  REQUIRE(as_a_user());  // root opens any process's files (/proc/PID/fd)
  const std::string file =
      std::string(TESSEL_SOURCE_DIR) + "/tests/gate/programs/forge_kernels.cpp";
  const temp_folder logs;
  const auto log = logs.path() / "log";
  tessel::cpu_options o;
  o.kernel = file + ":" + function;
  o.reference = file + ":twice_reference";
  o.inputs = "x:N";
  o.outputs = "y:N";
  o.flags = "-O1";
  o.cache_dir = TESSEL_CPU_TEST_CACHE;
  o.cpus = "off";  // a shared test machine
  o.racing = {3, 8, 0.0, 0.02, 2.0};
  o.min_sample_s = 2e-4;
  o.run_timeout_s = 10;
  o.kill_grace_s = 0.2;
  o.environment = {{"TESSEL_REDTEAM_LOG", log.string()}};
  o.gate_settings.secret = 16;
  const auto s = tessel::parse_space("space twice { const N = 4096  param us : {200} }");
  tessel::cpu_backend b(o);
  b.prepare(s);
  cpu_run r;
  r.m = b.evaluate(s, *s.default_config());
  r.log = lines_of(log);
  return r;
}

/// Whether a forger's run is caught: rejected, or timed no faster than half
/// the honest kernel (its forged 20 us not counted).
bool caught(const cpu_run& cheat, const cpu_run& honest) {
  return !cheat.m.ok() || cheat.m.objective > 0.5 * honest.m.objective;
}

/// Whether a forged line reached a pipe of the processes above the loader
/// (tessel's own end of the answer pipe among them).
bool forged_above(const cpu_run& r) { return !starting(r.log, "forged on /proc/").empty(); }

}  // namespace

TEST_CASE("class 16: a kernel that forges the answer everywhere and exits is caught") {
  // On its fourth call, after computing it right, it writes the answer the
  // loader would write for its calls on every pipe it holds and every pipe
  // its ancestors hold, kills its parent when that is the timing parent,
  // and exits. Before (597a530): the answer pipe was its own fd 3; the
  // backend read the forged line, and the run was ok at 20 us.
  const cpu_run honest = run_cpu("fg_honest");
  INFO(honest.m.message);
  REQUIRE(honest.m.ok());
  const cpu_run r = run_cpu("fg_exit");
  INFO(r.m.message);
  MESSAGE("fg_exit: " << to_string(r.m.status) << ", " << r.m.message);
  CHECK(caught(r, honest));
  CHECK(!r.m.ok());
  // The kernel's process holds no answer channel (the pipes it holds are
  // its handoff with the timing parent), and the parent is not dumpable:
  // only the pipes of the processes above it, reached through /proc, carry
  // its line, and a line without the run's token is the sign of a forger.
  CHECK(count(r.log, "parent's pipes opened 0") == 1);
  if (forged_above(r)) CHECK(r.m.status == status::suspicious);
}

TEST_CASE("class 16: a second answer after the loader's is caught or not read") {
  // An atexit handler writes a line of 20 us samples after the loader's
  // answer, everywhere it can. Before: the backend took the last line, the
  // forged one, and the run was ok at 20 us (class 12's case (7) with
  // the ancestors' pipes too).
  const cpu_run honest = run_cpu("fg_honest");
  REQUIRE(honest.m.ok());
  const cpu_run r = run_cpu("fg_second");
  INFO(r.m.message);
  MESSAGE("fg_second: " << to_string(r.m.status) << ", objective " << r.m.objective << " (honest "
                        << honest.m.objective << ")");
  CHECK(caught(r, honest));
  if (forged_above(r))
    CHECK(r.m.status == status::suspicious);  // two answers, one without the token
  else
    CHECK(r.m.ok());  // its line reached nobody: timed at its work
}

TEST_CASE("class 16: a kernel that takes the answer channel for itself is caught") {
  // It duplicates the pipe it holds past stderr, puts /dev/null in its
  // place so the loader's answer is lost, and writes its own at exit on
  // the duplicate. Before: the only line the backend read was the forged
  // one, and the run was ok at 20 us. Now the pipe it finds is its
  // handoff with the timing parent, not the answer: the parent hears no
  // "done" and the run is stopped at its limit.
  const cpu_run honest = run_cpu("fg_honest");
  REQUIRE(honest.m.ok());
  const cpu_run r = run_cpu("fg_redirect");
  INFO(r.m.message);
  MESSAGE("fg_redirect: " << to_string(r.m.status) << ", " << r.m.message);
  CHECK(caught(r, honest));
  CHECK(!r.m.ok());
}
