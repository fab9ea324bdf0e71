// The strategy registry: name -> factory with default options. A new
// strategy adds one row to `table` (and its factory to strategies.hpp).
#include "strategies/common.hpp"

#include <tessel/bayesian.hpp>
#include <tessel/did_you_mean.hpp>
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

}  // namespace

namespace detail {

std::string did_you_mean_suffix(std::string_view name, const std::vector<std::string_view>& known) {
  const auto hint = tessel::did_you_mean(name, known);
  return hint.empty() ? hint : " (" + hint + ")";
}

std::string unknown_strategy(std::string_view name) {
  std::vector<std::string_view> known;
  for (const auto& e : table) known.push_back(e.name);
  std::string message =
      "unknown strategy '" + std::string(name) + "'" + did_you_mean_suffix(name, known);
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
