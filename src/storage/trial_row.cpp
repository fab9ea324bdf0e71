// A trial as a row of the `trials` table, and back (trial_row.hpp).
#include "storage/trial_row.hpp"

#include "storage/codec.hpp"
#include "storage/postgres.hpp"
#include "storage/sqlite.hpp"

#include <tessel/codec.hpp>
#include <tessel/error.hpp>

#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

namespace tessel::detail::storage {
namespace {

/// The metric that marks an agent-reported result in metrics_json.
constexpr std::string_view reported_metric = "tessel.agent_reported";

// Unsigned 64-bit values are stored as the int64 of the same bit pattern
// (SQLite integers are signed); C++20 defines both conversions as modular.
std::int64_t to_column(std::uint64_t v) { return static_cast<std::int64_t>(v); }
std::uint64_t from_column(std::int64_t v) { return static_cast<std::uint64_t>(v); }

template <class Row>
bool has_prediction(const Row& q) {
  for (int col = 7; col <= 12; ++col)
    if (!q.is_null(col)) return true;
  return false;
}

template <class Row>
prediction read_prediction(const Row& q) {
  prediction p;
  p.mean = q.real(7);
  p.sigma = q.real(8);
  p.p_feasible = q.real(9);
  p.expected_gain = q.real(10);
  p.cost_s = q.real(11);
  p.utility = q.real(12);
  return p;
}

template <class Row>
measurement read_result(const Row& q) {
  measurement m;
  const auto name = q.text(13);
  const auto st = parse_status(name);
  if (!st) throw error("unknown status '" + name + "'");
  m.status = *st;
  m.objective = q.real(14);
  m.samples = samples_from_json(q.text(15));
  m.cost = {q.real(16), q.real(17), q.real(18)};
  m.metrics = metrics_from_json(q.text(19));
  m.message = q.text(20);
  return m;
}

}  // namespace

namespace {

/// trial_columns, one name each.
std::vector<std::string> column_names() {
  std::vector<std::string> out;
  const std::string_view columns = trial_columns;
  for (std::size_t start = 0; start < columns.size();) {
    auto end = columns.find(',', start);
    if (end == std::string_view::npos) end = columns.size();
    out.emplace_back(columns.substr(start, end - start));
    start = end + 2;
  }
  return out;
}

}  // namespace

std::string upsert_sql(bool dollar) {
  const std::string mark = dollar ? "$" : "?";
  std::string sql = std::string("INSERT INTO trials (") + trial_columns + ") VALUES (" + mark + "1";
  for (int i = 2; i <= trial_column_count; ++i) sql += ", " + mark + std::to_string(i);
  sql += ") ON CONFLICT (id) DO UPDATE SET ";
  const auto names = column_names();
  for (std::size_t i = 1; i < names.size(); ++i)  // every column but id takes the new value
    sql += (i > 1 ? ", " : "") + names[i] + " = excluded." + names[i];
  return sql;
}

std::string update_sql() {
  std::string sql = "UPDATE trials SET ";
  const auto names = column_names();
  for (std::size_t i = 1; i < names.size(); ++i)
    sql += (i > 1 ? ", " : "") + names[i] + " = $" + std::to_string(i + 1);
  return sql;
}

std::string insert_sql(std::size_t rows) {
  std::string sql = std::string("INSERT INTO trials (") + trial_columns + ") VALUES ";
  for (std::size_t r = 0; r < rows; ++r) {
    sql += r ? ", (" : "(";
    for (int i = 1; i <= trial_column_count; ++i)
      sql += (i > 1 ? ", $" : "$") + std::to_string(r * trial_column_count + i);
    sql += ")";
  }
  return sql;
}

trial_row::trial_row(const trial& tr, const space& s) : t(&tr) {
  if (tr.id == 0 || tr.id > std::uint64_t{std::numeric_limits<std::int64_t>::max()})
    throw error("cannot store trial id " + std::to_string(tr.id) +
                ": trial ids are 1-based and below 2^63");
  if (tr.config.size() != s.size())
    throw error("cannot store trial " + std::to_string(tr.id) + ": its config has " +
                std::to_string(tr.config.size()) + " values, space '" + s.name() + "' has " +
                std::to_string(s.size()) + " parameters");
  config_json = s.to_json(tr.config);
  if (tr.state == trial_state::finished) {
    samples_json = samples_to_json(tr.result.samples);
    // trial::reported rides in the metrics (no column of its own yet).
    auto metrics = tr.result.metrics;
    if (tr.reported) metrics[std::string(reported_metric)] = 1;
    metrics_json = metrics_to_json(metrics);
  }
}

template <class Params>
void trial_row::bind(Params& q, int first) const {
  q.bind(first + trial_column_count, nullptr);  // every parameter exists, NULL until bound
  q.bind(first + 1, static_cast<std::int64_t>(t->id));
  q.bind(first + 2, to_column(t->key));
  q.bind(first + 3, std::string_view(config_json));
  q.bind(first + 4, to_string(t->state));
  q.bind(first + 5, std::string_view(t->provenance.source));
  q.bind(first + 6, t->provenance.tokens);
  q.bind(first + 7, std::string_view(t->provenance.note));
  if (const auto& p = t->prediction) {
    q.bind(first + 8, p->mean);
    q.bind(first + 9, p->sigma);
    q.bind(first + 10, p->p_feasible);
    q.bind(first + 11, p->expected_gain);
    q.bind(first + 12, p->cost_s);
    q.bind(first + 13, p->utility);
  }  // else: unbound parameters are NULL
  q.bind(first + 22, t->proposed_at);
  if (t->state != trial_state::finished) return;  // the result stays NULL
  const auto& m = t->result;
  q.bind(first + 14, to_string(m.status));
  q.bind(first + 15, m.objective);
  q.bind(first + 16, std::string_view(samples_json));
  q.bind(first + 17, m.cost.compile_s);
  q.bind(first + 18, m.cost.gate_s);
  q.bind(first + 19, m.cost.run_s);
  q.bind(first + 20, std::string_view(metrics_json));
  q.bind(first + 21, std::string_view(m.message));
  q.bind(first + 23, t->finished_at);
}

template <class Row>
trial read_trial(const Row& q, const space& s) {
  trial t;
  t.id = static_cast<std::uint64_t>(q.integer(0));
  try {
    t.key = from_column(q.integer(1));
    t.config = s.from_json(q.text(2));
    const auto state = q.text(3);
    const auto parsed = parse_trial_state(state);
    if (!parsed) throw error("unknown state '" + state + "'");
    t.state = *parsed;
    t.provenance = {q.text(4), q.real(5), q.text(6)};
    if (has_prediction(q)) t.prediction = read_prediction(q);
    t.proposed_at = q.real(21);
    if (t.state == trial_state::finished) {
      t.result = read_result(q);
      t.reported = t.result.metrics.erase(std::string(reported_metric)) > 0;
      t.finished_at = q.real(22);
    }
  } catch (const error& e) {
    throw error("trial " + std::to_string(t.id) + " does not read back through space '" + s.name() +
                "': " + e.what());
  }
  return t;
}

template <class Row>
study_record read_study_columns(const Row& q) {
  study_record r;
  r.space_name = q.text(0);
  r.space_source = q.text(1);
  r.space_hash = q.text(2);
  r.target = q.text(3);
  r.backend = q.text(4);
  r.strategy = q.text(5);
  r.options_json = q.text(6);
  r.seed = from_column(q.integer(7));  // the bit pattern (docs/storage.md)
  return r;
}

template void trial_row::bind(sqlite::statement&, int) const;
template void trial_row::bind(pg::params&, int) const;
template trial read_trial(const sqlite::statement&, const space&);
template trial read_trial(const pg::row&, const space&);
template study_record read_study_columns(const sqlite::statement&);
template study_record read_study_columns(const pg::row&);

}  // namespace tessel::detail::storage
