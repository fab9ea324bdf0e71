// benchmarks/cost_aware: does ranking candidates by expected gain per unit of
// cost reach a good config sooner than ranking them by expected gain alone?
// Both arms run the same study (the same strategy proposing the pool, the
// same GP surrogate and cost model scoring it); the only difference is the
// scheduler's cost exponent: cost-aware cools alpha from 1 to 0 over the
// budget (Lee et al. 2020), EI-only keeps alpha = 0. Measured: the time until
// the best objective is 95% of the way from the space's median to its
// optimum, where time = the evaluation costs the backend reports + the CPU
// time tessel spends proposing and learning. Spaces: the real measured
// replay tables of shared/bench (recorded compile + verification + benchmark
// seconds per config), and the simulator's matmul (a modelled compile cost
// that grows with the unrolled instruction count, plus the kernel's latency).
//
//   bench_cost_aware [--shared DIR] [--seeds 25] [--strategy auto] [--spaces a,b] [--no-sim]
#include "replay_frame.hpp"

#include <tessel/backends.hpp>
#include <tessel/bayesian.hpp>
#include <tessel/dsl.hpp>
#include <tessel/error.hpp>
#include <tessel/sim.hpp>
#include <tessel/strategies.hpp>
#include <tessel/study.hpp>

#include <fmt/format.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <numeric>
#include <sstream>

