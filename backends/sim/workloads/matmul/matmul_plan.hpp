// matmul_plan.hpp: the plan of the matmul workload (matmul.cpp), shared by
// its lowering and its functional executor (matmul_functional.cpp) so both
// follow the same schedule: block and instruction-tile sizes, loop order,
// residency, where partial sums accumulate and in which type.
#pragma once

#include "../../machine.hpp"
#include "../../program.hpp"
#include "../../workload.hpp"

#include <tessel/config.hpp>
#include <tessel/gate.hpp>
#include <tessel/space.hpp>

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace tessel::sim {
class functional_kernel;
enum class fault : std::uint8_t;
namespace nki {
struct context;
}
}  // namespace tessel::sim

namespace tessel::sim::mm {

enum dim : int { dim_m = 0, dim_n = 1, dim_k = 2 };
constexpr std::array<const char*, 3> dim_names{"m", "n", "k"};

/// How partial sums reach their final value.
enum class accumulation : std::uint8_t {
  single_k,     ///< one k block: each PSUM group holds the whole sum
  psum_across,  ///< k innermost: PSUM groups stay open across the k blocks
  sbuf,         ///< partial sums of each k block added into SBUF by the evict engine
};

struct params {
  std::int64_t size_m = 0, size_n = 0, size_k = 0;  ///< the shape M, N, K
  dtype in = dtype::bf16, out = dtype::bf16, acc = dtype::bf16;
  /// The inputs' exact format: `in`'s, and for fp8 which one (e4m3 or e5m2;
  /// the two time alike: one byte, the same TensorE rate).
  element_type in_format = element_type::bf16;
  /// scale = row: C's row m is multiplied by scale[m] (an fp32 [M, 1] input:
  /// fp8's per-row dequantization) by the evict that drains each PSUM group.
  bool scaled = false;
  bool a_mk = false;  ///< A given as [M, K]: TensorE transposes each tile
  std::array<std::int64_t, 3> ext{}, tile{};
  std::int64_t mm_m = 128, mm_n = 512, mm_k = 128;
  std::array<int, 3> order{dim_m, dim_n, dim_k};
  std::array<int, 3> pos{0, 1, 2};          ///< position of each dim in `order`
  bool a_cached = false, b_cached = false;  ///< reuse > 1: blocks kept across the free loop
  int bufs = 2, a_bufs = 2, b_bufs = 2;     ///< block slots (sets of slots when cached)
  /// Blocks of the free loop that does not index the operand (A: n, B: m)
  /// sharing one load: 1 streams (reloaded per block), >= the loop's count
  /// loads once (a_home = sbuf), in between reloads a few times.
  std::int64_t a_reuse = 1, b_reuse = 1;
  int psum_bufs = 0;  ///< PSUM banks in rotation for accumulation (0: every free bank)
  /// psum_zero = memset: each accumulation group is zeroed by a VectorE memset
  /// before its first matmul (as nl.zeros in PSUM); matmul: the first matmul
  /// of the group overwrites the bank (the hardware's start-of-accumulation flag).
  bool psum_memset = false;
  /// Instruction loops inside a block, outermost first: m = stationary tiles,
  /// n = moving tiles, k = contraction tiles. k not innermost keeps several
  /// accumulation groups open (one bank each).
  std::array<int, 3> block_order{dim_m, dim_n, dim_k};
  std::array<int, 3> block_pos{0, 1, 2};  ///< position of each dim in `block_order`
  engine_id evict = vector_engine;
  bool coalesce = true;
  /// DMA queues per stream (A loads, B loads, C stores; dma_queues, default
  /// 1 as the compiler assigns them): their data phases share the 16 engines.
  int queues = 1;
};

[[nodiscard]] inline std::int64_t ceil_div(std::int64_t a, std::int64_t b) {
  return (a + b - 1) / b;
}

// --- the plan: residency, accumulation, resources ---------------------------------------

struct plan {
  params p;
  std::array<std::int64_t, 3> nb{};  ///< blocks per dim
  accumulation acc = accumulation::single_k;
  int a_resident = 1, b_resident = 1;  ///< blocks kept per buffer slot set (panel caching)
  int a_slots = 1, b_slots = 1;        ///< block slots
  int tm = 1, tn = 1, tk = 1;          ///< instruction tiles per full block
  int slabs = 1;                       ///< 128-row slabs per full k block
  int acc_banks = 8, groups = 1, psum_sets = 1;  ///< acc_banks: banks in rotation
  int transpose_bank = 6;  ///< a_layout = mk: the first of the transposes' two banks
  int open_rows = 1;       ///< coalesced C rows staged at once (block_order n before m: tm)
  int stage_slots = 2;
  std::int64_t c_rows = 0, c_cols = 0;  ///< C partial sums resident (sbuf accumulation)
};

struct sbuf_use {
  std::int64_t a = 0, b = 0, c = 0, stage = 0;
  std::int64_t scale = 0;  ///< scale = row: one fp32 per stationary tile of C
  [[nodiscard]] std::int64_t total() const { return a + b + c + stage + scale; }
};

/// The names the workload reads (its knob table, docs/simulator.md).
[[nodiscard]] std::vector<knob> knobs_of_matmul();
/// Reads the workload's names into `p`; returns "" or an error.
[[nodiscard]] std::string read_params(const knob_reader& v, const machine& m, params& p);
/// The instruction-tile limits of the target, as a compiler checks them.
[[nodiscard]] std::string check_tiles(const params& p, const machine& m);
/// read_params, then check_tiles: "" or the first error.
[[nodiscard]] std::string read_checked(const knob_reader& v, const machine& m, params& p);
/// The contraction tiles NKI can issue: mm_k divides the partitions, or (fp8's
/// double_row) is two slabs and every tile of a k block is two full slabs or
/// fits one.
[[nodiscard]] std::string check_contraction(const params& p, const machine& m);
/// Blocks, residency, accumulation and the resource checks; "" or a compile error.
[[nodiscard]] std::string make_plan(const params& p, const machine& m, plan& pl);
/// SBUF bytes per partition of each buffer of the plan.
[[nodiscard]] sbuf_use sbuf_needs(const plan& pl, const machine& m);
/// read_checked and make_plan: "" or the first error.
[[nodiscard]] std::string plan_for(const space& s, const config& c, const machine& m, plan& pl);
/// The functional executor of a plan (matmul_functional.cpp).
[[nodiscard]] std::unique_ptr<functional_kernel> make_functional(const plan& pl);
/// Blocks of dim d the plan's loops visit: all, or with drop_tail only the full ones.
[[nodiscard]] std::int64_t blocks_visited(const plan& pl, int d, fault f);
/// Whether the schedule writes C[i, j] (drop_tail leaves the tail blocks 0).
[[nodiscard]] bool element_computed(const plan& pl, std::int64_t i, std::int64_t j, fault f);
/// The reference: sum of a[k] b[k] in double.
[[nodiscard]] double exact_dot(std::span<const float> a, std::span<const float> b);
/// C[i, j] as the plan computes it from A's row i and B's column j (size_k
/// each): fp32 PSUM groups per instruction tile, partial sums per the plan's
/// accumulation, each drained group times the row's `scale` in fp32 (1
/// without scale = row), rounded to the output type (matmul_functional.cpp).
[[nodiscard]] double schedule_dot(const plan& pl, std::span<const float> a,
                                  std::span<const float> b, fault f, float scale = 1);

// --- instruction shapes: the lowering (matmul.cpp) and the analytic model
// (matmul_steady.cpp) cost the same instructions; buffers and tags are the lowering's.

/// One matmul: a k x rows stationary tile against a k x cols moving tile.
[[nodiscard]] instruction matmul_instruction(const params& p, std::int64_t k, std::int64_t rows,
                                             std::int64_t cols);
/// A TensorE transpose of a rows x cols tile of A (A given as [M, K]).
[[nodiscard]] instruction transpose_instruction(const params& p, std::int64_t rows,
                                                std::int64_t cols);
/// The evict of a PSUM group: a copy (op::copy) or an add of partial sums
/// (op::tensor_tensor), on the engine that runs it. `scaled` (scale = row):
/// the group is multiplied by its rows' scales on the way, VectorE's copy
/// becoming a tensor_scalar, its add a scalar_tensor_tensor (timed as the
/// add), ScalarE's activation taking the scales as its per-partition scale.
[[nodiscard]] instruction evict_instruction(const params& p, op kind, std::int64_t rows,
                                            std::int64_t cols, bool scaled = false);
/// psum_zero = memset: VectorE zeroes a group's bank.
[[nodiscard]] instruction psum_zero_instruction(std::int64_t rows, std::int64_t cols);

/// The NKI kernel of a plan (matmul_nki.cpp): "" or why it cannot be written.
[[nodiscard]] std::string emit_nki(const plan& pl, const nki::context& ctx, std::string& out);

}  // namespace tessel::sim::mm
