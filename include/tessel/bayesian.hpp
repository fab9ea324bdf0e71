// tessel/bayesian.hpp: Bayesian optimization (docs/bayesian.md). Link
// tessel::strategies. Three things, all built on one Gaussian process over a
// space's encoding (Matern-5/2 on numeric parameters, an overlap kernel on
// symbols and booleans, a Kendall kernel on permutations; log(objective);
// maximum-likelihood hyper-parameters; a feasibility model learnt from
// failed trials):
//   - the `bo` strategy (make_bo_strategy, or make_strategy("bo"));
//   - make_gp_surrogate(): a tessel::surrogate the scheduler ranks
//     candidates with (mean, sigma, P(feasible), expected gain);
//   - make_cost_model(): a tessel::cost_model predicting evaluation seconds.
// Options follow the pattern of tessel/strategies.hpp: plain structs whose
// validate() throws tessel::options_error naming the field and the rule.
// Eigen and nlopt stay inside the compiled sources.
#pragma once

#include <tessel/space.hpp>
#include <tessel/strategy.hpp>
#include <tessel/surrogate.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>

namespace tessel {

/// The Gaussian process model, as `bo` and make_gp_surrogate use it.
struct gp_options {
  /// Model log(objective), so relative differences count alike everywhere.
  /// The model falls back to the objective itself from the first ok
  /// objective that is not > 0. Default true.
  bool log_objective = true;
  /// Ok observations at which hyper-parameters are first fitted (the
  /// defaults of docs/bayesian.md until then). At least 2. Default 8.
  std::size_t first_fit = 8;
  /// Refit when the ok observations reach refit_growth times those of the
  /// last fit (8, 16, 32, ... with the defaults). Finite, > 1. Default 2.
  double refit_growth = 2.0;
  /// Points a fit uses at most: a uniform random subset beyond, so a fit
  /// costs O(max_fit_points^3) per likelihood evaluation. At least 10. Default 128.
  std::size_t max_fit_points = 128;
  /// Observations the objective GP holds at most: beyond, the best half and
  /// a uniform random draw from the rest (redrawn each time an eighth more
  /// have arrived), so ask costs O(max_model_points^2) per candidate however
  /// long the study. 0 = every observation (exact; cost grows as n^2). At
  /// least 16 otherwise. Default 128 (bench_strategy_quality: the same
  /// scores as 256 on the real spaces at a third of the CPU time).
  std::size_t max_model_points = 128;
  /// Random starts of each objective fit besides the current and the default
  /// hyper-parameters (the feasibility model's fits use those two only). Default 1.
  std::size_t fit_restarts = 1;
  /// Likelihood evaluations per start (L-BFGS). At least 1. Default 50.
  std::size_t fit_evaluations = 50;
  /// Noise variance of the feasibility model's 0/1 labels before its first
  /// fit, and its floor in every fit (without one, deterministic labels are
  /// interpolated exactly and the model rings between nearby opposite
  /// labels): smaller follows single failures more closely. In (0, 1]. Default 0.05.
  double feasibility_noise = 0.05;
  /// Floor on P(feasible), so log acquisitions stay finite. In (0, 1). Default 1e-4.
  double min_p_feasible = 1e-4;
  /// Also learn axis-aligned rules from the failures (tessel/constraints.hpp)
  /// and cap P(feasible) at 1 / (k + 2) where a rule that explained k
  /// failures, and no success, rejects the config: the GP's smooth boundary
  /// cannot follow a sharp one from few failures. Default true.
  bool learn_constraints = true;
  /// Give each integer parameter whose values differ in alignment (the
  /// largest power of two dividing them: 64 and 96 are aligned to 32, 72 to
  /// 8) a second kernel feature, that alignment, with its own length scale:
  /// hardware rewards multiples of its widths (a warp, a vector, a
  /// partition), which a smooth kernel over the value cannot see between
  /// neighbouring values (docs/bayesian.md). Not for `pow2` domains, whose
  /// encoding is already the log2 of the value. Default true: chosen by
  /// leave-one-space-out on the six tables of data/bench (benchmarks/README.md).
  bool alignment_features = true;
  /// An integer parameter's kernel feature is its value's position in its
  /// domain (0 for the first value, 1 for the last) rather than the value,
  /// so 1, 2, 4, ..., 128 are as evenly spread as 32, 64, ..., 992. Not for
  /// `pow2` domains, whose log2 encoding is that position already. Default
  /// false: no better on the six tables of data/bench (benchmarks/README.md).
  bool ordinal_features = false;
  /// Ok observations before gp_surrogate::ready(). At least 2. Default 5.
  std::size_t min_observations = 5;
  /// Seed of the surrogate's fits (random starts and subsets). `bo` seeds its
  /// model from start() instead. Default 0.
  std::uint64_t seed = 0;
  void validate() const;
};

/// What `bo` maximises over candidates (all multiplied by P(feasible)).
enum class acquisition_kind : std::uint8_t {
  log_ei,    ///< log expected improvement (Ament et al. 2023)
  ucb,       ///< optimistic improvement best - (mean - kappa * sd), through a softplus
  thompson,  ///< a joint posterior sample over the candidate pool
};

/// How `bo` accounts for proposals still being evaluated.
enum class batch_kind : std::uint8_t {
  kriging_believer,  ///< pretend each pending config returned its posterior mean
  constant_liar,     ///< pretend it returned the best objective so far (CL-min)
};

/// `bo`: Bayesian optimization. The first initial_samples proposals are
/// uniform samples; after that each proposal maximises the acquisition over
/// a pool of pool_size fresh uniform samples and the valid neighbours of the
/// incumbents best configs, refined by local search (local_starts
/// hill-climbs of up to local_steps neighbour moves). Pending proposals
/// (its own, not yet observed) are fantasised per `batch`, so a batch
/// spreads out. Failed trials teach the feasibility model, never the
/// objective. Proposals are always valid, distinct and unknown.
struct bo_options {
  gp_options model{};
  /// Uniform proposals before the model is used (observations from any
  /// strategy count). At least 1. Default 5 (with incumbents and ucb_after,
  /// chosen on the six tables of data/bench: benchmarks/README.md,
  /// "Late UCB").
  std::size_t initial_samples = 5;
  /// When the study weighs cost (search_context::cost_alpha() > 0), each
  /// initial sample is the cheapest by predicted cost of
  /// 1 + round((initial_draws - 1) * alpha) fresh uniform draws, a
  /// cost-effective initial design in the spirit of Lee et al. 2020; 1 keeps
  /// it uniform. At least 1. Default 2: where the cheap configs are the ones
  /// that fail (large tiles: few instructions, but PSUM overflows), the
  /// cheapest of 4 draws made the utility scheduler fail more often than fifo
  /// early on the simulator demo; 1 fails least but gives up most of the
  /// cost-aware gain (docs/scheduler.md, "Early failures").
  std::size_t initial_draws = 2;
  /// Default log_ei, turning to ucb after ucb_after trials. ucb from the
  /// start scores higher than log_ei alone on the long runs of data/bench
  /// and lower on the short ones (benchmarks/README.md, "Acquisition"); it
  /// is an option.
  acquisition_kind acquisition = acquisition_kind::log_ei;
  /// kappa of ucb, in posterior standard deviations. Finite, >= 0. Default 1.5.
  double ucb_kappa = 1.5;
  /// With log_ei: from this many finished trials on (any strategy's, failed
  /// ones included), use ucb with ucb_kappa instead. Log EI is greedy,
  /// which a short run needs; later it keeps sampling the incumbent's basin,
  /// and an optimistic bound explores (EI's known over-exploitation; GP-UCB's
  /// exploration weight grows with the run, Srinivas et al. 2010). Default
  /// 100; the largest size_t: never.
  std::size_t ucb_after = 100;
  batch_kind batch = batch_kind::kriging_believer;
  /// Uniform samples drawn per proposal call. At least 1. Default 128.
  std::size_t pool_size = 128;
  /// Best observed configs whose neighbours join the pool. Default 5.
  std::size_t incumbents = 5;
  /// Best pool members hill-climbed by the acquisition. Default 2.
  std::size_t local_starts = 2;
  /// Neighbour moves per hill-climb at most. Default 4.
  std::size_t local_steps = 4;
  /// Candidates whose P(feasible) is below feasibility_cutoff times the
  /// overall success rate are proposed only when no other candidate is left
  /// (a probabilistic constraint, as Gelbart, Snoek & Adams 2014): the
  /// objective GP extrapolates optimistically into regions that only ever
  /// failed, and log EI there can outweigh any multiplicative penalty.
  /// In [0, 1]; 0 disables it. Default 0.5.
  double feasibility_cutoff = 0.5;
  /// Learned rules (gp_options::learn_constraints) cap P(feasible) far below
  /// the cutoff, so a rule is obeyed for good once learned, though it only
  /// generalises from the failures it explains: one learned while every
  /// failure shared some other cause rejects a region that holds successes
  /// (the optimum, perhaps) and nothing ever contradicts it. So from this
  /// many finished trials on, one pick ignores the rules (the feasibility
  /// GP and the cutoff still apply); when it lands where a rule rejects, it
  /// is a test (provenance "bo/rule-test") and the next one is due after
  /// twice as many trials again: 100, 300, 700, 1500, ... A wrong rule falls
  /// to one success; a right one costs a failure per test, O(log n) in a
  /// run of n trials. 0: never. Default 100 (chosen on the six tables of
  /// data/bench among 0, 20, 50, 100: benchmarks/README.md, "Rule tests";
  /// earlier tests cost short runs with many failures more than they find).
  std::size_t rule_test_after = 100;
  /// Phases sized to the study's evaluation budget B, when it has one
  /// (search_context::evaluation_budget: `tessel tune --budget`,
  /// study_options::budget_hint); a study without one is unaffected. All
  /// three default to 0 (off): leaving one kernel family out, at full, half
  /// and quarter budgets, no setting tried moved the held-out score beyond
  /// noise (benchmarks/README.md, "Budget-aware phases").
  /// initial_share: the initial design is at most ceil(initial_share * B)
  /// proposals (at least 2), so a short run is not spent on blind picks.
  /// In [0, 1]; 0: initial_samples whatever the budget.
  double initial_share = 0;
  /// explore_runway: the turn to UCB (ucb_after) and each rule test happen
  /// only while at least this share of B is left, as exploring pays only
  /// when the run can still use what it finds. In [0, 1]; 0: as scheduled.
  double explore_runway = 0;
  /// phase_share: the turn to UCB and the first rule test come after at most
  /// ceil(phase_share * B) trials (ucb_after and rule_test_after are caps).
  /// In [0, 1]; 0: at ucb_after and rule_test_after.
  double phase_share = 0;
  void validate() const;
};

/// How the cost model regresses ln(seconds) on a config's encoding.
enum class cost_model_kind : std::uint8_t {
  gp,          ///< a Gaussian process with the objective's kernel (fitted lengths)
  log_linear,  ///< Bayesian ridge regression on the kernel features (cheaper, coarser)
};

/// The cost model: ln(seconds) regressed on a config's encoding, combined
/// with the backend's estimate as a prior in log space, each weighted by its
/// precision (docs/bayesian.md).
struct cost_model_options {
  /// Default gp: on the real spaces of data/bench it ranks held-out costs
  /// with Spearman 0.59-0.92 after 100 observations, against 0.45-0.82 for
  /// log_linear (bench_cost_model, docs/bayesian.md).
  cost_model_kind kind = cost_model_kind::gp;
  /// Standard deviation of the backend estimate's error, in ln(seconds):
  /// 0.7 trusts it to within a factor of about 2. Finite, > 0. Default 0.7.
  double prior_log_sd = 0.7;
  /// log_linear: ridge penalty on the encoding's coefficients (not the
  /// intercept). Finite, > 0. Default 1.
  double ridge = 1.0;
  /// Seconds predicted with neither data nor a positive estimate. Finite, > 0. Default 1.
  double default_cost_s = 1.0;
  /// The run link: timing a kernel costs about repetitions x its run time,
  /// so while ln(run seconds / objective) over the ok trials has a standard
  /// deviation at most this, the cost is predicted as a regression of the
  /// compile + gate seconds plus that ratio x the surrogate's predicted
  /// objective (when the study passes one, cost_query::objective). On the
  /// replay spaces of data/bench the ratio's deviation is 0.00-0.02.
  /// Finite, >= 0; 0: never (one regression of the total). Default 0.5.
  double run_link_max_sd = 0.5;
  /// Learn from ok trials only, so predict() is what a config costs when it
  /// runs. A failure is cheap (a compile error stops early), so learning
  /// its cost makes the configs that fail look cheapest, and a search that
  /// weighs cost chases them: on the simulator demo the utility scheduler
  /// failed twice as often as fifo in its first 50 evaluations with this
  /// off (docs/scheduler.md). Failed trials teach their own regression
  /// either way: predict_failure(), what a failure costs, which prices a
  /// success at (p ok + (1 - p) failed) / p (tessel::price_per_success). Default true.
  bool ok_only = true;
  /// Keep the total's and the failures' regressions as both kinds, a GP
  /// and a ridge regression, and answer with the one whose one-step-ahead
  /// absolute error in ln(seconds) (each trial predicted before it is
  /// learnt) is smaller so far, `kind` until both have predicted 5 trials;
  /// and use the run link only while its error, from the objective the
  /// study predicted for each trial (trial::prediction), is no larger than
  /// the total's regression's. Default false: on the six tables of
  /// data/bench it ranks held-out costs a little better after 30
  /// observations (mean Spearman 0.59 against 0.55), but bench_cost_aware
  /// moves within noise (1.25x against 1.23x, 1.18x against 1.16x on other
  /// seeds, the simulator 1.23x against 1.45x) and leave-one-space-out
  /// keeps it off (benchmarks/README.md, session 9).
  bool choose_by_error = false;
  /// gp: observations it holds at most; beyond, the most recent half and a
  /// uniform draw of the older ones, redrawn each time an eighth more have
  /// arrived, so predict() stays O(max_points^2). At least 16. Default 128.
  std::size_t max_points = 128;
  /// gp: observations at which hyper-parameters are first fitted, and the
  /// growth factor of the refits (8, 16, 32, ...). At least 2; finite, > 1.
  std::size_t first_fit = 8;
  double refit_growth = 2.0;
  /// gp: seed of the fits' random starts and of the subset draws. Default 0.
  std::uint64_t seed = 0;
  void validate() const;
};

/// Each validates its options first (options_error).
[[nodiscard]] std::unique_ptr<strategy> make_bo_strategy(const bo_options& options = {});
/// A Gaussian process surrogate of `s`: observe() every finished trial;
/// score() is const, O(n^2) for n ok observations, and safe to call from
/// several threads between observations.
[[nodiscard]] std::unique_ptr<surrogate> make_gp_surrogate(const space& s,
                                                           const gp_options& options = {});
/// A cost model of `s`: observe() every finished trial (its cost.total());
/// predict() is const and thread-safe between observations: O(n^2) for the
/// n <= max_points observations the gp holds, O(d^2) for d encoding
/// features with log_linear.
[[nodiscard]] std::unique_ptr<cost_model> make_cost_model(const space& s,
                                                          const cost_model_options& options = {});

}  // namespace tessel
