#include "strategies/auc_bandit.hpp"

#include <cmath>
#include <limits>

namespace tessel::detail {

auc_bandit::auc_bandit(std::size_t arms, std::size_t window, double exploration)
    : window_(window == 0 ? 1 : window), exploration_(exploration), arms_(arms) {}

void auc_bandit::record(std::size_t arm, bool improved) {
  auto& a = arms_[arm];
  ++a.uses;
  if (improved) {
    a.auc += a.uses;
    ++a.successes;
  }
  const result r{static_cast<std::uint32_t>(arm), improved};
  if (size_ < window_) {
    ring_.push_back(r);  // head_ stays 0 until the window is full
    ++size_;
    return;
  }
  // Full: the oldest result leaves; every later use of its arm moves down one place.
  const result old = ring_[head_];
  ring_[head_] = r;
  head_ = (head_ + 1) % window_;
  auto& o = arms_[old.arm];
  o.auc -= o.successes;
  if (old.improved) --o.successes;
  --o.uses;
}

double auc_bandit::credit(std::size_t arm) const {
  const auto& a = arms_[arm];
  if (a.uses == 0) return 0;
  const auto u = static_cast<double>(a.uses);
  return static_cast<double>(a.auc) * 2.0 / (u * (u + 1.0));
}

double auc_bandit::score(std::size_t arm, std::size_t pending, std::size_t pending_total) const {
  const auto uses = static_cast<double>(arms_[arm].uses + pending);
  if (uses == 0) return std::numeric_limits<double>::infinity();
  const auto total = static_cast<double>(size_ + pending_total);
  const double explore = total > 1 ? std::sqrt(2.0 * std::log(total) / uses) : 0.0;
  return credit(arm) + exploration_ * explore;
}

std::optional<std::size_t> auc_bandit::select(rng& random, const std::vector<std::size_t>& pending,
                                              const std::vector<bool>& excluded) const {
  std::size_t pending_total = 0;
  for (auto p : pending) pending_total += p;
  std::vector<std::size_t> best;
  double best_score = -std::numeric_limits<double>::infinity();
  for (std::size_t a = 0; a < arms_.size(); ++a) {
    if (a < excluded.size() && excluded[a]) continue;
    const double s = score(a, a < pending.size() ? pending[a] : 0, pending_total);
    if (s > best_score) {
      best_score = s;
      best.assign(1, a);
    } else if (s == best_score) {
      best.push_back(a);
    }
  }
  if (best.empty()) return std::nullopt;
  return best.size() == 1 ? best[0] : best[random.uniform(best.size())];
}

}  // namespace tessel::detail
