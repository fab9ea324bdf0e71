// bench_cpu_gemm: what tuning the cpu backend's GEMM buys on this machine
// (benchmarks/README.md, "CPU GEMM"). Four arms, all through the cpu
// backend (the same compiler, flags, gate and loader):
//   - tessel: `tessel tune examples/cpu_gemm.tsl` as a user runs it (the
//     auto strategy, the cost-aware scheduler), --budget evaluations per seed;
//   - sweep: a large uniform random sweep of the same space (the random
//     strategy, --sweep evaluations), whose best stands for the optimum;
//   - naive: the textbook triple loop (benchmarks/cpu/naive_gemm.cpp);
//   - openblas: cblas_sgemm of Debian's OpenBLAS (benchmarks/cpu/openblas_gemm.cpp),
//     on one thread and on every CPU.
// Each search arm has its own compile cache, so its time is its own. The time
// to 95% is when a search first measured a config within 95% of the
// sweep's best speed (objective <= best / 0.95). At the end the bests and
// the baselines are re-measured side by side, interleaved over --rounds
// rounds, and the ratios reported with their range over the rounds.
#include <tessel/bayesian.hpp>
#include <tessel/cpu.hpp>
#include <tessel/dsl.hpp>
#include <tessel/strategies.hpp>
#include <tessel/study.hpp>

#include <fmt/format.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;
using namespace tessel;

struct settings {
  int size = 512, budget = 60, sweep = 300, seeds = 1, rounds = 3;
  std::string cache = "bench-cpu-cache";
  std::string json;
};

/// One search: its trials' (finished_at, objective) and its best config.
struct search {
  std::string name;
  std::vector<std::pair<double, double>> curve;  ///< (seconds since start, objective) of ok trials
  double wall_s = 0;
  std::optional<config> best;
  double best_objective = 0;
};

/// The backend's defaults, but the compile limit: on a shared, loaded
/// machine a compile can take minutes of wall time.
cpu_options gemm_options(const fs::path& cache) {
  cpu_options o;
  o.cache_dir = cache.string();
  o.compile_timeout_s = 900;
  return o;
}

search run_search(const space& s, const std::string& strategy, int evaluations, std::uint64_t seed,
                  const fs::path& cache, const std::string& name) {
  auto b = std::make_shared<cpu_backend>(gemm_options(cache));
  study::options so;
  so.seed = seed;
  so.evaluate_baseline = strategy != "random";
  so.surrogate = make_gp_surrogate(s);
  so.costs = make_cost_model(s);
  study st(s, b, make_strategy(strategy), so);
  const auto summary = st.run(stop::evaluations(static_cast<std::size_t>(evaluations)));
  search out{name, {}, summary.wall_s, std::nullopt, 0};
  for (const auto& t : st.trials())
    if (t.result.ok()) out.curve.emplace_back(t.finished_at, t.result.objective);
  std::sort(out.curve.begin(), out.curve.end());
  if (const auto* best = st.best()) {
    out.best = best->config;
    out.best_objective = best->result.objective;
  }
  fmt::print("{}: {} evaluations in {:.0f} s, best {:.4g} ms\n", name, evaluations, out.wall_s,
             out.best_objective * 1e3);
  return out;
}

/// (evaluations, seconds) until the first objective <= target; nullopt if never.
std::optional<std::pair<std::size_t, double>> time_to(const search& s, double target) {
  for (std::size_t i = 0; i < s.curve.size(); ++i)
    if (s.curve[i].second <= target) return std::pair{i + 1, s.curve[i].first};
  return std::nullopt;
}

/// A baseline kernel: one config, measured through the cpu backend.
struct baseline {
  std::string name;
  std::shared_ptr<cpu_backend> backend;
  space one;
};

baseline make_baseline(const std::string& name, const std::string& kernel, const settings& o,
                       const fs::path& cache, const std::map<std::string, std::string>& env,
                       const std::string& libraries) {
  cpu_options c = gemm_options(cache);
  const std::string dir = std::string(TESSEL_SOURCE_DIR) + "/benchmarks/cpu/";
  c.kernel = dir + kernel;
  c.reference = dir + "naive_gemm.cpp:naive_gemm";
  c.inputs = "A:MxK,B:KxN";
  c.outputs = "C:MxN";
  c.libraries = libraries;
  c.environment = env;
  c.cpus = "all";
  auto s =
      parse_space(fmt::format("space one {{ const M = {0} const N = {0} const K = {0} param "
                              "one : {{1}} }}",
                              o.size));
  auto b = std::make_shared<cpu_backend>(c);
  b->prepare(s);
  return {name, b, std::move(s)};
}

}  // namespace

