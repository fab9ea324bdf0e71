// benchmarks/strategy_overhead: what a strategy costs per iteration of the
// tuning loop, ask (propose one config) + tell (observe its trial), as the
// observations grow, for every registered strategy side by side, with the
// ratio to random search measured in the same run.
//
// The space defaults to a Trainium-style matmul space of 483,840 valid
// configs (numeric, log-scaled, symbol, boolean-free and permutation
// parameters); --space loads another .tsl file. Objectives are synthetic (a
// smooth bowl over the encoding with 10% of the space failing to "compile"),
// so only the strategies' own time is measured.
//
// Times are the thread's CPU time (CLOCK_THREAD_CPUTIME_ID), so a loaded
// machine does not inflate them; TBB is held to that one thread meanwhile.
// Columns per strategy and checkpoint N (observations before the window):
//   median   median ask+tell over the window of --window iterations after N
//   mean     their mean (includes a hyper-parameter refit if one falls inside)
//   ask/tell mean ask and mean tell over the window
//   amortized  total ask+tell time of iterations N/2+1 .. N, divided by N/2:
//            everything paid on the way to N, refits included
//   x random the median's ratio to random search's median at the same N
// "bo-exact" is `bo` with gp_options::max_model_points = 0 (a GP of every
// observation), beside the default `bo` (at most 256).
//
// --compare-threads N adds a second table: each strategy run --repeats times
// with TBB limited to 1 thread and to N (tbb::global_control), alternately,
// timed in wall-clock seconds (its helpers' CPU time is not the caller's):
// medians and amortized times per side, the amortized ratio 1 thread / N
// threads, and whether every run proposed the same trials (it must).
//
//   bench_strategy_overhead [--space FILE] [--strategies a,b] [--checkpoints 100,500,1000]
//                           [--window 20] [--seed 1] [--compare-threads N [--repeats 3]]
#include "common.hpp"

#include <tessel/bayesian.hpp>
#include <tessel/dsl.hpp>
#include <tessel/strategies.hpp>

#include <fmt/format.h>
#include <tbb/global_control.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <ctime>
#include <iostream>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace {

using namespace tessel;

constexpr std::string_view default_space = R"(
space overhead {
  param tile_m : pow2(32 .. 2048)
  param tile_n : pow2(32 .. 2048)
  param tile_k : 64 .. 2048 step 64
  param order  : perm(m, n, k)
  param a_home : {sbuf, hbm}
  param bufs   : 1 .. 4
  param evict  : {vector, scalar, gpsimd}
  param unroll : {1, 2, 4, 8}
  require tile_m * tile_n <= 1024 * 1024
}
)";

/// The study's side of the loop: known keys, the best trial, a count.
class context final : public search_context {
 public:
  explicit context(const tessel::space& s) : space_(s) {}
  [[nodiscard]] const tessel::space& space() const override { return space_; }
  [[nodiscard]] bool known(std::uint64_t key) const override { return known_.contains(key); }
  [[nodiscard]] const trial* best() const override { return best_ ? &*best_ : nullptr; }
  [[nodiscard]] std::size_t finished() const override { return finished_; }
  void mark(std::uint64_t key) { known_.insert(key); }
  void finish(const trial& t) {
    ++finished_;
    if (t.result.ok() && (!best_ || t.result.objective < best_->result.objective)) best_ = t;
  }

 private:
  const tessel::space& space_;
  std::set<std::uint64_t> known_;
  std::optional<trial> best_;
  std::size_t finished_ = 0;
};

/// A smooth bowl over the encoding (minimum inside the space), log-normal
/// scale; configs whose first encoded dims sum past a threshold fail.
measurement objective(const space& s, const config& c) {
  const auto e = s.encode(c);
  double bowl = 0, edge = 0;
  for (std::size_t d = 0; d < e.size(); ++d) {
    const double centre = 0.3 + 0.4 * static_cast<double>(d % 3) / 2;
    const double x = e[d] < 0 ? 1.5
                              : (s.encoding()[d].categories > 0
                                     ? e[d] / static_cast<double>(s.encoding()[d].categories)
                                     : e[d]);
    bowl += (x - centre) * (x - centre);
    if (d < 2) edge += x;
  }
  if (edge > 1.7) return measurement::failure(status::compile_error, "too large");
  return measurement::success(1e-3 * std::exp(2 * bowl));
}