namespace {

using namespace tessel;

double thread_cpu_s() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

/// Best-so-far objective against charged seconds, one point per improvement.
using trajectory = std::vector<std::pair<double, double>>;

struct problem {
  std::string name;
  space s;
  std::shared_ptr<backend> b;
  double cap_s = 0;             ///< a run stops here (censored if the target is not reached)
  std::size_t budget_hint = 0;  ///< evaluations alpha cools over
  double median = 0;
  double optimum = std::numeric_limits<double>::infinity();  ///< lowered by the runs (sim)
};

trajectory run_once(const problem& p, const std::string& strategy, std::size_t pool_factor,
                    bool cost_aware, std::uint64_t seed, double stop_at) {
  study::options o;
  o.seed = seed;
  o.evaluate_baseline = false;
  o.surrogate = make_gp_surrogate(p.s);
  o.costs = make_cost_model(p.s);
  o.cost_alpha_start = cost_aware ? 1.0 : 0.0;
  o.cost_alpha_end = 0.0;
  o.budget_hint = p.budget_hint;
  if (pool_factor) o.pool_factor = pool_factor;
  study st(p.s, p.b, make_strategy(strategy), o);
  trajectory out;
  double clock = 0;
  double best = std::numeric_limits<double>::infinity();
  while (clock < p.cap_s && best > stop_at) {
    const double t0 = thread_cpu_s();
    const auto batch = st.ask(1);
    clock += thread_cpu_s() - t0;
    if (batch.empty()) break;
    const auto m = p.b->evaluate(p.s, batch.front().config);
    clock += m.cost.total();
    const double t1 = thread_cpu_s();
    st.tell(batch.front().trial_id, m);
    clock += thread_cpu_s() - t1;
    if (m.ok() && m.objective < best) {
      best = m.objective;
      out.emplace_back(clock, best);
    }
  }
  return out;
}

/// When `t` first reaches `target`, or nullopt.
std::optional<double> time_to(const trajectory& t, double target) {
  for (const auto& [when, value] : t)
    if (value <= target) return when;
  return std::nullopt;
}

std::vector<std::string> split(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream in(text);
  for (std::string piece; std::getline(in, piece, ',');)
    if (!piece.empty()) out.push_back(piece);
  return out;
}

problem replay_problem(const std::filesystem::path& path, const std::string& name) {
  const auto table = replay_table::load(path);
  const auto f = bench::make_frame(*table);
  auto b = std::make_shared<replay_backend>(table, replay_options{1, true, false});
  problem p{name, replay_space(path), b};
  b->prepare(p.s);
  p.median = f.median;
  p.optimum = f.optimum;
  // Twice what random search needs on average to get 95% of the way.
  p.cap_s = 2.0 * f.budget_s;
  p.budget_hint = static_cast<std::size_t>(std::ceil(p.cap_s / f.mean_cost_s));
  return p;
}

/// The simulator's matmul (examples/matmul.tsl on trn2). Its median and a
/// first optimum estimate come from a uniform sample; the runs may lower the
/// optimum further, and the target is set from the lowest seen anywhere.
problem sim_problem(std::size_t sample, std::uint64_t seed) {
  const auto path = std::filesystem::path(TESSEL_SOURCE_DIR) / "examples" / "matmul.tsl";
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  parse_options parse;
  parse.file = path.string();
  parse.target = "trn2";
  sim_options so;
  so.concurrency = 1;
  auto b = std::make_shared<sim_backend>(so);
  problem p{"sim matmul 4096^3 trn2", parse_space(text.str(), parse), b};
  b->prepare(p.s);
  rng r(seed);
  std::vector<double> ok;
  double cost = 0;
  for (std::size_t i = 0; i < sample; ++i) {
    const auto m = b->evaluate(p.s, p.s.sample(r));
    cost += m.cost.total();
    if (m.ok()) ok.push_back(m.objective);
  }
  if (ok.empty()) throw error("bench_cost_aware: no sampled simulator config compiled");
  std::sort(ok.begin(), ok.end());
  p.median = ok[ok.size() / 2];
  p.optimum = *std::min_element(ok.begin(), ok.end());
  const double mean_cost = cost / static_cast<double>(sample);
  p.budget_hint = 300;
  p.cap_s = mean_cost * static_cast<double>(p.budget_hint);
  return p;
}

struct arm_result {
  std::vector<double> times;  ///< per seed; the cap where the target was not reached
  std::size_t reached = 0;
  [[nodiscard]] double mean() const {
    return std::accumulate(times.begin(), times.end(), 0.0) / static_cast<double>(times.size());
  }
  [[nodiscard]] double median() const {
    auto t = times;
    std::sort(t.begin(), t.end());
    const auto n = t.size();
    return n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
  }
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "Time to 95% of the way from median to optimum: cost-aware dispatch vs expected "
      "improvement alone"};
  std::string shared = TESSEL_SHARED_DIR;
  int seeds = 25;
  std::string strategy = "auto";
  std::string only;
  bool no_sim = false, no_replay = false, json_out = false;
  std::size_t sim_sample = 2000;
  std::size_t pool_factor = 0;
  app.add_option("--shared", shared, "the shared/ folder holding bench/")->capture_default_str();
  app.add_option("--seeds", seeds, "runs per arm and space")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--strategy", strategy, "the strategy proposing the pool (both arms)")
      ->capture_default_str();
  app.add_option("--spaces", only, "comma-separated replay names (default: all of the manifest)");
  app.add_option("--sim-sample", sim_sample, "uniform configs timed to frame the simulator space")
      ->capture_default_str();
  app.add_option("--pool-factor", pool_factor,
                 "candidates scored per suggestion (0: study_options' default)")
      ->capture_default_str();
  app.add_flag("--no-sim", no_sim, "skip the simulator space");
  app.add_flag("--no-replay", no_replay, "skip the replay spaces");
  app.add_flag("--json", json_out, "print JSON instead of a table");
  CLI11_PARSE(app, argc, argv);

  std::vector<problem> problems;
  if (!no_replay) {
    const auto manifest = nlohmann::json::parse(
        std::ifstream(std::filesystem::path(shared) / "bench" / "manifest.json"));
    std::vector<std::string> names;
    for (const auto& entry : manifest) names.push_back(entry.at("name").get<std::string>());
    if (!only.empty()) names = split(only);
    for (const auto& name : names)
      problems.push_back(
          replay_problem(std::filesystem::path(shared) / "bench" / (name + ".json.gz"), name));
  }
  if (!no_sim) problems.push_back(sim_problem(sim_sample, 7));

