// benchmarks/strategy_quality: each strategy on every real measured space of
// data/bench/, replayed, scored with the method of Willemsen, van
// Nieuwpoort & van Werkhoven, "A methodology for comparing optimization
// algorithms for auto-tuning" (FGCS 2024), as data/bench/README.md states
// it: 0 = random search, 1 = the optimum, time-based budget, the strategy's
// own CPU time charged.
//
// Two modes (issue 13): `table`, the space is the table's stored configs
// (the kernel's restrictions known); `product`, the Cartesian product of the
// recorded values (restrictions unknown), where a proposal outside the table
// is answered invalid and charged the table's median compile time.
//
// Budget fractions (issue 32): each run may get a fraction of the table's
// budget (time and evaluations alike), scored over that shorter range, and
// the study is told the methodology's evaluation budget for it
// (study_options::budget_hint, which strategies see as
// search_context::evaluation_budget), as `tessel tune --budget N` tells it.
//
//   bench_strategy_quality [--data DIR] [--seeds 25] [--strategies a,b] [--mode both]
//                          [--budget-fractions 0.25,0.5,1] [--no-budget-hint] [--json]
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
#include <numeric>
#include <stdexcept>

namespace {

using namespace tessel;
using bench::frame;
using bench::make_frame;

/// The short keys of "auto[...]" variants in stored results (benchmarks/results/),
/// and the make_strategy spec key each stands for; any other key is passed on as it is.
const std::map<std::string, std::string>& variant_aliases() {
  static const std::map<std::string, std::string> aliases{
      {"bandit_window", "window"},
      {"pool", "pool_size"},
      {"initial", "initial_samples"},
      {"kappa", "ucb_kappa"},
      {"cutoff", "feasibility_cutoff"},
      {"rule_test", "rule_test_after"},
      {"points", "model.max_model_points"},
      {"align", "model.alignment_features"},
      {"ordinal", "model.ordinal_features"},
      {"rules", "model.learn_constraints"},  // the bo arm's only; auto keeps its own
      {"refit", "model.refit_growth"},
      {"restarts", "model.fit_restarts"},
  };
  return aliases;
}

/// "auto[KEY=V;KEY=V]": auto with other options, to compare candidate
/// defaults side by side (benchmarks/leave_one_out.py picks among them).
/// The keys are make_strategy's spec keys (tessel/strategies.hpp) or the
/// short aliases above.
std::unique_ptr<strategy> make_auto_variant(const std::string& spec) {
  std::string library = "auto[";
  for (const auto& item : bench::split(spec.substr(5, spec.size() - 6), ';')) {
    const auto eq = std::min(item.find('='), item.size());
    const auto alias = variant_aliases().find(item.substr(0, eq));
    library += (library.size() > 5 ? ";" : "") +
               (alias == variant_aliases().end() ? item : alias->second + item.substr(eq));
  }
  return make_strategy(library + "]");
}

/// A registered strategy or spec (make_strategy), an "auto[...]" variant,
/// or an older shorthand of stored results: "bo@128" (model size),
/// "auto@30" (lead), "auto:bo+ga" (arms), "auto-norules" / "bo-norules"
/// (learned constraints off).
std::unique_ptr<strategy> make_named(const std::string& spec) {
  if (spec.starts_with("auto[") && spec.ends_with("]")) return make_auto_variant(spec);
  if (spec == "auto-norules")
    return make_strategy("auto[learn_constraints=0;model.learn_constraints=0]");
  if (spec == "bo-norules") return make_strategy("bo[model.learn_constraints=0]");
  for (const auto& [shorthand, key] :
       {std::pair{"bo@", "bo[model.max_model_points="}, std::pair{"auto@", "auto[lead="},
        std::pair{"auto:", "auto[arms="}})
    if (spec.starts_with(shorthand))
      return make_strategy(key + spec.substr(std::string_view(shorthand).size()) + "]");
  return make_strategy(spec);
}

/// Best-so-far (ms) against simulated seconds, one point per improvement,
/// and the proposals that fell outside the table after the first 50.
struct trajectory {
  std::vector<std::pair<double, double>> points;
  std::size_t evaluations = 0;
  std::size_t late_outside = 0;  ///< proposals after the first 50 that fell outside the table
  [[nodiscard]] std::size_t late() const { return evaluations > 50 ? evaluations - 50 : 0; }
  double strategy_s = 0;  ///< the strategy's CPU time (ask + tell) charged to the clock
};

/// The two modes of issue 13. `table`: the space is the table's stored
/// configs (the kernel's restrictions known), nothing outside can be
/// proposed. `product`: the Cartesian product of the recorded values (the
/// restrictions unknown); a config outside the table is answered invalid
/// and charged `outside_cost_s`, what the compiler takes to reject it.
struct mode {
  std::string name;
  replay_space_kind kind = replay_space_kind::product;
  double outside_cost_s = 0;
};

trajectory run_once(const space& s, const std::shared_ptr<backend>& b,
                    const std::string& strategy_name, std::uint64_t seed, double limit_s,
                    double outside_cost_s, std::size_t budget_hint) {
  study::options o;
  o.seed = seed;
  o.evaluate_baseline = false;
  o.budget_hint = budget_hint;
  study st(s, b, make_named(strategy_name), o);
  trajectory out;
  double clock = 0;
  std::optional<double> best;
  while (clock < limit_s) {
    const double t0 = bench::thread_cpu_s();
    const auto batch = st.ask(1);
    const double asked = bench::thread_cpu_s() - t0;
    clock += asked;
    out.strategy_s += asked;
    if (batch.empty()) break;
    const auto m = b->evaluate(s, batch.front().config);
    const bool outside = m.status == status::invalid;  // not in the table
    clock += outside ? outside_cost_s : m.cost.total();
    if (++out.evaluations > 50 && outside) ++out.late_outside;
    const double t1 = bench::thread_cpu_s();
    st.tell(batch.front().trial_id, m);
    const double told = bench::thread_cpu_s() - t1;
    clock += told;
    out.strategy_s += told;
    if (m.ok() && (!best || m.objective < *best)) {
      best = m.objective;
      out.points.emplace_back(clock, *best);
    }
  }
  return out;
}

double best_at(const trajectory& t, double time, double fallback) {
  double best = fallback;
  for (const auto& [when, value] : t.points) {
    if (when > time) break;
    best = value;
  }
  return best;
}

/// README step 5 for one run: the mean over 1,000 times in [start, end] of
/// (random - strategy) / (random - optimum). The method's score of a cell
/// is that of the runs' mean trajectory, which, being linear in it, is the
/// mean of the runs' scores: so per-seed scores pair candidates by seed.
double score(const trajectory& run, const frame& f, double end_s) {
  constexpr int points = 1000;
  const double start_s = std::min(f.start_s, 0.5 * end_s);
  double sum = 0;
  for (int k = 0; k < points; ++k) {
    const double t = start_s + (end_s - start_s) * k / (points - 1);
    const double random = f.random_best(t);
    sum += random > f.optimum ? (random - best_at(run, t, f.median)) / (random - f.optimum) : 0.0;
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
  std::string mode_arg = "both";
  int jobs = 1;
  int first_seed = 1;
  std::string fractions_arg = "1";
  bool no_budget_hint = false;
  app.add_option("--data", data, "the data/ folder holding bench/")->capture_default_str();
  app.add_option("--seeds", seeds, "runs per strategy and space (the method asks for >= 25)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--strategies", strategies, "comma-separated strategy names")
      ->capture_default_str();
  app.add_option("--spaces", only,
                 "comma-separated replay file names (default: all but the T4 duplicate)");
  app.add_option("--first-seed", first_seed,
                 "seeds are first-seed ... first-seed + seeds - 1 (scores of disjoint seed "
                 "ranges combine as a mean weighted by their seed counts: the score is linear "
                 "in the mean trajectory)")
      ->capture_default_str();
  app.add_option("--jobs", jobs, "seeds run at once, one thread each")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--mode", mode_arg,
                 "table (restrictions known), product (unknown: every proposal charged) or both")
      ->capture_default_str();
  app.add_option("--budget-fractions", fractions_arg,
                 "comma-separated fractions of each table's budget (time and evaluations), each "
                 "scored over its own range")
      ->capture_default_str();
  app.add_flag("--no-budget-hint", no_budget_hint,
               "do not tell the study its evaluation budget (study_options::budget_hint)");
  app.add_flag("--json", json_out, "print JSON instead of a table");
  CLI11_PARSE(app, argc, argv);

  const auto names = bench::replay_names(data, only);
  const auto strategy_list = bench::split(strategies);
  try {  // a bad name or spec fails here, once, not in every run's thread
    for (const auto& strategy : strategy_list) (void)make_named(strategy);
  } catch (const std::exception& e) {
    std::cerr << "bench_strategy_quality: " << e.what() << "\n";
    return 2;
  }
  std::vector<std::string> mode_names =
      mode_arg == "both" ? std::vector<std::string>{"table", "product"} : bench::split(mode_arg);
  std::vector<double> fractions;
  for (const auto& text : bench::split(fractions_arg)) {
    fractions.push_back(std::stod(text));
    if (!(fractions.back() > 0 && fractions.back() <= 1)) {
      std::cerr << "bench_strategy_quality: --budget-fractions: each in (0, 1], not " << text
                << "\n";
      return 2;
    }
  }

  // fraction -> mode -> strategy -> space -> score (and per seed), and the
  // share of late proposals outside the table. The mode's key is "table" or
  // "product" at fraction 1, "table@0.25" at others.
  std::map<std::string, std::map<std::string, std::map<std::string, double>>> scores, outside;
  std::map<std::string, std::map<std::string, std::map<std::string, std::vector<double>>>> per_seed;
  std::vector<std::string> cells;  // the mode keys, in print order
  for (const auto& mode_name : mode_names)
    for (const double fraction : fractions)
      cells.push_back(fraction == 1 ? mode_name : fmt::format("{}@{:g}", mode_name, fraction));
  for (const auto& name : names) {
    const auto path = bench::replay_path(data, name);
    const auto table = replay_table::load(path);
    const auto f = make_frame(*table);
    std::vector<double> compiles;
    for (const auto& e : table->entries()) compiles.push_back(e.compile_ms / 1000.0);
    std::nth_element(compiles.begin(),
                     compiles.begin() + static_cast<std::ptrdiff_t>(compiles.size() / 2),
                     compiles.end());
    const double compile_s = compiles[compiles.size() / 2];
    const double budget_evaluations = f.random_needs(0.95);  // the methodology's budget
    if (!json_out)
      std::cerr << fmt::format(
          "{}: {} valid of {} stored of {} combinations, optimum {:.4g} ms, median {:.4g} ms, "
          "budget {:.1f} s = {:.0f} evaluations (scored from {:.1f} s), a config outside the "
          "table costs {:.3f} s\n",
          name, table->valid_count(), table->stored_count(), table->cartesian_size(),
          f.optimum * 1e3, f.median * 1e3, f.budget_s, budget_evaluations, f.start_s, compile_s);
    for (const auto& mode_name : mode_names) {
      if (mode_name != "table" && mode_name != "product")
        throw std::runtime_error("--mode: table, product or both, not " + mode_name);
      const mode m{mode_name,
                   mode_name == "table" ? replay_space_kind::table : replay_space_kind::product,
                   mode_name == "table" ? 0.0 : compile_s};
      const auto s = replay_space(path, m.kind);
      auto b = std::make_shared<replay_backend>(table, replay_options{1, true, false});
      b->prepare(s);
      for (const double fraction : fractions) {
        const auto cell = fraction == 1 ? mode_name : fmt::format("{}@{:g}", mode_name, fraction);
        const double end_s = fraction * f.budget_s;
        const double limit_s = 1.1 * end_s;  // runs go past the scored range
        const auto hint = no_budget_hint
                              ? std::size_t{0}
                              : static_cast<std::size_t>(std::ceil(fraction * budget_evaluations));
        for (const auto& strategy : strategy_list) {
          // Seeds run on `jobs` threads; each run charges its own thread's CPU
          // time, so running them side by side changes no score.
          std::vector<trajectory> runs(static_cast<std::size_t>(seeds));
          bench::for_each_seed(seeds, jobs, [&](int seed) {
            runs[static_cast<std::size_t>(seed)] =
                run_once(s, b, strategy, static_cast<std::uint64_t>(seed + first_seed), limit_s,
                         m.outside_cost_s, hint);
          });
          auto& seed_scores = per_seed[cell][strategy][name];
          std::size_t late = 0, late_outside = 0, evaluations = 0;
          double strategy_s = 0;
          for (const auto& r : runs) {
            seed_scores.push_back(score(r, f, end_s));
            late += r.late();
            late_outside += r.late_outside;
            evaluations += r.evaluations;
            strategy_s += r.strategy_s;
          }
          scores[cell][strategy][name] =
              std::accumulate(seed_scores.begin(), seed_scores.end(), 0.0) / seeds;
          outside[cell][strategy][name] =
              late ? static_cast<double>(late_outside) / static_cast<double>(late) : 0.0;
          if (!json_out)
            std::cerr << fmt::format(
                "  {:<8} {:<14} score {:.3f}  outside after 50: {:.1f}%  ({:.0f} evaluations, "
                "strategy CPU {:.1f}% of the budget)\n",
                cell, strategy, scores[cell][strategy][name], 100 * outside[cell][strategy][name],
                static_cast<double>(evaluations) / seeds, 100 * strategy_s / (seeds * limit_s));
        }
      }
    }
  }

  if (json_out) {
    nlohmann::json out;
    out["seeds"] = seeds;
    out["scores"] = scores;
    out["outside_after_50"] = outside;
    out["per_seed"] = per_seed;
    out["first_seed"] = first_seed;
    out["budget_hint"] = !no_budget_hint;
    std::cout << out.dump(2) << "\n";
    return 0;
  }
  for (const auto& mode_name : cells) {
    std::cout << fmt::format("\nmode {} ({})\n", mode_name,
                             mode_name.starts_with("table")
                                 ? "restrictions known: the space is the table's configs"
                                 : "restrictions unknown: the Cartesian product, every "
                                   "proposal charged; [late proposals outside the table]");
    std::string header = fmt::format("{:<14}", "strategy");
    for (const auto& name : names) header += fmt::format("{:>26}", name);
    header += fmt::format("{:>8}", "mean");
    std::cout << header << "\n";
    for (const auto& strategy : strategy_list) {
      std::string row = fmt::format("{:<14}", strategy);
      double mean = 0, mean_outside = 0;
      for (const auto& name : names) {
        const double sc = scores[mode_name][strategy][name];
        const double out = outside[mode_name][strategy][name];
        row += mode_name.starts_with("table") ? fmt::format("{:>26.3f}", sc)
                                              : fmt::format("{:>18.3f} [{:>4.1f}%]", sc, 100 * out);
        mean += sc;
        mean_outside += out;
      }
      const auto n = static_cast<double>(names.size());
      row += mode_name.starts_with("table")
                 ? fmt::format("{:>8.3f}", mean / n)
                 : fmt::format("{:>8.3f} [{:.1f}%]", mean / n, 100 * mean_outside / n);
      std::cout << row << "\n";
    }
  }
  std::cout << fmt::format(
      "\nscore: 0 = random search, 1 = optimum; {} seeds per cell; budget = what random search "
      "needs to get 95% of the way from the median to the optimum, x1.1; strategy CPU time "
      "charged.\n",
      seeds);
  return 0;
}
