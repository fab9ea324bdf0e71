// tessel/strategies.hpp: the shipped search strategies (docs/strategies.md),
// their Options, and the registry that picks one by name. Link
// tessel::strategies. Every strategy implements tessel::strategy
// (tessel/strategy.hpp): it proposes valid configs the study does not know
// yet and observes every finished trial; failed trials (status != ok) count
// as objective +inf, so no strategy proposes a known config again.
//
// Options follow one pattern: a plain struct whose fields document unit,
// default and rule, and validate(), which throws tessel::options_error naming
// the field and the rule ("ga_options.population_size: must be at least 2
// (got 1)"). Factories call validate() before building anything.
#pragma once

#include <tessel/strategy.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace tessel {

// --- random -------------------------------------------------------------------

/// `random`: configs drawn uniformly among the valid ones, skipping known keys.
struct random_options {
  /// Uniform draws tried per proposal before falling back to a scan of ranks
  /// from a random start (which finds every unknown config left, so a nearly
  /// exhausted space never loops). At least 1. Default 64.
  std::size_t sample_attempts = 64;
  void validate() const;
};

// --- exhaustive ---------------------------------------------------------------

/// `exhaustive`: every valid config exactly once, skipping known ones.
struct exhaustive_options {
  /// true: a seeded pseudo-random permutation of the ranks (a Feistel
  /// network with cycle walking), in O(1) memory, so a run cut short by its
  /// budget is a uniform sample. false: rank order 0, 1, ..., count()-1
  /// (space::at), which front-loads whatever the first parameters' first
  /// values are. Default true.
  bool shuffle = true;
  void validate() const;
};

// --- local search --------------------------------------------------------------

/// `local`: first-improvement hill climbing over valid neighbours in random
/// order, with restarts from a uniform sample at a local optimum.
struct local_options {
  /// Non-improving neighbour results, in a row, after which the climb
  /// restarts even though unvisited neighbours remain; 0 = only at a local
  /// optimum (no unvisited neighbour improves). Default 0.
  std::size_t patience = 0;
  /// As random_options::sample_attempts, for restart samples. At least 1. Default 64.
  std::size_t sample_attempts = 64;
  /// While the study weighs cost (search_context::cost_alpha() > 0), each
  /// neighbour proposed is the cheapest (predicted) of the next
  /// 1 + round((cost_draws - 1) * alpha) unvisited ones, and each restart
  /// point the cheapest of as many uniform draws. At least 1; 1: never. Default 4.
  std::size_t cost_draws = 4;
  void validate() const;
};

// --- simulated annealing ---------------------------------------------------------

/// `annealing`: simulated annealing (Kirkpatrick, Gelatt & Vecchi, Science
/// 1983) over valid neighbours. A move from f to f' is accepted with
/// probability min(1, exp(-(ln f' - ln f) / T)): the energy is the log
/// objective, so temperatures are relative changes (T = 0.1 accepts a move
/// 10% worse with probability ~0.39). After each neighbour result
/// T <- cooling * T; below min_temperature, or with no unvisited neighbour,
/// the walk restarts at initial_temperature.
struct annealing_options {
  /// T0, in units of ln(objective). Finite, > 0. Default 0.2.
  double initial_temperature = 0.2;
  /// Geometric factor per neighbour result. In (0, 1). Default 0.97.
  double cooling = 0.97;
  /// Restart threshold. In (0, initial_temperature). Default 0.005
  /// (about 120 steps per anneal with the defaults).
  double min_temperature = 0.005;
  /// Probability that a restart starts from the best config observed so far
  /// (any source) rather than a uniform sample. In [0, 1]. Default 0.5.
  double restart_from_best = 0.5;
  /// As random_options::sample_attempts. At least 1. Default 64.
  std::size_t sample_attempts = 64;
  void validate() const;
};

// --- genetic algorithm -------------------------------------------------------------

/// `ga`: a generational genetic algorithm. Parents are picked by tournament;
/// children take each non-permutation parameter from either parent (uniform
/// crossover) and each permutation by order crossover (OX1, Davis 1985);
/// mutation moves to a random valid neighbour; an invalid child is repaired
/// toward its first parent, then moved to an unvisited neighbour, else
/// replaced by a uniform sample. Every observed trial (any source) joins the
/// generation being formed; the best elite_count of a generation survive
/// into the next.
struct ga_options {
  /// Trials per generation. At least 2. Default 20.
  std::size_t population_size = 20;
  /// Members drawn (with replacement) per tournament; the best wins.
  /// In [1, population_size]. Default 3.
  std::size_t tournament_size = 3;
  /// Probability a child is a crossover of two parents (else a copy of one). In [0, 1]. Default
  /// 0.9.
  double crossover_rate = 0.9;
  /// Probability a child makes one random neighbour move. In [0, 1]. Default 0.2.
  double mutation_rate = 0.2;
  /// Best members of a generation carried into the next. Less than population_size. Default 2.
  std::size_t elite_count = 2;
  /// Breeding tries per proposal before a uniform sample. At least 1. Default 8.
  std::size_t breed_attempts = 8;
  /// While the study weighs cost (search_context::cost_alpha() > 0), each
  /// proposal is the cheapest (predicted) of up to this many children,
  /// 1 + round((cost_draws - 1) * alpha). At least 1; 1: never. Default 4.
  std::size_t cost_draws = 4;
  /// As random_options::sample_attempts. At least 1. Default 64.
  std::size_t sample_attempts = 64;
  void validate() const;
};

// --- auto (AUC bandit) --------------------------------------------------------------

