// class12_test.cpp: round seven, a red team of host kernels. Each cheat is a
// real kernel for the cpu backend (programs/redteam_kernels.cpp, compiled
// and run by the backend as a user's kernel is) or a mode of the gated
// command (programs/gate_program.cpp), written the way an agent cutting
// corners would: returning before the work is done, mutating its inputs,
// detecting the timing loop, planting the next call's answer in its input,
// leaving a daemon behind, surviving SIGTERM, looking around its folders,
// forging the loader's answer (no gain since round twelve), replacing the
// reference (the cpu backend's library in the compile cache, a gated
// command's reference program: both caught now), never exiting. Each case
// asserts today's verdict, caught or not (docs/gate.md, "Round eight").
#include <tessel/backends.hpp>
#include <tessel/cpu.hpp>
#include <tessel/dsl.hpp>

#include "redteam_log.hpp"
#include "temp_folder.hpp"
#include "work_dir.hpp"

#include <doctest/doctest.h>
#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

namespace {

namespace fs = std::filesystem;
using namespace tessel;
using namespace tessel::testing;

/// TMPDIR set to `dir` for the case (the backends' scratch folders go there).
struct tmpdir_as {
  std::string before;
  bool had = false;
  explicit tmpdir_as(const fs::path& dir) {
    if (const char* v = std::getenv("TMPDIR")) {  // NOLINT(concurrency-mt-unsafe)
      had = true;
      before = v;
    }
    ::setenv("TMPDIR", dir.c_str(), 1);  // NOLINT(concurrency-mt-unsafe): one thread
  }
  ~tmpdir_as() {
    if (had)
      ::setenv("TMPDIR", before.c_str(), 1);  // NOLINT(concurrency-mt-unsafe)
    else
      ::unsetenv("TMPDIR");  // NOLINT(concurrency-mt-unsafe)
  }
  tmpdir_as(const tmpdir_as&) = delete;
  tmpdir_as& operator=(const tmpdir_as&) = delete;
};

using cpu_run = twice_run;

/// The compile cache of this round's kernels (work_dir.hpp).
std::string round_cache() { return test_dirs::work_dir(TESSEL_CPU_TEST_CACHE); }

/// Evaluates redteam_kernels.cpp's `function` on the cpu backend, as a
/// user's kernel with its reference, gated; its log lines come back.
cpu_run run_cpu(const std::string& function, double run_timeout_s = 20,
                const std::string& cache = round_cache(), double min_sample_s = 2e-4,
                const std::string& reference = "twice_reference",
                const std::map<std::string, std::string>& environment = {},
                const std::string& kernel_user = "nobody") {
  tessel::cpu_options o;
  o.environment = environment;
  o.kernel_user = kernel_user;
  o.kernel = redteam_kernel(function);
  o.reference = redteam_kernel(reference);
  o.flags = "-O1";
  o.cache_dir = cache;
  o.min_sample_s = min_sample_s;
  o.run_timeout_s = run_timeout_s;
  o.gate_settings.secret = 12;
  return run_twice(o, "tessel-class12");  // (6) knows it in the TMPDIR by its name
}

bool alive(pid_t pid) { return ::kill(pid, 0) == 0 || errno == EPERM; }

/// How many of the processes logged as `pids` are still alive; each one is
/// killed (a daemon the case started, by its id), so none outlives the test.
std::size_t kill_survivors(const std::vector<std::string>& pids) {
  std::size_t survivors = 0;
  for (const auto& text : pids) {
    const auto pid = static_cast<pid_t>(std::stol(text));
    if (alive(pid)) {
      ++survivors;
      ::kill(pid, SIGKILL);
    }
  }
  return survivors;
}

}  // namespace

TEST_CASE("class 12: the honest host kernel passes, every call computed") {
  const auto r = run_cpu("rt_honest");
  INFO(r.m.message);
  REQUIRE(r.m.status == status::ok);
  // It spins 200 us a call. What the timing subtracts from each sample (the
  // handoff's and the input changes' cost) is measured apart, so a sample's
  // jitter against it can take a few us off (197 us, once, on a loaded
  // machine): the bound is 3/4 of it, which still tells the kernel's work
  // from a forged answer ten times faster (20 us, as rt_count_calls spins).
  CHECK(r.m.objective >= 0.75 * 200e-6);
  CHECK(count(r.log, "computed") == r.log.size());
}

