// replay_values.hpp: how replay tables normalize parameter values to text,
// so 16, 16.0 and "16" in a file, and 16 in a space, all read "16".
// Private to the replay backend.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <string_view>
#include <vector>

namespace tessel::detail {

/// A value written as text (a key part, a string field, a space's label):
/// integers in canonical decimal ("+016" -> "16"), integral decimals as
/// integers ("16.0" -> "16"), other decimals in shortest round-trip form,
/// True/False/true/false as 1/0, anything else unchanged.
[[nodiscard]] std::string normalize_text(std::string_view text);

/// A JSON value: numbers and strings as normalize_text, booleans 1/0,
/// null "None", arrays and objects as their JSON text.
template <class Json>
[[nodiscard]] std::string normalize_value(const Json& v) {
  if (v.is_null()) return "None";
  if (v.is_boolean()) return v.template get<bool>() ? "1" : "0";
  if (v.is_number_integer())
    return v.is_number_unsigned() ? std::to_string(v.template get<unsigned long long>())
                                  : std::to_string(v.template get<long long>());
  if (v.is_number()) return normalize_text(v.dump());
  if (v.is_string()) return normalize_text(v.template get<std::string>());
  return v.dump();
}

/// A Kernel Tuner cache key split at its commas ("16,1,2" -> 16, 1, 2).
[[nodiscard]] std::vector<std::string> split_key(std::string_view key);

/// Sorts normalized values: all integers -> ascending numerically; all
/// numbers -> ascending; otherwise left in first-seen order.
void sort_values(std::vector<std::string>& values);

/// Whether `text` is a canonical integer ("-3", "16").
[[nodiscard]] bool is_integer_text(std::string_view text);

/// Whether `text` can be a .tsl name (a letter or '_', then letters, digits,
/// '_'), and is not one of the language's keywords.
[[nodiscard]] bool is_tsl_name(std::string_view text);

}  // namespace tessel::detail
