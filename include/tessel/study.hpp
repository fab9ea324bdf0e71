// tessel/study.hpp: one tuning study, Ceres-style: Options -> run -> Summary.
// A Study owns a space, a backend, a strategy and (optionally) a study file,
// and is driven either by run() until a stop condition, or by ask/tell from
// a caller who owns the loop (an agent, a script).
#pragma once

#include <tessel/backend.hpp>
#include <tessel/space.hpp>
#include <tessel/storage.hpp>
#include <tessel/strategy.hpp>
#include <tessel/surrogate.hpp>
#include <tessel/trial.hpp>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace tessel {

enum class termination : unsigned char {
  evaluations,
  wall_time,
  cost_budget,
  target_reached,
  no_improvement,
  token_budget,     ///< the agents' tokens reached their budget
  space_exhausted,  ///< every valid config was evaluated
  strategy_done,    ///< the strategy had nothing more to propose
  negligible_gain,  ///< the best expected gain left fell below the threshold
  not_run,
};
[[nodiscard]] std::string_view to_string(termination t) noexcept;

/// Progress of a study, as stop conditions and observers see it.
struct progress {
  std::size_t evaluations = 0;        ///< finished trials (any status)
  std::size_t failures = 0;           ///< finished trials whose status is not ok
  double wall_s = 0;                  ///< seconds since run() started (or the study was made)
  double cost_s = 0;                  ///< sum of the finished trials' measurement cost
  double tokens = 0;                  ///< agent tokens spent on every trial so far (provenance)
  std::optional<double> best;         ///< best ok objective
  std::size_t since_improvement = 0;  ///< evaluations since the best last improved
};

/// A stop condition: a predicate on progress, composable with || and &&.
class stop_condition {
 public:
  /// A leaf: `test` decides, `reason` says why in words, `kind` is the
  /// termination it reports; `budget` (optional) says how many evaluations
  /// are left, so run() does not start a batch past it.
  /// `spent` (optional) says what fraction of its budget is used, in [0, 1].
  stop_condition(std::function<bool(const progress&)> test, std::string reason, termination kind,
                 std::function<std::optional<std::size_t>(const progress&)> budget = {},
                 std::function<std::optional<double>(const progress&)> spent = {});

  /// Whether to stop now.
  [[nodiscard]] bool operator()(const progress& p) const;
  /// Why, in words ("100 evaluations done"); for composites, the clauses that fired.
  [[nodiscard]] std::string reason(const progress& p) const;
  /// The termination kind of the (first) clause that fired.
  [[nodiscard]] termination kind(const progress& p) const;
  /// Evaluations that may still start before this condition must hold; nullopt if unbounded.
  [[nodiscard]] std::optional<std::size_t> evaluations_left(const progress& p) const;
  /// The fraction of its budget used, in [0, 1]: evaluations, wall seconds or
  /// cost seconds; nullopt for a condition that sets no budget (a target,
  /// patience). For ||, the largest (the clause closest to firing); for &&,
  /// the smallest, nullopt when any clause is unbounded. The cost-aware
  /// scheduler cools its exponent with it.
  [[nodiscard]] std::optional<double> spent(const progress& p) const;

  friend stop_condition operator||(stop_condition a, stop_condition b);
  friend stop_condition operator&&(stop_condition a, stop_condition b);

 private:
  enum class combine : unsigned char { leaf, any, all };
  stop_condition() = default;
  combine combine_ = combine::leaf;
  std::function<bool(const progress&)> test_;
  std::string reason_;
  termination kind_ = termination::not_run;
  std::function<std::optional<std::size_t>(const progress&)> budget_;
  std::function<std::optional<double>(const progress&)> spent_;
  std::vector<stop_condition> parts_;
};

namespace stop {
stop_condition evaluations(std::size_t n);     ///< n trials finished
stop_condition wall_seconds(double seconds);   ///< wall time since run() began
stop_condition cost_seconds(double seconds);   ///< summed evaluation cost
stop_condition tokens(double n);               ///< agent tokens spent (progress::tokens)
stop_condition target(double objective);       ///< best <= objective
stop_condition no_improvement(std::size_t n);  ///< n evaluations without a new best
stop_condition never();
}  // namespace stop