TEST_CASE("class 12: (1) returning before the work is done is caught: suspicious") {
  // A detached thread writes y 500 ms after the call returned: the loader
  // writes the outputs when the call returns, still NaN (poisoned), and a
  // NaN where the reference is finite is suspicious.
  const auto r = run_cpu("rt_early_return");
  INFO(r.m.message);
  CHECK(r.m.status == status::suspicious);
  CHECK(r.m.message.find("is nan") != std::string::npos);
  CHECK(r.m.samples.empty());  // never timed
}

TEST_CASE("class 12: (2) zeroing its inputs after computing is caught: suspicious") {
  // Before round eight's input check, every gate run passed (a process of
  // its own with fresh inputs) and the timing loop's later calls computed on
  // zeros, caught on the last timed call's outputs. Now the loader compares
  // the inputs with its own copy after the call: caught in the first gate run.
  const auto r = run_cpu("rt_zero_inputs");
  INFO(r.m.message);
  CHECK(r.m.status == status::suspicious);
  CHECK(r.m.message.find("in the gate (run 1 of ") == 0);
  CHECK(r.m.message.find("suspicious: the kernel wrote its input x") != std::string::npos);
  CHECK(count(r.log, "computed") == 1);
}

TEST_CASE("class 12: (3) computing once per process and copying after is caught: suspicious") {
  // A gate run's only call, and the timing's first warm-up, compute; every
  // later call in the timing loop copies the first answer (and spins a
  // tenth of the time, to stay above the floor). Before round seven's loop
  // rule the timing loop called the kernel on one input set, so the copy
  // was right (ok); now the inputs change before every call, and the last
  // call's copy is judged on the inputs that call had.
  const auto r = run_cpu("rt_count_calls");
  INFO(r.m.message);
  CHECK(r.m.status == status::suspicious);
  CHECK(r.m.message.find("computes differently when it is timed") != std::string::npos);
  CHECK(count(r.log, "copied") >= 3);  // every timed call but the first warm-up
}

TEST_CASE("class 12: (4) planting the next call's answer in its input buffer is caught") {
  // Inputs are writable (tensor::as<T>() is a T*): the kernel overwrites x
  // with its answer, and later calls copy x to y. Before: ok (y = 2 x is
  // elementwise, so the loop's exchanges permuted the planted answer along
  // with the inputs). Now the loader keeps a copy of the inputs made before
  // the first call and compares after the call: caught in its first run.
  const auto r = run_cpu("rt_plant_input");
  INFO(r.m.message);
  CHECK(r.m.status == status::suspicious);
  CHECK(r.m.message.find("suspicious: the kernel wrote its input x (inputs are read-only)") !=
        std::string::npos);
  CHECK(count(r.log, "computed") == 1);
  CHECK(count(r.log, "copied") == 0);  // never timed
}

TEST_CASE("class 12: (4) writing an input only in the timing loop is caught after the timing") {
  // One element changed from the third call of a process on: the gate runs
  // (one call each) pass, and the timing's copy, changed by the same
  // exchanges as the inputs outside the clock, differs at the end.
  const auto r = run_cpu("rt_write_late");
  INFO(r.m.message);
  CHECK(r.m.status == status::suspicious);
  CHECK(r.m.message == "suspicious: the kernel wrote its input x (inputs are read-only)");
  CHECK(r.m.samples.empty());
  CHECK(count(r.log, "computed") >= 5);  // the timing made its calls (the message: not a gate run)
}

TEST_CASE("class 12: an honest kernel reading its inputs passes the input check over many calls") {
  // 2 ms samples of a 200 us kernel: about ten calls a sample, each after an
  // exchange made on the inputs and, outside the clock, on the loader's copy.
  const auto r = run_cpu("rt_honest", 20, round_cache(), 2e-3);
  INFO(r.m.message);
  REQUIRE(r.m.status == status::ok);
  CHECK(r.m.metrics.at("iters_per_sample") >= 5);
  CHECK(count(r.log, "computed") > 30);
}

TEST_CASE("class 12: (5) a SIGTERM handler does not save a hanging kernel: timeout") {
  const auto start = std::chrono::steady_clock::now();
  const auto r = run_cpu("rt_term_hang", 1);
  INFO(r.m.message);
  CHECK(r.m.status == status::timeout);  // SIGKILL kill_grace after SIGTERM
  CHECK(r.m.message.find("ran past 1 s and was killed (the run limit; change it with "
                         "--backend-set timeout=S") != std::string::npos);
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(60));  // a bound
}

