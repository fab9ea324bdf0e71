// A trial as a row of the `trials` table, and back (trial_row.hpp).
#include "storage/trial_row.hpp"

#include "storage/codec.hpp"

#include <tessel/codec.hpp>
#include <tessel/error.hpp>

#include <cstdint>
#include <limits>
#include <string>
#include <string_view>

namespace tessel::detail::storage {
namespace {

/// The metric that marks an agent-reported result in metrics_json.
constexpr std::string_view reported_metric = "tessel.agent_reported";

// Unsigned 64-bit values are stored as the int64 of the same bit pattern
// (SQLite integers are signed); C++20 defines both conversions as modular.
std::int64_t to_column(std::uint64_t v) { return static_cast<std::int64_t>(v); }
std::uint64_t from_column(std::int64_t v) { return static_cast<std::uint64_t>(v); }

bool has_prediction(const sqlite::statement& q) {
  for (int col = 7; col <= 12; ++col)
    if (!q.is_null(col)) return true;
  return false;
}

prediction read_prediction(const sqlite::statement& q) {
  prediction p;
  p.mean = q.real(7);
  p.sigma = q.real(8);
  p.p_feasible = q.real(9);
  p.expected_gain = q.real(10);
  p.cost_s = q.real(11);
  p.utility = q.real(12);
  return p;
}

measurement read_result(const sqlite::statement& q) {
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

void trial_row::bind(sqlite::statement& q) const {
  q.bind(1, static_cast<std::int64_t>(t->id));
  q.bind(2, to_column(t->key));
  q.bind(3, std::string_view(config_json));
  q.bind(4, to_string(t->state));
  q.bind(5, std::string_view(t->provenance.source));
  q.bind(6, t->provenance.tokens);
  q.bind(7, std::string_view(t->provenance.note));
  if (const auto& p = t->prediction) {
    q.bind(8, p->mean);
    q.bind(9, p->sigma);
    q.bind(10, p->p_feasible);
    q.bind(11, p->expected_gain);
    q.bind(12, p->cost_s);
    q.bind(13, p->utility);
  }  // else: unbound parameters are NULL
  q.bind(22, t->proposed_at);
  if (t->state != trial_state::finished) return;  // the result stays NULL
  const auto& m = t->result;
  q.bind(14, to_string(m.status));
  q.bind(15, m.objective);
  q.bind(16, std::string_view(samples_json));
  q.bind(17, m.cost.compile_s);
  q.bind(18, m.cost.gate_s);
  q.bind(19, m.cost.run_s);
  q.bind(20, std::string_view(metrics_json));
  q.bind(21, std::string_view(m.message));
  q.bind(23, t->finished_at);
}

trial read_trial(const sqlite::statement& q, const space& s) {
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

}  // namespace tessel::detail::storage