struct summary {
  termination reason = termination::not_run;
  std::string message;  ///< the stop condition in words
  std::optional<trial> best;
  std::size_t evaluations = 0;
  std::size_t evaluations_to_best = 0;  ///< trials finished when the best was found
  std::map<status, std::size_t> by_status;
  std::uint64_t seed = 0;
  std::string space_name, backend_name, strategy_name;
  std::size_t jobs_given = 0, jobs_used = 0;
  double wall_s = 0;      ///< run() wall time
  double propose_s = 0;   ///< inside strategy propose/observe
  double evaluate_s = 0;  ///< waiting for backends (batches, wall)
  double overhead_s = 0;  ///< the rest: bookkeeping, storage, observers
  double cost_s = 0;      ///< summed measurement cost
  double tokens = 0;      ///< agent tokens spent (progress::tokens)
  /// Per proposal source: tokens spent and proposals made (the mean is what
  /// the scheduler expects a proposal of that source to cost).
  std::map<std::string, std::pair<double, std::size_t>> tokens_by_source;
  std::size_t reported = 0;      ///< finished trials whose result an agent told (unverified)
  std::size_t verified = 0;      ///< agent-reported trials re-measured by verify()
  std::string best_config_text;  ///< "tile_m = 512, order = [k, m, n], ..."

  [[nodiscard]] std::string brief_report() const;  ///< one line
  [[nodiscard]] std::string full_report() const;   ///< given vs used, counts, times, best config
};

/// Optional hooks; override what you need. Called on the thread that runs
/// the study (never concurrently), in trial order.
class observer {
 public:
  virtual ~observer() = default;
  virtual void on_trial(const trial& t, const progress& p) { (void)t, (void)p; }
  virtual void on_improvement(const trial& t, const progress& p) { (void)t, (void)p; }
  virtual void on_end(const summary& s) { (void)s; }
};

/// A suggestion from ask(): the trial to evaluate and why it was chosen.
struct suggestion {
  std::uint64_t trial_id = 0;
  tessel::config config;
  tessel::provenance provenance;
  std::optional<tessel::prediction> prediction;
};

struct study_options {
  /// Seed of every random choice (strategies, sampling). Recorded.
  std::uint64_t seed = 0;
  /// Threads evaluating at once in run(); 0 = the backend's concurrency().
  std::size_t jobs = 0;
  /// Proposals in flight at once in run(): proposal k is made knowing the
  /// results of trials 1 .. k - window, which are told in proposal order, so
  /// the trials are the same at any `jobs` (docs/scheduler.md). At most
  /// `window` evaluations run in parallel. 0 = `jobs` (more parallel past 4
  /// threads, but the trials then differ from one `jobs` to another).
  std::size_t window = 4;
  /// Evaluate the space's default config first (the baseline), when valid.
  bool evaluate_baseline = true;
  /// A backend or observer exception: false records it as runtime_error and
  /// goes on; true rethrows it from run() (after recording it).
  bool rethrow_exceptions = false;
  /// A store (the study_store given to the study) that already holds trials:
  /// true continues it (finished trials kept and replayed to the strategy,
  /// interrupted ones run first); false refuses it with tessel::error, so a
  /// new study never silently extends an old one (the CLI's --resume). A file
  /// whose study has no trial yet is taken either way.
  bool resume = false;
  /// A JSON object the caller wants stored with the study (the CLI stores its
  /// command line there so `tessel show` and `--resume` can rebuild the space).
  std::string annotations = "{}";