TEST_CASE("class 12: (5) a kernel cannot leave a daemon behind") {
  // setsid and a double fork leave tessel's process group: the group kill
  // when the loader exits does not reach it. Before round eight: it outlived
  // the loader (it could spin on the timing CPU and slow every later
  // candidate). Now each run has a supervisor process, a child subreaper, so
  // the orphan becomes its child, and the supervisor kills every child it has
  // left once the loader has exited. A process of the test's own, detached
  // the same way but started outside any run, is left alone.
  int ready[2];
  REQUIRE(::pipe(ready) == 0);
  const pid_t bystander = ::fork();
  REQUIRE(bystander >= 0);
  if (bystander == 0) {
    ::setsid();
    ::close(ready[0]);
    ::close(ready[1]);
    ::sleep(300);
    ::_exit(0);
  }
  ::close(ready[1]);
  char byte = 0;
  (void)::read(ready[0], &byte, 1);  // EOF once it is in its own session
  ::close(ready[0]);
  // Since round thirteen the kernel's process cannot fork at all: the daemon
  // is never started, and the kernel is refused at its first call
  // (docs/gate.md, "Round thirteen"); a gated command's daemon is still
  // killed by its run's supervisor (tests/backends/namespace_test.cpp).
  const auto r = run_cpu("rt_daemon");
  INFO(r.m.message);
  CHECK(r.m.status == status::suspicious);
  CHECK(r.m.message.find("tried to create a process") != std::string::npos);
  const auto pids = starting(r.log, "pid ");
  CHECK(pids.empty());
  CHECK(kill_survivors(pids) == 0);
  CHECK(alive(bystander));  // not a run's: not killed
  ::kill(bystander, SIGKILL);
  CHECK(::waitpid(bystander, nullptr, 0) == bystander);
}

TEST_CASE("class 12: (6) what a host kernel can see around it") {
  const temp_folder tmp;
  const tmpdir_as in_tmp(tmp.path());
  // As a kernel of tessel's own user sees it (kernel_user=root here; a
  // tessel that is not root): its run's folder is its user's. A root
  // tessel's kernel, nobody since round sixteen, cannot even list it.
  const auto r = run_cpu("rt_snoop", 20, round_cache(), 2e-4, "twice_reference", {}, "root");
  INFO(r.m.message);
  REQUIRE(r.m.status == status::ok);
  // Its folder holds its own inputs only (no other set's, no reference's).
  const auto inputs = starting(r.log, "see input folder ");
  REQUIRE(!inputs.empty());
  for (const auto& name : inputs) CHECK(name == "x.npy");
  // The TMPDIR holds its own scratch folder only (and the test's log folder):
  // the reference's runs and the other gate runs are gone when it runs.
  const auto runs = count(r.log, "computed");
  std::size_t scratch = 0;
  for (const auto& name : starting(r.log, "see tmpdir ")) {
    if (name.rfind("tessel-cpu-", 0) == 0)
      ++scratch;
    else
      CHECK(name.rfind("tessel-class12-", 0) == 0);
  }
  CHECK(scratch == runs);
  // Not hidden: its parent's command line (a gate_secret given on tessel's
  // command line is readable there). The compile cache, which it can write
  // (docs/gate.md, round seven), is no longer the folder of its own
  // library: since session 17 the kernel is loaded from a sealed copy,
  // /proc/self/fd/N (until then, every run saw the writable cache there).
  CHECK(count(r.log, "see parent test_gate_class12") == runs);
  CHECK(count(r.log, "see own folder /proc/self/fd") == runs);
  CHECK(count(r.log, "see writable cache") == 0);
}

TEST_CASE("class 12: (7) a kernel that forges the loader's answer line gains nothing") {
  // It finds the answer channel (the one pipe past stderr), and an atexit
  // handler writes a line of 20 us samples after the loader's own, with the
  // calls it counted. Until round twelve the kernel ran in the loader's
  // process, the pipe was the answer channel and the backend took the last
  // line: ok at 20 us for a kernel that takes 200 us. Now the kernel runs in
  // the loader's child, which holds no answer channel: the pipe it finds is
  // its handoff with the timing parent, which has stopped reading, and the
  // answer is the parent's (docs/gate.md, "Round twelve: the answer";
  // class16_test.cpp's forgers reach further).
  const auto r = run_cpu("rt_forge");
  INFO(r.m.message);
  REQUIRE(r.m.status == status::ok);
  CHECK(!starting(r.log, "forged on fd ").empty());  // the pipe it holds
  CHECK(r.m.objective > 1e-4);                       // its 200 us, not the forged 20
  CHECK(r.m.samples != std::vector<double>(5, 2e-5));
}

