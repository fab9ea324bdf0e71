// settings.cpp: reading KEY=VALUE settings (tessel/settings.hpp).
#include <tessel/error.hpp>
#include <tessel/settings.hpp>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <array>
#include <charconv>
#include <cmath>
#include <system_error>
#include <utility>

namespace tessel {
namespace {

constexpr std::array<std::pair<std::string_view, bool>, 8> flag_words{{
    {"1", true},
    {"true", true},
    {"yes", true},
    {"on", true},
    {"0", false},
    {"false", false},
    {"no", false},
    {"off", false},
}};

}  // namespace

std::optional<bool> parse_flag(std::string_view text) noexcept {
  for (const auto& [word, value] : flag_words)
    if (word == text) return value;
  return std::nullopt;
}

std::string_view flag_spellings() noexcept { return "true or false (or 1/0, yes/no, on/off)"; }

std::optional<double> parse_number(std::string_view text) noexcept {
  double out = 0;
  const auto* end = text.data() + text.size();
  const auto [at, ec] = std::from_chars(text.data(), end, out);
  if (text.empty() || ec != std::errc{} || at != end || std::isnan(out)) return std::nullopt;
  return out;
}

std::optional<std::size_t> parse_whole(std::string_view text) noexcept {
  std::size_t out = 0;
  const auto* end = text.data() + text.size();
  const auto [at, ec] = std::from_chars(text.data(), end, out);
  if (text.empty() || ec != std::errc{} || at != end) return std::nullopt;
  return out;
}

settings_map parse_assignments(const std::vector<std::string>& assignments, std::string_view what) {
  settings_map out;
  for (const auto& a : assignments) {
    const auto eq = a.find('=');
    if (eq == std::string::npos || eq == 0)
      throw error(fmt::format("{} expects KEY=VALUE, got '{}'", what, a));
    out[a.substr(0, eq)] = a.substr(eq + 1);
  }
  return out;
}

settings_reader::settings_reader(std::string owner, const settings_map& given)
    : owner_(std::move(owner)), given_(given) {}

std::optional<std::string> settings_reader::text(std::string_view key) {
  known_.emplace(key);
  const auto it = given_.find(key);
  if (it == given_.end()) return std::nullopt;
  used_.emplace(key);
  return it->second;
}

std::optional<double> settings_reader::number(std::string_view key) {
  const auto t = text(key);
  if (!t) return std::nullopt;
  const auto v = parse_number(*t);
  if (!v) reject(key, "a number", *t);
  return v;
}

std::optional<std::size_t> settings_reader::count(std::string_view key, std::size_t min) {
  const auto t = text(key);
  if (!t) return std::nullopt;
  const auto v = parse_whole(*t);
  if (!v || *v < min) reject(key, fmt::format("a whole number >= {}", min), *t);
  return v;
}

std::optional<bool> settings_reader::flag(std::string_view key) {
  const auto t = text(key);
  if (!t) return std::nullopt;
  const auto v = parse_flag(*t);
  if (!v) reject(key, flag_spellings(), *t);
  return v;
}

std::optional<std::string> settings_reader::choice(std::string_view key,
                                                   const std::vector<std::string_view>& choices) {
  auto t = text(key);
  if (!t) return std::nullopt;
  for (const auto c : choices)
    if (c == *t) return t;
  reject(key, fmt::format("one of {}", fmt::join(choices, ", ")), *t);
}

std::map<std::string, std::string> settings_reader::prefixed(std::string_view prefix) {
  known_.insert(std::string(prefix) + "NAME");
  std::map<std::string, std::string> out;
  for (const auto& [key, value] : given_)
    if (key.starts_with(prefix) && key.size() > prefix.size()) {
      out[key.substr(prefix.size())] = value;
      used_.insert(key);
    }
  return out;
}

void settings_reader::finish() const {
  for (const auto& [key, value] : given_)
    if (!used_.contains(key))
      throw error(fmt::format("{}: unknown setting '{}' (settings: {})", owner_, key,
                              fmt::join(known_, ", ")));
}

void settings_reader::also_names(std::span<const typed_name> fields) { also_.push_back(fields); }

void settings_reader::rethrow_named(const options_error& e,
                                    std::initializer_list<typed_name> fields) const {
  const auto rename = [&](const typed_name& f) {
    if (e.names(f.field)) throw e.renamed(fmt::format("{}: setting {}", owner_, f.name), "=");
  };
  for (const auto& f : fields) rename(f);
  for (const auto list : also_)
    for (const auto& f : list) rename(f);
  throw e;
}

void settings_reader::reject(std::string_view key, std::string_view expected,
                             std::string_view text) const {
  throw error(fmt::format("{}: setting {} must be {}, got '{}'", owner_, key, expected, text));
}

}  // namespace tessel