  // --- cost-aware scheduling (DESIGN.md §5, docs/scheduler.md) ---------------
  /// With a surrogate the study's scheduler is utility: ask(n) draws a pool of
  /// pool_factor * n candidates (queued first, then the strategy's), scores
  /// each (mean, sigma, P(feasible), expected gain over the incumbent, cost)
  /// and returns the n of highest utility = gain / (cost / P(feasible))^alpha.
  /// Null: fifo, proposals dispatched in the order they were made.
  std::shared_ptr<tessel::surrogate> surrogate;
  /// Predicts each candidate's cost in seconds; null: the backend's estimate.
  std::shared_ptr<tessel::cost_model> costs;
  /// Candidates scored per suggestion returned. At least 1. Default 4.
  std::size_t pool_factor = 4;
  /// alpha is cooled linearly from cost_alpha_start to cost_alpha_end as the
  /// evaluation budget is spent (Lee et al. 2020), so cheap-first does not
  /// starve expensive but promising regions. Defaults 2 and 0: alpha 1 is
  /// expected improvement per second; starting at 2 reached the target 1.56x
  /// sooner than EI alone on six measured spaces, against 1.38x from 1
  /// (benchmarks/README.md, "Cost-aware scheduling"). Set 1 or 0 where the
  /// good configs are thought to be the expensive ones.
  double cost_alpha_start = 2.0;
  double cost_alpha_end = 0.0;
  /// A floor on exploring expensive regions: every k-th evaluation is
  /// proposed and ranked at alpha 0 (expected gain alone), so a run cannot
  /// stay in the cheap region for good however the cooling stands. 0: never
  /// (k = 4, 8, 16 from alpha 2 and k = 8 from alpha 3 and 4 did not beat it
  /// chosen by leave-one-out over seven spaces; benchmarks/README.md).
  std::size_t cost_explore_every = 0;
  /// How predicted cost enters the ranking while alpha > 0. cooled_ei: gain
  /// / price^alpha above, and `bo`'s log EI less alpha ln price.
  /// gittins: the Pandora's-box Gittins index (Weitzman 1979; Xie et al.,
  /// NeurIPS 2024): the scheduler and `bo` rank by the lowest g solving
  /// E[(g - ln f)^+] = lambda price / c_ref, ln f ~ the posterior of the log
  /// objective, price the price of a success (price_per_success), c_ref the
  /// mean cost of the evaluations so far (tessel::gittins_index;
  /// docs/scheduler.md). alpha still switches it on and drives the other
  /// strategies' cheaper draws. Default cooled_ei (benchmarks/README.md,
  /// "the Pandora's-box Gittins index").
  enum class cost_rule_kind : unsigned char { cooled_ei, gittins };
  cost_rule_kind cost_rule = cost_rule_kind::cooled_ei;
  /// gittins: lambda, the log objective one evaluation of mean cost must be
  /// expected to gain (0.01: 1%). > 0.
  double gittins_lambda = 0.01;
  /// gittins: halve lambda whenever the index of the first config chosen is
  /// not below the incumbent's log objective (Weitzman's rule would stop;
  /// "PBGI-D"), so a run that has bought what lambda pays for goes on
  /// exploring at a lower price.
  bool gittins_decay = false;
  /// The budget alpha cools over, for ask/tell use: evaluations, or seconds
  /// of summed evaluation cost (progress::cost_s; CArBO cools by cost spent);
  /// with both, whichever is more used up. 0 and 0: the fraction of run()'s
  /// stop condition spent (stop_condition::spent: evaluations, wall or cost
  /// seconds); alpha stays at start when nothing bounds the budget.
  /// budget_hint is also the evaluation budget strategies see
  /// (search_context::evaluation_budget), which `bo` sizes its warm-up and
  /// exploration to.
  std::size_t budget_hint = 0;
  double cost_budget_hint_s = 0;
  /// Stop when the best expected gain left in the pool falls below this
  /// fraction of the incumbent (termination negligible_gain); 0 = never.
  double min_gain_fraction = 0;

