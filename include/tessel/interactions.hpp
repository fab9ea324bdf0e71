// tessel/interactions.hpp: which changes of a config help on their own and
// which only together. For a target config (a study's best) against a base
// (the baseline), the effect of each changed parameter alone (base + one
// change: standalone), of removing each from the target (target - one
// change), and of each pair on the base (cascading), measured through a
// caller-given evaluation while a budget lasts and predicted by a surrogate
// beyond it, every figure marked measured or predicted (docs/report.md).
#pragma once

#include <tessel/space.hpp>
#include <tessel/surrogate.hpp>
#include <tessel/trial.hpp>

#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace tessel {

/// One config of the designed set and what is known of it.
struct interaction_point {
  std::vector<std::size_t> changes;  ///< indices into interaction_report::changes
  config c;
  std::optional<double> objective;  ///< absent: failed, invalid or not evaluated
  bool measured = false;            ///< true: by `measure`; false: the surrogate's mean
  std::string note;                 ///< why there is no objective
};

struct interaction_report {
  std::vector<std::string> changes;     ///< "psum_bufs=8": each parameter the target changes
  std::vector<std::size_t> parameters;  ///< each change's parameter, its index in the space
  interaction_point base, target;
  std::vector<interaction_point> alone;    ///< base + change i, per change
  std::vector<interaction_point> without;  ///< target - change i, per change
  std::vector<interaction_point> pairs;    ///< base + changes i and j, i < j
  std::size_t measured = 0;                ///< figures measured: by `measure` or found in `known`
  std::size_t spent = 0;                   ///< calls of `measure` (at most the budget)
  std::size_t predicted = 0;               ///< figures from the surrogate
  /// (base - objective) / base: the fraction of the base's objective a point
  /// saves (lower objectives are better); nullopt without both objectives.
  [[nodiscard]] std::optional<double> gain(const interaction_point& p) const;
  /// "psum_bufs=8 gains 0% alone, 11% with block_order=[n, k, m]" for each
  /// change that gains under `alone_below` alone but at least `with_above`
  /// on top of another change (measured or predicted, as marked).
  [[nodiscard]] std::vector<std::string> only_together(double alone_below = 0.01,
                                                       double with_above = 0.02) const;
  /// Tables of the three designs, the only-together sentences and the budget.
  [[nodiscard]] std::string text() const;
};

/// Measures one config: its objective, or nullopt with `why` set (a failed
/// status, a gate rejection). Called at most `budget` times.
using interaction_measure = std::function<std::optional<double>(const config&, std::string& why)>;

/// Builds the designed set of `target` against `base` (both valid configs of
/// `s`; the changes are the parameters active in both with different values,
/// a conditional one being active in each point exactly when its condition
/// holds there): base and target first, then each change alone, the target without
/// each, and every pair; configs that break a constraint are noted and never
/// evaluated. A point whose config has a finished full-fidelity trial in
/// `known` (a study's trials) takes that trial's result, marked measured, at
/// no cost (the first ok one, else the first failure). Of the rest, the
/// first `budget` are measured (none when `measure` is empty) and the others
/// predicted by `model` when it is given and ready, else left "not evaluated
/// (over budget)". Deterministic for a deterministic `measure`.
[[nodiscard]] interaction_report analyse_interactions(const space& s, const config& base,
                                                      const config& target,
                                                      const interaction_measure& measure,
                                                      const surrogate* model, std::size_t budget,
                                                      const std::vector<trial>& known = {});

}  // namespace tessel
