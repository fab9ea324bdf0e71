// benchmarks/common.hpp: what several benchmarks need: the thread's CPU
// clock (the machine may be shared, so a strategy is charged its own CPU
// time, not the time other processes take the core), seeds run side by
// side on threads, comma-separated option lists, and the names of the real
// replay spaces of data/bench, and the bootstrap both ratio tables use.
#pragma once

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include <tessel/random.hpp>

#include <sys/resource.h>
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace tessel::bench {

/// This thread's CPU seconds (CLOCK_THREAD_CPUTIME_ID).
inline double thread_cpu_s() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

/// CPU seconds of this process and of its children that ended and were
/// reaped (getrusage): what a run of a program costs the machine.
inline double cpu_seconds() {
  rusage self{}, children{};
  ::getrusage(RUSAGE_SELF, &self);
  ::getrusage(RUSAGE_CHILDREN, &children);
  const auto seconds = [](const timeval& t) {
    return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) / 1e6;
  };
  return seconds(self.ru_utime) + seconds(self.ru_stime) + seconds(children.ru_utime) +
         seconds(children.ru_stime);
}

/// Calls run(seed) for seed = 0 .. seeds-1 on `jobs` threads (this one
/// included). With every run charged its own thread's CPU time
/// (thread_cpu_s), running seeds side by side changes no result.
template <typename Run>
void for_each_seed(int seeds, int jobs, Run&& run) {
  std::atomic<int> next{0};
  auto worker = [&] {
    for (int seed = next++; seed < seeds; seed = next++) run(seed);
  };
  std::vector<std::thread> pool;
  for (int j = 1; j < jobs; ++j) pool.emplace_back(worker);
  worker();
  for (auto& t : pool) t.join();
}

/// "a,b,,c" -> {"a", "b", "c"} (or split at another separator).
inline std::vector<std::string> split(const std::string& text, char separator = ',') {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start <= text.size()) {
    const auto comma = text.find(separator, start);
    auto piece = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (!piece.empty()) out.push_back(std::move(piece));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

/// The replay spaces to run: `only` (comma-separated) when given, each a
/// data/bench/NAME.json.gz (an unknown name lists the known ones and exits
/// 1), else every name in data/bench/manifest.json.
inline std::vector<std::string> replay_names(const std::filesystem::path& data,
                                             const std::string& only) {
  namespace fs = std::filesystem;
  const fs::path bench = data / "bench";
  if (only.empty()) {
    const auto manifest = nlohmann::json::parse(std::ifstream(bench / "manifest.json"));
    std::vector<std::string> names;
    for (const auto& entry : manifest) names.push_back(entry.at("name").get<std::string>());
    return names;
  }
  auto names = split(only);
  for (const auto& name : names)
    if (!fs::exists(bench / (name + ".json.gz"))) {
      // a typo in --spaces: say which names there are, not a missing file's error
      std::vector<std::string> known;
      for (const auto& f : fs::directory_iterator(bench))
        if (const auto n = f.path().filename().string(); n.ends_with(".json.gz"))
          known.push_back(n.substr(0, n.size() - 8));
      std::sort(known.begin(), known.end());
      std::cerr << fmt::format("unknown space '{}'; known: {}\n", name, fmt::join(known, ", "));
      std::exit(1);
    }
  return names;
}

/// data/bench/NAME.json.gz.
inline std::filesystem::path replay_path(const std::filesystem::path& data,
                                         const std::string& name) {
  return data / "bench" / (name + ".json.gz");
}

/// The mean of a resample (with replacement) of `v`: one bootstrap draw.
inline double resampled_mean(const std::vector<double>& v, rng& random) {
  double sum = 0;
  for (std::size_t i = 0; i < v.size(); ++i) sum += v[random.uniform(v.size())];
  return sum / static_cast<double>(v.size());
}

/// The 2.5% and 97.5% points of `draws`: a percentile-bootstrap 95% interval.
inline std::pair<double, double> interval(std::vector<double> draws) {
  std::sort(draws.begin(), draws.end());
  const auto at = [&](double q) {
    return draws[static_cast<std::size_t>(q * static_cast<double>(draws.size() - 1))];
  };
  return {at(0.025), at(0.975)};
}

/// bootstrap_ratios' answer: a 95% interval per pair and one of their geometric mean.
struct ratio_intervals {
  std::vector<std::pair<double, double>> per_pair;
  std::pair<double, double> geomean;
};

/// Percentile-bootstrap 95% intervals of each pair's ratio of means,
/// mean(numerator) / mean(denominator) of its (numerator, denominator)
/// samples, and of the geometric mean of the ratios: each side resampled
/// with replacement on its own, 2,000 times, from a fixed seed.
inline ratio_intervals bootstrap_ratios(
    const std::vector<std::pair<std::vector<double>, std::vector<double>>>& pairs) {
  constexpr std::size_t draws = 2000;
  rng random(2024);
  std::vector<std::vector<double>> ratios(pairs.size());
  std::vector<double> geo(draws, 0.0);
  for (std::size_t d = 0; d < draws; ++d)
    for (std::size_t i = 0; i < pairs.size(); ++i) {
      const double r =
          resampled_mean(pairs[i].first, random) / resampled_mean(pairs[i].second, random);
      ratios[i].push_back(r);
      geo[d] += std::log(r) / static_cast<double>(pairs.size());
    }
  ratio_intervals out;
  for (auto& r : ratios) out.per_pair.push_back(interval(std::move(r)));
  for (auto& g : geo) g = std::exp(g);
  out.geomean = interval(std::move(geo));
  return out;
}

}  // namespace tessel::bench
