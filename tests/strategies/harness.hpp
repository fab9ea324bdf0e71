// A miniature study for driving strategies in tests: a search_context over a
// set of known keys, a C++ objective, and a loop that proposes, checks the
// strategy contract, evaluates and observes. Also the small spaces the
// strategy tests share.
#pragma once

#include <tessel/error.hpp>
#include <tessel/space.hpp>
#include <tessel/strategies.hpp>
#include <tessel/strategy.hpp>
#include <tessel/trial.hpp>

#include <cstdint>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace tessel::testing {

/// The study's side of search_context: known = proposed by anyone so far.
class fake_context final : public search_context {
 public:
  explicit fake_context(const tessel::space& s) : space_(s) {}
  [[nodiscard]] const tessel::space& space() const override { return space_; }
  [[nodiscard]] bool known(std::uint64_t key) const override { return known_.contains(key); }
  [[nodiscard]] const trial* best() const override { return best_ ? &*best_ : nullptr; }
  [[nodiscard]] std::size_t finished() const override { return finished_; }
  [[nodiscard]] double cost_alpha() const override { return alpha; }
  [[nodiscard]] double gittins_rate() const override { return gittins; }
  [[nodiscard]] double predicted_cost(const config& c) const override {
    return seconds ? seconds(space_, c) : 1.0;
  }
  [[nodiscard]] std::optional<std::size_t> evaluation_budget() const override { return budget; }

  /// What the study would say of cost (0 and null: it does not weigh cost).
  double alpha = 0;
  /// The study's gittins rate (0: the cost rule is not gittins).
  double gittins = 0;
  std::function<double(const tessel::space&, const config&)> seconds;
  /// The study's evaluation budget (nullopt: unbounded).
  std::optional<std::size_t> budget;

  void mark_known(std::uint64_t key) { known_.insert(key); }
  void finish(const trial& t);

 private:
  const tessel::space& space_;
  std::set<std::uint64_t> known_;
  std::optional<trial> best_;
  std::size_t finished_ = 0;
};

/// The objective of a config; nullopt means the evaluation failed (compile_error).
using objective_fn = std::function<std::optional<double>(const space&, const config&)>;

struct run_record {
  std::vector<config> proposals;      ///< in proposal order
  std::vector<std::string> sources;   ///< source_of() of each, right after propose()
  std::vector<std::string> problems;  ///< contract violations seen (empty when none)
  std::optional<double> best;         ///< best ok objective
  std::size_t evaluations_to_best = 0;
  bool ran_dry = false;  ///< propose returned nothing
};

/// Starts `st` with `seed` and runs propose(batch) -> evaluate -> observe
/// until `budget` evaluations, `target` is reached, or the strategy returns
/// nothing. Keys in `pre_known` count as known from the start. Records every
/// violation: an invalid, known or repeated proposal, or more than asked.
/// `prepare` (optional) sets up the context first (its cost view).
run_record drive(strategy& st, const space& s, const objective_fn& f, std::size_t budget,
                 std::size_t batch, std::uint64_t seed, std::optional<double> target = std::nullopt,
                 const std::vector<std::uint64_t>& pre_known = {},
                 const std::function<void(fake_context&)>& prepare = {});

// --- spaces ---------------------------------------------------------------------

/// x, y in 0..15, z in pow2(1..64), order perm(a, b, c); require x + y <= 24.
/// 9870 configs.
space bowl_space();
/// 1 + (x-11)^2 + (y-5)^2 + (log2 z - 3)^2 + 2 * inversions(order vs [c, a, b]):
/// a unimodal bowl under the space's neighbour moves; minimum 1, one config.
std::optional<double> bowl(const space& s, const config& c);
/// bowl, but configs with x >= 13 fail to compile.
std::optional<double> bowl_with_failures(const space& s, const config& c);

/// home in {sbuf, hbm}; prefetch : bool when home == hbm; tile in {1, 2, 4, 8};
/// order perm(m, n, k); require not (home == sbuf and tile == 8). 66 configs.
space conditional_space();
/// A function of the conditional space's values; minimum 10 at exactly one
/// config (hbm, prefetch, tile 4, order [k, m, n]).
std::optional<double> conditional_objective(const space& s, const config& c);

/// A finished trial of `c`: ok with `objective` and `cost` run seconds, or a
/// compile_error when `objective` is empty.
trial finished_trial(const space& s, const config& c, std::optional<double> objective,
                     double cost = 0);

/// What `f` throws as text: an options_error's message, "error: " and a
/// tessel::error's, or "no exception".
template <class F>
std::string message_of(F&& f) {
  try {
    f();
  } catch (const options_error& e) {
    return e.what();
  } catch (const error& e) {
    return std::string("error: ") + e.what();
  }
  return "no exception";
}

}  // namespace tessel::testing
