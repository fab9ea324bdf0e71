// benchmarks/cost_aware: does weighing candidates by expected gain per unit
// of cost reach a good config sooner than by expected gain alone? Both arms
// run the same study (`auto` proposing, the GP surrogate and the GP cost
// model scoring); the only difference is the cost exponent alpha of the
// study, which the scheduler's ranking (expected gain / cost^alpha) and the
// strategies (`bo`'s log EI - alpha ln cost and cheaper initial design, the
// cheapest of a few children or neighbours for `ga` and `local`) all read:
// cost-aware cools alpha from --alpha (the study's default, 2) to 0 over the
// cost budget (Lee et al. 2020), EI-only keeps alpha = 0. Measured: the time
// until the best objective is 95% of the way from the space's median to its
// optimum, where time = the evaluation costs the backend reports + the CPU
// time tessel spends proposing and learning. Spaces: the real measured
// replay tables of data/bench (recorded compile + verification +
// benchmark seconds per config), and the simulator's matmul (a modelled
// compile cost that grows with the unrolled instruction count, the gate's
// CPU time and the kernel's latency). The ratios come with
// percentile-bootstrap 95% intervals over the seeds. --exact-cost gives the
// replay arms the recorded cost of every config (an oracle cost model).
// --cost-rule gittins ranks the cost-aware arm by the Pandora's-box Gittins
// index instead (study_options::cost_rule; EI-only is the same either way).
//
//   bench_cost_aware [--data DIR] [--seeds 25] [--first-seed 1] [--jobs 1] [--alpha A]
//                    [--explore-every K] [--strategy auto] [--spaces a,b] [--pool-factor N]
//                    [--exact-cost] [--cost-choice] [--no-cpu] [--no-sim] [--no-replay]
//                    [--cost-rule cooled_ei|gittins] [--gittins-lambda L] [--gittins-decay]
//                    [--json]
#include "common.hpp"
#include "replay_frame.hpp"

#include <tessel/backends.hpp>
#include <tessel/bayesian.hpp>
#include <tessel/dsl.hpp>
#include <tessel/error.hpp>
#include <tessel/random.hpp>
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

/// One improvement of the best-so-far objective.
struct step {
  double clock = 0;             ///< charged seconds when it was found
  double best = 0;              ///< the new best objective
  std::size_t evaluations = 0;  ///< evaluations done by then
};
/// Best-so-far objective against charged seconds, one point per improvement.
using trajectory = std::vector<step>;

struct problem {
  std::string name;
  space s;
  std::shared_ptr<backend> b;
  double cap_s = 0;  ///< a run stops here (censored if not reached); alpha cools over it
  double median = 0;
  double optimum = std::numeric_limits<double>::infinity();  ///< lowered by the runs (sim)
  bool oracle_cost = false;  ///< the backend's estimate is exact: no cost model is learned
  bool charge_cpu = true;    ///< tessel's own CPU time counts toward the clock
  bool choose_cost = false;  ///< cost_model_options::choose_by_error
  study::options::cost_rule_kind cost_rule = study::options::cost_rule_kind::cooled_ei;
  double gittins_lambda = study::options{}.gittins_lambda;
  bool gittins_decay = false;
};

