// The study's scheduler (DESIGN.md §5, docs/scheduler.md): which proposed
// configs start next, and what is predicted of each. study::ask calls it once
// interrupted trials and the baseline are placed; study::predict and the
// strategies' search_context::cost_alpha ask it too. Private to the study.
#pragma once

#include "study/state.hpp"

#include <cstddef>
#include <memory>
#include <vector>

namespace tessel {

class study::state::scheduler {
 public:
  scheduler() = default;
  scheduler(const scheduler&) = delete;
  scheduler& operator=(const scheduler&) = delete;
  virtual ~scheduler() = default;

  /// The one study_options ask for: utility with a surrogate, fifo without.
  [[nodiscard]] static std::unique_ptr<scheduler> make(const study_options& options);

  /// Up to n trials to start, as indices into s.trials, in the order to start
  /// them: taken from s.queue or added from the strategy's proposals, each
  /// with its prediction set. They stay proposed (ask starts them). Empty
  /// with s.negligible set: the early-stop test fired.
  virtual std::vector<std::size_t> select(state& s, std::size_t n) = 0;
  /// What select would attach to `c` proposed by `source` now.
  [[nodiscard]] virtual prediction predict(const state& s, const config& c,
                                           const provenance& source) const = 0;
  /// The exponent on predicted cost it ranks by now; 0: cost is not weighed.
  [[nodiscard]] virtual double cost_alpha(const state& s) const = 0;

 protected:
  /// The queue, then the strategy's proposals, in the order they were made,
  /// each priced by the prior (state::prior).
  static std::vector<std::size_t> in_proposal_order(state& s, std::size_t n);
};

/// The queue, then the strategy's proposals, in the order they were made;
/// cost is not weighed.
class study::state::fifo_scheduler final : public scheduler {
 public:
  std::vector<std::size_t> select(state& s, std::size_t n) override;
  [[nodiscard]] prediction predict(const state& s, const config& c,
                                   const provenance& source) const override;
  [[nodiscard]] double cost_alpha(const state&) const override { return 0.0; }
};

/// Once options.surrogate is ready, a pool of pool_factor * n candidates
/// ranked by expected gain per predicted cost of a success, cost^alpha with
/// alpha cooled as the budget is spent; before that, in proposal order with
/// the prior weighing cost by the same alpha. Needs options.surrogate.
class study::state::utility_scheduler final : public scheduler {
 public:
  std::vector<std::size_t> select(state& s, std::size_t n) override;
  [[nodiscard]] prediction predict(const state& s, const config& c,
                                   const provenance& source) const override;
  [[nodiscard]] double cost_alpha(const state& s) const override;

 private:
  /// The model's view of `c` (the surrogate is ready).
  [[nodiscard]] prediction score(const state& s, const config& c, const provenance& source) const;
};

}  // namespace tessel
