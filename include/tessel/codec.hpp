// tessel/codec.hpp: the one JSON form of each value the outer layer writes
// or reads: a config, a measurement, a prediction, a trial, a summary, and
// the names of statuses, trial states and prediction bases. The agent ops
// (serve, MCP, Python), `tune --json`, `export --format json` and the command
// backend's protocol all go through these, so a field has one name and one
// meaning everywhere (docs/serve.md lists them).
//
// The JSON type is nlohmann::json; this header only declares it
// (<nlohmann/json_fwd.hpp>): include <nlohmann/json.hpp> to use the values.
// Numbers that are not finite (a prior's mean before any success) are
// written as null, as JSON has no NaN.
#pragma once

#include <tessel/error.hpp>
#include <tessel/measurement.hpp>
#include <tessel/trial.hpp>

#include <nlohmann/json_fwd.hpp>

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tessel {

class space;
struct domain;
struct summary;
enum class param_kind : std::uint8_t;

/// "proposed", "running", "finished" (stored in study files: never change).
[[nodiscard]] std::string_view to_string(trial_state s) noexcept;
[[nodiscard]] std::optional<trial_state> parse_trial_state(std::string_view name) noexcept;
/// "model" or "prior".
[[nodiscard]] std::string_view to_string(prediction::basis b) noexcept;
/// "integer", "symbol", "boolean", "permutation".
[[nodiscard]] std::string_view to_string(param_kind k) noexcept;
/// "error", "warning", "note": a diagnostic's severity, as render() and the
/// CLI's `--json` errors write it.
[[nodiscard]] std::string_view to_string(diagnostic::severity level) noexcept;

namespace codec {

using json = nlohmann::json;

/// `{"tile_m": 512, "order": ["k", "m", "n"], "prefetch": null}`: every
/// parameter, an inactive one null (space::to_json).
[[nodiscard]] json config_json(const space& s, const config& c);

/// Value `index` of a domain, typed: a number, a string (symbol), a boolean,
/// or an array of labels (a loop order).
[[nodiscard]] json value_json(const domain& d, std::size_t index);

/// `{"status", "objective" (null unless ok), "samples", "cost": {"compile_s",
/// "gate_s", "run_s"}, "metrics", "message"}`.
[[nodiscard]] json to_json(const measurement& m);
/// `{"basis", "mean", "sigma", "p_feasible", "expected_gain", "cost_s",
/// "tokens", "utility"}`.
[[nodiscard]] json to_json(const prediction& p);
/// A trial: `trial_id`, `key` (16 hex digits), `config`, `source`, `tokens`,
/// `note`, `state`, `proposed_at`; once finished `finished_at`, `reported`
/// and the measurement's fields (to_json(measurement)); `prediction` when
/// the scheduler made one; `reason` (why it was handed out, in words) until
/// it is finished.
[[nodiscard]] json to_json(const space& s, const trial& t);
/// A summary: `termination`, `message`, `evaluations`, `evaluations_to_best`,
/// `by_status`, `seed`, `space`, `backend`, `strategy`, `jobs` {given, used},
/// `wall_s`, `propose_s`, `evaluate_s`, `overhead_s`, `cost_s`, `tokens`,
/// `tokens_by_source` {SOURCE: {tokens, proposals}}, `reported`, `verified`,
/// `best_objective` and `best` (the best trial, to_json(trial)), null
/// before any success.
[[nodiscard]] json to_json(const summary& sum, const space& s);

/// `{"ok": 3, "compile_error": 1}`: counts by status name.
[[nodiscard]] json counts_json(const std::map<status, std::size_t>& by_status);

/// Why a trial was handed out, in words: who proposed it and how the
/// scheduler ranked it ("proposed by auto/bo; ranked by the model: ...").
[[nodiscard]] std::string reason_of(const trial& t);

/// A measurement as a program, an agent or a callable reports it: the
/// fields of to_json(measurement), each optional. "time" is read as
/// "objective" when that is absent; a boolean metric as 1 or 0.
struct measurement_report {
  std::optional<tessel::status> status;
  std::optional<double> objective;
  std::vector<double> samples;
  std::string message;
  std::optional<double> compile_s, gate_s, run_s;
  std::map<std::string, double> metrics;
};

/// Reads a report: a JSON object of those fields, or a bare number (the
/// objective). Throws tessel::error naming the field that is malformed
/// ("'samples' must be an array of numbers", "unknown status 'fast' (one of
/// ok, invalid, ...)").
[[nodiscard]] measurement_report read_measurement(const json& j);

/// "ok, invalid, compile_error, ..." (every status name, for messages).
[[nodiscard]] std::string status_names();

}  // namespace codec
}  // namespace tessel
