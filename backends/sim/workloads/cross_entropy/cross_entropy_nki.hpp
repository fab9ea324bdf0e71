// cross_entropy_nki.hpp: what cross_entropy.cpp hands its NKI emitter
// (cross_entropy_nki.cpp): the schedule's parameters, read once there.
#pragma once

#include "../../program.hpp"

#include <cstdint>
#include <string>

namespace tessel::sim {
namespace nki {
struct context;
}

namespace ce {

struct nki_params {
  std::int64_t tokens = 0, d_model = 0, vocab = 0;
  dtype type = dtype::bf16;
  std::int64_t token_tile = 128, vocab_chunk = 512, mm_k = 128, mm_n = 512;
  bool vocab_outer = false;  ///< order (v, t): W chunks outer, x tiles streamed
  int bufs = 2, queues = 1;
  engine_id max_engine = vector_engine, exp_engine = scalar_engine, pick_engine = vector_engine;
};

/// The NKI kernel of the schedule `p`: "" or why not.
[[nodiscard]] std::string emit_nki(const nki_params& p, const nki::context& ctx, std::string& out);

}  // namespace ce
}  // namespace tessel::sim
