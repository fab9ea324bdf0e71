// benchmarks/run_process_cost.cpp: what a run's PID namespace costs (session
// 16, docs/backends.md "A PID namespace per run"). --runs runs of a trivial
// program (/bin/true) through run_process, alternating run by run between a
// PID namespace of its own and the fallback (TESSEL_NO_PID_NAMESPACE=1, the
// supervisor alone), so both see the same machine load. Per run: the wall
// time of run_process, and the CPU time of this process and its children
// (supervisors, programs; getrusage). Prints each mode's mean and the ratio.
//
//   bench_run_process [--runs 2000] [--program /bin/true]
#include "command/process.hpp"

#include "common.hpp"

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <array>
#include <chrono>
#include <cstdlib>
#include <string>

namespace {

struct totals {
  double wall_s = 0, cpu_s = 0;
  int runs = 0, namespaced = 0;
};

}  // namespace

int main(int argc, char** argv) {
  int runs = 2000;
  std::string program = "/bin/true";
  CLI::App app("bench_run_process: the cost of a PID namespace per run");
  app.add_option("--runs", runs, "runs, half in each mode")->check(CLI::PositiveNumber);
  app.add_option("--program", program, "the program each run execs");
  CLI11_PARSE(app, argc, argv);

  tessel::detail::process_request request;
  request.arguments = {program};
  request.environment = {"PATH=/usr/bin:/bin"};
  std::array<totals, 2> modes{};  // 0: namespace (where allowed), 1: fallback
  for (int i = 0; i < runs; ++i) {
    const auto mode = static_cast<std::size_t>(i % 2);
    if (mode == 1)
      ::setenv("TESSEL_NO_PID_NAMESPACE", "1", 1);
    else
      ::unsetenv("TESSEL_NO_PID_NAMESPACE");
    const double cpu = tessel::bench::cpu_seconds();
    const auto start = std::chrono::steady_clock::now();
    const auto result = tessel::detail::run_process(request);
    auto& t = modes[mode];
    t.wall_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    t.cpu_s += tessel::bench::cpu_seconds() - cpu;
    ++t.runs;
    t.namespaced += result.pid_namespace ? 1 : 0;
    if (!result.started || result.exit_code != 0) {
      fmt::print(stderr, "run {} failed: {}\n", i, result.start_error);
      return 1;
    }
  }
  const std::array<const char*, 2> names{"namespace", "fallback"};
  for (std::size_t m = 0; m < 2; ++m) {
    const auto& t = modes[m];
    fmt::print("{:<10} wall {:.3f} ms  cpu {:.3f} ms per run  ({} of {} runs namespaced)\n",
               names[m], 1e3 * t.wall_s / t.runs, 1e3 * t.cpu_s / t.runs, t.namespaced, t.runs);
  }
  fmt::print("namespace / fallback: wall {:.3f}, cpu {:.3f}\n", modes[0].wall_s / modes[1].wall_s,
             modes[0].cpu_s / modes[1].cpu_s);
  return 0;
}
