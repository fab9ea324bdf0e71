// A trial as a row of the `trials` table, and back, for both stores: the
// binders and readers are templates instantiated for SQLite's statement and
// PostgreSQL's parameters and rows (trial_row.cpp); and the study record
// read from a row of `study`. Private to src/storage/.
#pragma once

#include <tessel/space.hpp>
#include <tessel/storage.hpp>
#include <tessel/trial.hpp>

#include <string>

namespace tessel::detail::storage {

/// The columns of `trials`, in the order trial_binder binds and read_trial
/// reads them.
inline constexpr const char* trial_columns =
    "id, key, config_json, state, source, tokens, note, "
    "predicted_mean, predicted_sigma, predicted_p_feasible, predicted_gain, predicted_cost_s, "
    "predicted_utility, status, objective, samples_json, compile_s, gate_s, run_s, "
    "metrics_json, message, proposed_at, finished_at";
inline constexpr int trial_column_count = 23;

/// `INSERT INTO trials (trial_columns) VALUES (...) ON CONFLICT (id) DO
/// UPDATE` every column but id: SQLite's and PostgreSQL's shared dialect.
/// Placeholders are `?1`.. for SQLite (`dollar` false), `$1`.. for PostgreSQL.
[[nodiscard]] std::string upsert_sql(bool dollar);
/// `UPDATE trials SET key = $2, ...`: every column but id, PostgreSQL
/// placeholders in trial_columns order (id is $1); the caller adds WHERE.
[[nodiscard]] std::string update_sql();
/// `INSERT INTO trials (trial_columns) VALUES (...), (...)` for `rows` rows,
/// PostgreSQL placeholders: row r binds $(23r + 1) .. $(23r + 23).
[[nodiscard]] std::string insert_sql(std::size_t rows);

/// A trial's column values, computed outside any lock (JSON encoding).
/// Throws tessel::error for id 0 or above 2^63-1, or a config whose size is
/// not the space's.
struct trial_row {
  trial_row(const trial& t, const space& s);
  /// Binds the values to parameters first + 1 .. first + 23, in trial_columns
  /// order; NULL where a value is absent. `Params`: sqlite::statement or
  /// pg::params.
  template <class Params>
  void bind(Params& q, int first = 0) const;

  const trial* t;
  std::string config_json, samples_json, metrics_json;
};

/// The trial in the current row of a `SELECT trial_columns` statement.
/// Throws tessel::error naming the trial id when a stored value does not
/// read back (a config the space no longer has, an unknown state, ...).
/// `Row`: sqlite::statement or pg::row.
template <class Row>
[[nodiscard]] trial read_trial(const Row& q, const space& s);

/// The study record in the current row of a `SELECT space_name,
/// space_source, space_hash, target, backend, strategy, options_json, seed`
/// (columns 0 to 7; the seed as its int64 bit pattern): all but the schema
/// version and creation time, which the caller reads from `meta`.
/// `Row`: sqlite::statement or pg::row.
template <class Row>
[[nodiscard]] study_record read_study_columns(const Row& q);

}  // namespace tessel::detail::storage
