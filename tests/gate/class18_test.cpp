// class18_test.cpp: round fourteen (docs/gate.md, "Round fourteen: the
// record of a refusal, the clock, the judged call"). Round thirteen's filter
// refuses a call by a SIGSYS whose handler, the loader's, records it; a
// kernel could put its own handler in its place (sigaction, signal) and
// have its refused calls answered EPERM unrecorded, falling back to honest
// work: `ok`. As root it could slow CLOCK_MONOTONIC, the timing parent's
// clock, by up to 10% for the whole machine (adjtimex's tick). Now the
// filter refuses a new action for SIGSYS and the calls that change the
// clock. (What remained, a SIGSYS that cannot be delivered, is round
// seventeen's: class20_test.cpp.) And
// kernels that work only on the last call of each run, once the only call
// the loader judged, are suspicious now for another call it draws after the
// run. Each kernel is real (programs/process_kernels.cpp), compiled and
// run by the backend as a user's kernel is.
#include "process_run.hpp"

#include <doctest/doctest.h>

#include <cstdlib>
#include <string>
#include <utility>

namespace {

using tessel::status;
using namespace tessel::testing;

cpu_run run_cpu(const std::string& function) { return run_told("tessel-class18", function); }

constexpr const char* handler_refused = "replace the loader's SIGSYS handler (rt_sigaction)";

}  // namespace

TEST_CASE("class 18: a kernel that installs its own SIGSYS handler is refused") {
  // Before (e199d0f): its handler took the filter's SIGSYS, its fork failed
  // (EPERM, as its handler answered), nothing was recorded, it computed
  // honestly after, and it was ok. Now its sigaction fails and is recorded.
  const cpu_run r = run_cpu("pk_own_handler");
  check_refused(r, handler_refused, "own handler", "sigaction");
  CHECK(count(r.log, "fork failed: Operation not permitted") > 0);  // the loader's handler answered
  CHECK(count(r.log, "forked") == 0);
}

TEST_CASE("class 18: a kernel that ignores SIGSYS is refused") {
  // Before: signal(SIGSYS, SIG_IGN) worked, and the kernel then forced the
  // filter's SIGSYS with its default action (an ignored forced signal
  // takes it): killed by SIGSYS, suspicious already. Now the signal call is
  // refused and named.
  const cpu_run r = run_cpu("pk_ignore_sigsys");
  check_refused(r, handler_refused, "own handler", "sigaction");
  CHECK(count(r.log, "forked") == 0);
}

TEST_CASE("class 18: a kernel that blocks SIGSYS is killed by it") {
  // A forced signal that is blocked is unblocked and takes its default
  // action (Linux's force_sig_info): the process ends by SIGSYS before its
  // fork returns, which the parent answers as a refusal.
  const cpu_run r = run_cpu("pk_block_sigsys");
  CHECK(r.m.status == status::suspicious);
  CHECK(has(r, "was killed by SIGSYS"));
  CHECK(count(r.log, "forked") == 0);
  CHECK(count(r.log, "fork failed: Operation not permitted") == 0);  // it never returned
}

TEST_CASE("class 18: a kernel may not change the system clock") {
  // Before, as root (CAP_SYS_TIME): adjtimex read the clock's tick and set
  // it (to the same value here; 9000 of 10000 would make CLOCK_MONOTONIC,
  // the timing parent's clock, and so every sample, 10% short, and the
  // whole machine's clock slow while it runs), and the kernel was ok. Now
  // the read is refused and named (glibc's adjtimex is clock_adjtime).
  const cpu_run r = run_cpu("pk_clock");
  check_refused(r, "change the system clock", "clock read", "adjtimex");
  CHECK(count(r.log, "clock set") == 0);
}

TEST_CASE("class 18: a user who is not root cannot replace the handler either") {
  // The filter is the same for a user who is not root (PR_SET_NO_NEW_PRIVS):
  // a forked child gives up root, with a cache of its own.
  CHECK(exit_code_as_nobody("tessel-class18-user", [](const std::string& cache) {
          const auto run = [&cache](const std::string& function) {
            return run_process_kernel("tessel-class18", function, "-O1", {}, cache);
          };
          if (!run("pk_honest").m.ok()) return 11;
          const cpu_run cheat = run("pk_own_handler");
          if (cheat.m.status != status::suspicious || !has(cheat, handler_refused)) return 12;
          if (count(cheat.log, "own handler") != 0) return 13;
          return 0;
        }) == 0);
}

