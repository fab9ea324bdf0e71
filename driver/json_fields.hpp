// json_fields.hpp: reading the fields of a spec's JSON form (study_spec,
// model_spec), each field of the wrong type an error naming it. Private to
// the driver.
#pragma once

#include <tessel/error.hpp>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace tessel::json_fields {

/// Field `key` of `j` into `out` when present and not null; a field of
/// another type is a tessel::error starting with `owner` ("study spec").
template <class T>
void read(std::string_view owner, const nlohmann::json& j, const char* key, T& out) {
  const auto it = j.find(key);
  if (it == j.end() || it->is_null()) return;
  try {
    out = it->get<T>();
  } catch (const nlohmann::json::exception&) {
    throw error(fmt::format("{}: \"{}\" has the wrong type: {}", owner, key,
                            it->dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)));
  }
}

/// Field `key` as assignments: ["M=8192"] as the CLI stores --set, or an
/// object ({"M": "8192"}, {"M": 8192}: a value that is not a string is its JSON text).
inline void read_assignments(std::string_view owner, const nlohmann::json& j, const char* key,
                             std::map<std::string, std::string, std::less<>>& out) {
  const auto it = j.find(key);
  if (it == j.end() || it->is_null()) return;
  if (it->is_object()) {
    for (const auto& [name, value] : it->items())
      out[name] = value.is_string() ? value.get<std::string>() : value.dump();
    return;
  }
  std::vector<std::string> assignments;
  read(owner, j, key, assignments);
  for (const auto& a : assignments)
    if (const auto eq = a.find('='); eq != std::string::npos && eq > 0)
      out[a.substr(0, eq)] = a.substr(eq + 1);
}

}  // namespace tessel::json_fields
