// Doubles inside the study file's JSON columns (codec.hpp).
#include "storage/codec.hpp"

#include <tessel/error.hpp>

#include <cmath>
#include <limits>

namespace tessel::detail::storage {
namespace {

using json = nlohmann::json;

json parse_json(std::string_view text, const char* what) {
  try {
    return json::parse(text);
  } catch (const json::parse_error& e) {
    throw error(std::string(what) + " is not valid JSON: " + e.what());
  }
}

}  // namespace

json double_to_json(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return v;
}

double double_from_json(const json& v) {
  if (v.is_number()) return v.get<double>();
  if (v.is_null() || v == "nan") return std::numeric_limits<double>::quiet_NaN();
  if (v == "inf") return std::numeric_limits<double>::infinity();
  if (v == "-inf") return -std::numeric_limits<double>::infinity();
  throw error(v.dump() + " is not a number");
}

std::string samples_to_json(const std::vector<double>& samples) {
  json out = json::array();
  for (double v : samples) out.push_back(double_to_json(v));
  return out.dump();
}

std::vector<double> samples_from_json(std::string_view text) {
  const json in = parse_json(text, "samples_json");
  if (!in.is_array()) throw error("samples_json is not a JSON array");
  std::vector<double> out;
  out.reserve(in.size());
  for (const auto& v : in) out.push_back(double_from_json(v));
  return out;
}

std::string metrics_to_json(const std::map<std::string, double>& metrics) {
  json out = json::object();
  for (const auto& [name, v] : metrics) out[name] = double_to_json(v);
  // A name that is not UTF-8 gets U+FFFD rather than failing the save.
  return out.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::map<std::string, double> metrics_from_json(std::string_view text) {
  const json in = parse_json(text, "metrics_json");
  if (!in.is_object()) throw error("metrics_json is not a JSON object");
  std::map<std::string, double> out;
  for (const auto& [name, v] : in.items()) out[name] = double_from_json(v);
  return out;
}

}  // namespace tessel::detail::storage