namespace {

/// `function` evaluated at the cpu backend's default sample (1 ms: runs of
/// 5 calls for these 200 us kernels), and the honest kernel beside it, the
/// gate keyed by `secret`.
std::pair<cpu_run, cpu_run> beside_honest(const std::string& function, std::uint64_t secret = 17) {
  tessel::cpu_options o;
  o.kernel = std::string(TESSEL_SOURCE_DIR) + "/tests/gate/programs/process_kernels.cpp:pk_honest";
  o.reference = redteam_kernel("twice_reference");
  o.cache_dir = test_dirs::work_dir(TESSEL_CPU_TEST_CACHE);
  o.run_timeout_s = 10;
  o.gate_settings.secret = secret;
  cpu_run honest = run_twice(o, "tessel-class18");
  o.kernel =
      std::string(TESSEL_SOURCE_DIR) + "/tests/gate/programs/process_kernels.cpp:" + function;
  cpu_run r = run_twice(o, "tessel-class18");
  MESSAGE(function << ": " << to_string(r.m.status) << ", " << r.m.objective / honest.m.objective
                   << " of the honest kernel's time: " << r.m.message);
  return {std::move(honest), std::move(r)};
}

/// Checks that `lazy`, a kernel that skips its work on some calls, is
/// suspicious for a call the loader drew after its samples ("the call K of
/// N, drawn", K < N, the set's name counting the same way: "(timed, the
/// call K)").
void check_judged_call(const cpu_run& lazy) {
  CHECK(lazy.m.status == status::suspicious);
  CHECK(has(lazy, "computes differently when it is timed (the call "));
  const auto at = lazy.m.message.find("(the call ");
  REQUIRE(at != std::string::npos);
  const char* text = lazy.m.message.c_str() + at + 10;
  char* rest = nullptr;
  const auto k = std::strtoull(text, &rest, 10);
  const auto n = std::strtoull(rest + 4, &rest, 10);  // " of N"
  CHECK(std::string(rest).rfind(", drawn)", 0) == 0);
  CHECK(k > 0);
  CHECK(k < n);
  CHECK(has(lazy, "(timed, the call " + std::to_string(k) + ")"));
}

}  // namespace

TEST_CASE("class 18: a kernel that works only on the last call of each run is suspicious") {
  // The loader times samples of `iters` calls, back to back, and judged the
  // timing's last call only. The kernel counts the calls of each run and
  // computes only the call as far into its run as the run before was long,
  // leaving the others (y[0] = 0): before (d69d503), ok at about 0.2 of the
  // honest kernel (iters 5 at the default 1 ms sample for this 200 us
  // kernel). Now each call of a run writes outputs of its own, and the
  // parent draws, after the run, one of the last run's other calls to be
  // judged too: its outputs are undone (docs/gate.md, "Round fourteen").
  const auto [honest, lazy] = beside_honest("pk_last_of_run");
  REQUIRE(honest.m.ok());
  CHECK(honest.m.metrics.at("iters_per_sample") > 1);  // runs of more than one call
  check_judged_call(lazy);
  CHECK(count(lazy.log, "worked") > 0);
}

TEST_CASE("class 18: a kernel that reads its run's length in its process is suspicious") {
  // The same kernel, but it finds the run's length where the loader's
  // command holds it, on the stack above its call ({'g', calls}), and works
  // on the last call of every run: ok at about 0.2 of the honest kernel's
  // time before. Whatever the kernel's process knows of the run, the call
  // judged besides the last is drawn by the parent after the run, from a
  // seed that process never held.
  const auto [honest, lazy] = beside_honest("pk_last_by_stack");
  CHECK(honest.m.ok());
  check_judged_call(lazy);
  CHECK(count(lazy.log, "worked") > 0);
}

TEST_CASE("class 18: a kernel that skips its work in all samples but the last is suspicious") {
  // It counts the runs of calls and does a fifth of its work, leaving its
  // outputs undone, in samples 1 to 7 of the 8 run_twice races; its samples
  // differ by more than the race's 2%, so the race takes all 8. Before
  // (a77b434), only the last sample's calls were judged (its last call and
  // one drawn of it): they were right, and it was ok at about 0.21 of the
  // honest kernel's time. Now the call judged besides the last is drawn
  // over all the samples (by reservoir sampling, after each sample's run,
  // from the secret), so it falls in a skipped sample at odds 7 / 8: under
  // each of these keys it does (the draw is the same for the same key).
  for (const std::uint64_t secret : {17, 1, 2, 3}) {
    const auto [honest, lazy] = beside_honest("pk_skip_some_runs", secret);
    REQUIRE(honest.m.ok());
    CHECK(count(lazy.log, "skipped run") == 7);
    check_judged_call(lazy);  // a call of a skipped sample: the last sample's are all right
  }
}