  nlohmann::json report = nlohmann::json::array();
  if (!json_out)
    std::cout << fmt::format("{:<26}{:>14}{:>14}{:>9}{:>14}{:>14}{:>9}{:>10}{:>10}\n", "space",
                             "aware mean s", "aware med s", "reached", "EI mean s", "EI med s",
                             "reached", "mean x", "median x");
  double log_sum = 0;
  for (auto& p : problems) {
    std::vector<trajectory> aware_runs, ei_runs;
    // The target is 95% of the way from the median to the optimum; for the
    // simulator the optimum is only known after the runs, so they go on to
    // the cap and are read afterwards.
    const bool known = std::isfinite(p.optimum) && !std::dynamic_pointer_cast<sim_backend>(p.b);
    const double stop_at = known ? p.optimum + 0.05 * (p.median - p.optimum)
                                 : -std::numeric_limits<double>::infinity();
    for (int seed = 1; seed <= seeds; ++seed) {
      aware_runs.push_back(
          run_once(p, strategy, pool_factor, true, static_cast<std::uint64_t>(seed), stop_at));
      ei_runs.push_back(
          run_once(p, strategy, pool_factor, false, static_cast<std::uint64_t>(seed), stop_at));
    }
    for (const auto* runs : {&aware_runs, &ei_runs})
      for (const auto& r : *runs)
        if (!r.empty()) p.optimum = std::min(p.optimum, r.back().second);
    const double target = p.optimum + 0.05 * (p.median - p.optimum);
    auto collect = [&](const std::vector<trajectory>& runs) {
      arm_result a;
      for (const auto& r : runs) {
        const auto t = time_to(r, target);
        a.times.push_back(t ? *t : p.cap_s);
        a.reached += t ? 1 : 0;
      }
      return a;
    };
    const auto aware = collect(aware_runs);
    const auto ei = collect(ei_runs);
    const double mean_ratio = ei.mean() / aware.mean();
    const double median_ratio = ei.median() / aware.median();
    log_sum += std::log(mean_ratio);
    report.push_back(
        {{"space", p.name},
         {"target", target},
         {"cap_s", p.cap_s},
         {"aware",
          {{"mean_s", aware.mean()}, {"median_s", aware.median()}, {"reached", aware.reached}}},
         {"ei", {{"mean_s", ei.mean()}, {"median_s", ei.median()}, {"reached", ei.reached}}},
         {"mean_ratio", mean_ratio},
         {"median_ratio", median_ratio}});
    if (!json_out)
      std::cout << fmt::format(
          "{:<26}{:>14.1f}{:>14.1f}{:>6}/{:<2}{:>14.1f}{:>14.1f}{:>6}/{:<2}{:>10.2f}{:>10.2f}\n",
          p.name.substr(0, 25), aware.mean(), aware.median(), aware.reached, seeds, ei.mean(),
          ei.median(), ei.reached, seeds, mean_ratio, median_ratio);
  }
  const double geo = std::exp(log_sum / static_cast<double>(problems.size()));
  if (json_out) {
    std::cout << nlohmann::json{{"seeds", seeds},
                                {"strategy", strategy},
                                {"spaces", report},
                                {"geomean_mean_ratio", geo}}
                     .dump(2)
              << "\n";
    return 0;
  }
  std::cout << fmt::format(
      "\ngeometric mean of (EI-only mean time / cost-aware mean time): {:.2f}x\n"
      "time = evaluation cost charged + tessel's own CPU time; a run that never reaches the "
      "target counts at the cap;\n{} seeds per arm, strategy '{}' proposing, GP surrogate and cost "
      "model scoring in both arms.\n",
      geo, seeds, strategy);
  return 0;
}