TEST_CASE("class 12: (7) a kernel that overwrites the reference's library is caught") {
  // The compile cache is the user's folder, writable by the kernel's
  // process; the reference is built there like any config and run from
  // there for every input set. Before: the wrong kernel (2 x + 1) copied its
  // library over the reference's in its first gate run, the reference then
  // computed 2 x + 1 too, and the trial was ok. Now the loader and the
  // reference's library are checked around every run and put back.
  // Since session 17 it does not find the cache through its own library
  // (next case); a kernel whose author knows where the cache is (the
  // user's folder) still does.
  // A kernel of the cache's user (kernel_user=root here, as any kernel of
  // a tessel that is not root): a root tessel's kernel, nobody since round
  // sixteen, cannot write root's cache at all.
  const temp_folder cache;  // a fresh cache: this case tampers with it
  const auto r = run_cpu("rt_hijack", 20, cache.path().string(), 2e-4, "twice_reference",
                         {{"TESSEL_REDTEAM_CACHE", cache.path().string()}}, "root");
  INFO(r.m.message);
  CHECK(!starting(r.log, "planted ").empty());
  CHECK(r.m.status == status::suspicious);
  // Said like every broken rule in a verdict (the gate's, the command
  // backend's guard): "suspicious: " and what happened, after the run.
  CHECK(r.m.message.find("in the gate (run 1 of ") == 0);
  CHECK(r.m.message.find("): suspicious: its process changed tessel's own files in the compile "
                         "cache (") != std::string::npos);
  CHECK(count(r.log, "computed") == 1);  // caught in its first run
  // The reference is itself again: the honest kernel passes on this cache.
  const auto honest = run_cpu("rt_honest", 20, cache.path().string());
  INFO(honest.m.message);
  CHECK(honest.m.status == status::ok);
}

TEST_CASE("class 12: (7) a kernel does not find the cache through its own library") {
  // dladdr of its own code names the file it was loaded from: until session
  // 17 its build in the compile cache, since then its sealed copy,
  // /proc/self/fd/N. Looking beside it, it plants nothing, and is judged
  // on its own wrong 2 x + 1.
  const temp_folder cache;
  const auto r = run_cpu("rt_hijack", 20, cache.path().string());
  INFO(r.m.message);
  CHECK(starting(r.log, "planted ").empty());
  CHECK(r.m.status == status::incorrect);
}

// --- the gated command ---------------------------------------------------------------

namespace {

tessel::space matmul_space() {
  return tessel::parse_space(
      "space t { const M = 48  const K = 40  const N = 32  param tile : {1} }");
}

/// Evaluates gated_command(`mode`), whose runs each leave a daemon behind and
/// log its pid: every run logged one, and none outlives the evaluation.
void check_daemons_killed(const std::string& mode) {
  const auto r = run_logged(mode, 12);
  const auto& m = r.m;
  const auto& log = r.log;
  INFO(m.message);
  CHECK(m.status == status::ok);
  const auto runs = static_cast<std::size_t>(m.metrics.at("gate_runs"));
  const auto pids = starting(log, "pid ");
  CHECK(pids.size() == runs);  // each run logs its daemon's pid before it goes on
  CHECK(kill_survivors(pids) == 0);
}

}  // namespace

TEST_CASE("class 12: a gated command that never exits is a timeout under the default limit") {
  // Before: no limit by default, and the tuning run hung here. The default
  // (600 s) is shortened for the test; the message says where the limit
  // came from and how to change it.
  tessel::command_options o;
  o.default_timeout_s = 0.5;
  auto b = gated_command("hang", o, 12);
  const auto s = matmul_space();
  b.prepare(s);
  const auto start = std::chrono::steady_clock::now();
  const auto m = b.evaluate(s, *s.default_config());
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(30));  // a bound
  INFO(m.message);
  CHECK(m.status == status::timeout);
  CHECK(m.message.find("run 1 of ") == 0);
  CHECK(m.message.find("timed out after 0.5 s (the default limit: no timeout was set; set one "
                       "with --backend-set timeout=S") != std::string::npos);
  CHECK(m.samples.empty());
}