struct timing {
  std::vector<double> ask_s, tell_s;  ///< per iteration, in order
  std::vector<std::uint64_t> keys;    ///< the proposals, in order
};

double wall_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

/// Runs ask(1) + tell until `iterations` trials or the strategy runs dry.
/// A registered strategy, or "bo-exact": `bo` whose GP keeps every
/// observation (gp_options::max_model_points = 0), to show what the cap saves.
std::unique_ptr<strategy> make(const std::string& name) {
  if (name == "bo-exact") return make_bo_strategy({.model = {.max_model_points = 0}});
  return make_strategy(name);
}

/// `clock`: the calling thread's CPU time, or the wall clock (parallel work).
timing run(const std::string& name, const space& s, std::size_t iterations, std::uint64_t seed,
           double (*clock)() = bench::thread_cpu_s) {
  auto st = make(name);
  context ctx(s);
  st->start(s, seed);
  timing t;
  for (std::size_t i = 0; i < iterations; ++i) {
    const double t0 = clock();
    const auto proposed = st->propose(1, ctx);
    const double t1 = clock();
    if (proposed.empty()) break;
    trial tr;
    tr.id = i + 1;
    tr.config = proposed.front();
    tr.key = s.key(tr.config);
    tr.provenance.source = st->source_of(tr.key);
    tr.state = trial_state::finished;
    tr.result = objective(s, tr.config);
    ctx.mark(tr.key);
    ctx.finish(tr);
    const double t2 = clock();
    st->observe(tr);
    const double t3 = clock();
    t.ask_s.push_back(t1 - t0);
    t.tell_s.push_back(t3 - t2);
    t.keys.push_back(tr.key);
  }
  return t;
}

struct row {
  double median_ms = 0, mean_ms = 0, ask_ms = 0, tell_ms = 0, amortized_ms = 0;
  bool ok = false;
};

row summarize(const timing& t, std::size_t n, std::size_t window) {
  row r;
  if (t.ask_s.size() < n + window) return r;
  std::vector<double> total;
  for (std::size_t i = n; i < n + window; ++i) {
    total.push_back(t.ask_s[i] + t.tell_s[i]);
    r.ask_ms += 1e3 * t.ask_s[i] / static_cast<double>(window);
    r.tell_ms += 1e3 * t.tell_s[i] / static_cast<double>(window);
  }
  r.mean_ms = r.ask_ms + r.tell_ms;
  std::sort(total.begin(), total.end());
  r.median_ms = 1e3 * total[total.size() / 2];
  double sum = 0;
  for (std::size_t i = n / 2; i < n; ++i) sum += t.ask_s[i] + t.tell_s[i];
  r.amortized_ms = 1e3 * sum / static_cast<double>(n - n / 2);
  r.ok = true;
  return r;
}

