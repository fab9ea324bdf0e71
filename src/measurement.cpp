// measurement.cpp: status names and the measurement constructors.
#include <tessel/measurement.hpp>

#include <fmt/format.h>

#include <array>
#include <cmath>
#include <utility>

namespace tessel {
namespace {

constexpr std::array<std::pair<status, std::string_view>, 7> status_names{{
    {status::ok, "ok"},
    {status::invalid, "invalid"},
    {status::compile_error, "compile_error"},
    {status::runtime_error, "runtime_error"},
    {status::timeout, "timeout"},
    {status::incorrect, "incorrect"},
    {status::suspicious, "suspicious"},
}};

}  // namespace

std::string_view to_string(status s) noexcept {
  for (const auto& [value, name] : status_names)
    if (value == s) return name;
  return "unknown";
}

std::optional<status> parse_status(std::string_view name) noexcept {
  for (const auto& [value, text] : status_names)
    if (text == name) return value;
  return std::nullopt;
}

std::string outcome_text(status s, std::string_view message) {
  const auto name = to_string(s);
  if (message.empty()) return std::string(name);
  if (message.starts_with(name) && message.substr(name.size()).starts_with(": "))
    return std::string(message);
  return fmt::format("{}: {}", name, message);
}

const std::vector<status>& all_statuses() noexcept {
  static const std::vector<status> all = [] {
    std::vector<status> v;
    v.reserve(status_names.size());
    for (const auto& entry : status_names) v.push_back(entry.first);
    return v;
  }();
  return all;
}

std::string seconds_text(double seconds) {
  if (!std::isfinite(seconds)) return fmt::format("{}", seconds);
  const double magnitude = std::abs(seconds);
  if (magnitude == 0 || magnitude >= 1) return fmt::format("{:.4g} s", seconds);
  if (magnitude >= 1e-3) return fmt::format("{:.4g} ms", seconds * 1e3);
  if (magnitude >= 1e-6) return fmt::format("{:.4g} us", seconds * 1e6);
  return fmt::format("{:.4g} ns", seconds * 1e9);
}

measurement measurement::success(double objective, tessel::cost paid) {
  measurement m;
  m.status = tessel::status::ok;
  m.objective = objective;
  m.cost = paid;
  return m;
}

bool measurement::low_fidelity() const noexcept {
  const auto level = metrics.find("fidelity");
  const auto levels = metrics.find("fidelity_levels");
  return level != metrics.end() && levels != metrics.end() && level->second + 1 < levels->second;
}

measurement measurement::failure(tessel::status s, std::string message, tessel::cost paid) {
  measurement m;
  m.status = s;
  m.message = std::move(message);
  m.cost = paid;
  return m;
}

}  // namespace tessel