TEST_CASE("class 12: (6) what a gated command can see around it") {
  const temp_folder tmp, logs;
  const tmpdir_as in_tmp(tmp.path());
  tessel::command_options o;
  o.environment = {{"TESSEL_REDTEAM_LOG", (logs.path() / "log").string()}};
  auto b = gated_command("snoop", o, 12);
  const auto s = matmul_space();
  b.prepare(s);
  const auto m = b.evaluate(s, *s.default_config());
  INFO(m.message);
  REQUIRE(m.status == status::ok);
  const auto log = lines_of(logs.path() / "log");
  const auto runs = static_cast<std::size_t>(m.metrics.at("gate_runs"));
  // Each run's folder holds its own in/ and out/ only; the TMPDIR holds that
  // folder only (the reference's folders are gone, its outputs kept in
  // tessel's memory).
  const auto seen = starting(log, "see run folder ");
  CHECK(seen.size() == 2 * runs);
  CHECK(std::set<std::string>(seen.begin(), seen.end()) == std::set<std::string>{"in", "out"});
  CHECK(starting(log, "see tmpdir ").size() == runs);
}

TEST_CASE("class 12: (5) a daemon a gated command leaves behind is killed when it exits") {
  // As for the cpu loader: the process-group kill when the program exits
  // does not reach a process that called setsid; the run's supervisor does.
  check_daemons_killed("daemon");
}

TEST_CASE("class 12: (5) a run's leftovers are killed, another run's in progress are not") {
  // Two plain commands, each leaving a setsid daemon that writes its pid
  // (this machine's, from /proc: $$ is its run's PID namespace's):
  // `slow` keeps running while `quick` starts and ends. When quick's root
  // exits, its daemon is killed; slow's, a child of slow's supervisor, is
  // not, until slow's own root exits. Slow goes on until the test has looked
  // (the file `go`, or 60 s as a bound): before, it lingered a fixed 3 s,
  // within which quick had to start and end, on a loaded machine too.
  const temp_folder dir;
  const auto go = (dir.path() / "go").string();
  const auto script = [&](const std::string& name, bool wait_for_go) {
    const auto file = (dir.path() / name).string();
    return std::vector<std::string>{
        "/bin/sh", "-c",
        fmt::format("setsid sh -c 'read -r s < /proc/self/stat; echo ${{s%% *}} > {0}.tmp && "
                    "mv {0}.tmp {0}; exec sleep 300' & "
                    "while [ ! -s {0} ]; do sleep 0.01; done; {1}"
                    "echo '{{\"objective\": 0.001}}'",
                    file,
                    wait_for_go ? fmt::format("i=0; while [ ! -e {} ] && [ $i -lt 6000 ]; do "
                                              "sleep 0.01; i=$((i + 1)); done; ",
                                              go)
                                : "")};
  };
  const auto pid_in = [&](const std::string& name) {
    std::ifstream in(dir.path() / name);
    long pid = 0;
    in >> pid;
    return static_cast<pid_t>(pid);
  };
  const auto s = matmul_space();
  tessel::command_backend slow(script("slow", true), {});
  tessel::command_backend quick(script("quick", false), {});
  slow.prepare(s);
  quick.prepare(s);
  tessel::measurement slow_m;
  std::thread other([&] { slow_m = slow.evaluate(s, *s.default_config()); });
  for (int wait = 0; wait < 6000 && !fs::exists(dir.path() / "slow"); ++wait)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  const auto quick_m = quick.evaluate(s, *s.default_config());
  const pid_t slow_daemon = pid_in("slow"), quick_daemon = pid_in("quick");
  const bool slow_alive = alive(slow_daemon), quick_alive = alive(quick_daemon);
  std::ofstream(go).put('\n');  // slow may end now
  other.join();
  INFO(quick_m.message);
  INFO(slow_m.message);
  CHECK(quick_m.status == status::ok);
  CHECK(slow_m.status == status::ok);
  REQUIRE(slow_daemon > 0);
  REQUIRE(quick_daemon > 0);
  CHECK(!quick_alive);  // its run had ended
  CHECK(slow_alive);    // its run was still going on
  CHECK(!alive(slow_daemon));
  for (const pid_t pid : {slow_daemon, quick_daemon})
    if (alive(pid)) ::kill(pid, SIGKILL);  // (daemons this case started, by their ids)
}

