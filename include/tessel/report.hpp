// tessel/report.hpp: a study, seen. One self-contained HTML page of inline
// SVG plots (no script, no network) from a study's record, space and trials,
// or one plot alone as an SVG file (docs/report.md). The core draws what the
// trials hold; what needs a module (the surrogate's parameter importance,
// the rules learned from failures) is computed by the caller through the
// core interfaces below and passed in, so the CLI, a C++ user and the
// Python package wire the same function.
#pragma once

#include <tessel/interactions.hpp>
#include <tessel/space.hpp>
#include <tessel/storage.hpp>
#include <tessel/surrogate.hpp>
#include <tessel/trial.hpp>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tessel {

/// How much of the surrogate's predicted variation one parameter explains.
struct parameter_importance {
  std::string parameter;
  /// The variance of the parameter's main effect over the total variance of
  /// the prediction, on the model's log(objective) scale: a first-order
  /// (functional ANOVA) index in [0, 1]. Interactions make the shares sum
  /// to less than 1.
  double share = 0;
};

/// What parameter_importances found, with the method named for readers.
struct importance_result {
  std::string method;
  std::vector<parameter_importance> parameters;  ///< largest share first
};

/// First-order importance of each parameter under `model`, which must have
/// observed the study's finished trials (nullopt when it is not ready or
/// fewer than two ok trials exist). The main effect of parameter p at value
/// v is the model's mean prediction of log(objective) over a base set of
/// the study's ok configs (at most `base_configs`, the first in trial
/// order) with p set to v; its variance over p's values (at most
/// `values_per_parameter`, evenly spread over the domain), over the
/// variance of the prediction over the base set, is p's share (Hutter,
/// Hoos & Leyton-Brown 2014, "functional ANOVA", estimated on the study's
/// own configs rather than the whole domain). Deterministic.
[[nodiscard]] std::optional<importance_result> parameter_importances(
    const space& s, const std::vector<trial>& trials, const surrogate& model,
    std::size_t base_configs = 48, std::size_t values_per_parameter = 12);

/// What a report shows.
struct report_input {
  const study_record* record = nullptr;        ///< required
  const tessel::space* study_space = nullptr;  ///< required: the study's space
  const std::vector<trial>* trials = nullptr;  ///< required: every stored trial
  std::string source;  ///< where the study came from (its file), shown in the header
  /// From the caller's surrogate (parameter_importances); absent: the
  /// section says why.
  std::optional<importance_result> importance;
  /// Why importance is absent ("the surrogate is not ready: 3 ok trials").
  std::string importance_note;
  /// The rules learned from the failures as `require` lines
  /// (tessel/constraints.hpp, learned_constraint::line()).
  std::vector<std::string> learned_constraints;
  /// The best config against the baseline (analyse_interactions), drawn as
  /// the `interactions` plot; absent: interactions_note says why.
  std::optional<interaction_report> interactions;
  std::string interactions_note;
  std::size_t top = 12;  ///< trials in the parallel-coordinates view and the table
};

/// The plots a report holds, by name: convergence, convergence_cost,
/// objective_by_parameter, importance, interactions, parallel, status,
/// engines, fidelity.
/// "engines" (the best simulator trial's busy fractions) and "fidelity" (low
/// against high objectives) are drawn only when the trials carry them.
[[nodiscard]] const std::vector<std::string>& report_plot_names();

/// The whole page: a header (space, target, backend, strategy, counts),
/// each plot with a caption saying what it shows, the learned constraints
/// and the best trials. Throws tessel::error when a required field is null.
[[nodiscard]] std::string report_html(const report_input& in);

/// One plot as a standalone SVG document. Throws tessel::error naming the
/// known plots for an unknown name, or saying why the study has nothing to
/// draw for it (no ok trial, no simulator metrics, no fidelity pairs).
[[nodiscard]] std::string report_svg(const report_input& in, std::string_view plot);

}  // namespace tessel
