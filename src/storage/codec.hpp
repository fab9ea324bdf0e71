// Text forms shared by the study file and the exports: trial states, result
// statuses, and doubles inside JSON. Private to src/storage/.
#pragma once

#include <tessel/measurement.hpp>
#include <tessel/trial.hpp>

#include <nlohmann/json.hpp>

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tessel::detail::storage {

/// "proposed", "running", "finished".
[[nodiscard]] std::string_view state_name(trial_state s) noexcept;
[[nodiscard]] std::optional<trial_state> parse_state(std::string_view name) noexcept;

/// The enumerator's name: "ok", "compile_error", ... (stored in the file, so
/// these never change).
[[nodiscard]] std::string_view status_name(status s) noexcept;
[[nodiscard]] std::optional<status> parse_status_name(std::string_view name) noexcept;

/// A double as JSON without loss: a number when finite, else the string
/// "nan", "inf" or "-inf" (JSON has no such numbers).
[[nodiscard]] nlohmann::json double_to_json(double v);
/// Inverse of double_to_json; null also reads as NaN. Throws tessel::error
/// for anything else.
[[nodiscard]] double double_from_json(const nlohmann::json& v);

/// `[1.5, 2, "inf"]` and back (double_to_json for each element).
[[nodiscard]] std::string samples_to_json(const std::vector<double>& samples);
[[nodiscard]] std::vector<double> samples_from_json(std::string_view text);
/// `{"name": 1.5, ...}` and back.
[[nodiscard]] std::string metrics_to_json(const std::map<std::string, double>& metrics);
[[nodiscard]] std::map<std::string, double> metrics_from_json(std::string_view text);

}  // namespace tessel::detail::storage
