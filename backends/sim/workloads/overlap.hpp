// overlap.hpp: the collectives of a sharded workload's rank, after its
// compute or overlapped with it block by block (workload::communicate,
// docs/topology.md "Overlap"); shared by sharded_matmul and
// sharded_attention.
#pragma once

#include "../workload.hpp"

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>

namespace tessel::sim {

/// The collectives of a rank whose compute takes `compute_ns`: one of
/// `whole_ns` after the compute, or with `overlap` one of `chunk_ns` per
/// each of `chunks` blocks, each sent while the next block computes (a
/// two-stage pipeline: the slower stage sets the pace and the other stage's
/// one block is exposed).
[[nodiscard]] inline communication communication_of(std::string what, double whole_ns,
                                                    double chunk_ns, std::int64_t chunks,
                                                    bool overlap, double compute_ns) {
  communication out;
  out.what = std::move(what);
  if (!overlap) {
    out.ns = whole_ns;
    out.exposed_ns = whole_ns;
    return out;
  }
  const double n = static_cast<double>(chunks);
  out.ns = n * chunk_ns;
  out.exposed_ns = std::max(compute_ns, out.ns) + std::min(compute_ns / n, chunk_ns) - compute_ns;
  return out;
}

}  // namespace tessel::sim
