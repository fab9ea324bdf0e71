// benchmarks/cost_model: how well each cost model (cost_model_kind gp and
// log_linear) predicts the recorded evaluation cost of configs it has not
// seen, on the real measured spaces of data/bench. For n = 30, 100, 300
// uniformly drawn stored configs it observes their recorded cost (compile +
// verification + benchmark + framework seconds) and predicts 1,200 others,
// with no backend estimate (the regression alone): the Spearman rank
// correlation of predicted and recorded cost (what a ranking by cost needs),
// and the rms error in ln(seconds) beside a constant (the mean of the
// training costs). The linked models see each trial with the surrogate's
// prediction of it (trial::prediction), as a study records it; `rho obj`
// ranks by that surrogate's predicted objective alone, which bounds the run
// link. One draw of configs is noisy at n = 30: compare over several --seed.
//
//   bench_cost_model [--data DIR] [--spaces a,b] [--seed 3]
#include "common.hpp"

#include <tessel/backends.hpp>
#include <tessel/bayesian.hpp>

#include <fmt/format.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <sstream>

namespace {

using namespace tessel;

std::vector<double> ranks(const std::vector<double>& v) {
  std::vector<std::size_t> order(v.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return v[a] < v[b]; });
  std::vector<double> r(v.size());
  for (std::size_t i = 0; i < order.size(); ++i) r[order[i]] = static_cast<double>(i);
  return r;
}

double spearman(const std::vector<double>& a, const std::vector<double>& b) {
  const auto ra = ranks(a), rb = ranks(b);
  const double mean = static_cast<double>(a.size() - 1) / 2;
  double cross = 0, va = 0, vb = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    cross += (ra[i] - mean) * (rb[i] - mean);
    va += (ra[i] - mean) * (ra[i] - mean);
    vb += (rb[i] - mean) * (rb[i] - mean);
  }
  return cross / std::sqrt(va * vb);
}

struct sample {
  std::vector<config> configs;
  std::vector<double> log_cost;
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Held-out accuracy of the cost models on the real measured spaces"};
  std::string data = TESSEL_DATA_DIR;
  std::string only;
  std::uint64_t seed = 3;
  app.add_option("--data", data, "the data/ folder holding bench/")->capture_default_str();
  app.add_option("--spaces", only, "comma-separated replay names (default: all of the manifest)");
  app.add_option("--seed", seed, "seed of the draws")->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  const auto names = bench::replay_names(data, only);
  constexpr std::size_t held_out = 1200;
  const std::vector<std::size_t> sizes{30, 100, 300};

  fmt::print("{:<26}{:>6}{:>14}{:>12}{:>12}{:>12}{:>12}{:>12}{:>12}{:>12}{:>12}\n", "space", "n",
             "rms const", "rms linear", "rho linear", "rms gp", "rho gp", "rms link", "rho link",
             "rho choice", "rho obj");
  for (const auto& name : names) {
    const auto path = bench::replay_path(data, name);
    const auto table = replay_table::load(path);
    const space s = replay_space(path);
    replay_backend b(table, replay_options{1, true, false});
    b.prepare(s);
    rng random(seed);
    sample all;
    for (std::size_t tries = 0; all.configs.size() < sizes.back() + held_out && tries < 1000000;
         ++tries) {
      auto c = s.sample(random);
      const auto* e = b.lookup(s, c);
      if (!e || !(e->cost_s(true) > 0)) continue;
      all.configs.push_back(std::move(c));
      all.log_cost.push_back(std::log(e->cost_s(true)));
    }
    if (all.configs.size() < sizes.back() + held_out) continue;  // a tiny table
    for (auto n : sizes) {
      // const, log_linear, gp, gp with the run link (told the objective
      // predicted by a GP surrogate that saw the same trials: the study's
      // default), the same choosing by one-step error (choose_by_error).
      double rms[5] = {0, 0, 0, 0, 0};
      std::vector<double> truth, predicted[4], objective_mean;
      const double mean =
          std::accumulate(all.log_cost.begin(),
                          all.log_cost.begin() + static_cast<std::ptrdiff_t>(n), 0.0) /
          static_cast<double>(n);
      for (int k = 0; k < 4; ++k) {
        const bool linked = k >= 2;
        auto model = make_cost_model(
            s, {.kind = k == 0 ? cost_model_kind::log_linear : cost_model_kind::gp,
                .run_link_max_sd = linked ? cost_model_options{}.run_link_max_sd : 0.0,
                .choose_by_error = k == 3});
        const auto objective = linked ? make_gp_surrogate(s) : nullptr;
        for (std::size_t i = 0; i < n; ++i) {
          trial t;
          t.config = all.configs[i];
          t.key = s.key(t.config);
          t.result = b.evaluate(s, t.config);
          if (objective && objective->ready()) {
            // What the study records for a trial it dispatches: the
            // surrogate's prediction of it, which the cost model scores
            // the run link by.
            const auto told = objective->score(t.config, {});
            t.prediction = prediction{told.mean, told.sigma, told.p_feasible, told.expected_gain};
          }
          model->observe(t);
          if (objective) objective->observe(t);
        }
        for (std::size_t i = sizes.back(); i < all.configs.size(); ++i) {
          cost_query q;
          if (objective && objective->ready()) q.objective = objective->score(all.configs[i], {});
          if (q.objective && k == 2) objective_mean.push_back(q.objective->mean);
          const double p = std::log(model->predict(all.configs[i], q));
          predicted[k].push_back(p);
          rms[k + 1] += (p - all.log_cost[i]) * (p - all.log_cost[i]);
          if (k == 0) {
            truth.push_back(all.log_cost[i]);
            rms[0] += (mean - all.log_cost[i]) * (mean - all.log_cost[i]);
          }
        }
      }
      for (auto& r : rms) r = std::sqrt(r / static_cast<double>(held_out));
      fmt::print(
          "{:<26}{:>6}{:>14.3f}{:>12.3f}{:>12.2f}{:>12.3f}{:>12.2f}{:>12.3f}{:>12.2f}{:>12.2f}"
          "{:>12.2f}\n",
          name.substr(0, 25), n, rms[0], rms[1], spearman(truth, predicted[0]), rms[2],
          spearman(truth, predicted[1]), rms[3], spearman(truth, predicted[2]),
          spearman(truth, predicted[3]),
          objective_mean.size() == truth.size() ? spearman(truth, objective_mean) : std::nan(""));
    }
  }
  fmt::print(
      "\nrms: of ln(predicted / recorded seconds) over {} held-out stored configs; rho: Spearman "
      "rank correlation; const: the training mean; link: the study's default (the GP with the run "
      "link); choice: the same with choose_by_error (GP or ridge, and the link or not, by "
      "one-step error); obj: the surrogate's predicted objective alone.\n",
      held_out);
  return 0;
}
