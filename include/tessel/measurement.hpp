// tessel/measurement.hpp: what a backend returns for one config. Failure is
// data, never an exception: every outcome is a status with a message.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tessel {

/// The outcome of evaluating one config (KTT-style typed result).
enum class status : unsigned char {
  ok,             ///< measured; `objective` holds the result
  invalid,        ///< not a valid config of the space, or unknown to the backend
  compile_error,  ///< did not build (includes resource overflows the compiler reports)
  runtime_error,  ///< crashed, returned an error, or threw
  timeout,        ///< exceeded its time limit and was killed
  incorrect,      ///< outputs differ from the reference (the equivalence gate)
  suspicious,     ///< outputs look forged: constant, non-deterministic, faster than the roofline
};

[[nodiscard]] std::string_view to_string(status s) noexcept;
/// Inverse of to_string; nullopt for an unknown name.
[[nodiscard]] std::optional<status> parse_status(std::string_view name) noexcept;
/// Every status, in declaration order.
[[nodiscard]] const std::vector<status>& all_statuses() noexcept;
/// An outcome as a person reads it: "timeout: timed out after 2 s", the
/// status alone when there is no message. The status is said once: a
/// message that already opens with it (the gate's verdicts read
/// "suspicious: ...") is not prefixed again.
[[nodiscard]] std::string outcome_text(status s, std::string_view message);

/// A time in seconds as a person reads it, with a unit and four significant
/// digits: "1.937 ms", "812.5 us", "3.2 s", "41 ns"; "nan", "inf" as such.
[[nodiscard]] std::string seconds_text(double seconds);

/// What evaluating one config cost, in seconds of wall time.
struct cost {
  double compile_s = 0;  ///< building the candidate
  double gate_s = 0;     ///< checking it against the reference
  double run_s = 0;      ///< timing it (all repetitions)
  [[nodiscard]] double total() const noexcept { return compile_s + gate_s + run_s; }
};

struct measurement {
  tessel::status status = tessel::status::ok;
  double objective = 0;         ///< seconds unless the space says otherwise; lower is better
  std::vector<double> samples;  ///< raw repetitions the objective summarizes
  tessel::cost cost;
  std::map<std::string, double> metrics;  ///< engine busy fractions, bytes moved, ...
  std::string message;                    ///< why it failed, or notes

  [[nodiscard]] bool ok() const noexcept { return status == tessel::status::ok; }
  /// A multi-fidelity screen (docs/fidelity.md): metrics["fidelity"] is below
  /// metrics["fidelity_levels"] - 1, so the objective is a prediction from a
  /// lower fidelity, not a measurement. A study never takes it as its best.
  [[nodiscard]] bool low_fidelity() const noexcept;
  [[nodiscard]] static measurement success(double objective, tessel::cost paid = {});
  [[nodiscard]] static measurement failure(tessel::status s, std::string message,
                                           tessel::cost paid = {});
};

}  // namespace tessel
