// dma_sharing.cpp: the DMA engines shared by the active data phases
// (dma_sharing.hpp).
#include "dma_sharing.hpp"

#include <algorithm>
#include <array>
#include <bit>

namespace tessel::sim {

namespace {

/// The bits set in `x` (std::popcount is a library call without -mpopcnt).
[[nodiscard]] int bits_set(std::uint32_t x) noexcept {
  x = x - ((x >> 1) & 0x5555'5555u);
  x = (x & 0x3333'3333u) + ((x >> 2) & 0x3333'3333u);
  x = (x + (x >> 4)) & 0x0F0F'0F0Fu;
  return static_cast<int>((x * 0x0101'0101u) >> 24);
}

}  // namespace

void dma_sharing::reset(std::size_t n, const machine& m) {
  full_mask_ = m.dma_engines >= 32 ? ~0u : (1u << m.dma_engines) - 1;
  hbm_bytes_per_ns_ = m.hbm_bytes_per_ns;
  remaining_.resize(n);
  rate_.resize(n);
  hbm_rate_.resize(n);
  mask_.resize(n);
  active_.clear();
  finished_.clear();
  not_full_ = 0;
  next_ = std::numeric_limits<double>::infinity();
  t_ = active_ns_ = work_ns_ = 0;
}

/// Moves the active data phases on to `now`. With `collect`, those done by
/// now (within 1e-6 ns) leave active_ for finished_, in order. A template
/// so that each caller's loop is compiled for its own case.
template <bool collect>
void dma_sharing::advance(double now) {
  const double dt = now - t_;
  const bool moved = dt > 0 && !active_.empty();
  if (!moved && !collect) {
    t_ = now;
    return;
  }
  std::uint32_t used = 0;
  std::size_t kept = 0;
  if constexpr (collect) finished_.clear();
  for (const auto id : active_) {
    if (moved) {
      remaining_[id] = std::max(0.0, remaining_[id] - dt * rate_[id]);
      used |= mask_[id];
    }
    if constexpr (collect) {
      if (remaining_[id] <= 1e-6) {
        finished_.push_back(id);
        if (mask_[id] != full_mask_) --not_full_;
      } else {
        active_[kept++] = id;
      }
    }
  }
  if constexpr (collect) active_.resize(kept);
  if (moved) {
    active_ns_ += dt;
    work_ns_ += dt * bits_set(used);
  }
  t_ = now;
}

/// Each active transfer progresses at 1/n of its busiest engine, n = the
/// transfers using that engine. One event stands for the earliest end.
void dma_sharing::reshare(double now) {
  next_ = std::numeric_limits<double>::infinity();
  if (active_.empty()) return;
  const bool all_full = not_full_ == 0;
  double first = std::numeric_limits<double>::infinity();
  double total = 0;  // HBM bytes per ns at these rates (summed in active_ order)
  if (all_full) {    // the common case: every transfer spans all 16 engines
    const double rate = 1.0 / static_cast<double>(active_.size());
    for (const auto id : active_) {
      rate_[id] = rate;
      first = std::min(first, remaining_[id]);
      total += rate * hbm_rate_[id];
    }
    first /= rate;
  } else {
    std::array<int, 32> load{};
    for (const auto id : active_)
      for (std::uint32_t bits = mask_[id]; bits; bits &= bits - 1) ++load[std::countr_zero(bits)];
    for (const auto id : active_) {
      int worst = 1;
      for (std::uint32_t bits = mask_[id]; bits; bits &= bits - 1)
        worst = std::max(worst, load[std::countr_zero(bits)]);
      rate_[id] = 1.0 / worst;
      first = std::min(first, remaining_[id] * worst);
      total += rate_[id] * hbm_rate_[id];
    }
  }
  // HBM bandwidth is shared too: the core's share of the chip's HBM caps
  // the bytes per ns of every transfer that reads or writes HBM
  if (hbm_bytes_per_ns_ > 0) {
    if (total > hbm_bytes_per_ns_) {
      const double scale = hbm_bytes_per_ns_ / total;
      first = std::numeric_limits<double>::infinity();
      for (const auto id : active_) {
        if (hbm_rate_[id] > 0) rate_[id] *= scale;
        first = std::min(first, remaining_[id] / rate_[id]);
      }
    }
  }
  next_ = now + first;
}

void dma_sharing::start(std::uint32_t id, double work_ns, double now) {
  advance<false>(now);
  remaining_[id] = work_ns;
  const double hbm_bytes = hbm_rate_[id];  // set by describe()
  hbm_rate_[id] = hbm_bytes > 0 && work_ns > 0 ? hbm_bytes / work_ns : 0;
  active_.push_back(id);
  if (mask_[id] != full_mask_) ++not_full_;
  reshare(now);
}

const std::vector<std::uint32_t>& dma_sharing::finish_due(double now) {
  advance<true>(now);
  reshare(now);
  return finished_;
}

}  // namespace tessel::sim
