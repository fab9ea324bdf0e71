// collectives.hpp: the simulator's collective cost model (docs/topology.md,
// "Collectives"). A collective over p ranks is a sequence of steps; each
// step costs a latency (alpha) plus the bytes it moves over the bandwidth
// its slowest link gives each transfer (beta), with the transfers that share
// a link or the chip's HBM at once dividing it (contention). Ranks are
// placed chip-major: the first ranks_per_chip ranks on chip 0, and so on.
// Within a chip ranks exchange through the shared HBM with their DMA
// engines; between chips over NeuronLink (the target's chip_link_* figures,
// docs/targets.md "Topology").
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>

namespace tessel::sim {

enum class collective : unsigned char { all_reduce, all_gather, reduce_scatter, all_to_all };
enum class collective_algorithm : unsigned char { ring, tree, hierarchical };

/// "all-reduce", "all-gather", "reduce-scatter", "all-to-all".
[[nodiscard]] std::string_view to_string(collective c) noexcept;
/// "ring", "tree", "hierarchical".
[[nodiscard]] std::string_view to_string(collective_algorithm a) noexcept;
/// The algorithm named `name` ("ring", "tree", "hierarchical"), or nullopt.
[[nodiscard]] std::optional<collective_algorithm> parse_collective_algorithm(
    std::string_view name) noexcept;

/// The links a collective runs over. Bandwidths in bytes per ns (GB/s),
/// latencies in ns.
struct topology {
  int chips = 1;
  int ranks_per_chip = 1;
  int torus_x = 1, torus_y = 1;  ///< chips per dimension of the chip-to-chip torus
  double core_bytes_per_ns = 0;  ///< one rank's DMA rate (the target's dma_bytes_per_us)
  double hbm_bytes_per_ns = 0;   ///< a chip's HBM, shared by every transfer on the chip
  double core_latency_ns = 0;    ///< per step: one DMA's fixed latency
  int chip_links = 0;            ///< NeuronLinks per chip
  double link_bytes_per_ns = 0;  ///< per link and direction
  double link_latency_ns = 0;    ///< per chip-to-chip hop
  [[nodiscard]] int ranks() const noexcept { return chips * ranks_per_chip; }
};

/// The topology of a target's constants (name -> value in the target's
/// units: ranks_per_chip, chips, torus_x, torus_y, dma_bytes_per_us,
/// hbm_bytes_per_us, dma_fixed_latency_ns, chip_links,
/// chip_link_bytes_per_us, chip_link_latency_ns). Missing names: one rank.
[[nodiscard]] topology topology_of(const std::map<std::string, double, std::less<>>& constants);

/// One collective's time and its parts.
struct collective_time {
  double ns = 0;           ///< the whole: latency_ns + transfer_ns
  double latency_ns = 0;   ///< the alpha terms
  double transfer_ns = 0;  ///< the size / bandwidth terms
  int steps = 0;           ///< sequential steps
};

/// The time of collective `c` by `a` over the first `ranks` ranks of `t`,
/// each rank holding `bytes`: the whole vector (all-reduce), the gathered
/// output (all-gather), the input before it is scattered (reduce-scatter),
/// its whole send buffer (all-to-all). 0 for one rank. Throws tessel::error
/// when `ranks` exceeds the topology or a bandwidth it needs is 0.
[[nodiscard]] collective_time time_collective(collective c, collective_algorithm a, double bytes,
                                              int ranks, const topology& t);

}  // namespace tessel::sim
