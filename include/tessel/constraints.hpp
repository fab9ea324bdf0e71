// tessel/constraints.hpp: constraints learned from failed trials. When a
// kernel's compiler or runtime rejects configs nobody wrote a `require` for,
// the failures are data: an axis-aligned rule learner finds conditions that
// every observed failure of one kind meets and no success does ("MDIMC *
// NDIMC >= 512" for compile errors), states them as candidate `require`
// lines a user can paste into the .tsl, and tells strategies which configs
// are all but certain to fail (docs/strategies.md, "Learned constraints").
// Failure kinds are kept apart: a rule explains compile errors, or runtime
// errors, or gate failures, never a mix.
#pragma once

#include <tessel/config.hpp>
#include <tessel/measurement.hpp>
#include <tessel/space.hpp>
#include <tessel/trial.hpp>

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

namespace tessel {

/// One learned rule: configs that meet `condition` failed with `kind`.
struct learned_constraint {
  std::string require;    ///< the `require` line's expression: "MDIMC * NDIMC < 512"
  std::string condition;  ///< what it rejects, the negation: "MDIMC * NDIMC >= 512"
  tessel::status kind = tessel::status::compile_error;  ///< the failures it explains
  std::size_t failures_rejected = 0;   ///< failures of `kind` meeting the condition
  std::size_t failures = 0;            ///< failures of `kind` observed
  std::size_t successes_rejected = 0;  ///< ok trials meeting it (0 when learned)
  std::size_t successes = 0;           ///< ok trials observed
  /// `require MDIMC * NDIMC < 512   # rejects 97% of the 451 compile_error failures, none of
  /// the 147 successes`
  [[nodiscard]] std::string line() const;
};

struct constraint_learner_options {
  /// A rule must explain at least this many failures of its kind.
  std::size_t min_support = 3;
  /// Rules kept per failure kind (greedy cover, largest first).
  std::size_t max_rules = 6;
  /// Candidate features are the parameters, products of two integer
  /// parameters, and divisibility a % b and a % (b * c); the triples only
  /// while the space has at most this many integer parameters.
  std::size_t max_params_for_triples = 14;
  /// Throws options_error naming the field.
  void validate() const;
};

/// Learns rules from finished trials as they come (observe), relearning
/// when the trials have grown by a tenth (at least 4) since the last time.
/// Not thread-safe for observe; the const queries may run concurrently.
class constraint_learner {
 public:
  explicit constraint_learner(const space& s, constraint_learner_options options = {});
  ~constraint_learner();
  constraint_learner(constraint_learner&&) noexcept;
  constraint_learner& operator=(constraint_learner&&) noexcept;

  /// A finished trial: ok trials are successes, any other status a failure
  /// of that kind. Trials whose config is not of the space are ignored.
  void observe(const trial& t);
  /// Relearns now (observe does so on its schedule).
  void learn();
  /// The rules as of the last learning, every kind, largest first.
  [[nodiscard]] const std::vector<learned_constraint>& rules() const noexcept;
  /// The most failures any current rule that rejects `c` explained (0: no
  /// rule rejects it). A rule with support k and no success behind it puts
  /// P(feasible) at 1 / (k + 2) (Laplace).
  [[nodiscard]] std::size_t rejecting_support(const config& c) const;
  /// 1 / (rejecting_support + 2) when a rule rejects `c`, else 1.
  [[nodiscard]] double p_feasible(const config& c) const;
  [[nodiscard]] std::size_t observed() const noexcept;

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

/// Learns once from `trials` (finished ones; others are skipped).
[[nodiscard]] std::vector<learned_constraint> learn_constraints(
    const space& s, const std::vector<trial>& trials, constraint_learner_options options = {});

}  // namespace tessel