/// One run; `alpha_start` 0 is the EI-only arm.
trajectory run_once(const problem& p, const std::string& strategy, std::size_t pool_factor,
                    double alpha_start, std::size_t explore_every, std::uint64_t seed,
                    double stop_at) {
  study::options o;
  o.seed = seed;
  o.evaluate_baseline = false;
  o.surrogate = make_gp_surrogate(p.s);
  if (!p.oracle_cost) o.costs = make_cost_model(p.s, {.choose_by_error = p.choose_cost});
  o.cost_alpha_start = alpha_start;
  o.cost_alpha_end = 0.0;
  o.cost_explore_every = explore_every;
  o.cost_rule = p.cost_rule;  // inert in the EI-only arm (alpha 0)
  o.gittins_lambda = p.gittins_lambda;
  o.gittins_decay = p.gittins_decay;
  o.cost_budget_hint_s = p.cap_s;
  if (pool_factor) o.pool_factor = pool_factor;
  study st(p.s, p.b, make_strategy(strategy), o);
  trajectory out;
  double clock = 0;
  double best = std::numeric_limits<double>::infinity();
  std::size_t evaluations = 0;
  while (clock < p.cap_s && best > stop_at) {
    const double t0 = bench::thread_cpu_s();
    const auto batch = st.ask(1);
    if (p.charge_cpu) clock += bench::thread_cpu_s() - t0;
    if (batch.empty()) break;
    const auto m = p.b->evaluate(p.s, batch.front().config);
    clock += m.cost.total();
    ++evaluations;
    const double t1 = bench::thread_cpu_s();
    st.tell(batch.front().trial_id, m);
    if (p.charge_cpu) clock += bench::thread_cpu_s() - t1;
    if (m.ok() && m.objective < best) {
      best = m.objective;
      out.push_back({clock, best, evaluations});
    }
  }
  return out;
}

/// The first step of `t` that reaches `target`, or nullopt.
std::optional<step> reaching(const trajectory& t, double target) {
  for (const auto& s : t)
    if (s.best <= target) return s;
  return std::nullopt;
}

problem replay_problem(const std::filesystem::path& path, const std::string& name,
                       bool exact_cost) {
  const auto table = replay_table::load(path);
  const auto f = bench::make_frame(*table);
  auto b = std::make_shared<replay_backend>(table, replay_options{1, true, exact_cost});
  problem p{name, replay_space(path), b};
  b->prepare(p.s);
  p.median = f.median;
  p.optimum = f.optimum;
  p.oracle_cost = exact_cost;
  // Twice what random search needs on average to get 95% of the way.
  p.cap_s = 2.0 * f.budget_s;
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
  p.cap_s = mean_cost * 300;  // 300 evaluations of the average sampled cost
  return p;
}

