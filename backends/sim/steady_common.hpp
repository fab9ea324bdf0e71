// steady_common.hpp: the pieces every workload's steady-state model
// (docs/simulator.md, "Speed") shares: an elementwise instruction as the
// lowerings build one, and the name of what bounds an estimate. The
// closed-form helpers are in steady_closed.hpp.
#pragma once

#include "cost_rules.hpp"
#include "machine.hpp"
#include "program.hpp"
#include "workload.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <span>
#include <utility>
#include <vector>

namespace tessel::sim::steady {

/// Names what bounds an estimate: the DMA data when it outweighs the
/// busiest compute engine (tag `transfers`), else that engine (tag: its
/// entry of `work`, TensorE, VectorE, ScalarE, GpSimdE).
inline void name_bound(steady_estimate& e, const std::array<const char*, 4>& work,
                       const char* transfers) {
  static constexpr std::array<const char*, 4> engines{"tensor", "vector", "scalar", "gpsimd"};
  const auto busiest = static_cast<std::size_t>(
      std::max_element(e.busy_ns.begin(), e.busy_ns.end()) - e.busy_ns.begin());
  const bool dma = e.dma_data_ns > e.busy_ns[busiest];
  e.bound = dma ? "dma data" : engines[busiest];
  e.tag = dma ? transfers : work[busiest];
}

}  // namespace tessel::sim::steady
