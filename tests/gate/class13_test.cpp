// class13_test.cpp: round nine, more cheats against the cpu backend and the
// gated command, each a real kernel (programs/redteam_kernels.cpp, compiled
// and run by the backend as a user's kernel is) or a mode of the gated
// command (programs/gate_program.cpp): looking for the reference's outputs
// on disk, running on more CPUs than the timing was given, reading the
// memory of the processes above it. Each case asserts today's verdict where
// it is caught; what is not caught is documented, not asserted
// (docs/gate.md, "Round nine").
#include <tessel/backends.hpp>
#include <tessel/cpu.hpp>
#include <tessel/dsl.hpp>

#include <doctest/doctest.h>
#include <fmt/format.h>

#include "redteam_log.hpp"
#include "temp_folder.hpp"
#include "work_dir.hpp"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <sched.h>
#include <unistd.h>

namespace {

namespace fs = std::filesystem;
using namespace tessel;
using namespace tessel::testing;

/// The CPUs this process may run on.
int allowed_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  return ::sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 1;
}

struct cpu_case {
  std::string function;
  std::string cpus = "off";  // a shared test machine: pinning only where the case needs it
  std::string us = "200";    // the kernel's work per call, in microseconds (one value or several)
  double min_sample_s = 2e-4;
  std::map<std::string, std::string> environment;
};

struct cpu_run {
  std::vector<tessel::measurement> m;  // one per config, evaluated at once
  std::vector<std::string> log;
};

/// Evaluates redteam_kernels.cpp's `function` on the cpu backend, as a
/// user's kernel with its reference, gated: every config of the space at
/// once (one thread each); its log lines come back.
cpu_run run_cpu(const cpu_case& c) {
  const temp_folder logs;
  const auto log = kernel_log(logs);
  tessel::cpu_options o;
  o.kernel = redteam_kernel(c.function);
  o.reference = redteam_kernel("twice_reference");
  o.inputs = "x:N";
  o.outputs = "y:N";
  o.flags = "-O1";
  o.cache_dir = test_dirs::work_dir(TESSEL_CPU_TEST_CACHE);
  o.cpus = c.cpus;
  o.racing = {3, 8, 0.0, 0.02, 2.0};
  o.min_sample_s = c.min_sample_s;
  o.run_timeout_s = 20;
  o.kill_grace_s = 0.2;
  o.environment = c.environment;
  o.environment["TESSEL_REDTEAM_LOG"] = log.string();
  o.gate_settings.secret = 13;
  const auto s =
      tessel::parse_space(fmt::format("space twice {{ const N = 4096  param us : {{{}}} }}", c.us));
  tessel::cpu_backend b(o);
  b.prepare(s);
  std::vector<tessel::config> configs;
  for (const auto& one : s.configs()) configs.push_back(one);
  cpu_run r;
  r.m.resize(configs.size());
  std::vector<std::thread> threads;
  for (std::size_t i = 0; i < configs.size(); ++i)
    threads.emplace_back([&, i] { r.m[i] = b.evaluate(s, configs[i]); });
  for (auto& t : threads) t.join();
  r.log = lines_of(log);
  return r;
}

/// A case of the CPU rules: `function` timed on `cpus` (auto: the last
/// allowed CPU), 2 ms of work a call, 20 ms samples.
cpu_case cpu_rule_case(const std::string& function, const std::string& cpus) {
  cpu_case c;
  c.function = function;
  c.cpus = cpus;
  c.us = "2000";
  c.min_sample_s = 2e-2;
  return c;
}

/// The verdict on `function` pinned to one CPU (cpus=auto), which widens
/// what it runs on; none where this process may run on one CPU only.
std::optional<cpu_run> widening_run(const std::string& function) {
  if (allowed_cpus() < 2) {
    MESSAGE("skipped: one CPU, nothing to widen to");
    return std::nullopt;
  }
  return run_cpu(cpu_rule_case(function, "auto"));
}

/// CPU and wall time (rt_widen_helpers' "cpus used" lines).
struct use {
  double cpu_s = 0, wall_s = 0;
};

/// What rt_widen_helpers' last process used over its last `calls` calls,
/// by its lines "cpus used R cpu C wall W since S" (C and W since its first
/// call began, at S: one process's); none when it logged fewer than `calls`
/// calls.
std::optional<use> race_use(const std::vector<std::string>& log, std::size_t calls) {
  std::vector<use> lines;  // the last process's, in order
  std::string last_start;
  for (const auto& line : log) {
    std::istringstream words(line);
    std::string cpus, used, ratio, cpu_word, wall_word, since_word, start;
    use u;
    if (!(words >> cpus >> used >> ratio >> cpu_word >> u.cpu_s >> wall_word >> u.wall_s >>
          since_word >> start) ||
        cpus != "cpus")
      continue;
    if (start != last_start) lines.clear();
    last_start = start;
    lines.push_back(u);
  }
  if (calls == 0 || lines.size() < calls) return std::nullopt;
  const use end = lines.back();
  const use start = lines.size() > calls ? lines[lines.size() - 1 - calls] : use{};
  return use{end.cpu_s - start.cpu_s, end.wall_s - start.wall_s};
}

}  // namespace

