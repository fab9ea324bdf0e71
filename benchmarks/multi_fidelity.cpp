// benchmarks/multi_fidelity: how many high-fidelity evaluations does a
// study need to get 95% of the way from the median to the optimum, screening
// every config at a cheap low fidelity first (multi_fidelity_backend), against
// the same study on the high fidelity alone? Both arms run side by side, the
// same strategy and seeds; only the backend differs. Pairs with a known
// distortion, built from what exists here:
//
// - replay tables of data/bench as the high fidelity, and a distorted copy of
//   each as the low one: t_low = (t^gamma + beta * median^gamma) *
//   exp(sigma * sd(ln t) * e_c), a monotone warp (gamma compresses the range;
//   beta adds a constant floor, like a launch overhead the low fidelity
//   over-counts, so the map is not log-linear) plus rank noise (e_c a
//   standard normal fixed per config by a hash of its values, sd(ln t) the
//   table's spread of ln times). Failing configs fail at both.
// - the simulator at two targets: benchmarks/spaces/sim_matmul_frame.tsl
//   timed on trn1 (low) and on trn2 (high), both with the gate off; a uniform
//   sample of its valid configs (--sim-sample, 5,000 of 18,696) is timed once
//   up front at both, so the frame is exact and the runs cheap, and the pair
//   answers from those
//   tables (a config outside the sample is invalid, as one outside a replay
//   table is).
// - the simulator's two timing models: the same sample on trn2, the
//   steady-state analytic model (sim_options::model = "analytic") screening
//   for the event-driven one (issue 16: the scheduler screens with the fast
//   model); and the same on every config of examples/sim_rmsnorm.tsl,
//   sim_softmax.tsl and sim_layernorm.tsl (issue 28: the row workloads' model).
//   With --file (repeatable), instead, the same analytic -> event pair on
//   each given space at --target, on a uniform sample of --sim-sample of
//   its configs (issue 28: multi-fidelity screening on every workload).
//
// Measured per run: the high-fidelity evaluations until the best
// high-fidelity objective is within 5% of (median - optimum) of the optimum;
// a run that never gets there counts at the cap (twice what random search
// needs on average, at least 100). A config outside the table or the sample is
// not counted in either arm (it was never run; the kernel's restrictions
// exclude it); a failure at the high fidelity is. Ratio per pair = mean of
// high-only / mean of multi-fidelity, with a percentile-bootstrap 95%
// interval over the seeds, and the geometric mean over the pairs.
//
// TESSEL_BENCH_DEBUG=1 prints each run that misses its target, with the
// multi-fidelity backend's report.
//
//   bench_multi_fidelity [--data DIR] [--seeds 10] [--jobs 1] [--strategy auto]
//                        [--spaces a,b] [--gamma 0.7] [--beta 0.3] [--sigma 0.3]
//                        [--z 2] [--top 0.1] [--top-patience 20] [--top-min 0] [--min-spread 0]
//                        [--audit 0]
//                        [--sim-sample 5000]
//                        [--no-sim] [--no-replay] [--file F.tsl]... [--target trn2] [--json]
#include "common.hpp"
#include "replay_frame.hpp"

#include <tessel/backends.hpp>
#include <tessel/dsl.hpp>
#include <tessel/error.hpp>
#include <tessel/fidelity.hpp>
#include <tessel/hash.hpp>
#include <tessel/random.hpp>
#include <tessel/sim.hpp>
#include <tessel/strategies.hpp>
#include <tessel/study.hpp>
#include <tessel/target.hpp>

#include <fmt/format.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <limits>
#include <numeric>
#include <sstream>
#include <thread>
#include <unordered_map>

