// Private: the state local search and simulated annealing share. A walk
// holds a centre (a config with its score), the centre's neighbours not yet
// proposed (in random order), the origin of every proposal not yet
// observed, and spare restart points. Not installed.
#pragma once

#include "strategies/common.hpp"

#include <cstdint>
#include <map>
#include <optional>
#include <unordered_map>
#include <utility>

namespace tessel::detail {

class walk {
 public:
  /// Where a proposal came from, as take() reports it.
  enum class origin : std::uint8_t {
    foreign,          ///< not proposed by this walk (another strategy, an agent, the baseline)
    start,            ///< a uniform sample proposed as a restart point
    neighbour,        ///< a neighbour of the current centre
    stale_neighbour,  ///< a neighbour of an earlier centre
  };

  /// Forgets everything (start() of a strategy).
  void reset();
  [[nodiscard]] bool has_centre() const noexcept { return centre_.has_value(); }
  [[nodiscard]] const config& centre() const { return *centre_; }
  [[nodiscard]] double centre_score() const noexcept { return centre_score_; }

  /// Makes `c` (score `score`) the centre and lists its valid neighbours in
  /// random order; neighbours of earlier centres become stale.
  void move_to(const space& s, const config& c, double score, rng& random);
  /// Drops the centre (a restart); its outstanding neighbours become stale.
  void clear();

  /// Adds the centre's next fresh neighbour to `b`; false when none is left
  /// (neighbours known by now are dropped on the way). With `draws` > 1,
  /// the cheapest (predicted) of the next `draws` fresh neighbours.
  bool propose_neighbour(batch& b, std::size_t draws = 1);
  /// Adds one uniform fresh sample to `b` as a restart point (the cheapest
  /// of `draws`, fill_cheapest); false when the space has nothing fresh left.
  bool propose_start(batch& b, rng& random, std::size_t attempts, std::size_t draws = 1);
  /// The centre has no neighbour left to propose and none awaiting a
  /// result: as far as this walk can see, a local optimum.
  [[nodiscard]] bool exhausted() const noexcept {
    return centre_ && next_ >= neighbours_.size() && outstanding_ == 0;
  }

  /// Removes `key` from the proposals awaiting a result; says where it came from.
  origin take(std::uint64_t key);

  /// Keeps an observed restart point the walk had no use for (it held a
  /// centre then); at most max_spares, the best ones.
  void add_spare(const config& c, double score);
  /// The best spare restart point, removed; nullopt when none.
  std::optional<std::pair<config, double>> pop_spare();

  /// Proposals awaiting a result (bounded by what the study has in flight).
  [[nodiscard]] std::size_t pending() const noexcept { return pending_.size(); }

  static constexpr std::size_t max_spares = 64;

 private:
  /// Swaps the cheapest of the next `draws` fresh neighbours to next_.
  void bring_cheapest_forward(const batch& b, std::size_t draws);

  struct proposal {
    origin kind = origin::start;
    std::uint64_t generation = 0;  ///< the centre it was a neighbour of
  };
  std::optional<config> centre_;
  double centre_score_ = 0;
  std::uint64_t generation_ = 0;
  std::vector<config> neighbours_;
  std::size_t next_ = 0;
  std::size_t outstanding_ = 0;  ///< neighbours of the current centre awaiting a result
  std::unordered_map<std::uint64_t, proposal> pending_;
  std::multimap<double, config> spares_;  ///< equal scores keep arrival order
};

}  // namespace tessel::detail
