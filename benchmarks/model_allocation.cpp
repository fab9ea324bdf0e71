// bench_model_allocation: one budget across a model's kernels (docs/models.md).
// For each example model and seed, tunes every kernel under the same total
// budget side by side: the allocator (utility: calls x expected gain / cost)
// with each --floors value (the evaluations every kernel gets first, as a
// fraction of its even share; the first is the one the goal is read for), an
// even split, and a split by each kernel's share of the default step. Reports the step time each
// reaches, and the goal: the evaluations the allocator needs to reach 95% of the step-time
// reduction the even split reaches with the whole budget, as a fraction of
// that budget (goal: at most one half).
//
//   bench_model_allocation --seeds 10 --jobs 2
//   bench_model_allocation --models examples/models/qwen3_moe_layer.tsl --budget 90
#include "common.hpp"

#include <tessel/backends.hpp>
#include <tessel/bayesian.hpp>
#include <tessel/dsl.hpp>
#include <tessel/model.hpp>
#include <tessel/strategies.hpp>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <mutex>
#include <optional>

namespace {

using namespace tessel;

struct options {
  std::vector<std::string> models = {"examples/models/dense_60m.tsl",
                                     "examples/models/qwen3_moe_layer.tsl"};
  int seeds = 10;
  int jobs = 2;
  std::size_t per_kernel = 12;  ///< the budget: this many evaluations per distinct kernel
  std::string strategy = "auto";
  std::string timing = "analytic";  ///< the simulator's model (analytic where a workload has one)
  std::string target = "trn2";
  std::vector<double> floors = {model_study_options{}.floor_fraction, 0.0};
};

/// One way of allocating, as the report names it.
struct variant {
  std::string label;
  model_study_options options;
};

std::vector<variant> variants_of(const options& o) {
  std::vector<variant> out;
  for (double f : o.floors) {
    model_study_options u;
    u.floor_fraction = f;
    out.push_back({fmt::format("utility floor {:g}", f), u});
  }
  out.push_back({"even", {.policy = allocation::even}});
  out.push_back({"share", {.policy = allocation::share}});
  return out;
}

/// The step time after each evaluation (NaN until every kernel has a result).
struct trajectory {
  double before_s = 0;
  std::vector<double> step_s;
};

trajectory tune(const model_definition& m, const model_study_options& allocator, std::uint64_t seed,
                std::size_t budget, const options& o) {
  std::vector<model_member> members;
  const auto distinct = distinct_kernels(m);
  for (std::size_t i = 0; i < distinct.size(); ++i) {
    const auto& k = m.kernels[distinct[i].front()];
    std::int64_t calls = 0;
    for (auto j : distinct[i]) calls += m.kernels[j].calls;
    study::options so;
    so.seed = seed * 1000 + i;
    so.window = 1;
    so.surrogate = make_gp_surrogate(k.space);
    so.costs = make_cost_model(k.space);
    so.budget_hint = budget / distinct.size();
    auto b = make_backend("sim", {{"gate", "false"}, {"model", o.timing}});
    members.push_back(
        {k.name, calls,
         std::make_unique<study>(k.space, std::move(b), make_strategy(o.strategy), so)});
  }
  model_study ms(std::move(members), allocator);
  trajectory t;
  const double nan = std::numeric_limits<double>::quiet_NaN();
  while (ms.current_summary().evaluations < budget && ms.step()) {
    const auto sum = ms.current_summary();
    t.step_s.push_back(sum.after_s.value_or(nan));
    if (sum.before_s) t.before_s = *sum.before_s;
  }
  return t;
}

/// The first evaluation count at which `t` is within `fraction` of the way
/// from `before` down to `target`, or nullopt.
std::optional<std::size_t> evaluations_to(const trajectory& t, double target, double fraction) {
  const double goal = t.before_s - fraction * (t.before_s - target);
  for (std::size_t i = 0; i < t.step_s.size(); ++i)
    if (t.step_s[i] <= goal) return i + 1;
  return std::nullopt;
}

struct seed_result {
  double before_s = 0;
  std::map<std::string, double> after_s, half_s;  ///< by variant: at the budget, at half of it
  std::optional<std::size_t> util_to_95;          ///< evaluations to 95% of even's reduction
  std::size_t budget = 0;
};

std::string mean_interval(const std::vector<double>& v, std::uint64_t seed) {
  double mean = 0;
  for (double x : v) mean += x / static_cast<double>(v.size());
  rng random(seed);
  std::vector<double> draws;
  for (int i = 0; i < 2000; ++i) draws.push_back(bench::resampled_mean(v, random));
  const auto [lo, hi] = bench::interval(draws);
  return fmt::format("{:.3f} [{:.3f}, {:.3f}]", mean, lo, hi);
}

void report(const std::string& name, const std::vector<variant>& variants,
            const std::vector<seed_result>& results) {
  const auto budget = results.front().budget;
  fmt::print("\n{}: {} seeds, budget {} evaluations, default step {:.4g} ms\n", name,
             results.size(), budget, results.front().before_s * 1e3);
  fmt::print("  step time / default step, mean over seeds [95% bootstrap interval]\n");
  fmt::print("  {:<18} {:>28} {:>28}\n", "allocation", fmt::format("at {} evals", budget / 2),
             fmt::format("at {} evals", budget));
  for (const auto& v : variants) {
    std::vector<double> half, full;
    for (const auto& r : results) {
      half.push_back(r.half_s.at(v.label) / r.before_s);
      full.push_back(r.after_s.at(v.label) / r.before_s);
    }
    fmt::print("  {:<18} {:>28} {:>28}\n", v.label, mean_interval(half, 1), mean_interval(full, 2));
  }
  std::vector<double> fraction;
  std::size_t met = 0;
  for (const auto& r : results) {
    const double f = r.util_to_95 ? static_cast<double>(*r.util_to_95) / static_cast<double>(budget)
                                  : std::numeric_limits<double>::infinity();
    fraction.push_back(f);
    met += f <= 0.5 ? 1 : 0;
  }
  std::sort(fraction.begin(), fraction.end());
  std::string list;
  for (double f : fraction) list += std::isfinite(f) ? fmt::format(" {:.2f}", f) : " never";
  fmt::print(
      "  {}: evaluations to 95% of the even split's reduction, / budget (sorted):{}\n"
      "  goal (<= 0.50) met in {} of {} seeds; median {}\n",
      variants.front().label, list, met, results.size(),
      std::isfinite(fraction[fraction.size() / 2])
          ? fmt::format("{:.2f}", fraction[fraction.size() / 2])
          : "never");
}

}  // namespace