/// The --compare-threads table: 1 thread against `threads`, run alternately.
/// Per checkpoint N: the median ask+tell over every repeat's window, and the
/// amortized ask+tell of iterations N/2+1 .. N (refits included) with the
/// ratio of each repeat's pair: their median [min, max].
void compare_threads(const std::vector<std::string>& names, const space& s,
                     const std::vector<std::size_t>& checkpoints, std::size_t window,
                     std::uint64_t seed, std::size_t threads, std::size_t repeats) {
  std::cout << fmt::format("\nwall-clock ask+tell, TBB on 1 thread vs {} ({} repeats)\n", threads,
                           repeats);
  std::cout << fmt::format("{:<12}{:>7}{:>12}{:>12}{:>14}{:>14}{:>24}{:>7}\n", "strategy", "obs",
                           "median 1", fmt::format("median {}", threads), "amortized 1",
                           fmt::format("amortized {}", threads), "ratio [min, max]", "same");
  const auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.empty() ? std::nan("") : v[v.size() / 2];
  };
  for (const auto& name : names) {
    std::vector<std::array<timing, 2>> runs(repeats);  // [1 thread, `threads`]
    bool same = true;
    for (auto& pair : runs) {
      for (std::size_t side = 0; side < 2; ++side) {
        const tbb::global_control limit(tbb::global_control::max_allowed_parallelism,
                                        side == 0 ? 1 : threads);
        pair[side] = run(name, s, checkpoints.back() + window, seed, wall_s);
        same = same && pair[side].keys == runs.front()[0].keys;
      }
    }
    for (auto n : checkpoints) {
      std::array<std::vector<double>, 2> medians, amortized;
      std::vector<double> ratios;
      for (const auto& pair : runs) {
        std::array<row, 2> r{summarize(pair[0], n, window), summarize(pair[1], n, window)};
        if (!r[0].ok || !r[1].ok) continue;
        for (std::size_t side = 0; side < 2; ++side) {
          medians[side].push_back(r[side].median_ms);
          amortized[side].push_back(r[side].amortized_ms);
        }
        ratios.push_back(r[0].amortized_ms / r[1].amortized_ms);
      }
      if (ratios.empty()) continue;
      const auto [lo, hi] = std::minmax_element(ratios.begin(), ratios.end());
      std::cout << fmt::format(
          "{:<12}{:>7}{:>12.3f}{:>12.3f}{:>14.3f}{:>14.3f}{:>24}{:>7}\n", name, n,
          median(medians[0]), median(medians[1]), median(amortized[0]), median(amortized[1]),
          fmt::format("{:.2f} [{:.2f}, {:.2f}]", median(ratios), *lo, *hi), same ? "yes" : "NO");
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "Time per ask+tell of each strategy as observations grow, as ratios to random search"};
  std::string space_file;
  std::string strategies;
  std::string checkpoints_text = "100,500,1000";
  std::size_t window = 20;
  std::uint64_t seed = 1;
  app.add_option("--space", space_file, "a .tsl file (default: the built-in matmul space)");
  app.add_option("--strategies", strategies,
                 "comma-separated names (default: every registered one, and bo-exact: bo without "
                 "its model-size cap)");
  app.add_option("--checkpoints", checkpoints_text, "observation counts to time at")
      ->capture_default_str();
  app.add_option("--window", window, "iterations timed after each checkpoint")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--seed", seed, "the strategies' seed")->capture_default_str();
  std::size_t threads = 0, repeats = 3;
  app.add_option("--compare-threads", threads,
                 "also time each strategy in wall-clock time with TBB on 1 thread and on N")
      ->check(CLI::Range(2, 1024));
  app.add_option("--repeats", repeats, "alternate runs per side of --compare-threads")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);

  const space s = space_file.empty() ? parse_space(default_space) : load_space(space_file);
  std::vector<std::size_t> checkpoints;
  for (const auto& c : bench::split(checkpoints_text)) checkpoints.push_back(std::stoul(c));
  std::sort(checkpoints.begin(), checkpoints.end());
  auto names = strategies.empty() ? strategy_names() : bench::split(strategies);
  if (strategies.empty()) names.insert(std::find(names.begin(), names.end(), "bo") + 1, "bo-exact");
  std::cout << fmt::format("space {}: {} valid configs, {} parameters, {} encoded dims\n\n",
                           s.name(), s.count(), s.size(), s.encoding().size());

  std::map<std::string, std::vector<row>> rows;
  {
    // One thread: the caller's CPU time is then all of a strategy's work.
    const tbb::global_control serial(tbb::global_control::max_allowed_parallelism, 1);
    for (const auto& name : names) {
      const auto t = run(name, s, checkpoints.back() + window, seed);
      for (auto n : checkpoints) rows[name].push_back(summarize(t, n, window));
    }
  }
  std::cout << fmt::format("{:<12}{:>7}{:>12}{:>12}{:>11}{:>11}{:>13}{:>11}\n", "strategy", "obs",
                           "median ms", "mean ms", "ask ms", "tell ms", "amortized ms", "x random");
  for (const auto& name : names) {
    for (std::size_t k = 0; k < checkpoints.size(); ++k) {
      const auto& r = rows[name][k];
      if (!r.ok) {
        std::cout << fmt::format("{:<12}{:>7}   (ran dry before the window)\n", name,
                                 checkpoints[k]);
        continue;
      }
      const auto& random = rows.contains("random") ? rows["random"][k] : row{};
      const std::string ratio = random.ok && random.median_ms > 0
                                    ? fmt::format("{:.0f}", r.median_ms / random.median_ms)
                                    : "-";
      std::cout << fmt::format("{:<12}{:>7}{:>12.3f}{:>12.3f}{:>11.3f}{:>11.3f}{:>13.3f}{:>11}\n",
                               name, checkpoints[k], r.median_ms, r.mean_ms, r.ask_ms, r.tell_ms,
                               r.amortized_ms, ratio);
    }
  }
  if (threads > 0) compare_threads(names, s, checkpoints, window, seed, threads, repeats);
  return 0;
}
