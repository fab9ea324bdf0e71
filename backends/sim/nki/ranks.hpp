// ranks.hpp: the NKI kernel of a plan split over ranks joined by collectives
// (the sharded workloads with tp > 1; docs/nki.md, "Ranks and collectives").
// Every rank runs the same kernel on its own shard of the inputs: the inner
// workload's kernel of one rank's plan (as the simulator timed it), then the
// nki.collectives calls the split names, one per chunk with overlap.
// Internal to the simulator.
#pragma once

#include "nki.hpp"

#include <string>
#include <vector>

namespace tessel::sim::nki {

/// What a sharded workload adds to its inner workload's kernel of one rank.
struct rank_emission {
  std::string workload;  ///< "sharded_matmul": the kernel is <workload>_kernel
  int ranks = 1;
  /// rank_inputs()'s entries, the rank's shard of each whole input, in
  /// `rank` ("\"A\": A[:, rank * 128:(rank + 1) * 128]")
  std::vector<std::string> shards;
  /// the kernel's body after the call of the rank's kernel: the collectives
  /// and `return` (each line at the kernel's indentation)
  std::vector<std::string> setup, communicate;
  std::string rank_call;  ///< "matmul_rank(A, B, C_rank)"
  /// outputs each rank returns only its part of (concatenated along axis 0
  /// in rank order); the others every rank returns whole
  std::vector<std::string> sharded_outputs;
  std::vector<std::string> notes;  ///< for the header, after the whole's
  std::string signature;           ///< replaces the whole's INPUTS/OUTPUTS/TOLERANCE if set
  std::string reference;           ///< appended after the whole's reference
};

/// `c` storing the file it would assemble into `into` (nki::assemble): the
/// whole problem's (program -1, no fault: its constants, signature and
/// reference) or one rank's kernel (program 0, c's fault).
[[nodiscard]] inline context capturing(const context& c, kernel_file& into, int program) {
  context out = c;
  out.capture = &into;
  out.program = program;
  if (program < 0) out.injected = fault::none;
  return out;
}

/// The file: `whole`'s header, constants, signature and reference (the
/// whole problem's kernel_file, captured, or `rank` itself when the rank's
/// constants are the file's and e.signature states the whole's shapes); RANKS; STRUCTURE (one
/// rank's lowering and its collectives, `s`); rank_inputs(); `rank`'s kernel (one rank's plan,
/// captured as program 0 and renamed <workload>_rank, its constants that differ from the whole's
/// held as locals); the kernel.
[[nodiscard]] std::string assemble_ranks(const kernel_file& whole, const kernel_file& rank,
                                         const rank_emission& e, const structure& s,
                                         const context& c);

}  // namespace tessel::sim::nki