int main(int argc, char** argv) {
  options o;
  CLI::App app{"bench_model_allocation: the allocator against even and share splits"};
  app.add_option("--models", o.models, "Model files (relative to the source folder)");
  app.add_option("--seeds", o.seeds)->capture_default_str();
  app.add_option("--jobs", o.jobs, "Seeds run side by side")->capture_default_str();
  app.add_option("--per-kernel", o.per_kernel, "Budget: evaluations per kernel")
      ->capture_default_str();
  app.add_option("--strategy", o.strategy)->capture_default_str();
  app.add_option("--timing", o.timing, "The simulator's model: analytic or event")
      ->capture_default_str();
  app.add_option("--target", o.target)->capture_default_str();
  app.add_option("--floors", o.floors,
                 "The allocator's floor_fraction values to compare (the goal is read for the "
                 "first)")
      ->delimiter(',')
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  for (const auto& file : o.models) {
    parse_options po;
    po.target = o.target;
    const auto m = load_model(std::filesystem::path(TESSEL_SOURCE_DIR) / file, po);
    const std::size_t budget = o.per_kernel * distinct_kernels(m).size();
    std::vector<seed_result> results(static_cast<std::size_t>(o.seeds));
    const auto variants = variants_of(o);
    std::mutex print;
    bench::for_each_seed(o.seeds, o.jobs, [&](int seed) {
      seed_result r;
      r.budget = budget;
      std::map<std::string, trajectory> runs;
      for (const auto& v : variants)
        runs[v.label] = tune(m, v.options, static_cast<std::uint64_t>(seed) + 1, budget, o);
      r.before_s = runs.at("even").before_s;
      std::string line;
      for (const auto& v : variants) {
        const auto& t = runs.at(v.label);
        r.after_s[v.label] = t.step_s.back();
        r.half_s[v.label] = t.step_s.at(budget / 2 - 1);
        line += fmt::format("; {} {:.4g}", v.label, t.step_s.back() * 1e3);
      }
      r.util_to_95 = evaluations_to(runs.at(variants.front().label), r.after_s.at("even"), 0.95);
      const std::lock_guard lock(print);
      fmt::print(stderr, "{} seed {}: default {:.4g} ms{}\n", m.name, seed + 1, r.before_s * 1e3,
                 line);
      results[static_cast<std::size_t>(seed)] = std::move(r);
    });
    report(m.name, variants, results);
  }
  return 0;
}
