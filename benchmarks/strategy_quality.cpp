// benchmarks/strategy_quality: each strategy on every real measured space of
// data/bench/, replayed, scored with the method of Willemsen, van
// Nieuwpoort & van Werkhoven, "A methodology for comparing optimization
// algorithms for auto-tuning" (FGCS 2024), as data/bench/README.md states
// it: 0 = random search, 1 = the optimum, time-based budget, the strategy's
// own CPU time charged.
//
//   bench_strategy_quality [--data DIR] [--seeds 25] [--strategies a,b] [--json]
#include "common.hpp"
#include "replay_frame.hpp"

#include <tessel/backends.hpp>
#include <tessel/bayesian.hpp>
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
#include <map>

namespace {

using namespace tessel;
using bench::frame;
using bench::make_frame;

/// A registered strategy, or "auto:ARM+ARM+..." for the bandit over those arms
/// (to compare arm sets side by side).
std::unique_ptr<strategy> make_named(const std::string& spec) {
  if (spec.starts_with("bo@")) {  // bo with another model size: "bo@128"
    bo_options o;
    o.model.max_model_points = std::stoul(spec.substr(3));
    return make_bo_strategy(o);
  }
  constexpr std::string_view prefix = "auto:";
  if (spec.starts_with("auto@")) {  // the default arms with another lead: "auto@30"
    auto_options o;
    o.lead = std::stoul(spec.substr(5));
    return make_auto_strategy(o);
  }
  if (!spec.starts_with(prefix)) return make_strategy(spec);
  auto_options o;
  o.arms.clear();
  std::string rest = spec.substr(prefix.size());
  for (std::size_t start = 0; start <= rest.size();) {
    const auto plus = rest.find('+', start);
    o.arms.push_back(rest.substr(start, plus == std::string::npos ? plus : plus - start));
    if (plus == std::string::npos) break;
    start = plus + 1;
  }
  return make_auto_strategy(o);
}

/// Best-so-far (ms) against simulated seconds, one point per improvement.
using trajectory = std::vector<std::pair<double, double>>;

trajectory run_once(const space& s, const std::shared_ptr<backend>& b,
                    const std::string& strategy_name, std::uint64_t seed, double limit_s) {
  study::options o;
  o.seed = seed;
  o.evaluate_baseline = false;
  study st(s, b, make_named(strategy_name), o);
  trajectory out;
  double clock = 0;
  std::optional<double> best;
  while (clock < limit_s) {
    const double t0 = bench::thread_cpu_s();
    const auto batch = st.ask(1);
    clock += bench::thread_cpu_s() - t0;
    if (batch.empty()) break;
    const auto m = b->evaluate(s, batch.front().config);
    clock += m.cost.total();
    const double t1 = bench::thread_cpu_s();
    st.tell(batch.front().trial_id, m);
    clock += bench::thread_cpu_s() - t1;
    if (m.ok() && (!best || m.objective < *best)) {
      best = m.objective;
      out.emplace_back(clock, *best);
    }
  }
  return out;
}

double best_at(const trajectory& t, double time, double fallback) {
  double best = fallback;
  for (const auto& [when, value] : t) {
    if (when > time) break;
    best = value;
  }
  return best;
}

/// README step 5: mean over 1,000 times of (random - strategy) / (random - optimum).
double score(const std::vector<trajectory>& runs, const frame& f) {
  constexpr int points = 1000;
  double sum = 0;
  for (int k = 0; k < points; ++k) {
    const double t = f.start_s + (f.budget_s - f.start_s) * k / (points - 1);
    double mean = 0;
    for (const auto& r : runs) mean += best_at(r, t, f.median);
    mean /= static_cast<double>(runs.size());
    const double random = f.random_best(t);
    sum += random > f.optimum ? (random - mean) / (random - f.optimum) : 0.0;
  }
  return sum / points;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "Scores tessel's strategies on the real measured spaces of data/bench (FGCS 2024 method)"};
  std::string data = TESSEL_DATA_DIR;
  int seeds = 25;
  std::string strategies = "random,exhaustive,local,annealing,ga,auto";
  std::string only;
  bool json_out = false;
  int jobs = 1;
  app.add_option("--data", data, "the data/ folder holding bench/")->capture_default_str();
  app.add_option("--seeds", seeds, "runs per strategy and space (the method asks for >= 25)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--strategies", strategies, "comma-separated strategy names")
      ->capture_default_str();
  app.add_option("--spaces", only,
                 "comma-separated replay file names (default: all but the T4 duplicate)");
  app.add_option("--jobs", jobs, "seeds run at once, one thread each")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_flag("--json", json_out, "print JSON instead of a table");
  CLI11_PARSE(app, argc, argv);

  const auto names = bench::replay_names(data, only);
  const auto strategy_list = bench::split(strategies);

  std::map<std::string, std::map<std::string, double>> scores;  // strategy -> space -> score
  for (const auto& name : names) {
    const auto path = bench::replay_path(data, name);
    const auto table = replay_table::load(path);
    const auto f = make_frame(*table);
    const auto s = replay_space(path);
    auto b = std::make_shared<replay_backend>(table, replay_options{1, true, false});
    b->prepare(s);
    if (!json_out)
      std::cerr << fmt::format(
          "{}: {} valid of {} stored, optimum {:.4g} ms, median {:.4g} ms, budget {:.1f} s (scored "
          "from {:.1f} s)\n",
          name, table->valid_count(), table->stored_count(), f.optimum, f.median, f.budget_s,
          f.start_s);
    for (const auto& strategy : strategy_list) {
      // Seeds run on `jobs` threads; each run charges its own thread's CPU
      // time, so running them side by side changes no score.
      std::vector<trajectory> runs(static_cast<std::size_t>(seeds));
      bench::for_each_seed(seeds, jobs, [&](int seed) {
        runs[static_cast<std::size_t>(seed)] =
            run_once(s, b, strategy, static_cast<std::uint64_t>(seed) + 1, 1.1 * f.budget_s);
      });
      scores[strategy][name] = score(runs, f);
    }
  }

  if (json_out) {
    nlohmann::json out;
    out["seeds"] = seeds;
    out["scores"] = scores;
    std::cout << out.dump(2) << "\n";
    return 0;
  }
  std::string header = fmt::format("{:<12}", "strategy");
  for (const auto& name : names) header += fmt::format("{:>26}", name);
  header += fmt::format("{:>8}", "mean");
  std::cout << header << "\n";
  for (const auto& strategy : strategy_list) {
    std::string row = fmt::format("{:<12}", strategy);
    double mean = 0;
    for (const auto& name : names) {
      row += fmt::format("{:>26.3f}", scores[strategy][name]);
      mean += scores[strategy][name];
    }
    row += fmt::format("{:>8.3f}", mean / static_cast<double>(names.size()));
    std::cout << row << "\n";
  }
  std::cout << fmt::format(
      "\nscore: 0 = random search, 1 = optimum; {} seeds per cell; budget = what random search "
      "needs "
      "to get 95% of the way from the median to the optimum, x1.1; strategy CPU time charged.\n",
      seeds);
  return 0;
}