  // --- agents (docs/agents.md) -------------------------------------------------
  /// Seconds of cost one 1,000 agent tokens are worth: a candidate's
  /// predicted cost is its evaluation seconds plus token_price_s / 1000 times
  /// its tokens (its own, or the mean per proposal of its source so far), so
  /// the scheduler weighs device time and agent tokens in one cost. 0: tokens
  /// are recorded but not weighed.
  double token_price_s = 0;
  /// Results told by a caller (tell()) are agent-reported. true: they cannot
  /// be the best until verify() re-measures them on the backend; run() does so
  /// before each batch. false: they count as told, marked as reported.
  bool verify_reported = false;

  // --- a shared study (a store many processes work: PostgreSQL) ----------------
  /// How this process joins a shared study in run(): its name (empty: host:pid),
  /// its heartbeat and lease (docs/distributed.md). jobs is set from `jobs`.
  worker_info worker;

  /// Throws options_error naming the field and the rule.
  void validate() const;
};

class study {
 public:
  using options = study_options;

  /// `db` may be null (nothing stored). With a db holding trials of the same
  /// space, the study resumes: finished trials are replayed to the strategy,
  /// trials that were proposed or running are queued again. A shared store
  /// (db->shared(), PostgreSQL) makes this process one worker of a study that
  /// others work too: run() claims trials from the store, proposes when it
  /// holds the proposer lock, and stops when `until` holds for the whole
  /// study (docs/distributed.md); ask, tell, enqueue, evaluate and verify,
  /// which one process drives, throw tessel::error there.
  study(tessel::space s, std::shared_ptr<backend> b, std::unique_ptr<strategy> st, options o = {},
        std::shared_ptr<study_store> db = nullptr);
  ~study();
  study(study&&) noexcept;
  study& operator=(study&&) noexcept;

  /// Runs until `until` holds, the space is exhausted or the strategy is done.
  /// On a shared study, `until` is tested on the whole study's progress
  /// (wall seconds are this process's own), and the trials depend on timing:
  /// not reproducible from the seed.
  summary run(const stop_condition& until);

  /// Up to n suggestions (queued proposals first, then the strategy's).
  std::vector<suggestion> ask(std::size_t n);
  /// Records the measurement of an asked trial, as agent-reported (the study
  /// did not measure it: trial::reported). `tokens`: agent tokens spent on
  /// it since it was proposed, added to its provenance. Throws tessel::error
  /// for an unknown or already finished trial id.
  const trial& tell(std::uint64_t trial_id, const measurement& m, double tokens = 0);
  /// Queues a config proposed by an agent or a person. Returns the new trial
  /// id, or nullopt when the config was already proposed (deduplicated).
  /// Throws tessel::error when the config is not valid (with the reason).
  std::optional<std::uint64_t> enqueue(const config& c, provenance source);
  /// Evaluates `c` now through the backend (ask/tell in one call). A config
  /// already finished is returned as it is, unless its result was
  /// agent-reported: then it is re-measured (as verify() does).
  const trial& evaluate(const config& c, provenance source);
  /// Re-measures on the backend (gated) up to `max` agent-reported ok trials
  /// that would beat the best measured objective, best reported first. Each
  /// becomes measured: its result is the backend's, the told objective kept
  /// as metric "reported_objective". Returns how many were re-measured.
  std::size_t verify(std::size_t max = 1);
  /// The prediction the scheduler would make for `c` now (model or prior),
  /// as ask() attaches to suggestions; `source` is who would propose it.
  [[nodiscard]] prediction predict(const config& c, const provenance& source) const;

  void add_observer(std::shared_ptr<observer> o);

  [[nodiscard]] const trial* best() const;
  [[nodiscard]] const std::vector<trial>& trials() const;
  [[nodiscard]] summary current_summary() const;
  [[nodiscard]] const tessel::space& space() const;
  [[nodiscard]] const options& opts() const;
  /// In a shared study, the id this process joined with in its latest run()
  /// (shared_store::join): trial::worker of the results it measured; 0
  /// before run() joined, and for a store with one writer.
  [[nodiscard]] std::uint64_t worker_id() const;

 private:
  struct state;
  std::unique_ptr<state> state_;
};

}  // namespace tessel
