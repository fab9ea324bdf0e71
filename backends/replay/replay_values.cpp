// replay_values.cpp: value normalization for replay tables.
#include "replay/replay_values.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <optional>

namespace tessel::detail {
namespace {

bool all_of_chars(std::string_view text, std::string_view allowed) {
  return !text.empty() && text.find_first_not_of(allowed) == std::string_view::npos;
}

/// The number `text` spells (decimal notation only: no hex, inf or nan).
std::optional<double> decimal_of(std::string_view text) {
  if (!all_of_chars(text, "0123456789+-.eE") ||
      text.find_first_of("0123456789") == std::string_view::npos)
    return std::nullopt;
  const std::string copy(text);
  char* end = nullptr;
  errno = 0;
  const double d = std::strtod(copy.c_str(), &end);
  if (end != copy.c_str() + copy.size() || errno == ERANGE) return std::nullopt;
  return d;
}

}  // namespace

std::string normalize_text(std::string_view text) {
  if (text == "True" || text == "true") return "1";
  if (text == "False" || text == "false") return "0";
  const auto digits = text.substr(!text.empty() && (text[0] == '-' || text[0] == '+') ? 1 : 0);
  if (all_of_chars(digits, "0123456789") && digits.size() <= 18) {
    const long long v = std::strtoll(std::string(text).c_str(), nullptr, 10);
    return std::to_string(v);
  }
  if (const auto d = decimal_of(text)) {
    if (std::floor(*d) == *d && std::fabs(*d) < 9.0e15)
      return std::to_string(static_cast<long long>(*d));
    return fmt::format("{}", *d);
  }
  return std::string(text);
}

std::vector<std::string> split_key(std::string_view key) {
  std::vector<std::string> parts;
  for (;;) {
    const auto comma = key.find(',');
    parts.emplace_back(key.substr(0, comma));
    if (comma == std::string_view::npos) return parts;
    key.remove_prefix(comma + 1);
  }
}

void sort_values(std::vector<std::string>& values) {
  std::vector<double> numbers;
  for (const auto& v : values) {
    const auto d = decimal_of(v);
    if (!d) return;  // not all numbers: keep the first-seen order
    numbers.push_back(*d);
  }
  std::vector<std::size_t> order(values.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return numbers[a] < numbers[b]; });
  std::vector<std::string> sorted;
  sorted.reserve(values.size());
  for (auto i : order) sorted.push_back(std::move(values[i]));
  values = std::move(sorted);
}

bool is_integer_text(std::string_view text) {
  const auto digits = text.substr(!text.empty() && text[0] == '-' ? 1 : 0);
  return all_of_chars(digits, "0123456789") && (digits.size() == 1 || digits[0] != '0') &&
         digits.size() <= 18;
}

bool is_tsl_name(std::string_view text) {
  static constexpr std::array<std::string_view, 13> keywords{
      "space", "param", "const", "let", "require", "when", "target",
      "and",   "or",    "not",   "in",  "true",    "false"};
  if (text.empty() || !(std::isalpha(static_cast<unsigned char>(text[0])) != 0 || text[0] == '_'))
    return false;
  if (!std::all_of(text.begin(), text.end(), [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_';
      }))
    return false;
  return std::find(keywords.begin(), keywords.end(), text) == keywords.end();
}

}  // namespace tessel::detail