struct arm_result {
  std::vector<double> times;  ///< per seed; the cap where the target was not reached
  std::size_t reached = 0;
  double evaluations = 0;  ///< summed over the runs that reached the target
  [[nodiscard]] double mean_evaluations() const {
    return reached ? evaluations / static_cast<double>(reached) : 0.0;
  }
  [[nodiscard]] double mean() const {
    return std::accumulate(times.begin(), times.end(), 0.0) / static_cast<double>(times.size());
  }
  [[nodiscard]] nlohmann::json to_json() const {
    return {{"mean_s", mean()},
            {"median_s", median()},
            {"reached", reached},
            {"evaluations", mean_evaluations()},
            {"times_s", times}};
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
  std::string data = TESSEL_DATA_DIR;
  int seeds = 25;
  int first_seed = 1;
  int jobs = 1;
  double alpha = study::options{}.cost_alpha_start;
  std::string strategy = "auto";
  std::string only;
  bool no_sim = false, no_replay = false, json_out = false, exact_cost = false, no_cpu = false;
  bool cost_choice = cost_model_options{}.choose_by_error;
  std::string cost_rule = "cooled_ei";
  double gittins_lambda = study::options{}.gittins_lambda;
  bool gittins_decay = study::options{}.gittins_decay;
  std::size_t sim_sample = 2000;
  std::size_t pool_factor = 0;
  std::size_t explore_every = study::options{}.cost_explore_every;
  app.add_option("--data", data, "the data/ folder holding bench/")->capture_default_str();
  app.add_option("--seeds", seeds, "runs per arm and space")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--first-seed", first_seed,
                 "the first run seed (seeds first .. first + seeds - 1)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--jobs", jobs, "seeds run at once, one thread each")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--alpha", alpha, "the cost-aware arm's cost_alpha_start (cooled to 0)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--explore-every", explore_every,
                 "the cost-aware arm's cost_explore_every: every k-th evaluation at alpha 0 (0: "
                 "never)")
      ->capture_default_str();
  app.add_option("--strategy", strategy, "the strategy proposing the pool (both arms)")
      ->capture_default_str();
  app.add_option("--spaces", only, "comma-separated replay names (default: all of the manifest)");
  app.add_option("--sim-sample", sim_sample, "uniform configs timed to frame the simulator space")
      ->capture_default_str();
  app.add_option("--pool-factor", pool_factor,
                 "candidates scored per suggestion (0: study_options' default)")
      ->capture_default_str();
  app.add_flag("--exact-cost", exact_cost,
               "replay: the backend's estimate is each config's recorded cost (an oracle cost "
               "model, bounding what cost-awareness can gain)");
  app.add_flag("--no-cpu", no_cpu,
               "charge evaluation costs only, not tessel's own CPU time (which the machine's load "
               "moves)");
  app.add_flag("--cost-choice,!--no-cost-choice", cost_choice,
               "the cost model with cost_model_options::choose_by_error: GP or ridge, and the "
               "run link or not, by one-step error");
  app.add_option("--cost-rule", cost_rule,
                 "the cost-aware arm's study_options::cost_rule: cooled_ei (gain / price^alpha) or "
                 "gittins (the Pandora's-box Gittins index)")
      ->capture_default_str()
      ->check(CLI::IsMember({"cooled_ei", "gittins"}));
  app.add_option("--gittins-lambda", gittins_lambda,
                 "gittins: study_options::gittins_lambda (log objective per mean evaluation cost)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_flag("--gittins-decay", gittins_decay,
               "gittins: halve lambda when the first choice's index is not below the incumbent "
               "(PBGI-D)");
  app.add_flag("--no-sim", no_sim, "skip the simulator space");
  app.add_flag("--no-replay", no_replay, "skip the replay spaces");
  app.add_flag("--json", json_out, "print JSON instead of a table");
  CLI11_PARSE(app, argc, argv);

  std::vector<problem> problems;
  if (!no_replay) {
    for (const auto& name : bench::replay_names(data, only))
      problems.push_back(replay_problem(bench::replay_path(data, name), name, exact_cost));
  }
  if (!no_sim) problems.push_back(sim_problem(sim_sample, 7));
  for (auto& p : problems) {
    p.charge_cpu = !no_cpu;
    p.choose_cost = cost_choice;
    p.cost_rule = cost_rule == "gittins" ? study::options::cost_rule_kind::gittins
                                         : study::options::cost_rule_kind::cooled_ei;
    p.gittins_lambda = gittins_lambda;
    p.gittins_decay = gittins_decay;
  }

  nlohmann::json report = nlohmann::json::array();
  if (!json_out)
    std::cout << fmt::format("{:<26}{:>13}{:>12}{:>8}{:>9}{:>13}{:>12}{:>8}{:>9}{:>9}{:>10}   {}\n",
                             "space", "aware mean s", "aware med s", "evals", "reached",
                             "EI mean s", "EI med s", "evals", "reached", "mean x", "median x",
                             "95% CI of mean x");
  double log_sum = 0;
  std::vector<std::pair<arm_result, arm_result>> arms;  ///< (aware, EI) per space
  for (auto& p : problems) {
    std::vector<trajectory> aware_runs, ei_runs;
    // The target is 95% of the way from the median to the optimum; for the
    // simulator the optimum is only known after the runs, so they go on to
    // the cap and are read afterwards.
    const bool known = std::isfinite(p.optimum) && !std::dynamic_pointer_cast<sim_backend>(p.b);
    const double stop_at = known ? p.optimum + 0.05 * (p.median - p.optimum)
                                 : -std::numeric_limits<double>::infinity();
    aware_runs.resize(static_cast<std::size_t>(seeds));
    ei_runs.resize(static_cast<std::size_t>(seeds));
    bench::for_each_seed(seeds, jobs, [&](int seed) {
      const auto i = static_cast<std::size_t>(seed);
      const auto run_seed = static_cast<std::uint64_t>(seed + first_seed);
      aware_runs[i] = run_once(p, strategy, pool_factor, alpha, explore_every, run_seed, stop_at);
      ei_runs[i] = run_once(p, strategy, pool_factor, 0.0, 0, run_seed, stop_at);
    });
    for (const auto* runs : {&aware_runs, &ei_runs})
      for (const auto& r : *runs)
        if (!r.empty()) p.optimum = std::min(p.optimum, r.back().best);
    const double target = p.optimum + 0.05 * (p.median - p.optimum);
    auto collect = [&](const std::vector<trajectory>& runs) {
      arm_result a;
      for (const auto& r : runs) {
        const auto t = reaching(r, target);
        a.times.push_back(t ? t->clock : p.cap_s);
        if (t) {
          ++a.reached;
          a.evaluations += static_cast<double>(t->evaluations);
        }
      }
      return a;
    };
    const auto aware = collect(aware_runs);
    const auto ei = collect(ei_runs);
    const double mean_ratio = ei.mean() / aware.mean();
    const double median_ratio = ei.median() / aware.median();
    log_sum += std::log(mean_ratio);
    arms.emplace_back(aware, ei);
    report.push_back({{"space", p.name},
                      {"target", target},
                      {"cap_s", p.cap_s},
                      {"aware", aware.to_json()},
                      {"ei", ei.to_json()},
                      {"mean_ratio", mean_ratio},
                      {"median_ratio", median_ratio}});
  }
  const double geo = std::exp(log_sum / static_cast<double>(problems.size()));
  // each space's EI / aware mean-time ratio, seeds resampled
  std::vector<std::pair<std::vector<double>, std::vector<double>>> ei_over_aware;
  for (const auto& [aware, ei] : arms) ei_over_aware.emplace_back(ei.times, aware.times);
  const auto ci = bench::bootstrap_ratios(ei_over_aware);
  for (std::size_t i = 0; i < report.size(); ++i)
    report[i]["mean_ratio_ci95"] = {ci.per_pair[i].first, ci.per_pair[i].second};
  if (json_out) {
    std::cout << nlohmann::json{{"seeds", seeds},
                                {"strategy", strategy},
                                {"first_seed", first_seed},
                                {"alpha_start", alpha},
                                {"explore_every", explore_every},
                                {"cost_rule", cost_rule},
                                {"gittins_lambda", gittins_lambda},
                                {"gittins_decay", gittins_decay},
                                {"spaces", report},
                                {"geomean_mean_ratio", geo},
                                {"geomean_ci95", {ci.geomean.first, ci.geomean.second}}}
                     .dump(2)
              << "\n";
    return 0;
  }
  for (std::size_t i = 0; i < problems.size(); ++i) {
    const auto& [aware, ei] = arms[i];
    std::cout << fmt::format(
        "{:<26}{:>13.1f}{:>12.1f}{:>8.0f}{:>6}/{:<2}{:>13.1f}{:>12.1f}{:>8.0f}{:>6}/{:<2}{:>9.2f}"
        "{:>10.2f}   [{:.2f}, {:.2f}]\n",
        problems[i].name.substr(0, 25), aware.mean(), aware.median(), aware.mean_evaluations(),
        aware.reached, seeds, ei.mean(), ei.median(), ei.mean_evaluations(), ei.reached, seeds,
        ei.mean() / aware.mean(), ei.median() / aware.median(), ci.per_pair[i].first,
        ci.per_pair[i].second);
  }
  std::cout << fmt::format(
      "\ngeometric mean of (EI-only mean time / cost-aware mean time): {:.2f}x "
      "(bootstrap 95% interval [{:.2f}, {:.2f}])\n"
      "time = evaluation cost charged + tessel's own CPU time; a run that never reaches the "
      "target counts at the cap;\n{} seeds per arm, strategy '{}' proposing, GP surrogate and cost "
      "model scoring in both arms; cost-aware alpha cooled from {} to 0{}{}.\n",
      geo, ci.geomean.first, ci.geomean.second, seeds, strategy, alpha,
      explore_every ? fmt::format(", every {}th evaluation at alpha 0", explore_every) : "",
      cost_rule == "gittins" ? fmt::format(", ranked by the Gittins index (lambda {}{})",
                                           gittins_lambda, gittins_decay ? ", halved" : "")
                             : "");
  return 0;
}