int main(int argc, char** argv) {
  settings o;
  CLI::App app(
      "bench_cpu_gemm: tessel's tuned GEMM vs a random sweep, the naive loop and OpenBLAS");
  app.add_option("--size", o.size, "M = N = K")->capture_default_str();
  app.add_option("--budget", o.budget, "tessel's evaluations per seed")->capture_default_str();
  app.add_option("--sweep", o.sweep, "the random sweep's evaluations")->capture_default_str();
  app.add_option("--seeds", o.seeds, "tessel runs (seeds 1..N)")->capture_default_str();
  app.add_option("--rounds", o.rounds, "interleaved re-measurement rounds")->capture_default_str();
  app.add_option("--cache", o.cache, "folder of the compile caches (one per arm)")
      ->capture_default_str();
  app.add_option("--json", o.json, "also write the figures here");
  CLI11_PARSE(app, argc, argv);
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // progress lines reach a log as they happen

  parse_options p;
  p.target = "cpu";
  for (const auto* dim : {"M", "N", "K"}) p.overrides[dim] = std::to_string(o.size);
  const auto s = load_space(std::string(TESSEL_SOURCE_DIR) + "/examples/cpu_gemm.tsl", p);
  const fs::path cache = fs::absolute(o.cache);
  fmt::print("GEMM {0} x {0} x {0} fp32, {1} valid configs; host {2}\n", o.size, s.count(),
             cpu_backend().hardware().value_or("?"));

  const auto sweep = run_search(s, "random", o.sweep, 1000, cache / "sweep", "sweep");
  std::vector<search> tuned;
  for (int seed = 1; seed <= o.seeds; ++seed)
    tuned.push_back(run_search(s, "auto", o.budget, static_cast<std::uint64_t>(seed),
                               cache / fmt::format("tessel-{}", seed),
                               fmt::format("tessel seed {}", seed)));

  nlohmann::json out{{"size", o.size},
                     {"valid_configs", s.count()},
                     {"sweep_evaluations", o.sweep},
                     {"budget", o.budget}};
  const double target = sweep.best_objective / 0.95;
  fmt::print("\ntime to a config within 95% of the sweep's best ({:.4g} ms):\n",
             sweep.best_objective * 1e3);
  for (const auto* arm : [&] {
         std::vector<const search*> all{&sweep};
         for (const auto& t : tuned) all.push_back(&t);
         return all;
       }()) {
    const auto reached = time_to(*arm, target);
    fmt::print("  {:<14} {}\n", arm->name,
               reached ? fmt::format("{} evaluations, {:.0f} s", reached->first, reached->second)
                       : std::string("not within its budget"));
    out["time_to_95"][arm->name] =
        reached ? nlohmann::json{{"evaluations", reached->first}, {"seconds", reached->second}}
                : nlohmann::json();
  }

  // Side by side: every contender re-measured (all max_repeats samples, no
  // racing) once per round, in the same order each round.
  std::vector<std::pair<std::string, std::function<double()>>> contenders;
  auto sweep_backend = std::make_shared<cpu_backend>(gemm_options(cache / "sweep"));
  sweep_backend->prepare(s);
  contenders.emplace_back(
      "sweep best", [&, b = sweep_backend] { return b->remeasure(s, *sweep.best)->objective; });
  contenders.emplace_back("tessel best", [&, b = sweep_backend] {
    const auto& best = *std::min_element(
        tuned.begin(), tuned.end(),
        [](const auto& x, const auto& y) { return x.best_objective < y.best_objective; });
    return b->remeasure(s, *best.best)->objective;
  });
  std::vector<baseline> baselines;
  baselines.push_back(
      make_baseline("naive loop", "naive_gemm.cpp:naive_gemm", o, cache / "naive", {}, ""));
  baselines.push_back(make_baseline("openblas 1 thread", "openblas_gemm.cpp:openblas_gemm", o,
                                    cache / "openblas", {{"OPENBLAS_NUM_THREADS", "1"}},
                                    "-lopenblas"));
  const auto cores = builtin_target("cpu")->find("cores").value_or(1);
  baselines.push_back(make_baseline(
      fmt::format("openblas {} threads", cores), "openblas_gemm.cpp:openblas_gemm", o,
      cache / "openblas", {{"OPENBLAS_NUM_THREADS", std::to_string(cores)}}, "-lopenblas"));
  for (const auto& b : baselines)
    contenders.emplace_back(b.name, [&b] {
      const auto c = b.one.from_json(R"({"one": 1})");
      const auto m = *b.backend->remeasure(b.one, c);
      if (!m.ok()) throw std::runtime_error(b.name + ": " + m.message);
      return m.objective;
    });
  std::map<std::string, std::vector<double>> times;
  for (int r = 0; r < o.rounds; ++r)
    for (auto& [name, measure] : contenders) times[name].push_back(measure());

  const double flops = 2.0 * o.size * o.size * o.size;
  fmt::print(
      "\nside by side, {} rounds (median of each round's 20-sample median; range over rounds)\n",
      o.rounds);
  fmt::print("{:<20} {:>10} {:>10} {:>22} {:>24}\n", "", "ms", "GFLOP/s", "tessel best is x faster",
             "x of tessel best's speed");
  const auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  const auto& mine = times["tessel best"];
  for (const auto& [name, measure] : contenders) {
    const auto& t = times[name];
    std::vector<double> ratio;
    for (std::size_t r = 0; r < t.size(); ++r) ratio.push_back(t[r] / mine[r]);
    const auto [lo, hi] = std::minmax_element(ratio.begin(), ratio.end());
    fmt::print("{:<20} {:>10.4f} {:>10.1f} {:>10.2f} [{:.2f}, {:.2f}] {:>14.2f}\n", name,
               median(t) * 1e3, flops / median(t) * 1e-9, median(ratio), *lo, *hi,
               1.0 / median(ratio));
    out["side_by_side"][name] = {{"ms", median(t) * 1e3},
                                 {"gflops", flops / median(t) * 1e-9},
                                 {"rounds_ms", t},
                                 {"time_over_tessel", median(ratio)},
                                 {"time_over_tessel_range", {*lo, *hi}}};
  }
  if (!o.json.empty()) std::ofstream(o.json) << out.dump(2) << "\n";
  return 0;
}
