// benchmarks/replay_frame.hpp: the scoring frame of one replay table, as
// data/bench/README.md defines it (Willemsen, van Nieuwpoort & van
// Werkhoven, FGCS 2024): the optimum, the median, and what random search
// needs to get a fraction of the way from the median to the optimum. Shared
// by bench_strategy_quality and bench_cost_aware.
#pragma once

#include <tessel/backends.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

namespace tessel::bench {

/// The scoring frame of one replay table (README steps 1, 2 and 4).
struct frame {
  std::vector<double> worst_first;  ///< valid times, descending, in seconds (the objective's unit)
  double optimum = 0, median = 0;
  double start_s = 0, budget_s = 0;  ///< scored range [start, T]
  double mean_cost_s = 0;            ///< per valid evaluation, failures' share included

  /// Evaluations random search (without replacement) needs to reach a time <= y.
  double random_needs(double fraction) const {
    const double y = optimum + (1.0 - fraction) * (median - optimum);
    const auto n = static_cast<double>(worst_first.size());
    std::size_t i = 0;
    while (i < worst_first.size() && worst_first[i] > y) ++i;
    return std::ceil(static_cast<double>(i) / (n + 1.0 - static_cast<double>(i)));
  }

  /// Expected best of random search after t seconds.
  double random_best(double t) const {
    const auto n = static_cast<double>(worst_first.size());
    const double m = std::max(std::round(t / mean_cost_s), 1.0);
    const auto rank = static_cast<std::size_t>(std::llround(m * (n + 1.0) / (m + 1.0)));
    return worst_first[std::clamp<std::size_t>(rank, 1, worst_first.size()) - 1];
  }
};

inline frame make_frame(const replay_table& table) {
  frame f;
  // The table records ms; the replay backend's objective is seconds.
  f.worst_first = table.valid_times();
  for (auto& t : f.worst_first) t *= 1e-3;
  std::reverse(f.worst_first.begin(), f.worst_first.end());
  f.optimum = table.optimum() * 1e-3;
  f.median = table.median() * 1e-3;
  std::vector<double> costs;
  double total = 0;
  for (const auto& e : table.entries()) {
    costs.push_back(e.cost_s(true));
    total += e.cost_s(true);
  }
  std::nth_element(costs.begin(), costs.begin() + static_cast<std::ptrdiff_t>(costs.size() / 2),
                   costs.end());
  const double median_cost = costs[costs.size() / 2];
  f.mean_cost_s = total / static_cast<double>(table.valid_count());
  f.budget_s = f.random_needs(0.95) * median_cost;
  f.start_s = f.random_needs(0.01) * median_cost;
  return f;
}

}  // namespace tessel::bench
