#include "strategies/walk.hpp"

#include <limits>

namespace tessel::detail {

void walk::reset() {
  clear();
  pending_.clear();
  spares_.clear();
  generation_ = 0;
}

void walk::move_to(const space& s, const config& c, double score, rng& random) {
  centre_ = c;
  centre_score_ = score;
  ++generation_;
  neighbours_ = s.neighbours(c);
  shuffle(neighbours_, random);
  next_ = 0;
  outstanding_ = 0;
}

void walk::clear() {
  centre_.reset();
  neighbours_.clear();
  next_ = 0;
  outstanding_ = 0;
  ++generation_;
}

bool walk::propose_neighbour(batch& b, std::size_t draws) {
  while (centre_ && next_ < neighbours_.size() && !b.full()) {
    if (draws > 1) bring_cheapest_forward(b, draws);
    if (auto key = b.add(neighbours_[next_++])) {
      pending_[*key] = {origin::neighbour, generation_};
      ++outstanding_;
      return true;
    }
  }
  return false;
}

void walk::bring_cheapest_forward(const batch& b, std::size_t draws) {
  std::size_t cheapest = next_;
  double lowest = std::numeric_limits<double>::infinity();
  for (std::size_t i = next_, fresh = 0; i < neighbours_.size() && fresh < draws; ++i) {
    if (!b.fresh(b.space().key(neighbours_[i]))) continue;
    ++fresh;
    const double cost = b.context().predicted_cost(neighbours_[i]);
    if (cost < lowest) {
      lowest = cost;
      cheapest = i;
    }
  }
  std::swap(neighbours_[next_], neighbours_[cheapest]);
}

bool walk::propose_start(batch& b, rng& random, std::size_t attempts, std::size_t draws) {
  const auto keys = fill_cheapest(b, 1, draws, random, attempts);
  for (auto key : keys) pending_[key] = {origin::start, generation_};
  return !keys.empty();
}

walk::origin walk::take(std::uint64_t key) {
  const auto it = pending_.find(key);
  if (it == pending_.end()) return origin::foreign;
  const proposal p = it->second;
  pending_.erase(it);
  if (p.kind != origin::neighbour) return p.kind;
  if (p.generation != generation_) return origin::stale_neighbour;
  --outstanding_;
  return origin::neighbour;
}

void walk::add_spare(const config& c, double score) {
  spares_.emplace(score, c);
  if (spares_.size() > max_spares) spares_.erase(std::prev(spares_.end()));
}

std::optional<std::pair<config, double>> walk::pop_spare() {
  if (spares_.empty()) return std::nullopt;
  const auto first = spares_.begin();
  std::pair<config, double> best{std::move(first->second), first->first};
  spares_.erase(first);
  return best;
}

}  // namespace tessel::detail
