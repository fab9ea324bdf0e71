// The study's state: trials, dedupe index, queue, incumbent, timers. Private.
#pragma once

#include <tessel/storage.hpp>
#include <tessel/study.hpp>

#include <chrono>
#include <deque>
#include <unordered_map>
#include <unordered_set>

namespace tessel {

struct study::state final : search_context {
  class scheduler;  // scheduler.hpp: which proposed configs start next
  class fifo_scheduler;
  class utility_scheduler;

  state(tessel::space s, std::shared_ptr<backend> b, std::unique_ptr<strategy> st, study_options o,
        std::shared_ptr<study_store> d);
  ~state() override;

  // search_context
  [[nodiscard]] const tessel::space& space() const override { return space_; }
  [[nodiscard]] bool known(std::uint64_t key) const override {
    return by_key.count(key) != 0 || pool_keys.count(key) != 0;
  }
  [[nodiscard]] const trial* best() const override {
    return best_index ? &trials[*best_index] : nullptr;
  }
  [[nodiscard]] std::size_t finished() const override { return progress_.evaluations; }
  /// budget_hint, else run()'s evaluation budget (run_budget).
  [[nodiscard]] std::optional<std::size_t> evaluation_budget() const override {
    if (options_.budget_hint > 0) return options_.budget_hint;
    return run_budget;
  }

  /// Seconds since the study was made (since the store's study began, for
  /// a shared study, so that every worker's times share one origin).
  [[nodiscard]] double now() const;
  /// A new trial in state proposed; stored. Returns its index.
  std::size_t add_trial(const config& c, provenance source);
  /// Marks trial `index` running and stored; returns the suggestion.
  suggestion start(std::size_t index);
  /// Records a measurement, updates best/progress, tells strategy, storage
  /// and observers. `replaying`: a stored trial read back on resume (not saved again).
  const trial& finish(std::size_t index, const measurement& m, bool replaying = false);
  /// What ask(n) gives out, in order: interrupted trials, the baseline,
  /// then the scheduler's choice (each with a prediction); new ones are
  /// added in state proposed.
  std::vector<std::size_t> choose(std::size_t n);
  /// The scheduler's exponent on predicted cost now (scheduler::cost_alpha).
  [[nodiscard]] double cost_alpha() const override;
  /// lambda / c_ref while the cost rule is gittins and cost_alpha() > 0
  /// (c_ref: the mean cost of the evaluations so far); else 0.
  [[nodiscard]] double gittins_rate() const override;
  /// The cost model's prediction (the backend's estimate without one), told
  /// the surrogate's score of `c` once the surrogate is ready.
  [[nodiscard]] double predicted_cost(const config& c) const override;
  /// The same, with the surrogate's score of `c` already at hand.
  [[nodiscard]] double predicted_cost(const config& c,
                                      const std::optional<candidate_score>& scored) const;
  /// The surrogate's score of `c` when the cost model reads one, else nullopt.
  [[nodiscard]] std::optional<candidate_score> surrogate_score(const config& c) const;
  /// predicted_cost and what a failure costs (the cost model's
  /// predict_failure; the backend's estimate without one), one surrogate score.
  [[nodiscard]] cost_forecast predicted_costs(const config& c) const override;
  [[nodiscard]] double predicted_failure_cost(const config& c,
                                              const std::optional<candidate_score>& scored) const;
  /// Agent tokens a proposal by `source` is expected to cost: its own
  /// tokens when it has some, else the mean per proposal of its source.
  [[nodiscard]] double expected_tokens(const provenance& source) const;
  /// predicted_cost plus the tokens' worth (options_.token_price_s).
  [[nodiscard]] double token_cost_s(double tokens) const {
    return options_.token_price_s * tokens / 1000.0;
  }
  /// Counts agent tokens: `proposals` new proposals by `source` that cost `tokens`.
  void count_tokens(const std::string& source, double tokens, std::size_t proposals);
  /// The scheduler's view of `c` before any model is fitted (prediction::basis::prior).
  [[nodiscard]] prediction prior(const config& c, const provenance& source) const;
  /// Re-measures agent-reported trial `index` on the backend (study::verify).
  void reverify(std::size_t index);
  /// Tells the strategy, the surrogate and the cost model of a finished trial.
  void observe_models(const trial& t);
  /// Makes trial `index` the best when its ok result beats it.
  bool consider_best(std::size_t index);
  /// Reloads a study file's trials (resume). One process's study keeps them
  /// from the models (deferred) until it is first used: run() replays them
  /// (begin_replay), anything else tells them in id order (settle).
  void resume(std::vector<trial> stored);