TEST_CASE("class 12: (5) a daemon that hides its environment is killed when its run ends") {
  // Before session 13: tessel found a run's leftovers by a marker in their
  // environment (TESSEL_RUN), so a daemon that overwrote its environment
  // block, or exec'd with an empty environment, outlived its run. Now the
  // run's supervisor kills every process orphaned inside the run, whatever
  // its environment.
  for (const std::string mode : {"daemon_erased", "daemon_bare"}) {
    CAPTURE(mode);
    check_daemons_killed(mode);
  }
}

TEST_CASE("class 12: (7) a gated command that replaces the reference program is caught") {
  // The reference command is a user's file like the candidate: here a copy of
  // gate_program in a private folder. The candidate writes zeros, after
  // replacing that file with a script that writes zeros too. Before: the
  // reference ran after the candidate's first run, agreed, and the trial was
  // ok. Now the backend keeps the bytes of the reference's files when it is
  // prepared and checks them around every run: the run that changed them is
  // suspicious, and they are put back.
  const temp_folder dir;
  const auto reference = dir.path() / "reference_program";
  fs::copy_file(TESSEL_GATE_PROGRAM, reference);
  const auto original = lines_of(reference);
  tessel::command_options o;
  o.environment = {{"TESSEL_REDTEAM_REFERENCE", reference.string()}};
  o.gate_inputs = "A:MxK,B:KxN";
  o.gate_outputs = "C:MxN";
  o.gate_reference = reference.string() + " reference";
  o.gate.secret = 12;
  const auto s = matmul_space();
  // The control: zeros against the real reference are caught.
  tessel::command_backend zeros(fmt::format("{} zeros", TESSEL_GATE_PROGRAM), o);
  zeros.prepare(s);
  const auto control = zeros.evaluate(s, *s.default_config());
  INFO(control.message);
  CHECK((control.status == status::incorrect || control.status == status::suspicious));
  tessel::command_backend b(fmt::format("{} hijack", TESSEL_GATE_PROGRAM), o);
  b.prepare(s);
  const auto m = b.evaluate(s, *s.default_config());
  INFO(m.message);
  CHECK(m.status == status::suspicious);
  CHECK(m.message.find("run 1 of ") == 0);  // its first run, before the reference ran
  CHECK(m.message.find(fmt::format(": suspicious: its process changed the reference's files ({}); "
                                   "they are restored",
                                   reference.string())) != std::string::npos);
  CHECK(lines_of(reference) == original);  // put back: the program again, not the script
  CHECK(::access(reference.c_str(), X_OK) == 0);
  // What the candidate wrote is kept beside it, not lost (had a person edited
  // the reference, the edit would be there).
  std::vector<fs::path> asides;
  for (const auto& entry : fs::directory_iterator(dir.path()))
    if (entry.path().filename().string().starts_with("reference_program.changed-"))
      asides.push_back(entry.path());
  REQUIRE(asides.size() == 1);
  CHECK(lines_of(asides[0]) != original);
  // The reference is itself again: an honest candidate passes against it.
  tessel::command_backend honest(fmt::format("{} honest", TESSEL_GATE_PROGRAM), o);
  honest.prepare(s);
  const auto after = honest.evaluate(s, *s.default_config());
  INFO(after.message);
  CHECK(after.status == status::ok);
}

TEST_CASE("class 12: a reference that writes its inputs is named as the reference's fault") {
  // The same loader rule holds for the user's reference: an in-place
  // reference is the user's bug, and the message says whose it is, once.
  cpu_run r;
  std::string error;
  try {
    r = run_cpu("rt_honest", 20, round_cache(), 2e-4, "rt_zero_inputs");
  } catch (const tessel::error& e) {
    error = e.what();
  }
  const auto text = error.empty() ? r.m.message : error;
  INFO(text);
  CHECK(text.find("the reference broke a rule every kernel keeps: the kernel wrote its input x") !=
        std::string::npos);
  CHECK(text.find("the reference suspicious") == std::string::npos);
  CHECK(text.find("suspicious: ") == std::string::npos);  // the status once, not in the message
}