TEST_CASE("class 13: (1) a host kernel that scavenges the reference's outputs finds none: caught") {
  // It scans TMPDIR, /tmp and the compile cache for a folder holding an input
  // beside an output (the reference's loader folder: x.npy, out_y.npy),
  // stashes each pair keyed by the input's bytes (the stash outlives its
  // runs) and answers from the stash when its own input is there, wrong
  // (2 x + 1) otherwise. Two configs are evaluated at once, so one's gate
  // runs and reference runs go on while the other's kernel scans. A set is
  // drawn for one session only and its reference runs after the candidate's
  // run on it, in a folder removed when it ends: nothing it can find answers
  // its own inputs.
  const temp_folder stash;
  cpu_case c;
  c.function = "rt_scavenge";
  c.us = "200, 300";
  c.environment = {{"TESSEL_REDTEAM_STASH", stash.path().string()}};
  const auto r = run_cpu(c);
  MESSAGE("reference outputs stashed: " << starting(r.log, "stashed ").size());
  for (const auto& m : r.m) {
    INFO(m.message);
    CHECK((m.status == status::incorrect || m.status == status::suspicious));
  }
  MESSAGE("answered from the stash on inputs it was given before: " << count(r.log, "hit repeat"));
  CHECK(count(r.log, "hit new") == 0);
  CHECK(count(r.log, "miss") >= r.m.size());
}

TEST_CASE("class 13: (2) a kernel that widens its own affinity is caught: suspicious") {
  // Timed pinned to one CPU (cpus=auto: the last allowed one), it sets its
  // affinity to every CPU and runs its work on four threads at once. Before:
  // nothing looked (ok, timed on the CPUs of the runs beside it). Now the
  // loader checks that the affinity after the timing is within the one it
  // was given.
  const auto r = widening_run("rt_widen");
  if (!r) return;
  const auto& m = r->m.at(0);
  INFO(m.message);
  CHECK(m.status == status::suspicious);
  CHECK(m.message == "suspicious: the kernel widened its CPU affinity (it was given 1 CPU(s))");
  CHECK(m.samples.empty());
  CHECK(count(r->log, "computed") > 5);  // caught after the timing, not in a gate run
}

TEST_CASE("class 13: (2) a kernel whose helper threads run on other CPUs is caught by CPU time") {
  // The same, the calling thread's affinity left as given: only its pool of
  // three helper threads widen theirs, so the affinity check sees nothing.
  // The loader's CPU rule does: over the timed samples its process used more
  // CPU time than one CPU gives in that wall time. On a loaded machine
  // (autogroups: a session's processes share one fair share) it may get no
  // more than one CPU: then it passes, having gained little.
  const auto r = widening_run("rt_widen_helpers");
  if (!r) return;
  const auto& m = r->m.at(0);
  INFO(m.message);
  MESSAGE("verdict: " << m.message);
  if (m.status == status::suspicious) {
    CHECK(m.message.find("suspicious: the kernel used more CPUs than it was given: ") == 0);
    CHECK(m.message.find(" s of timing on 1 CPU(s)") != std::string::npos);
    return;
  }
  CHECK(m.status == status::ok);
  // Passed: what it got over the timed samples, by its own clocks, is
  // within the rule. The rule's window is the race: the timing process's
  // last samples x iters_per_sample calls (its calls before them, the
  // calibration's, are outside it, and there the helpers may have had
  // every CPU: over the process's whole life, before, it could seem to have
  // used 1.3 CPUs and more while the rule rightly passed it).
  const auto calls = m.samples.size() * static_cast<std::size_t>(m.metrics.at("iters_per_sample"));
  const auto used = race_use(r->log, calls);
  REQUIRE(used);
  MESSAGE("over its last " << calls << " calls: " << used->cpu_s << " s of CPU in " << used->wall_s
                           << " s; its last line: " << r->log.back());
  // The rule's margin (10%, 10 ms), and 10 ms more: its own clock of CPU
  // time, read at the end of a call, may lag a tick too.
  CHECK(used->cpu_s <= 1.1 * used->wall_s + 0.02);
}

