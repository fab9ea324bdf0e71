// fixed_space.hpp: a one-config space built in C++ (no .tsl), for the
// calibration cases, benchmarks and tests: every value is a constant except
// the loop orders, permutation parameters whose config picks the order. The
// workload is the symbol `workload`, else the space's name.
#pragma once

#include <tessel/config.hpp>
#include <tessel/space.hpp>
#include <tessel/target.hpp>

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace tessel::sim {

struct fixed_values {
  /// M, tile_m, bufs, coalesce (0/1: a flag of the workload becomes a bool), ...
  std::map<std::string, std::int64_t> integers;
  std::map<std::string, std::string> symbols;  ///< dtype, a_home, evict, workload, ...
  std::vector<std::string> order;        ///< the `order` permutation ("n", "k", "m"); empty: none
  std::vector<std::string> block_order;  ///< the `block_order` permutation; empty: none
};

/// The space `name` on target `t` holding `v`, and its only config.
[[nodiscard]] std::pair<space, config> fixed_space(const std::string& name, const target& t,
                                                   const fixed_values& v);

}  // namespace tessel::sim