namespace {

using namespace tessel;

/// The documented distortion of a replay table (header comment).
struct distortion {
  double gamma = 0.7, beta = 0.3, sigma = 0.3;
  std::uint64_t seed = 12;
};

struct pair_problem {
  std::string name;
  space s;
  std::shared_ptr<backend> low, high;
  double median = 0, optimum = 0;
  std::size_t high_cap = 0;   ///< a run stops after this many high evaluations (censored)
  std::size_t total_cap = 0;  ///< ... or this many evaluations in all (either arm)
  double spearman = 0;        ///< low vs high over every valid config
  double kendall = 0;
};

/// A standard normal draw fixed by `key` (Box-Muller on two splitmix64 words).
double std_normal(std::uint64_t key) {
  std::uint64_t state = key;
  const auto u1 = (static_cast<double>(tessel::splitmix64(state) >> 11) + 0.5) * 0x1.0p-53;
  const auto u2 = (static_cast<double>(tessel::splitmix64(state) >> 11) + 0.5) * 0x1.0p-53;
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
}

std::uint64_t values_hash(const std::vector<std::uint32_t>& values, std::uint64_t seed) {
  std::uint64_t h = tessel::fnv1a_offset_basis ^ seed;
  for (auto v : values) h = tessel::fnv1a_step(h, v);
  return h;
}

rank_agreement agreement_of(const std::vector<std::pair<double, double>>& pairs) {
  // Kendall is O(n^2): a fixed every-k-th subsample of at most 3,000 pairs.
  std::vector<std::pair<double, double>> sample;
  const std::size_t step = std::max<std::size_t>(1, pairs.size() / 3000);
  for (std::size_t i = 0; i < pairs.size(); i += step) sample.push_back(pairs[i]);
  return measure_agreement(sample);
}

pair_problem replay_pair(const std::filesystem::path& path, const std::string& name,
                         const distortion& d) {
  const auto table = replay_table::load(path);
  const auto f = bench::make_frame(*table);
  auto high = std::make_shared<replay_backend>(table, replay_options{1, true, false});
  pair_problem p{name + " (warped copy)", replay_space(path), high, high};
  high->prepare(p.s);
  std::vector<double> logs;
  for (double t : table->valid_times()) logs.push_back(std::log(t));
  const double mean = std::accumulate(logs.begin(), logs.end(), 0.0) / logs.size();
  double var = 0;
  for (double l : logs) var += (l - mean) * (l - mean);
  const double sd = std::sqrt(var / logs.size());
  const double floor = d.beta * std::pow(f.median, d.gamma);
  auto warp = [=](const replay_table::entry& e) {
    return (std::pow(e.time_ms, d.gamma) + floor) *
           std::exp(d.sigma * sd * std_normal(values_hash(e.values, d.seed)));
  };
  std::vector<std::pair<double, double>> pairs;
  for (const auto& e : table->entries())
    if (e.status == status::ok) pairs.emplace_back(warp(e), e.time_ms);
  const auto a = agreement_of(pairs);
  p.spearman = a.spearman_rho.value_or(0);
  p.kendall = a.kendall_tau.value_or(0);
  p.low = std::make_shared<callback_backend>(
      [high, warp](const space& s, const config& c) {
        const auto* e = high->lookup(s, c);
        if (!e) return measurement::failure(status::invalid, "not in the table");
        if (e->status != status::ok)
          return measurement::failure(e->status, e->failure, cost{0, 0, 1e-3});
        return measurement::success(warp(*e), cost{0, 0, 1e-3});
      },
      [] {
        callback_options o;
        o.name = "warped replay";
        return o;
      }());
  p.median = f.median;
  p.optimum = f.optimum;
  // Twice what random search needs on average to get 95% of the way.
  p.high_cap = std::max<std::size_t>(100, static_cast<std::size_t>(2.0 * f.random_needs(0.95)));
  return p;
}

/// A backend answering from measurements taken once up front.
std::shared_ptr<backend> table_backend(std::string name,
                                       std::unordered_map<std::uint64_t, measurement> answers) {
  auto shared =
      std::make_shared<const std::unordered_map<std::uint64_t, measurement>>(std::move(answers));
  callback_options o;
  o.name = std::move(name);
  return std::make_shared<callback_backend>(
      [shared](const space& s, const config& c) {
        const auto it = shared->find(s.key(c));
        // Like a replay table: a config that was not measured is not a candidate.
        return it == shared->end() ? measurement::failure(status::invalid, "not in the sample")
                                   : it->second;
      },
      o);
}

using answers = std::unordered_map<std::uint64_t, measurement>;

/// A pair answering from two tables of the same sample.
pair_problem sim_pair(const space& s, const std::string& name, const std::string& low_name,
                      answers low, const answers& high) {
  std::vector<double> times;
  std::vector<std::pair<double, double>> pairs;
  for (const auto& [key, m] : high)
    if (m.ok()) {
      times.push_back(m.objective);
      if (low.at(key).ok()) pairs.emplace_back(low.at(key).objective, m.objective);
    }
  if (times.empty()) throw error("bench_multi_fidelity: no simulator config compiled");
  std::sort(times.begin(), times.end());
  pair_problem p{name, s, nullptr, nullptr};
  p.low = table_backend(low_name, std::move(low));
  p.high = table_backend("sim event (table)", high);
  p.median = times[times.size() / 2];
  p.optimum = times.front();
  const auto a = agreement_of(pairs);
  p.spearman = a.spearman_rho.value_or(0);
  p.kendall = a.kendall_tau.value_or(0);
  // Random search (without replacement) over the valid configs.
  const double y95 = p.optimum + 0.05 * (p.median - p.optimum);
  const auto below =
      static_cast<double>(std::upper_bound(times.begin(), times.end(), y95) - times.begin());
  const auto n = static_cast<double>(times.size());
  p.high_cap =
      std::max<std::size_t>(100, static_cast<std::size_t>(2.0 * std::ceil((n + 1) / (below + 1))));
  return p;
}

/// The space in `path`, on `target`.
space sim_space(const std::filesystem::path& path, const std::string& target = "trn2") {
  std::ifstream in(path);
  if (!in) throw error(fmt::format("bench_multi_fidelity: cannot read {}", path.string()));
  std::stringstream text;
  text << in.rdbuf();
  parse_options parse;
  parse.file = path.string();
  parse.target = target;
  return parse_space(text.str(), parse);
}

/// A uniform sample of `sample` distinct valid configs of `s` (all of them
/// with sample 0 or more than there are).
std::vector<config> frame_of(const space& s, std::size_t sample) {
  std::vector<config> all;
  if (sample == 0 || sample >= s.count()) {
    for (const auto& c : s.configs()) all.push_back(c);
    return all;
  }
  rng r(7);
  std::unordered_map<std::uint64_t, bool> seen;
  while (all.size() < sample) {
    auto c = s.sample(r);
    if (seen.emplace(s.key(c), true).second) all.push_back(std::move(c));
  }
  return all;
}

/// Each config of `all` timed once by the simulator on `target` with `model`
/// (gate off); the configs outside answer invalid.
answers timed(const space& s, const std::vector<config>& all, const std::string& target,
              const std::string& model, int jobs) {
  sim_options o;
  o.target = target;
  o.model = model == "analytic" ? tessel::sim_model::analytic : tessel::sim_model::event;
  o.gate = false;
  o.concurrency = 1;
  sim_backend b(o);
  b.prepare(s);
  std::vector<measurement> out(all.size());
  bench::for_each_seed(static_cast<int>(all.size()), jobs, [&](int i) {
    out[static_cast<std::size_t>(i)] = b.evaluate(s, all[static_cast<std::size_t>(i)]);
  });
  answers by_key;
  for (std::size_t i = 0; i < all.size(); ++i) by_key.emplace(s.key(all[i]), out[i]);
  return by_key;
}

/// The analytic -> event pair of the space in `path` on `target`, over a
/// uniform sample of `sample` of its configs (every config with 0).
pair_problem model_pair(const std::filesystem::path& path, const std::string& target,
                        std::size_t sample, int jobs) {
  const space s = sim_space(path, target);
  const auto all = frame_of(s, sample);
  return sim_pair(s,
                  fmt::format("{} analytic -> event{}", path.stem().string(),
                              target == "trn2" ? "" : " @" + target),
                  "sim analytic (table)", timed(s, all, target, "analytic", jobs),
                  timed(s, all, target, "event", jobs));
}

/// The simulator pairs: on the matmul frame (a sample of `sample` configs),
/// trn1 -> trn2 and, on trn2, analytic -> event; on each row workload's
/// example space (every config), analytic -> event (issue 28).
std::vector<pair_problem> sim_pairs(int jobs, std::size_t sample) {
  const auto root = std::filesystem::path(TESSEL_SOURCE_DIR);
  const space s = sim_space(root / "benchmarks" / "spaces" / "sim_matmul_frame.tsl");
  const auto all = frame_of(s, sample);
  const auto high = timed(s, all, "trn2", "event", jobs);
  std::vector<pair_problem> out;
  out.push_back(sim_pair(s, "sim matmul trn1 -> trn2", "sim@trn1 (table)",
                         timed(s, all, "trn1", "event", jobs), high));
  out.push_back(sim_pair(s, "sim matmul analytic -> event", "sim analytic (table)",
                         timed(s, all, "trn2", "analytic", jobs), high));
  for (const char* name : {"sim_rmsnorm", "sim_softmax", "sim_layernorm"})
    out.push_back(model_pair(root / "examples" / fmt::format("{}.tsl", name), "trn2", 0, jobs));
  return out;
}

struct run_result {
  std::size_t high_to_target = 0;  ///< high evaluations to the target (the cap if never)
  bool reached = false;
  std::size_t evaluations = 0;  ///< all evaluations by then (low ones included)
};

run_result run_once(const pair_problem& p, const std::string& strategy, std::uint64_t seed,
                    double target, const multi_fidelity_options* mf_options) {
  std::shared_ptr<multi_fidelity_backend> mf;
  if (mf_options) mf = std::make_shared<multi_fidelity_backend>(p.low, p.high, *mf_options);
  std::shared_ptr<backend> b = mf ? std::shared_ptr<backend>(mf) : p.high;
  study::options o;
  o.seed = seed;
  o.evaluate_baseline = false;
  study st(p.s, b, make_strategy(strategy), o);
  b->prepare(p.s);
  run_result r;
  std::size_t high_only = 0;
  // Both arms may propose up to total_cap configs: those outside the table
  // or the sample count in neither arm, so on a sparse sample the high-only
  // arm must not run out of proposals before it runs out of high evaluations.
  while (r.evaluations < p.total_cap) {
    const auto batch = st.ask(1);
    if (batch.empty()) break;
    const auto m = b->evaluate(p.s, batch.front().config);
    ++r.evaluations;
    // A config outside the table (or the sample) was never run: it is not a
    // high-fidelity evaluation (the multi-fidelity arm learns it at the low one).
    if (m.status != status::invalid) ++high_only;
    st.tell(batch.front().trial_id, m);
    const std::size_t high = mf ? mf->stats().high_evaluations : high_only;
    if (st.best() && st.best()->result.objective <= target) {
      r.reached = true;
      r.high_to_target = high;
      return r;
    }
    if (high >= p.high_cap) break;
  }
  r.high_to_target = p.high_cap;
  if (std::getenv("TESSEL_BENCH_DEBUG"))
    fmt::print(stderr, "{} seed {}: best {} target {} after {} evaluations\n", p.name, seed,
               st.best() ? st.best()->result.objective : -1.0, target, r.evaluations);
  if (std::getenv("TESSEL_BENCH_DEBUG") && mf) fmt::print(stderr, "{}", mf->stats().text());
  return r;
}

struct arm {
  std::vector<double> high;  ///< per seed, censored at the cap
  std::size_t reached = 0;
  double evaluations = 0;
  [[nodiscard]] double mean() const {
    return std::accumulate(high.begin(), high.end(), 0.0) / static_cast<double>(high.size());
  }
  [[nodiscard]] double mean_evaluations() const {
    return evaluations / static_cast<double>(high.size());
  }
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "High-fidelity evaluations to 95% of the way from median to optimum: multi-fidelity "
      "screening vs the high fidelity alone"};
  std::string data = TESSEL_DATA_DIR;
  int seeds = 10, jobs = 1;
  std::string strategy = "auto";
  std::string only = "pnpoly_RTX_3090,convolution_RTX_3090,convolution_milo_A100";
  distortion d;
  multi_fidelity_options mfo;
  double total_factor = 20;
  bool no_sim = false, no_replay = false, json_out = false;
  std::size_t sim_sample = 5000;
  std::vector<std::string> files;
  std::string file_target = "trn2";
  app.add_option("--data", data, "the data/ folder holding bench/")->capture_default_str();
  app.add_option("--seeds", seeds, "runs per arm and pair")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--jobs", jobs, "seeds run at once, one thread each")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--strategy", strategy, "the strategy (both arms)")->capture_default_str();
  app.add_option("--spaces", only, "comma-separated replay tables to pair with a warped copy")
      ->capture_default_str();
  app.add_option("--gamma", d.gamma, "warp exponent of the low fidelity")->capture_default_str();
  app.add_option("--beta", d.beta, "constant floor of the low fidelity, x median^gamma")
      ->capture_default_str();
  app.add_option("--sigma", d.sigma, "rank noise, x the table's sd of ln time")
      ->capture_default_str();
  app.add_option("--z", mfo.z, "multi_fidelity_options::z")->capture_default_str();
  app.add_option("--top", mfo.top_fraction, "multi_fidelity_options::top_fraction")
      ->capture_default_str();
  app.add_option("--top-patience", mfo.top_patience, "multi_fidelity_options::top_patience")
      ->capture_default_str();
  app.add_option("--top-min", mfo.top_min, "multi_fidelity_options::top_min (0 = no minimum)")
      ->capture_default_str();
  app.add_option("--min-spread", mfo.min_spread,
                 "multi_fidelity_options::min_spread (log scale; 0 = no floor)")
      ->capture_default_str();
  app.add_option("--audit", mfo.audit_every, "multi_fidelity_options::audit_every")
      ->capture_default_str();
  app.add_option("--total-factor", total_factor,
                 "either arm stops after this many x the high cap evaluations in all")
      ->capture_default_str();
  app.add_flag("--no-sim", no_sim, "skip the simulator pair");
  app.add_flag("--no-replay", no_replay, "skip the replay pairs");
  app.add_option("--sim-sample", sim_sample,
                 "simulator configs timed at both fidelities (uniform, distinct; 0 = all: the "
                 "matmul frame's 18,696, or every config of a --file space)")
      ->capture_default_str();
  app.add_option("--file", files,
                 "a simulator space (.tsl): its analytic -> event pair at --target on "
                 "--sim-sample of its configs, instead of the default simulator pairs (repeatable)")
      ->check(CLI::ExistingFile);
  app.add_option("--target", file_target, "the target of the --file pairs")
      ->capture_default_str()
      ->check(CLI::IsMember(builtin_target_names()));
  app.add_flag("--json", json_out, "print JSON instead of a table");
  CLI11_PARSE(app, argc, argv);

  std::vector<pair_problem> pairs;
  if (!no_replay)
    for (const auto& name : bench::replay_names(data, only))
      pairs.push_back(replay_pair(bench::replay_path(data, name), name, d));
  for (const auto& f : files) {
    try {
      pairs.push_back(model_pair(f, file_target, sim_sample, jobs));
    } catch (const error& e) {  // a space the simulator cannot time, or not at this target
      fmt::print(stderr, "bench_multi_fidelity: {}: {}\n", f, e.what());
      return 1;
    }
  }
  if (files.empty() && !no_sim)
    for (auto& p : sim_pairs(jobs, sim_sample)) pairs.push_back(std::move(p));
  for (auto& p : pairs)
    p.total_cap = static_cast<std::size_t>(total_factor * static_cast<double>(p.high_cap));

  std::vector<std::pair<arm, arm>> arms;  ///< (high only, multi-fidelity) per pair
  nlohmann::json report = nlohmann::json::array();
  double log_sum = 0;
  for (const auto& p : pairs) {
    const double target = p.optimum + 0.05 * (p.median - p.optimum);
    std::vector<run_result> hi(static_cast<std::size_t>(seeds)), mf(hi.size());
    bench::for_each_seed(seeds, jobs, [&](int seed) {
      const auto i = static_cast<std::size_t>(seed);
      const auto run_seed = static_cast<std::uint64_t>(seed) + 1;
      hi[i] = run_once(p, strategy, run_seed, target, nullptr);
      mf[i] = run_once(p, strategy, run_seed, target, &mfo);
    });
    auto collect = [](const std::vector<run_result>& runs) {
      arm a;
      for (const auto& r : runs) {
        a.high.push_back(static_cast<double>(r.high_to_target));
        a.reached += r.reached ? 1 : 0;
        a.evaluations += static_cast<double>(r.evaluations);
      }
      return a;
    };
    arms.emplace_back(collect(hi), collect(mf));
    const double ratio = arms.back().first.mean() / arms.back().second.mean();
    log_sum += std::log(ratio);
    report.push_back({{"pair", p.name},
                      {"spearman", p.spearman},
                      {"kendall", p.kendall},
                      {"high_cap", p.high_cap},
                      {"high_only", arms.back().first.high},
                      {"multi", arms.back().second.high},
                      {"multi_evaluations", arms.back().second.mean_evaluations()},
                      {"ratio", ratio}});
  }
  const double geo = std::exp(log_sum / static_cast<double>(pairs.size()));
  // each pair's high-only / multi-fidelity mean ratio, seeds resampled
  std::vector<std::pair<std::vector<double>, std::vector<double>>> high_over_multi;
  for (const auto& [h, m] : arms) high_over_multi.emplace_back(h.high, m.high);
  const auto [per, geo_ci] = bench::bootstrap_ratios(high_over_multi);
  for (std::size_t i = 0; i < report.size(); ++i)
    report[i]["ratio_ci95"] = {per[i].first, per[i].second};
  if (json_out) {
    std::cout << nlohmann::json{{"seeds", seeds},
                                {"strategy", strategy},
                                {"gamma", d.gamma},
                                {"beta", d.beta},
                                {"sigma", d.sigma},
                                {"z", mfo.z},
                                {"pairs", report},
                                {"geomean_ratio", geo},
                                {"geomean_ci95", {geo_ci.first, geo_ci.second}}}
                     .dump(2)
              << "\n";
    return 0;
  }
  std::cout << fmt::format("{:<48}{:>6}{:>7}{:>6}{:>11}{:>8}{:>11}{:>8}{:>11}{:>8}   {}\n",
                           "pair (low -> high)", "rho", "tau", "cap", "high-only", "reached",
                           "multi", "reached", "all evals", "ratio", "95% CI");
  for (std::size_t i = 0; i < pairs.size(); ++i) {
    const auto& [h, m] = arms[i];
    std::cout << fmt::format(
        "{:<48}{:>6.3f}{:>7.3f}{:>6}{:>11.1f}{:>5}/{:<2}{:>11.1f}{:>5}/{:<2}{:>11.0f}{:>8.2f}   "
        "[{:.2f}, {:.2f}]\n",
        pairs[i].name.substr(0, 47), pairs[i].spearman, pairs[i].kendall, pairs[i].high_cap,
        h.mean(), h.reached, seeds, m.mean(), m.reached, seeds, m.mean_evaluations(),
        h.mean() / m.mean(), per[i].first, per[i].second);
  }
  std::cout << fmt::format(
      "\ngeometric mean of (high-only / multi-fidelity mean high evaluations to the target): "
      "{:.2f}x (bootstrap 95% interval [{:.2f}, {:.2f}])\n"
      "{} seeds per arm, strategy '{}'; warped copies: gamma {}, beta {}, sigma {}; z {}; top_min "
      "{}; min_spread {}; a run that never reaches the target counts at the cap.\n",
      geo, geo_ci.first, geo_ci.second, seeds, strategy, d.gamma, d.beta, d.sigma, mfo.z,
      mfo.top_min, mfo.min_spread);
  return 0;
}