TEST_CASE("class 13: (2) honest multi-threaded kernels within their CPUs pass the CPU rule") {
  // Four threads that keep the affinity they inherit: pinned to one CPU
  // (cpus=auto) they share it, and given every CPU (cpus=all) they use
  // them all; either way the process's CPU time stays within its CPUs.
  // The widening kernel given every CPU widens to what it has, and a kernel
  // that binds itself to fewer CPUs than it was given (OMP_PROC_BIND): ok.
  const struct {
    std::string function, cpus;
  } cases[] = {
      {"rt_threads", "auto"}, {"rt_threads", "all"}, {"rt_widen", "all"}, {"rt_narrow", "all"}};
  for (const auto& one : cases) {
    CAPTURE(one.function);
    CAPTURE(one.cpus);
    const auto r = run_cpu(cpu_rule_case(one.function, one.cpus));
    INFO(r.m.at(0).message);
    CHECK(r.m.at(0).status == status::ok);
  }
}

TEST_CASE("class 13: (3) a host kernel cannot read its supervisor's memory") {
  // The run's supervisor is a fork of tessel: its memory is a copy of
  // tessel's (the secret, the hidden sets drawn so far). It is not dumpable
  // since round nine, so /proc/PID/mem is closed to the run's processes of
  // the same user. Tessel's own process is not changed (a library does not
  // change its embedder's core dumps): whether the kernel can read it
  // depends on the system's ptrace policy (docs/gate.md, "Round nine").
  REQUIRE(as_a_user());
  cpu_case c;
  c.function = "rt_peek";
  const auto r = run_cpu(c);
  const auto& m = r.m.at(0);
  INFO(m.message);
  CHECK(m.status == status::ok);
  const auto processes =
      count(r.log, "computed") > 0
          ? starting(r.log, "denied supervisor").size() + starting(r.log, "read supervisor").size()
          : 0;
  REQUIRE(processes > 0);  // one per loader process
  CHECK(count(r.log, "denied supervisor") == processes);
  MESSAGE("tessel's own memory read by " << count(r.log, "read tessel") << " of " << processes
                                         << " loader processes");
}

// --- the gated command ---------------------------------------------------------------

TEST_CASE("class 13: (1) a gated command that scavenges the reference's outputs finds none") {
  // Two configs evaluated at once (concurrency 2): while one's reference
  // runs, the other's candidate scans TMPDIR and /tmp for run folders
  // holding in/A.npy, in/B.npy and out/C.npy and stashes them by the inputs'
  // bytes; a run whose inputs are stashed copies C, any other writes zeros.
  // What it finds belongs to sets drawn for another session: never its own.
  const temp_folder logs, stash;
  tessel::command_options o;
  o.concurrency = 2;
  o.environment = {{"TESSEL_REDTEAM_LOG", (logs.path() / "log").string()},
                   {"TESSEL_REDTEAM_STASH", stash.path().string()}};
  auto b = gated_command("scavenge", o, 13);
  const auto s = tessel::parse_space(
      "space t { const M = 48  const K = 40  const N = 32  param tile : {1, 2} }");
  b.prepare(s);
  std::vector<tessel::config> configs;
  for (const auto& one : s.configs()) configs.push_back(one);
  std::vector<tessel::measurement> m(configs.size());
  std::vector<std::thread> threads;
  for (std::size_t i = 0; i < configs.size(); ++i)
    threads.emplace_back([&, i] { m[i] = b.evaluate(s, configs[i]); });
  for (auto& t : threads) t.join();
  const auto log = lines_of(logs.path() / "log");
  MESSAGE("reference outputs stashed: " << starting(log, "stashed ").size());
  for (const auto& one : m) {
    INFO(one.message);
    CHECK((one.status == status::incorrect || one.status == status::suspicious));
  }
  // Found, and answered from: the reference's outputs of a set one candidate
  // had already answered (wrong), stashed by the other while its reference
  // ran. Only a repeat of that set can use them, which is judged but not
  // timed, after the first run on it was judged.
  MESSAGE("answered from the stash on inputs it was given before: " << count(log, "hit repeat"));
  CHECK(count(log, "hit new") == 0);
  CHECK(count(log, "miss") >= m.size());
}

TEST_CASE("class 13: (3) a gated command cannot read its supervisor's memory") {
  REQUIRE(as_a_user());
  const auto r = run_logged("peek", 13);
  const auto& m = r.m;
  const auto& log = r.log;
  INFO(m.message);
  CHECK(m.status == status::ok);
  const auto runs = static_cast<std::size_t>(m.metrics.at("gate_runs"));
  CHECK(count(log, "denied supervisor") == runs);
  MESSAGE("tessel's own memory read by " << count(log, "read tessel") << " of " << runs << " runs");
}
