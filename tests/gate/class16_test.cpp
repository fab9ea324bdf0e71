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
#include "work_dir.hpp"

#include <doctest/doctest.h>

#include <map>
#include <string>

namespace {

using tessel::status;
using tessel::testing::as_a_user;
using tessel::testing::count;
using tessel::testing::starting;

using cpu_run = tessel::testing::twice_run;

/// Evaluates forge_kernels.cpp's `function` on the cpu backend, gated, as a
/// user's kernel with its reference, as a user who is not root: root opens
/// any process's files (/proc/PID/fd); `environment` added to the loader's.
cpu_run run_cpu(const std::string& function,
                const std::map<std::string, std::string>& environment = {}) {
  REQUIRE(as_a_user());
  tessel::cpu_options o;
  o.kernel = std::string(TESSEL_SOURCE_DIR) + "/tests/gate/programs/forge_kernels.cpp:" + function;
  o.reference = tessel::testing::redteam_kernel("twice_reference");
  o.flags = "-O1";
  o.cache_dir = test_dirs::work_dir(TESSEL_CPU_TEST_CACHE);
  o.min_sample_s = 2e-4;
  o.run_timeout_s = 10;
  o.gate_settings.secret = 16;
  o.environment = environment;
  return tessel::testing::run_twice(o, "tessel-class16");
}

/// The honest control's run and a cheat's, in that order.
struct runs {
  cpu_run honest, cheat;
  /// Whether the cheat is caught: rejected, or timed no faster than half
  /// the honest kernel (its forged 20 us not counted).
  [[nodiscard]] bool caught() const {
    return !cheat.m.ok() || cheat.m.objective > 0.5 * honest.m.objective;
  }
};

runs run_beside_honest(const std::string& cheat) {
  runs r{run_cpu("fg_honest"), {}};
  INFO(r.honest.m.message);
  REQUIRE(r.honest.m.ok());
  r.cheat = run_cpu(cheat);
  MESSAGE(cheat << ": " << to_string(r.cheat.m.status) << ", objective " << r.cheat.m.objective
                << " (honest " << r.honest.m.objective << "): " << r.cheat.m.message);
  return r;
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
  const runs both = run_beside_honest("fg_exit");
  CHECK(both.caught());
  CHECK(!both.cheat.m.ok());
  // The kernel's process holds no answer channel (the pipes it holds are
  // its handoff with the timing parent), and the parent is not dumpable:
  // only the pipes of the processes above it, reached through /proc, carry
  // its line, and a line without the run's token is the sign of a forger.
  CHECK(count(both.cheat.log, "parent's pipes opened 0") == 1);
  if (forged_above(both.cheat)) CHECK(both.cheat.m.status == status::suspicious);
}

TEST_CASE("class 16: a second answer after the loader's is caught or not read") {
  // An atexit handler writes a line of 20 us samples after the loader's
  // answer, everywhere it can. Before: the backend took the last line, the
  // forged one, and the run was ok at 20 us (class 12's case (7) with
  // the ancestors' pipes too).
  const runs both = run_beside_honest("fg_second");
  CHECK(both.caught());
  if (forged_above(both.cheat))
    CHECK(both.cheat.m.status == status::suspicious);  // two answers, one without the token
  else
    CHECK(both.cheat.m.ok());  // its line reached nobody: timed at its work
}

TEST_CASE("class 16: a kernel that takes the answer channel for itself is caught") {
  // It duplicates the pipe it holds past stderr, puts /dev/null in its
  // place so the loader's answer is lost, and writes its own at exit on
  // the duplicate. Before: the only line the backend read was the forged
  // one, and the run was ok at 20 us. Now the pipe it finds is its
  // handoff with the timing parent, not the answer: the parent hears no
  // "done" and the run is stopped at its limit.
  const runs both = run_beside_honest("fg_redirect");
  CHECK(both.caught());
  CHECK(both.cheat.m.status == status::timeout);
}

TEST_CASE("class 16: a kernel whose work ends at its process's exit is caught") {
  // Each call returns at once; a thread of its own computes the queued
  // calls, and an atexit handler waits for the queue, so the last call's
  // output is complete when the kernel's process ends. The loader keeps
  // the outputs as the last call's "done" left them, before it tells the
  // kernel's process to quit: they are not complete there (under the
  // first version of the split, which read them after the process ended,
  // it was ok at a fraction of its time).
  // Where its worker thread finishes the last call before the parent takes
  // the outputs (it shares the kernel's CPUs: on a loaded or one-CPU
  // machine the calls' wall time is then its work's), it is ok at the
  // honest kernel's time: it gained nothing, and it is judged as it is.
  const runs both = run_beside_honest("fg_drain");
  CHECK(both.caught());
  if (both.cheat.m.ok())
    CHECK(both.cheat.m.objective > 0.8 * both.honest.m.objective);
  else
    CHECK((both.cheat.m.status == status::incorrect || both.cheat.m.status == status::suspicious));
  CHECK(count(both.cheat.log, "drained at exit") == 1);
}

TEST_CASE("class 16: a kernel that crashes after forking is seen crashing at once") {
  // The process it forked holds the reply pipe open, so its EOF never
  // comes; the timing parent also waits on the child's pidfd, sees it end
  // and ends by the same signal, long before the run's 10 s limit. (Since
  // round thirteen a kernel cannot fork: the case runs without the filter,
  // TESSEL_CPU_SECCOMP=off, as on a system that cannot have it.) The time
  // is its runs' (the gate's and the timing's), not the compiler's: the
  // wall time around the evaluation held the kernel's compile too (the
  // loader's and the reference's as well where no case before built them),
  // 9.8 s for this case alone on a fresh cache at a load of 4.
  const cpu_run r = run_cpu("fg_fork_crash", {{"TESSEL_CPU_SECCOMP", "off"}});
  INFO(r.m.message);
  CHECK(r.m.status == status::runtime_error);
  CHECK(r.m.message.find("crashed (SIGSEGV)") != std::string::npos);
  CHECK(r.m.cost.gate_s > 0);  // it crashed in a run of the gate, which was timed
  CHECK(r.m.cost.gate_s + r.m.cost.run_s < 8);
}
