// steady_closed.hpp: pieces of the closed-form steady models (matmul_steady.cpp,
// swiglu_steady.cpp): a dimension cut into tiles (full tiles of one size and
// at most one tail, so a sum over the tiles is two terms), and the TensorE
// time the warm-up throttle (cost_rules.hpp) costs a run of work.
#pragma once

#include "machine.hpp"

#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>

namespace tessel::sim::steady {

/// A dimension cut into tiles: count[i] tiles of size[i], i < n (the full
/// tiles first, then the tail).
struct cut {
  std::array<std::int64_t, 2> count{}, size{};
  int n = 0;
};

/// `extent` cut into tiles of `tile` (> 0).
[[nodiscard]] inline cut split(std::int64_t extent, std::int64_t tile) {
  cut c;
  if (extent / tile > 0) {
    c.count[0] = extent / tile;
    c.size[0] = tile;
    c.n = 1;
  }
  if (extent % tile > 0) {
    c.count[static_cast<std::size_t>(c.n)] = 1;
    c.size[static_cast<std::size_t>(c.n)] = extent % tile;
    ++c.n;
  }
  return c;
}

/// f(count, size) for each distinct tile size of `c`.
template <class F>
void each(const cut& c, F&& f) {
  for (int i = 0; i < c.n; ++i)
    f(static_cast<double>(c.count[static_cast<std::size_t>(i)]),
      c.size[static_cast<std::size_t>(i)]);
}

/// TensorE time lost to the warm-up throttle by `work_ns` of work that starts cold.
[[nodiscard]] inline double warmup_loss(double work_ns, const machine& m) {
  const double w = m.warmup_ns, s0 = m.warmup_start;
  if (w <= 0 || s0 >= 1 || work_ns <= 0) return 0;
  const double slope = (1 - s0) / w;
  const double in_ramp = s0 * w + slope * w * w / 2;
  if (work_ns >= in_ramp) return w - in_ramp;
  return (-s0 + std::sqrt(s0 * s0 + 2 * slope * work_ns)) / slope - work_ns;
}

}  // namespace tessel::sim::steady
