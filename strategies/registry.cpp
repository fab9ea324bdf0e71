// The strategy registry: name -> factory with default options. A new
// strategy adds one row to `table` (and its factory to strategies.hpp).
#include "strategies/common.hpp"

#include <tessel/bayesian.hpp>
#include <tessel/error.hpp>
#include <tessel/strategies.hpp>

#include <algorithm>
#include <array>

namespace tessel {
namespace {

struct entry {
  std::string_view name;
  std::unique_ptr<strategy> (*make)();
};

// Registry order is the order strategy_names() lists.
constexpr std::array table{
    entry{"random", [] { return make_random_strategy(); }},
    entry{"exhaustive", [] { return make_exhaustive_strategy(); }},
    entry{"local", [] { return make_local_strategy(); }},
    entry{"annealing", [] { return make_annealing_strategy(); }},
    entry{"ga", [] { return make_ga_strategy(); }},
    entry{"bo", [] { return make_bo_strategy(); }},
    entry{"auto", [] { return make_auto_strategy(); }},
};

/// Levenshtein distance (insert, delete, substitute; each costs 1).
std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

}  // namespace

namespace detail {

std::string did_you_mean(std::string_view name, const std::vector<std::string_view>& known) {
  std::string_view closest;
  std::size_t closest_distance = 0;
  for (const auto candidate : known) {
    const auto d = edit_distance(name, candidate);
    if (d <= std::max<std::size_t>(1, candidate.size() / 3) &&
        (closest.empty() || d < closest_distance)) {
      closest = candidate;
      closest_distance = d;
    }
  }
  return closest.empty() ? std::string() : " (did you mean '" + std::string(closest) + "'?)";
}

std::string unknown_strategy(std::string_view name) {
  std::vector<std::string_view> known;
  for (const auto& e : table) known.push_back(e.name);
  std::string message = "unknown strategy '" + std::string(name) + "'" + did_you_mean(name, known);
  message += "; known:";
  for (std::size_t i = 0; i < table.size(); ++i)
    message += (i == 0 ? " " : ", ") + std::string(table[i].name);
  return message;
}

}  // namespace detail

std::unique_ptr<strategy> make_strategy(std::string_view name) {
  if (name.find('[') != std::string_view::npos) return detail::make_strategy_from_spec(name);
  for (const auto& e : table)
    if (e.name == name) return e.make();
  throw error(detail::unknown_strategy(name));
}

std::vector<std::string> strategy_names() {
  std::vector<std::string> names;
  names.reserve(table.size());
  for (const auto& e : table) names.emplace_back(e.name);
  return names;
}

}  // namespace tessel
