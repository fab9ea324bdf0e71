// tessel/strategy.hpp: a search strategy proposes batches of configs and
// observes results. It never sees a backend: it works through the space's
// operations (sample, neighbours, encode), so constraints hold by
// construction. Strategies are picked by name through tessel/strategies.hpp.
#pragma once

#include <tessel/config.hpp>
#include <tessel/random.hpp>
#include <tessel/space.hpp>
#include <tessel/trial.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace tessel {

/// What a strategy may ask of the study while it proposes.
/// Predicted seconds of evaluating a config, when it succeeds and when it fails.
struct cost_forecast {
  double ok_s = 1.0;
  double failed_s = 1.0;
};

class search_context {
 public:
  virtual ~search_context() = default;
  [[nodiscard]] virtual const tessel::space& space() const = 0;
  /// Whether the config with this key is already proposed, running or
  /// finished (by any strategy or agent): proposing it again is wasted.
  [[nodiscard]] virtual bool known(std::uint64_t key) const = 0;
  /// The best finished ok trial so far, if any.
  [[nodiscard]] virtual const trial* best() const = 0;
  /// Number of finished trials.
  [[nodiscard]] virtual std::size_t finished() const = 0;
  /// The exponent the study's cost-aware scheduler puts on cost now (its
  /// utility is expected gain / cost^alpha, docs/scheduler.md); 0 when the
  /// study does not weigh cost. A strategy that maximises an acquisition can
  /// subtract alpha * ln predicted_cost(c) from its log acquisition, so its
  /// proposals already favour gain per second (as `bo` does).
  [[nodiscard]] virtual double cost_alpha() const { return 0.0; }
  /// With the study's cost rule `gittins` (study_options::cost_rule) while
  /// it weighs cost: lambda / c_ref, the log objective one second of
  /// evaluation must be expected to gain; a strategy ranks by the lowest
  /// gittins_index(mu, sd, gittins_rate() * price of a success), mu and sd
  /// the posterior of ln objective (tessel/surrogate.hpp), instead of
  /// subtracting alpha ln cost. 0: the rule is not in force.
  [[nodiscard]] virtual double gittins_rate() const { return 0.0; }
  /// The study's prediction of what evaluating `c` costs, in seconds (its
  /// cost model, seeded by the backend's estimate); > 0. Meaningful when
  /// cost_alpha() > 0.
  [[nodiscard]] virtual double predicted_cost(const config& c) const {
    (void)c;
    return 1.0;
  }
  /// predicted_cost(c), and what a failed evaluation of `c` is predicted
  /// to cost (the cost model's cost_model::predict_failure), in one call.
  /// With P(feasible) p, a success costs price_per_success(p, ok_s,
  /// failed_s) (tessel/surrogate.hpp). Default: a failure costs what a
  /// success does.
  [[nodiscard]] virtual cost_forecast predicted_costs(const config& c) const {
    const double ok = predicted_cost(c);
    return {ok, ok};
  }
  /// The evaluations the study expects to make in all, finished ones
  /// included: study_options::budget_hint when set, else the evaluation
  /// budget of run()'s stop condition (`tessel tune --budget N`); nullopt
  /// when nothing bounds the count (a time or cost budget, a target, ask/tell
  /// without a hint). A strategy may size its warm-up and its exploration
  /// to it (bo_options::initial_share, explore_runway, phase_share); unbounded, it behaves as it
  /// always did.
  [[nodiscard]] virtual std::optional<std::size_t> evaluation_budget() const {
    return std::nullopt;
  }
};

/// A search_context that answers every question as `base` does; a
/// meta-strategy derives from it and overrides what it changes for its arms
/// (`auto` adds its batch to known()). Every virtual of search_context is
/// forwarded here, so a question added there reaches arms unchanged once it
/// is added here too, instead of falling back to its default in each wrapper.
class forwarding_context : public search_context {
 public:
  explicit forwarding_context(const search_context& base) : base_(base) {}
  [[nodiscard]] const tessel::space& space() const override { return base_.space(); }
  [[nodiscard]] bool known(std::uint64_t key) const override { return base_.known(key); }
  [[nodiscard]] const trial* best() const override { return base_.best(); }
  [[nodiscard]] std::size_t finished() const override { return base_.finished(); }
  [[nodiscard]] double cost_alpha() const override { return base_.cost_alpha(); }
  [[nodiscard]] double gittins_rate() const override { return base_.gittins_rate(); }
  [[nodiscard]] double predicted_cost(const config& c) const override {
    return base_.predicted_cost(c);
  }
  [[nodiscard]] cost_forecast predicted_costs(const config& c) const override {
    return base_.predicted_costs(c);
  }
  [[nodiscard]] std::optional<std::size_t> evaluation_budget() const override {
    return base_.evaluation_budget();
  }

 private:
  const search_context& base_;
};

class strategy {
 public:
  virtual ~strategy() = default;

  /// The name proposals are credited to ("random", "ga", ...).
  [[nodiscard]] virtual std::string name() const = 0;

  /// Called once before the first proposal. `seed` is this strategy's own
  /// stream: the same seed and the same observations give the same proposals.
  virtual void start(const space& s, std::uint64_t seed) = 0;

  /// Up to `n` valid configs, distinct, none of them context.known(). Fewer
  /// (or none) when the strategy has nothing more to propose.
  [[nodiscard]] virtual std::vector<config> propose(std::size_t n,
                                                    const search_context& context) = 0;

  /// Every finished trial of the study, whoever proposed it, in the order the
  /// study records them (proposal order within a batch).
  virtual void observe(const trial& t) = 0;

  /// Who to credit the proposal with this key to, in the trial's provenance:
  /// name() by default; a meta-strategy names the part that proposed it
  /// ("auto/ga"). Called right after propose(), before the trial is observed.
  [[nodiscard]] virtual std::string source_of(std::uint64_t key) const {
    (void)key;
    return name();
  }

  /// Whether the strategy weighs the rules learned from failed trials
  /// itself (tessel/constraints.hpp), so its proposals where a rule rejects
  /// are deliberate (a test of the rule) and a meta-strategy that vetoes
  /// such proposals must let them through. Default false.
  [[nodiscard]] virtual bool weighs_learned_constraints() const { return false; }
};

}  // namespace tessel
