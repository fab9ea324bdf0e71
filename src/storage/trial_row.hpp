// A trial as a row of the `trials` table, and back. Private to src/storage/.
#pragma once

#include "storage/sqlite.hpp"

#include <tessel/space.hpp>
#include <tessel/trial.hpp>

namespace tessel::detail::storage {

/// The columns of `trials`, in the order trial_binder binds and read_trial
/// reads them.
inline constexpr const char* trial_columns =
    "id, key, config_json, state, source, tokens, note, "
    "predicted_mean, predicted_sigma, predicted_p_feasible, predicted_gain, predicted_cost_s, "
    "predicted_utility, status, objective, samples_json, compile_s, gate_s, run_s, "
    "metrics_json, message, proposed_at, finished_at";
inline constexpr int trial_column_count = 23;

/// A trial's column values, computed outside any lock (JSON encoding).
/// Throws tessel::error for id 0 or above 2^63-1, or a config whose size is
/// not the space's.
struct trial_row {
  trial_row(const trial& t, const space& s);
  /// Binds the values to ?1..?23 in trial_columns order.
  void bind(sqlite::statement& q) const;

  const trial* t;
  std::string config_json, samples_json, metrics_json;
};

/// The trial in the current row of a `SELECT trial_columns` statement.
/// Throws tessel::error naming the trial id when a stored value does not
/// read back (a config the space no longer has, an unknown state, ...).
[[nodiscard]] trial read_trial(const sqlite::statement& q, const space& s);

}  // namespace tessel::detail::storage
