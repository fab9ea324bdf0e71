// Private: the AUC-credit multi-armed bandit of OpenTuner's meta-technique
// (Ansel et al., "OpenTuner: an extensible framework for program
// autotuning", PACT 2014; AUC credit after Fialho, Ros, Schoenauer & Sebag,
// "Comparison-based adaptive strategy selection with bandits in
// differential evolution", PPSN 2010).
// Not installed.
#pragma once

#include <tessel/random.hpp>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

namespace tessel::detail {

/// Remembers the last `window` results (arm, improved?) of all arms. An
/// arm's credit is the area under the curve of its own results in the
/// window, oldest first, where its i-th use (1-based) adds i when it
/// improved: AUC = sum_i i*v_i / (u(u+1)/2) in [0, 1], so recent successes
/// weigh more. Its score adds exploration * sqrt(2 ln(N) / u) (UCB1, Auer,
/// Cesa-Bianchi & Fischer 2002), N the results in the window; OpenTuner's
/// code takes log2 where this takes ln, a constant factor that the
/// exploration weight absorbs. Unused arms score +inf.
///
/// record() is O(1): the per-arm sums are kept incrementally (a result
/// leaving the window lowers every later use's weight by one, so the arm's
/// sum drops by its count of successes in the window). select() is
/// O(arms). Memory is O(arms + window), whatever the length of the history.
class auc_bandit {
 public:
  explicit auc_bandit(std::size_t arms = 0, std::size_t window = 500, double exploration = 0.05);

  /// One result of `arm`: whether its proposal became a new global best.
  void record(std::size_t arm, bool improved);

  /// The arm with the best score, counting `pending[a]` extra uses of each
  /// arm a (proposals awaiting results) in its exploration term; arms with
  /// excluded[a] set are skipped (both vectors may be empty). Ties are
  /// broken uniformly with `random`. nullopt when every arm is excluded.
  [[nodiscard]] std::optional<std::size_t> select(rng& random,
                                                  const std::vector<std::size_t>& pending,
                                                  const std::vector<bool>& excluded) const;

  /// AUC credit in [0, 1]; 0 for an arm with no result in the window.
  [[nodiscard]] double credit(std::size_t arm) const;
  /// credit + exploration term, with `pending` extra uses and `pending_total` extra results.
  [[nodiscard]] double score(std::size_t arm, std::size_t pending = 0,
                             std::size_t pending_total = 0) const;
  /// Results of `arm` in the window.
  [[nodiscard]] std::size_t uses(std::size_t arm) const { return arms_[arm].uses; }
  /// Results in the window (at most window()).
  [[nodiscard]] std::size_t history() const noexcept { return size_; }
  [[nodiscard]] std::size_t window() const noexcept { return window_; }
  [[nodiscard]] std::size_t arms() const noexcept { return arms_.size(); }
  /// Storage held for the window: grows to window() and stays there.
  [[nodiscard]] std::size_t capacity() const noexcept { return ring_.size(); }

 private:
  struct result {
    std::uint32_t arm = 0;
    bool improved = false;
  };
  struct arm_sums {
    std::uint64_t uses = 0;       ///< u: results in the window
    std::uint64_t auc = 0;        ///< sum_i i * v_i over them
    std::uint64_t successes = 0;  ///< sum_i v_i over them
  };
  std::size_t window_;
  double exploration_;
  std::vector<result> ring_;  ///< the window, oldest at head_ once full
  std::size_t head_ = 0;
  std::size_t size_ = 0;
  std::vector<arm_sums> arms_;
};

}  // namespace tessel::detail
