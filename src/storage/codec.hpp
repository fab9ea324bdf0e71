// Doubles inside the study file's JSON columns, without loss (NaN and
// infinities as strings). Names of statuses and states are tessel/codec.hpp's.
// Private to src/storage/.
#pragma once

#include <nlohmann/json.hpp>

#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace tessel::detail::storage {

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
