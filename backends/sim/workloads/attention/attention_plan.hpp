// attention_plan.hpp: the plan of the attention workload (attention.cpp),
// shared by its lowering and its functional executor
// (attention_functional.cpp): the parameters it reads and which kv tiles
// each q tile visits.
#pragma once

#include "../../machine.hpp"
#include "../../program.hpp"
#include "../../workload.hpp"

#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace tessel::sim {
class functional_kernel;
namespace nki {
struct context;
}
}  // namespace tessel::sim

namespace tessel::sim::attn {

[[nodiscard]] inline std::int64_t ceil_div(std::int64_t a, std::int64_t b) {
  return (a + b - 1) / b;
}

struct params {
  std::int64_t seq = 0, d = 128;
  dtype type = dtype::bf16;
  bool causal = false, skip_masked = true;
  std::int64_t q_tile = 128, kv_tile = 512;
  int kv_bufs = 2, queues = 1;
  std::vector<std::string> dma_order{"q", "k", "v"};
  bool exp_on_vector = false;
  int rescale_every = 1;  ///< 1: eager
  engine_id max_engine = vector_engine;
};

/// Reads the workload's names into `p`; returns "" or an error.
[[nodiscard]] std::string read(const knob_reader& v, const machine& m, params& p);

/// How the lowering lays a plan out on the core.
struct layout {
  std::int64_t partitions = 128;
  int sub_tiles = 1;  ///< 128-row sub-tiles of a q tile
  int kv_blocks = 1;  ///< 128-key blocks of a kv tile (V loads, P transposes)
  int s_banks = 1;    ///< PSUM banks of one fp32 score tile
  int s_sets = 1;     ///< score tiles in rotation (the banks left after transposes and O)
};
[[nodiscard]] layout layout_of(const params& p, const machine& m);

/// "" or the PSUM or SBUF overflow the lowering reports (a compile error
/// found after planning).
[[nodiscard]] std::string check_memory(const params& p, const machine& m);

/// The kv tiles q tile `qt` visits, in order: all of them, or with causal
/// and skip_masked those not wholly above the diagonal.
[[nodiscard]] inline std::vector<std::int64_t> visited_kv_tiles(const params& p, std::int64_t qt) {
  const std::int64_t q_end = std::min(p.seq, (qt + 1) * p.q_tile);
  const std::int64_t kv_tiles = ceil_div(p.seq, p.kv_tile);
  std::vector<std::int64_t> kvs;
  for (std::int64_t kt = 0; kt < kv_tiles; ++kt)
    if (!(p.causal && p.skip_masked && kt * p.kv_tile >= q_end)) kvs.push_back(kt);
  return kvs;
}

/// The NKI kernel of `p` (attention_nki.cpp): "" or why not. heads > 1
/// (sharded_attention): the heads stacked as the functional executor
/// stacks them, computed one after another. split_heads: the core split cuts
/// the stacked heads (sharded_attention on two physical cores).
[[nodiscard]] std::string emit_nki(const params& p, const nki::context& ctx, std::string& out,
                                   std::int64_t heads = 1, bool split_heads = false);

/// The steady-state estimate (attention_steady.cpp); nullopt when the plan
/// does not lower (check_memory).
[[nodiscard]] std::optional<steady_estimate> estimate_steady(const params& p, const machine& m);

/// How many heads the functional executor computes (stacked in its tensors)
/// and how many of them each rank runs (sharded_attention): fault::drop_tail
/// then drops each rank's last head.
struct head_split {
  std::int64_t heads = 1, per_rank = 1;
};

/// The functional executor (attention_functional.cpp).
[[nodiscard]] std::unique_ptr<functional_kernel> make_functional(const params& p,
                                                                 std::int64_t partitions,
                                                                 head_split heads = {});

}  // namespace tessel::sim::attn