/// `auto`: OpenTuner's AUC bandit meta-technique (Ansel et al., PACT 2014;
/// credit after Fialho et al., PPSN 2010) over other strategies. Each arm's
/// credit is the area under the curve of its last uses within a sliding
/// window of the W most recent results (all arms): a use scores 1 when its
/// proposal became a new global best, weighted by recency, normalised to
/// [0, 1]. Each proposal goes to the arm maximising
/// credit + C * sqrt(2 ln(results in window) / uses in window); unused arms
/// first. Every arm observes every trial.
struct auto_options {
  /// Registered strategy names, each at most once, not "auto". Default bo,
  /// ga, local: the three that score best alone on the real spaces of
  /// data/bench (benchmarks/README.md); random and annealing as arms cost
  /// the bandit more than they find on short budgets.
  std::vector<std::string> arms = {"bo", "ga", "local"};
  /// C, the exploration weight. Finite, >= 0. Default 0.05 (OpenTuner's).
  double exploration = 0.05;
  /// W, results remembered. At least 1. Default 500 (OpenTuner's).
  std::size_t window = 500;
  /// The first `lead` proposals all go to the first arm (its results are
  /// credited as usual); the bandit chooses from then on. With bo first, the
  /// model-based arm gets its initial design and first model-guided picks
  /// before the walkers (ga, local) are tried, which is what short budgets
  /// reward (benchmarks/README.md: 0.557 -> 0.772 on the two short-budget
  /// spaces, 0.680 -> 0.756 on the mean of all five). Default 30.
  std::size_t lead = 30;
  /// Learn rules from the failures (tessel/constraints.hpp) and veto an
  /// arm's proposal that a rule rejects; the arm is asked again (up to
  /// `max_vetoes` times per slot, then its proposal stands). Arms that weigh
  /// the rules themselves (strategy::weighs_learned_constraints: bo, which
  /// tests them on a schedule of its own) are not vetoed. Default true.
  bool learn_constraints = true;
  /// A rejected proposal still goes ahead with probability
  /// explore_rejected * explore_horizon / (explore_horizon + trials
  /// observed), so a wrong rule can be corrected: 0.2 at the start, 0.04
  /// after 200 trials with the defaults. In [0, 1]. Default 0.2.
  double explore_rejected = 0.2;
  /// Trials over which that rate halves. At least 1. Default 50.
  std::size_t explore_horizon = 50;
  /// Vetoes per proposal slot at most. Default 16.
  std::size_t max_vetoes = 16;
  /// Adds an arm "groups" (credited "auto/groups"): once its GP surrogate
  /// is ready, it estimates from the model which parameters interact around
  /// the study's best config (the standalone and cascading effects of
  /// `tessel explain --interactions`, predicted), then searches the
  /// parameters that interact with none one at a time and each interacting
  /// group jointly (docs/strategies.md). Default false: left one kernel
  /// family out on the replay tables its gain was within the noise
  /// (benchmarks/README.md, issue 26).
  bool interaction_groups = false;
  /// Two parameters interact when their predicted joint gain differs from
  /// the sum of their standalone gains by more than this fraction of the
  /// best config's predicted objective (on average over a few directions).
  /// Finite, >= 0. Default 0.05.
  double interaction_threshold = 0.05;
  void validate() const;
};

// --- factories and registry -----------------------------------------------------------

/// Each validates its options first (options_error).
[[nodiscard]] std::unique_ptr<strategy> make_random_strategy(const random_options& options = {});
[[nodiscard]] std::unique_ptr<strategy> make_exhaustive_strategy(
    const exhaustive_options& options = {});
[[nodiscard]] std::unique_ptr<strategy> make_local_strategy(const local_options& options = {});
[[nodiscard]] std::unique_ptr<strategy> make_annealing_strategy(
    const annealing_options& options = {});
[[nodiscard]] std::unique_ptr<strategy> make_ga_strategy(const ga_options& options = {});
/// Arms made by make_strategy(name) for each of options.arms.
[[nodiscard]] std::unique_ptr<strategy> make_auto_strategy(const auto_options& options = {});
/// Arms given ready-made (options.arms is ignored); names must be distinct.
/// Throws options_error when `arms` is empty, holds null or repeats a name.
[[nodiscard]] std::unique_ptr<strategy> make_auto_strategy(
    const auto_options& options, std::vector<std::unique_ptr<strategy>> arms);

/// The strategy registered as `name`, with default options. Throws
/// tessel::error naming the known strategies (and a did-you-mean) otherwise.
/// `bo` and `auto` also take options as a spec, "bo[KEY=VALUE;...]": the
/// keys are bo_options' field paths: initial_samples, initial_draws,
/// acquisition (log_ei, ucb, thompson), ucb_kappa, ucb_after, pool_size,
/// incumbents, local_starts, local_steps, feasibility_cutoff,
/// rule_test_after, and model.learn_constraints (true/false),
/// model.max_model_points, model.alignment_features,
/// model.ordinal_features, model.refit_growth, model.fit_restarts;
/// "auto[...]" takes those for its bo arm and its own arms (joined by '+'),
/// lead, exploration, window, learn_constraints, explore_rejected,
/// interaction_groups and interaction_threshold
/// ("auto[initial_draws=1;lead=60]"). An unknown key, a malformed value or
/// an option out of range throws tessel::error naming it.
[[nodiscard]] std::unique_ptr<strategy> make_strategy(std::string_view name);
/// Registered names, in registry order.
[[nodiscard]] std::vector<std::string> strategy_names();

}  // namespace tessel
