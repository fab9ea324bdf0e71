// Private helpers every strategy shares: the score of a trial, a batch of
// fresh proposals, uniform sampling that never loops, shuffling and the
// options-error format. Not installed.
#pragma once

#include <tessel/config.hpp>
#include <tessel/random.hpp>
#include <tessel/space.hpp>
#include <tessel/strategy.hpp>
#include <tessel/trial.hpp>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_set>
#include <utility>
#include <vector>

namespace tessel::detail {

/// The objective of an ok trial; +inf for a failure (any status but ok) or a
/// NaN objective, so failed configs rank last everywhere. Lower is better.
[[nodiscard]] double score_of(const trial& t) noexcept;

/// Throws options_error("<where>.<field>: <rule>").
[[noreturn]] void options_failure(std::string_view where, std::string_view field,
                                  const std::string& rule);
/// "unknown strategy 'anealing' (did you mean 'annealing'?); known: random, ..."
[[nodiscard]] std::string unknown_strategy(std::string_view name);
/// " (did you mean 'X'?)": tessel::did_you_mean in parentheses, or "".
[[nodiscard]] std::string did_you_mean_suffix(std::string_view name,
                                              const std::vector<std::string_view>& known);
/// make_strategy for "bo[KEY=VALUE;...]" and "auto[...]" (strategies/spec.cpp).
[[nodiscard]] std::unique_ptr<strategy> make_strategy_from_spec(std::string_view spec);
/// " (got 1.5)": the value an options rule rejected, in its shortest form.
[[nodiscard]] std::string got(double value);
[[nodiscard]] std::string got(std::size_t value);

/// A batch being proposed: configs that are valid (callers only add configs
/// the space made), distinct, and not known to the context.
class batch {
 public:
  batch(const search_context& context, std::size_t capacity)
      : context_(context), capacity_(capacity) {
    configs_.reserve(capacity);
  }
  [[nodiscard]] const tessel::space& space() const { return context_.space(); }
  [[nodiscard]] const search_context& context() const { return context_; }
  [[nodiscard]] bool full() const noexcept { return configs_.size() >= capacity_; }
  [[nodiscard]] std::size_t size() const noexcept { return configs_.size(); }
  /// Neither known to the context nor already in this batch.
  [[nodiscard]] bool fresh(std::uint64_t key) const {
    return !keys_.contains(key) && !context_.known(key);
  }
  /// Adds `c` when it is fresh and the batch is not full; returns its key
  /// when added.
  std::optional<std::uint64_t> add(const config& c);
  [[nodiscard]] std::vector<config> take() { return std::move(configs_); }

 private:
  const search_context& context_;
  std::size_t capacity_;
  std::vector<config> configs_;
  std::unordered_set<std::uint64_t> keys_;
};

/// Adds up to `n` uniformly drawn fresh configs to `b` (fewer when `b` fills
/// up or no fresh config is left); returns their keys. Each slot gets up to
/// `attempts` uniform draws; after a slot's draws all hit known configs, the
/// remaining slots are filled by walking ranks from a uniformly drawn start,
/// wrapping once, so the call ends after at most count() ranks and finds a
/// fresh config whenever one exists.
std::vector<std::uint64_t> fill_uniform(batch& b, std::size_t n, rng& random, std::size_t attempts);

/// Candidates a strategy draws per slot while the study weighs cost, to
/// keep the cheapest (predicted): 1 + round((max_draws - 1) * alpha) for
/// the study's cost exponent alpha in [0, 1]; 1 (no weighing) at alpha 0.
[[nodiscard]] std::size_t cost_draws(const search_context& context, std::size_t max_draws);

/// Of up to `draws` calls of draw() (each an optional fresh config), the
/// config with the lowest context.predicted_cost(); nullopt when no call
/// gave one. A single draw is returned without asking the cost model.
template <class Draw>
std::optional<config> cheapest_of(const batch& b, std::size_t draws, Draw&& draw) {
  std::optional<config> cheapest;
  double lowest = 0;
  for (std::size_t i = 0; i < draws; ++i) {
    auto c = draw();
    if (!c) continue;
    if (draws == 1) return c;
    const double cost = b.context().predicted_cost(*c);
    if (!cheapest || cost < lowest) {
      lowest = cost;
      cheapest = std::move(c);
    }
  }
  return cheapest;
}

/// fill_uniform, but each of the `n` slots takes the cheapest (predicted)
/// of `draws` fresh uniform draws (see cost_draws); draws <= 1 is
/// fill_uniform itself.
std::vector<std::uint64_t> fill_cheapest(batch& b, std::size_t n, std::size_t draws, rng& random,
                                         std::size_t attempts);

/// Moves a uniform draw (without replacement) of min(k, size - first) of the
/// items at or after `first` to positions first, first + 1, ...: the first
/// k steps of Fisher-Yates, k draws however many items there are.
template <class T>
void draw_to_front(std::vector<T>& items, std::size_t first, std::size_t k, rng& random) {
  const std::size_t end = first + std::min(k, items.size() - std::min(first, items.size()));
  for (std::size_t i = first; i < end; ++i)
    std::swap(items[i], items[i + random.uniform(items.size() - i)]);
}

/// Fisher-Yates with tessel::rng (std::shuffle's draws are not portable).
template <class T>
void shuffle(std::vector<T>& items, rng& random) {
  for (std::size_t i = items.size(); i > 1; --i) std::swap(items[i - 1], items[random.uniform(i)]);
}

}  // namespace tessel::detail
