// bench_sim_speed: how many candidates per second the NeuronCore simulator
// evaluates on one core (issue 4's goal: >= 1,000/s for 4096^3 bf16 matmul
// configs). Samples valid configs of examples/sim_matmul.tsl uniformly with a
// fixed seed and evaluates them one after another on this thread, splitting
// the time into lowering and timing; then the same configs again with the
// equivalence gate on (the functional mode checks each compiled config), to
// report the gate's cost per candidate separately. First, the two timing
// models side by side on the same configs (issue 16: >= 10,000 timings per
// CPU second for screening): the event-driven model and the steady-state
// analytic one, their rates and how they agree (Spearman, Kendall, level
// error, top-1 and top-10 sets).
//
//   bench_sim_speed [--configs N] [--seed S] [--target trn2] [--file PATH]
//                   [--goal R] [--analytic-goal R] [--min-spearman S]
#include "common.hpp"
#include "sim/machine.hpp"
#include "sim/program.hpp"
#include "sim/timing.hpp"
#include "sim/workload.hpp"

#include <tessel/dsl.hpp>
#include <tessel/error.hpp>
#include <tessel/fidelity.hpp>
#include <tessel/random.hpp>
#include <tessel/sim.hpp>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cmath>
#include <ctime>
#include <numeric>
#include <vector>

