// bench_sim_speed: how many candidates per second the NeuronCore simulator
// evaluates on one core (issue 4's goal: >= 1,000/s for 4096^3 bf16 matmul
// configs). Samples valid configs of examples/sim_matmul.tsl uniformly with a
// fixed seed and evaluates them one after another on this thread, splitting
// the time into lowering and timing; then the same configs again with the
// equivalence gate on (the functional mode checks each compiled config), to
// report the gate's cost per candidate separately.
//
//   bench_sim_speed [--configs N] [--seed S] [--target trn2] [--file PATH]
#include "common.hpp"
#include "sim/machine.hpp"
#include "sim/program.hpp"
#include "sim/timing.hpp"
#include "sim/workload.hpp"

#include <tessel/dsl.hpp>
#include <tessel/error.hpp>
#include <tessel/random.hpp>
#include <tessel/sim.hpp>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <ctime>
#include <vector>

namespace {
/// This thread's CPU time: the machine may be shared, and a candidate's
/// simulation is single-threaded work, so CPU seconds are what it costs.
struct clock_type {
  using time_point = double;
  static double now() { return tessel::bench::thread_cpu_s(); }
};
double seconds_since(double t0) { return clock_type::now() - t0; }
}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"NeuronCore simulator: candidates per second on one core"};
  std::size_t configs = 2000;
  std::uint64_t seed = 7;
  std::string target = "trn2";
  std::string file = TESSEL_SOURCE_DIR "/examples/sim_matmul.tsl";
  double goal = 0;
  app.add_option("--configs", configs, "configs to evaluate");
  app.add_option("--seed", seed, "sampling seed");
  app.add_option("--target", target, "trn1 or trn2");
  app.add_option("--file", file, "the space (.tsl)");
  app.add_option("--goal", goal,
                 "exit 1 when fewer compiling candidates per CPU second (0: report only)");
  CLI11_PARSE(app, argc, argv);

  try {
    tessel::parse_options options;
    options.target = target;
    const tessel::space s = tessel::load_space(file, options);
    tessel::rng random(seed);
    std::vector<tessel::config> sample;
    for (std::size_t i = 0; i < configs; ++i) sample.push_back(s.sample(random));

    // 1. the backend, as a study calls it, timing only (no gate)
    tessel::sim_options timing_only;
    timing_only.gate = false;
    tessel::sim_backend backend(timing_only);
    backend.prepare(s);
    std::size_t ok = 0;
    double ok_s = 0, total = 0;
    for (const auto& c : sample) {
      const auto t0 = clock_type::now();
      const bool compiled = backend.evaluate(s, c).ok();
      const double dt = seconds_since(t0);
      total += dt;
      if (compiled) {
        ++ok;
        ok_s += dt;
      }
    }

    // 1b. the same with the equivalence gate on (the default): each compiled
    // config is checked once on the gate's suite (verdicts are cached per
    // config, so a study pays it once per distinct config)
    tessel::sim_backend gated;
    gated.prepare(s);
    std::size_t gated_ok = 0, gate_failed = 0;
    double gated_s = 0, gate_s = 0;
    for (const auto& c : sample) {
      const auto t0 = clock_type::now();
      const auto r = gated.evaluate(s, c);
      const double dt = seconds_since(t0);
      if (r.status == tessel::status::compile_error) continue;
      ++gated_ok;
      gated_s += dt;
      if (const auto w = r.metrics.find("gate_wall_s"); w != r.metrics.end()) gate_s += w->second;
      if (!r.ok()) ++gate_failed;
    }

    // 2. the same configs, lowering and timing apart
    const tessel::sim::machine m = tessel::sim::resolve_machine(s.def().target);
    const auto& w = tessel::sim::matmul_workload();
    tessel::sim::program prog;
    double lower_s = 0, time_s = 0, instructions = 0;
    for (const auto& c : sample) {
      const auto a = clock_type::now();
      const bool compiled = w.lower(s, c, m, prog).empty();
      lower_s += seconds_since(a);
      if (!compiled) continue;
      const auto b = clock_type::now();
      const auto r = tessel::sim::time_program(prog, m);
      time_s += seconds_since(b);
      instructions += static_cast<double>(prog.size());
    }
    const double rate = static_cast<double>(sample.size()) / total;
    const double ok_rate = static_cast<double>(ok) / std::max(ok_s, 1e-12);
    fmt::print("space {} ({} valid configs) on {}: {} sampled, {} compile, {} are compile errors\n",
               s.name(), s.count(), target, sample.size(), ok, sample.size() - ok);
    fmt::print(
        "candidates per CPU second (one core, sim_backend::evaluate): {:.0f} (those that compile: "
        "{:.0f}; "
        "compile errors are found before timing)\n",
        rate, ok_rate);
    fmt::print(
        "  per candidate: {:.1f} us; lowering {:.1f} us, timing {:.1f} us (compiled ones: {:.0f} "
        "program "
        "instructions on average)\n",
        1e6 * total / static_cast<double>(sample.size()),
        1e6 * lower_s / static_cast<double>(sample.size()),
        1e6 * time_s / static_cast<double>(std::max<std::size_t>(ok, 1)),
        instructions / static_cast<double>(std::max<std::size_t>(ok, 1)));
    const double per_gated = gated_s / static_cast<double>(std::max<std::size_t>(gated_ok, 1));
    fmt::print(
        "with the gate (compiling candidates): {:.0f} per CPU second vs {:.0f} without; the gate "
        "costs {:.2f} ms CPU per candidate (metric gate_wall_s: {:.2f} ms); {} of {} failed it\n",
        1.0 / std::max(per_gated, 1e-12), ok_rate,
        1e3 * (per_gated - ok_s / std::max<double>(static_cast<double>(ok), 1)),
        1e3 * gate_s / static_cast<double>(std::max<std::size_t>(gated_ok, 1)), gate_failed,
        gated_ok);
    if (goal > 0 && ok_rate < goal) {
      fmt::print("compiling candidates: below the goal of {:.0f} per second\n", goal);
      return 1;
    }
  } catch (const tessel::space_error& e) {
    for (const auto& d : e.diagnostics()) fmt::print(stderr, "{}\n", d.render());
    return 2;
  } catch (const tessel::error& e) {
    fmt::print(stderr, "bench_sim_speed: {}\n", e.what());
    return 2;
  }
  return 0;
}
