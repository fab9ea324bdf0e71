// The command backend against tests/backends/programs/helper.sh, one mode per
// part of the protocol (docs/backends.md).
#include "backend_fixtures.hpp"

#include <tessel/backends.hpp>
#include <tessel/dsl.hpp>
#include <tessel/error.hpp>
#include <tessel/strategies.hpp>
#include <tessel/study.hpp>

#include <doctest/doctest.h>

#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <unistd.h>

#ifdef __linux__
#include <sys/prctl.h>
#endif

using namespace tessel;
namespace fs = std::filesystem;

namespace {

/// `sh helper.sh ARGS` as a command string (so ARGS may hold placeholders).
command_backend helper(const std::string& args, command_options options = {}) {
  return command_backend("sh '" + testing::helper_program() + "' " + args, std::move(options));
}

config some_config(const space& s) {
  return testing::small_config(s, 64, "k,m,n", true, "beta", 3);
}

std::string slurp(const fs::path& file) {
  std::ifstream in(file);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

TEST_CASE("command: the last JSON line is the report; earlier lines are logs") {
  const auto s = testing::small_space();
  auto b = helper("ok");
  b.prepare(s);
  const auto m = b.evaluate(s, some_config(s));
  REQUIRE_MESSAGE(m.ok(), m.message);
  CHECK(m.objective == 1.5);
  CHECK(m.samples == std::vector<double>{1.4, 1.6});
  CHECK(m.metrics.at("flops") == 10);
  CHECK(m.message == "fine");
  CHECK(m.cost.run_s > 0);  // the measured wall time
  CHECK(m.cost.compile_s == 0);
  CHECK(b.name().rfind("command:sh ", 0) == 0);
}

TEST_CASE("command: the config as TESSEL_<NAME> variables; inactive parameters unset") {
  const auto s = testing::small_space();
  command_options options;
  options.environment = {{"EXTRA", "hi"}, {"TESSEL_DEPTH", "99"}};
  auto b = helper("env", options);
  b.prepare(s);
  auto m = b.evaluate(s, some_config(s));
  REQUIRE_MESSAGE(m.ok(), m.message);
  CHECK(m.objective == 64);
  CHECK(m.message == "order=k,m,n fast=1 kind=beta depth=3 extra=hi");

  m = b.evaluate(s, testing::small_config(s, 32, "m,n,k", false, "alpha"));
  REQUIRE_MESSAGE(m.ok(), m.message);
  CHECK(m.objective == 32);
  CHECK(m.message == "order=m,n,k fast=0 kind=alpha depth=unset extra=hi");
}

TEST_CASE("command: {name} placeholders in the arguments") {
  const auto s = testing::small_space();
  auto b = helper("args {tile_m} '{kind}-{order}-{fast}-{depth}-{{x}}-{not a name}'");
  b.prepare(s);
  auto m = b.evaluate(s, some_config(s));
  REQUIRE_MESSAGE(m.ok(), m.message);
  CHECK(m.objective == 64);
  CHECK(m.message == "beta-k,m,n-1-3-{x}-{not a name}");
  m = b.evaluate(s, testing::small_config(s, 128, "n,m,k", false, "alpha"));
  CHECK(m.message == "alpha-n,m,k-0--{x}-{not a name}");

  const testing::temp_folder folder;
  const auto& dir = folder.path();
  auto whole = helper("write_arg '" + (dir / "config.json").string() + "' {config}");
  whole.prepare(s);
  REQUIRE(whole.evaluate(s, some_config(s)).ok());
  CHECK(slurp(dir / "config.json") == s.to_json(some_config(s)));
}

TEST_CASE("command: a symbol or boolean constant passes its name or 0/1, not its index") {
  // Issue 15: `const c = beta` gave c=0 (the symbol's index).
  const auto s = parse_space(
      "space s { const c = beta  const on = true  const n = 7  param kind : {alpha, beta} }");
  auto b = helper("args 5 '{c}-{on}-{n}-{kind}'");
  b.prepare(s);
  const auto m = b.evaluate(s, *s.default_config());
  REQUIRE_MESSAGE(m.ok(), m.message);
  CHECK(m.message == "beta-1-7-alpha");
}

TEST_CASE("command: the config as JSON on stdin; a bare number is the objective") {
  const auto s = testing::small_space();
  const testing::temp_folder folder;
  const auto& dir = folder.path();
  auto b = helper("stdin '" + (dir / "stdin.json").string() + "'");
  const auto m = b.evaluate(s, some_config(s));
  REQUIRE_MESSAGE(m.ok(), m.message);
  CHECK(m.objective == 2.25);
  CHECK(slurp(dir / "stdin.json") == s.to_json(some_config(s)) + "\n");
}

TEST_CASE("command: report variants") {
  const auto s = testing::small_space();
  const auto c = some_config(s);
  SUBCASE("time instead of objective; the program's own cost") {
    const auto m = helper("time_field").evaluate(s, c);
    REQUIRE_MESSAGE(m.ok(), m.message);
    CHECK(m.objective == 3);
    CHECK(m.cost.compile_s == 0.25);
    CHECK(m.cost.run_s == 0.5);
    CHECK(m.cost.gate_s == 0);
  }
  SUBCASE("a pretty-printed object") {
    const auto m = helper("pretty").evaluate(s, c);
    REQUIRE_MESSAGE(m.ok(), m.message);
    CHECK(m.objective == 4);
  }
  SUBCASE("a log line after the report") {
    const auto m = helper("json_then_log").evaluate(s, c);
    REQUIRE_MESSAGE(m.ok(), m.message);
    CHECK(m.objective == 5);
  }
  SUBCASE("megabytes on stdout and stderr do not deadlock") {
    const auto m = helper("big").evaluate(s, c);
    REQUIRE_MESSAGE(m.ok(), m.message.substr(0, 300));
    CHECK(m.objective == 7);
  }
}

TEST_CASE("command: failures are data, with the tail of stderr") {
  const auto s = testing::small_space();
  const auto c = some_config(s);
  SUBCASE("exit code 3") {
    const auto m = helper("fail").evaluate(s, c);
    CHECK(m.status == status::runtime_error);
    CHECK(m.message == "exited with code 3\nstderr:\nsomething broke");
    CHECK(m.cost.run_s > 0);
  }
  SUBCASE("the program says compile_error, and exits 1") {
    const auto m = helper("compile_error").evaluate(s, c);
    CHECK(m.status == status::compile_error);
    CHECK(m.message == "does not fit\nstderr:\nerror: tile too large");
    CHECK(m.cost.compile_s == 0.5);
  }
  SUBCASE("garbage on stdout") {
    const auto m = helper("garbage").evaluate(s, c);
    CHECK(m.status == status::runtime_error);
    CHECK(
        m.message ==
        "could not parse the program's output: no JSON object on stdout (last line: 'not json {')\n"
        "stderr:\nthe stderr explains");
  }
  SUBCASE("nothing on stdout") {
    const auto m = helper("empty").evaluate(s, c);
    CHECK(m.status == status::runtime_error);
    CHECK(m.message ==
          "could not parse the program's output: the program printed nothing on stdout");
  }
  SUBCASE("an unknown status") {
    const auto m = helper("bad_status").evaluate(s, c);
    CHECK(m.status == status::runtime_error);
    CHECK(m.message.find("unknown status 'splendid'") != std::string::npos);
  }
  SUBCASE("no objective") {
    const auto m = helper("no_objective").evaluate(s, c);
    CHECK(m.status == status::runtime_error);
    CHECK(m.message.find("no 'objective'") != std::string::npos);
  }
  SUBCASE("killed by a signal") {
    const auto m = helper("crash").evaluate(s, c);
    CHECK(m.status == status::runtime_error);
    CHECK(m.message == "killed by signal 11 (SIGSEGV)\nstderr:\nabout to crash");
  }
  SUBCASE("a program that cannot be started") {
    command_backend b("/nonexistent/tessel/program");
    CHECK_THROWS_AS(b.prepare(s), error);
    const auto m = b.evaluate(s, c);
    CHECK(m.status == status::runtime_error);
    CHECK(m.message ==
          "could not start the program: could not run /nonexistent/tessel/program: "
          "No such file or directory");
  }
}

TEST_CASE("command: megabytes of garbage cost a scan, not a parse (docs/limits.md)") {
  // Before: 16 MB of '[' on stdout took 18 s and 1.2 GB for one evaluation.
  const auto s = testing::small_space();
  const auto c = some_config(s);
  for (const char* mode : {"flood", "flood_lines"}) {
    CAPTURE(mode);
    const auto start = std::chrono::steady_clock::now();
    const auto m = helper(mode).evaluate(s, c);
    CHECK(m.status == status::runtime_error);
    CHECK(m.message.find("no JSON object on stdout") != std::string::npos);
    CHECK(m.message.size() < 1000);    // the last line is shortened
    CHECK(seconds_since(start) < 60);  // a bound for a hang, not a timing
  }
  const auto deep = helper("deep_report").evaluate(s, c);  // nested past 64: not read
  CHECK(deep.status == status::runtime_error);
}

TEST_CASE("command: a timeout kills the whole process group") {
  const auto s = testing::small_space();
  const testing::temp_folder folder;
  const auto& dir = folder.path();
  const auto pid_file = dir / "grandchild.pid";
  // Each limit is 2 s, long enough for the program to start and write its
  // grandchild's pid before it expires on a loaded machine (under 0.3 s the
  // shell could be signalled before it wrote it); the upper bounds are for
  // a hang (the grandchild sleeps 100 s), or, where said, for the grace.
  SUBCASE("SIGTERM is enough") {
    command_options options;
    options.timeout_s = 2;
    options.kill_grace_s = 20;
    const auto start = std::chrono::steady_clock::now();
    const auto m = helper("hang '" + pid_file.string() + "'", options).evaluate(s, some_config(s));
    CHECK(seconds_since(start) < 15);  // no SIGKILL: ended before the 20 s grace was over
    CHECK(m.status == status::timeout);
    CHECK(m.message ==
          "timed out after 2 s (the limit set by timeout; change it with --backend-set "
          "timeout=S or command_options::timeout_s; 0: no limit); its process group was killed");
    CHECK(m.cost.run_s >= 2.0);
    const auto grandchild = testing::read_pid(pid_file);
    REQUIRE(grandchild > 0);
    CHECK(testing::process_gone(grandchild));
  }
  SUBCASE("SIGKILL after the grace period when SIGTERM is ignored") {
    command_options options;
    options.timeout_s = 2;
    options.kill_grace_s = 0.3;
    const auto start = std::chrono::steady_clock::now();
    const auto m = helper("hang_ignoring_term '" + pid_file.string() + "'", options)
                       .evaluate(s, some_config(s));
    CHECK(seconds_since(start) >= 2.3);
    CHECK(seconds_since(start) < 30);  // a bound for a hang, not a timing
    CHECK(m.status == status::timeout);
    const auto grandchild = testing::read_pid(pid_file);
    REQUIRE(grandchild > 0);
    CHECK(testing::process_gone(grandchild));
  }
}

TEST_CASE("command: a candidate that never exits is a timeout under the default limit") {
  // Before: timeout_s 0 (no limit) by default, so one hanging candidate held
  // the whole tuning run. Now an unset timeout_s means default_timeout_s
  // (600 s); the test shortens that default instead of sleeping ten minutes.
  const command_options defaults;
  CHECK_FALSE(defaults.timeout_s.has_value());
  CHECK(defaults.default_timeout_s == 600);
  CHECK(defaults.limit_s() == 600);

  const auto s = parse_space("space t { param tile : {32, 64, 128} }");
  command_options options;
  // The limit every run gets, the honest ones too: 2 s, long enough for a
  // shell to start and echo on a loaded machine (under 0.5 s, session 19's
  // 0.3 and 0.5 s limits expired before a shell had written one line).
  options.default_timeout_s = 2;
  // tile 64 hangs (exec: the sleep is the program, SIGTERM ends it); the
  // others report their tile as the objective.
  const std::vector<std::string> hang_on_64{
      "sh", "-c", "if [ \"$TESSEL_TILE\" = 64 ]; then exec sleep 1000; fi; echo $TESSEL_TILE"};
  const auto run = [&] {
    study::options o;
    o.seed = 7;
    o.evaluate_baseline = false;
    study st(s, std::make_shared<command_backend>(hang_on_64, options), make_strategy("random"), o);
    const auto start = std::chrono::steady_clock::now();
    const auto summary = st.run(stop::evaluations(10));
    CHECK(seconds_since(start) < 30);  // a bound for a hang, not a timing
    CHECK(summary.evaluations == 3);   // the space is exhausted: the run went on past the hang
    REQUIRE(summary.best);
    CHECK(summary.best->result.objective == 32);
    std::vector<std::pair<std::int64_t, status>> seen;
    for (const auto& t : st.trials()) {
      const auto tile = s.value_of(t.config, 0).integer;
      seen.emplace_back(tile, t.result.status);
      if (tile == 64) {
        CHECK(t.result.status == status::timeout);
        CHECK(t.result.message.rfind(
                  "timed out after 2 s (the default limit: no timeout was set; set one with "
                  "--backend-set timeout=S or command_options::timeout_s; 0: no limit)",
                  0) == 0);
        CHECK(t.result.cost.run_s >= 2);
      } else {
        REQUIRE_MESSAGE(t.result.ok(), t.result.message);
        CHECK(t.result.objective == static_cast<double>(tile));  // kept, whatever came after
      }
    }
    CHECK(seen.size() == 3);
    return seen;
  };
  // A fixed limit: the same seed gives the same trials and the same outcomes.
  CHECK(run() == run());

  // Set explicitly, the limit is the one set, and the message says so.
  options.timeout_s = 0.3;
  std::optional<config> tile_64;
  for (const auto& c : s.configs())
    if (s.integer(c, "tile") == 64) tile_64 = c;
  REQUIRE(tile_64);
  const auto m = command_backend(hang_on_64, options).evaluate(s, *tile_64);
  CHECK(m.status == status::timeout);
  CHECK(m.message.rfind("timed out after 0.3 s (the limit set by timeout;", 0) == 0);
}

TEST_CASE("command: what a program leaves running in its group is killed when it exits") {
  const auto s = testing::small_space();
  const testing::temp_folder folder;
  const auto& dir = folder.path();
  const auto start = std::chrono::steady_clock::now();
  const auto m =
      helper("leave_behind '" + (dir / "pid").string() + "'").evaluate(s, some_config(s));
  // A bound for a hang, not a timing: the grandchild holds stdout for 100 s,
  // which a run that waited for its end would wait for.
  CHECK(seconds_since(start) < 30);
  REQUIRE_MESSAGE(m.ok(), m.message);
  CHECK(m.objective == 2.0);
  const auto grandchild = testing::read_pid(dir / "pid");
  REQUIRE(grandchild > 0);
  CHECK(testing::process_gone(grandchild));
}

#ifdef __linux__
TEST_CASE("command: running a program does not make this process a child subreaper") {
  // Before session 13 the first run made the whole process a child subreaper
  // for the rest of its life: orphans of an embedding program's own children
  // became its zombies. Now each run's supervisor is the subreaper, and this
  // process is not, also after a run that left a process behind.
  const auto s = testing::small_space();
  const testing::temp_folder folder;
  const auto& dir = folder.path();
  const auto m =
      helper("leave_behind '" + (dir / "pid").string() + "'").evaluate(s, some_config(s));
  REQUIRE_MESSAGE(m.ok(), m.message);
  int subreaper = -1;
  REQUIRE(::prctl(PR_GET_CHILD_SUBREAPER, &subreaper, 0L, 0L, 0L) == 0);
  CHECK(subreaper == 0);
}

TEST_CASE("command: after a timeout, a daemon the program left outside its group is killed") {
  // The time limit signals the program's group; the run's supervisor is not
  // in it, so it outlives the kill and then kills what the run left behind:
  // here a daemon in a session of its own, with an empty environment (before
  // session 13 a marker in the environment was what found such a daemon).
  const auto s = testing::small_space();
  const testing::temp_folder folder;
  const auto& dir = folder.path();
  const auto pid_file = dir / "daemon.pid";
  command_options options;
  options.timeout_s = 2;  // the daemon's pid is written before it expires on a loaded machine
  options.kill_grace_s = 0.2;
  const auto start = std::chrono::steady_clock::now();
  const auto m = command_backend(std::vector<std::string>{"/bin/sh", "-c",
                                                          "setsid env -i sleep 300 & " +
                                                              testing::last_job_pid(pid_file) +
                                                              "; exec sleep 100"},
                                 options)
                     .evaluate(s, some_config(s));
  CHECK(seconds_since(start) < 30);  // a bound for a hang, not a timing
  CHECK(m.status == status::timeout);
  const auto daemon = testing::read_pid(pid_file);
  REQUIRE(daemon > 0);
  CHECK(testing::process_gone(daemon));
  if (!testing::process_gone(daemon, 0)) ::kill(daemon, SIGKILL);  // (a process this case started)
}
#endif

TEST_CASE("command: working directory, direct exec, and concurrent evaluations") {
  const auto s = testing::small_space();
  const testing::temp_folder folder;
  const auto dir = fs::canonical(folder.path());
  {
    std::ofstream script(dir / "prog.sh");
    script << "#!/bin/sh\necho \"{\\\"objective\\\": $TESSEL_TILE_M, \\\"message\\\": "
              "\\\"$(pwd)\\\"}\"\n";
  }
  fs::permissions(dir / "prog.sh", fs::perms::owner_all);
  command_options options;
  options.working_directory = dir;
  options.concurrency = 4;
  command_backend b("./prog.sh", options);
  b.prepare(s);
  CHECK(b.concurrency() == 4);

  std::vector<measurement> results(8);
  std::vector<std::thread> threads;
  const std::vector<std::int64_t> tiles{32, 64, 128, 32, 64, 128, 32, 64};
  for (std::size_t i = 0; i < results.size(); ++i)
    threads.emplace_back([&, i] {
      results[i] = b.evaluate(s, testing::small_config(s, tiles[i], "m,n,k", false, "alpha"));
    });
  for (auto& t : threads) t.join();
  for (std::size_t i = 0; i < results.size(); ++i) {
    REQUIRE_MESSAGE(results[i].ok(), results[i].message);
    CHECK(results[i].objective == static_cast<double>(tiles[i]));
    CHECK(results[i].message == dir.string());
  }
}

TEST_CASE("command: misuse fails in the constructor or prepare") {
  const auto s = testing::small_space();
  CHECK_THROWS_AS(command_backend(""), error);
  CHECK_THROWS_AS(command_backend("a 'b"), error);
  command_options negative;
  negative.timeout_s = -1;
  CHECK_THROWS_AS(command_backend("true", negative), options_error);
  command_options negative_default;
  negative_default.default_timeout_s = -1;
  CHECK_THROWS_WITH_AS(command_backend("true", negative_default),
                       "command_options::default_timeout_s = -1: must be >= 0 (0: no limit)",
                       options_error);

  CHECK_THROWS_WITH(
      helper("args {tile_q}").prepare(s),
      doctest::Contains(
          "placeholder {tile_q} names no parameter, let or constant of space 'small'"));
  CHECK_THROWS_WITH(command_backend("tessel_no_such_program_anywhere").prepare(s),
                    "command backend: program 'tessel_no_such_program_anywhere' not found in PATH");
  command_options missing_dir;
  missing_dir.working_directory = "/nonexistent/tessel/dir";
  CHECK_THROWS_WITH(command_backend("true", missing_dir).prepare(s),
                    "command backend: working directory /nonexistent/tessel/dir does not exist");
  CHECK_NOTHROW(command_backend("true").prepare(s));
}

TEST_CASE("command: with repeats, each run is one sample and racing decides how many") {
  // A program whose n-th run reports BASE + n % 3 (a counter file keeps n):
  // the median is BASE + 1 whatever the order.
  const auto s = testing::small_space();
  const testing::temp_folder folder;
  const auto& dir = folder.path();
  command_options o;
  o.racing = {3, 9, 0.0, 0.001, 0.0};
  o.working_directory = dir;
  command_backend here({"sh", "-c",
                        "n=$(cat count 2>/dev/null || echo 0); n=$((n + 1)); echo $n > count; "
                        "echo $(({tile_m} + n % 3))"},
                       o);
  here.prepare(s);
  const auto fast = here.evaluate(s, testing::small_config(s, 32, "k,m,n", true, "beta", 3));
  REQUIRE_MESSAGE(fast.ok(), fast.message);
  CHECK(fast.samples.size() == 9);  // the interval never gets within 0.1%
  CHECK(fast.objective == 33);
  CHECK(fast.metrics.at("ci_low_s") == 32);
  CHECK(fast.metrics.at("ci_high_s") == 34);
  CHECK(fast.message.find("racing stopped: max_repeats") != std::string::npos);
  CHECK(slurp(dir / "count") == "9\n");
  // A config clearly slower than that incumbent stops at min_repeats.
  const auto slow = here.evaluate(s, testing::small_config(s, 128, "k,m,n", true, "beta", 3));
  CHECK(slow.samples.size() == 3);
  CHECK(slow.message.find("slower_than_incumbent") != std::string::npos);
  CHECK(slow.objective == 129);
  // The best config re-measured: every max_repeats run.
  CHECK(
      here.remeasure(s, testing::small_config(s, 128, "k,m,n", true, "beta", 3))->samples.size() ==
      9);
  // Without repeats a command runs once and remeasure has nothing to add.
  CHECK(!helper("ok").remeasure(s, some_config(s)));
  // A failing run ends the race with its failure.
  command_options failing;
  failing.racing = {3, 5, 0.0, 0.02, 0.0};
  failing.working_directory = dir;
  command_backend flaky({"sh", "-c", "test -e flag && exit 3; touch flag; echo 1.0"}, failing);
  flaky.prepare(s);
  const auto broke = flaky.evaluate(s, some_config(s));
  CHECK(broke.status == status::runtime_error);
  CHECK(broke.message.find("exited with code 3") != std::string::npos);
}

TEST_CASE("command: repeats are registry settings; bad ones are named") {
  const auto b =
      make_backend("command:sh -c 'echo 1'", {{"min_repeats", "2"}, {"max_repeats", "4"}});
  CHECK(b->name() == "command:sh -c 'echo 1'");
  CHECK_THROWS_WITH_AS(make_backend("command:true", {{"min_repeats", "5"}, {"max_repeats", "2"}}),
                       "backend command: setting max_repeats: must be >= min_repeats",
                       options_error);
  // A gated command's samples are its gate runs, each judged and timed.
  const auto s = testing::small_space();
  const auto gated = make_backend("command:true", {{"min_repeats", "2"},
                                                   {"max_repeats", "4"},
                                                   {"gate_inputs", "x:4"},
                                                   {"gate_outputs", "y:4"},
                                                   {"gate_reference", "true"}});
  CHECK_THROWS_WITH_AS(gated->prepare(s),
                       "command backend: a gated command is timed by its gate runs (every run "
                       "judged and timed); min_repeats and max_repeats are for ungated commands",
                       error);
}