namespace {
/// This thread's CPU time: the machine may be shared, and a candidate's
/// simulation is single-threaded work, so CPU seconds are what it costs.
struct clock_type {
  using time_point = double;
  static double now() { return tessel::bench::thread_cpu_s(); }
};
double seconds_since(double t0) { return clock_type::now() - t0; }

/// One model's pass over the sample: per config the objective (NaN when it
/// does not compile) and the CPU seconds in total and for compiling ones.
struct model_run {
  std::vector<double> objective;
  std::size_t ok = 0;
  double total_s = 0, ok_s = 0;
  [[nodiscard]] double rate(std::size_t n) const {
    return static_cast<double>(n) / std::max(total_s, 1e-12);
  }
  [[nodiscard]] double ok_rate() const { return static_cast<double>(ok) / std::max(ok_s, 1e-12); }
};

model_run time_model(const tessel::space& s, const std::vector<tessel::config>& sample,
                     const std::string& model) {
  tessel::sim_options o;
  o.gate = false;
  o.model = model == "analytic" ? tessel::sim_model::analytic : tessel::sim_model::event;
  tessel::sim_backend backend(o);
  backend.prepare(s);
  model_run r;
  for (const auto& c : sample) {
    const auto t0 = clock_type::now();
    const auto m = backend.evaluate(s, c);
    const double dt = seconds_since(t0);
    r.total_s += dt;
    r.objective.push_back(m.ok() ? m.objective : std::nan(""));
    if (m.ok()) {
      ++r.ok;
      r.ok_s += dt;
    }
  }
  return r;
}

/// Indices of the n smallest values.
std::vector<std::size_t> best(const std::vector<double>& v, std::size_t n) {
  std::vector<std::size_t> i(v.size());
  std::iota(i.begin(), i.end(), std::size_t{0});
  std::stable_sort(i.begin(), i.end(), [&](std::size_t a, std::size_t b) { return v[a] < v[b]; });
  i.resize(std::min(n, i.size()));
  return i;
}

double quantile(std::vector<double> v, double q) {
  if (v.empty()) return std::nan("");
  std::sort(v.begin(), v.end());
  return v[static_cast<std::size_t>(q * static_cast<double>(v.size() - 1) + 0.5)];
}

/// The event and the analytic model on the same configs: rates and agreement.
/// Returns the Spearman rho (NaN under 3 pairs).
double compare_models(const tessel::space& s, const std::vector<tessel::config>& sample,
                      double& analytic_rate, std::size_t worst) {
  const model_run ev = time_model(s, sample, "event");
  const model_run an = time_model(s, sample, "analytic");
  std::vector<double> e, a, level;
  std::vector<std::size_t> index;  // of each pair in the sample
  std::vector<std::pair<double, double>> pairs;
  std::size_t disagree_compile = 0;
  for (std::size_t i = 0; i < sample.size(); ++i) {
    const bool eo = !std::isnan(ev.objective[i]), ao = !std::isnan(an.objective[i]);
    if (eo != ao) ++disagree_compile;
    if (!eo || !ao) continue;
    e.push_back(ev.objective[i]);
    a.push_back(an.objective[i]);
    pairs.emplace_back(an.objective[i], ev.objective[i]);
    level.push_back(std::abs(an.objective[i] / ev.objective[i] - 1));
    index.push_back(i);
  }
  const auto agreement = tessel::measure_agreement(pairs);
  const auto top_e = best(e, 10), top_a = best(a, 10);
  std::size_t common = 0;
  for (const auto i : top_a) common += std::count(top_e.begin(), top_e.end(), i);
  const auto order_a = best(a, a.size());
  const auto rank_of_best =
      e.empty() ? 0
                : static_cast<std::size_t>(
                      std::find(order_a.begin(), order_a.end(), top_e.front()) - order_a.begin()) +
                      1;
  analytic_rate = an.ok_rate();
  fmt::print("timing models side by side ({} configs, one thread, thread CPU time, no gate):\n",
             sample.size());
  fmt::print("  {:<9} {:>14} {:>22}\n", "model", "all per CPU s", "compiling per CPU s");
  fmt::print("  {:<9} {:>14.0f} {:>22.0f}\n", "event", ev.rate(sample.size()), ev.ok_rate());
  fmt::print("  {:<9} {:>14.0f} {:>22.0f}\n", "analytic", an.rate(sample.size()), an.ok_rate());
  fmt::print("  analytic / event: {:.1f}x (all), {:.1f}x (compiling)\n",
             ev.total_s / std::max(an.total_s, 1e-12),
             an.ok_rate() / std::max(ev.ok_rate(), 1e-12));
  fmt::print("  agreement over {} compiling configs: {}\n", pairs.size(), agreement.text());
  fmt::print("  level error |analytic / event - 1|: median {:.1f}%, p90 {:.1f}%, max {:.1f}%\n",
             100 * quantile(level, 0.5), 100 * quantile(level, 0.9), 100 * quantile(level, 1.0));
  fmt::print(
      "  top-1: {} (the event model's best is the analytic model's #{}); top-10 sets share {} of "
      "10; {} configs compile in one model only\n",
      !e.empty() && top_a.front() == top_e.front() ? "same" : "different", rank_of_best, common,
      disagree_compile);
  // where an analytic evaluation's time goes: config -> plan, the estimate, the rest
  {
    const tessel::sim::machine m = tessel::sim::resolve_machine(s.def().target);
    const auto& w = *tessel::sim::workload_for_space(s, "");
    double plan_s = 0, estimate_s = 0, planned = 0;
    for (const auto& c : sample) {
      const auto t0 = clock_type::now();
      const auto plan = w.plan_config(s, c, m);
      plan_s += seconds_since(t0);
      if (!plan->error.empty()) continue;
      const auto t1 = clock_type::now();
      const auto estimate = w.steady_plan(*plan, m);
      estimate_s += seconds_since(t1);
      planned += estimate ? 1 : 0;
    }
    const double n = static_cast<double>(sample.size());
    fmt::print(
        "  analytic per candidate: {:.2f} us in all; config -> plan {:.2f} us, the estimate {:.2f} "
        "us (of those that compile), the measurement and metrics the rest\n",
        1e6 * an.total_s / n, 1e6 * plan_s / n, 1e6 * estimate_s / std::max(planned, 1.0));
  }
  if (worst > 0) {
    for (const auto i : best(e, worst))
      fmt::print("  event top: event {:.4g} ms, analytic {:.4g} ms (analytic #{}): {}\n",
                 1e3 * e[i], 1e3 * a[i],
                 std::find(order_a.begin(), order_a.end(), i) - order_a.begin() + 1,
                 s.to_json(sample[index[i]]));
    std::vector<double> negative(level.size());
    std::transform(level.begin(), level.end(), negative.begin(), [](double x) { return -x; });
    tessel::sim_options o;
    o.gate = false;
    o.model = tessel::sim_model::analytic;
    tessel::sim_backend analytic(o);
    o.model = tessel::sim_model::event;
    tessel::sim_backend event(o);
    for (const auto i : best(negative, worst)) {
      const auto& c = sample[index[i]];
      fmt::print("  worst: event {:.4g} ms ({}), analytic {:.4g} ms ({}): {}\n", 1e3 * e[i],
                 event.evaluate(s, c).message, 1e3 * a[i], analytic.evaluate(s, c).message,
                 s.to_json(c));
    }
  }
  return agreement.spearman_rho.value_or(std::nan(""));
}
}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"NeuronCore simulator: candidates per second on one core"};
  std::size_t configs = 2000;
  std::uint64_t seed = 7;
  std::string target = "trn2";
  std::string file = TESSEL_SOURCE_DIR "/examples/sim_matmul.tsl";
  double goal = 0, analytic_goal = 0, min_spearman = 0;
  std::size_t worst = 0;
  std::string trace;
  app.add_option("--configs", configs, "configs to evaluate");
  app.add_option("--seed", seed, "sampling seed");
  app.add_option("--target", target, "trn1 or trn2");
  app.add_option("--file", file, "the space (.tsl)");
  app.add_option("--goal", goal,
                 "exit 1 when fewer compiling candidates per CPU second (0: report only)");
  app.add_option("--analytic-goal", analytic_goal,
                 "exit 1 when the analytic model times fewer compiling candidates per CPU second");
  app.add_option("--min-spearman", min_spearman,
                 "exit 1 when the models' Spearman rho is below this (0: report only)");
  app.add_option("--worst", worst, "list the configs where the two models differ most");
  app.add_option("--trace", trace, "write the event model's trace of the first sampled config");
  bool models_only = false;
  app.add_flag("--models-only", models_only,
               "only the two timing models side by side (skip the gate and the lowering split)");
  CLI11_PARSE(app, argc, argv);

  try {
    tessel::parse_options options;
    options.target = target;
    const tessel::space s = tessel::load_space(file, options);
    tessel::rng random(seed);
    std::vector<tessel::config> sample;
    for (std::size_t i = 0; i < configs; ++i) sample.push_back(s.sample(random));

    if (!trace.empty()) {
      tessel::sim_backend b;
      b.prepare(s);
      b.write_trace(s, sample.front(), trace);
    }

    // 0. the two timing models side by side
    double analytic_rate = 0;
    const double rho = compare_models(s, sample, analytic_rate, worst);
    bool failed = false;
    if (analytic_goal > 0 && analytic_rate < analytic_goal) {
      fmt::print("analytic model: below the goal of {:.0f} per second\n", analytic_goal);
      failed = true;
    }
    if (min_spearman > 0 && !(rho >= min_spearman)) {
      fmt::print("analytic model: Spearman {:.3f} below {:.3f}\n", rho, min_spearman);
      failed = true;
    }

    if (models_only) return failed ? 1 : 0;

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
    const auto& w = *tessel::sim::workload_for_space(s, "");
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
    if (failed) return 1;
  } catch (const tessel::space_error& e) {
    for (const auto& d : e.diagnostics()) fmt::print(stderr, "{}\n", d.render());
    return 2;
  } catch (const tessel::error& e) {
    fmt::print(stderr, "bench_sim_speed: {}\n", e.what());
    return 2;
  }
  return 0;
}