  // --- a resumed study's replay (replay.cpp, docs/driver.md) -------------------
  /// Tells the models every stored trial, in id order, when they are still
  /// deferred: the search rebuilt from the stored results (ask/tell, enqueue).
  void settle();
  /// run() on a resumed study: clears the trials read back, so that run()
  /// proposes again from the start and takes each stored trial's result when
  /// its config comes up in its place (replayed), as the run that stored it did.
  void begin_replay();
  /// add_trial's replay: the next stored trial when `c` is its config (its
  /// index; its result, when it has one, in replay_results); nullopt when
  /// the replay is over or `c` departs from it (diverge).
  std::optional<std::size_t> replay_one(const config& c);
  /// Ends the replay where the proposals depart from the stored trials (or
  /// run() stops first): appends the stored trials not replayed yet as
  /// resume() does, told in id order, interrupted ones queued.
  void diverge();
  /// Appends one stored trial (the next id): replays it to the strategy when
  /// finished, else queues it as interrupted when `requeue` (a shared study
  /// leaves it to the store's queue).
  void append_stored(trial t, bool requeue);
  /// Stores `t`. False only for a shared study's result that was not kept
  /// (another worker finished the trial first).
  bool save(const trial& t);
  /// Refuses an operation one process drives on a shared study.
  void one_process(std::string_view what) const;

  // --- a shared study (shared_run.cpp, docs/distributed.md) --------------------
  /// Reads what other processes proposed and finished since the last look.
  void sync();
  /// As the proposer (taking the lock when it is free, and keeping it):
  /// syncs, then stores new proposals (enough for the idle workers, within
  /// the budget `until` leaves). Returns how many; nullopt when another
  /// process holds the lock or the connection was lost (try again).
  std::optional<std::size_t> propose_shared(const stop_condition& until, std::size_t free_jobs);
  /// Takes trials `first`.. back out of the mirror into `unsent`.
  void retract(std::size_t first);
  summary run_shared(const stop_condition& until);
  /// How run() ended, and the summary observers are told of.
  enum class run_end : unsigned char { condition, negligible, empty };
  summary end_run(run_end how, const stop_condition& until, const progress& p);
  [[nodiscard]] summary make_summary() const;

  tessel::space space_;
  std::shared_ptr<backend> backend_;
  std::unique_ptr<strategy> strategy_;
  study_options options_;
  std::shared_ptr<study_store> db_;
  shared_store* shared_ = nullptr;  ///< db_->shared(): many processes work this study
  std::uint64_t worker_id = 0;  ///< shared_->join()'s answer in the latest run (study::worker_id)
  /// Proposals a lost connection may not have stored: proposed again at the
  /// next turn as proposer, unless known by then.
  std::vector<trial> unsent;
  /// Finished trials the models have not been told of yet: in a shared study
  /// only the process that proposes needs them, so each process tells its
  /// models when it next proposes (most workers never do: see run_shared).
  std::vector<std::size_t> unobserved;
  double clock_offset = 0;  ///< added to now(): seconds from the store's start to `created`
  std::vector<std::shared_ptr<observer>> observers;
  std::unique_ptr<scheduler> scheduler_;

  std::vector<trial> trials;  ///< by id - 1
  std::unordered_map<std::uint64_t, std::size_t> by_key;
  std::deque<std::size_t> queue;  ///< proposed, not yet asked
  /// Trials a killed run had proposed or started (resume()): asked for
  /// before anything else, whatever the scheduler would rank first, so a
  /// resumed study completes them within its budget.
  std::deque<std::size_t> interrupted;
  /// The stored trials of a resumed study not yet replayed (begin_replay),
  /// from replay_next on, while deferred or replaying.
  std::vector<trial> replay_;
  std::size_t replay_next = 0;
  bool deferred = false;   ///< the models have not been told the stored trials
  bool in_replay = false;  ///< run() is re-proposing the stored trials
  /// Replayed trials not told yet: their stored results, by index.
  std::unordered_map<std::size_t, measurement> replay_results;
  std::vector<std::pair<config, std::string>>
      pool;  ///< scored, not chosen strategy proposals (and who made them)
  std::unordered_set<std::uint64_t> pool_keys;
  /// The fraction of run()'s budget spent (stop_condition::spent), while
  /// run() is going; nullopt outside run() or for an unbounded condition.
  std::optional<double> run_spent;
  /// The evaluations run()'s stop condition allows in all (finished ones
  /// included), while run() is going; nullopt outside run() or when the
  /// condition bounds no count.
  std::optional<std::size_t> run_budget;
  bool negligible = false;  ///< the early-stop test fired
  /// The gittins rule's lambda now: study_options::gittins_lambda, halved
  /// by the scheduler with gittins_decay.
  std::optional<double> gittins_lambda;
  std::optional<std::size_t> best_index;
  progress progress_;
  std::map<status, std::size_t> by_status;
  std::size_t evaluations_to_best = 0;
  /// Agent tokens per proposal source: total tokens, proposals.
  std::map<std::string, std::pair<double, std::size_t>> tokens_by_source;
  std::size_t reported = 0, verified = 0;
  bool baseline_considered = false;
  bool prepared = false;

  std::chrono::steady_clock::time_point created = std::chrono::steady_clock::now();
  /// When the current run() began; nullopt outside run(). Observers' progress
  /// counts wall seconds from it (from `created` outside run()).
  std::optional<std::chrono::steady_clock::time_point> run_started;
  double propose_s = 0, evaluate_s = 0, run_wall_s = 0;
  std::size_t jobs_used = 0;
  termination last_reason = termination::not_run;
  std::string last_message;
};

}  // namespace tessel
