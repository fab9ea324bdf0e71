// matmul_plan.cpp: reading the matmul workload's names and planning its
// schedule (matmul_plan.hpp).
#include "matmul_plan.hpp"

#include "../../functional.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace tessel::sim::mm {
namespace {

std::string read_dtypes(const knob_reader& v, params& p) {
  std::string type = v.symbol("dtype", "");
  if (type.empty()) {
    const auto bytes = v.integer("bytes");
    type = bytes == 1 ? "fp8" : bytes == 4 ? "fp32" : bytes == 2 ? "bf16" : "";
    if (type.empty())
      return fmt::format("matmul: const bytes = {} is not 1 (fp8), 2 (bf16) or 4 (fp32)", bytes);
  }
  if (type == "bf16")
    p.in = dtype::bf16;
  else if (type == "fp16")
    p.in = dtype::fp16;
  else if (type == "fp8" || type == "fp8_e4m3" || type == "fp8_e5m2")
    p.in = dtype::fp8;
  else if (type == "fp32")
    p.in = dtype::fp32;
  else
    return fmt::format("matmul: dtype '{}' is not bf16, fp16, fp8, fp8_e4m3, fp8_e5m2 or fp32",
                       type);
  p.in_format = type == "fp8_e5m2" ? element_type::fp8_e5m2 : element_of(p.in);
  p.out = p.in == dtype::fp32 ? dtype::fp32 : dtype::bf16;
  const std::string acc = v.symbol("acc_dtype", "");
  p.acc = acc == "fp32" ? dtype::fp32 : acc == "bf16" ? dtype::bf16 : p.out;
  const std::string layout = v.symbol("a_layout");
  if (layout != "km" && layout != "mk")
    return fmt::format("matmul: a_layout '{}' is not km or mk", layout);
  p.a_mk = layout == "mk";
  const std::string scale = v.symbol("scale");
  if (scale != "none" && scale != "row")
    return fmt::format("matmul: scale '{}' is not none or row", scale);
  p.scaled = scale == "row";
  return "";
}

/// Reads a permutation of (m, n, k) named `name` into order/pos (unchanged when absent).
std::string read_perm(const knob_reader& v, const char* name, std::array<int, 3>& order,
                      std::array<int, 3>& pos) {
  const auto perm = v.order(name);
  const auto bad = fmt::format("matmul: {} must be a permutation of (m, n, k)", name);
  if (perm.size() != 3) return bad;
  std::array<bool, 3> seen{};
  for (int i = 0; i < 3; ++i) {
    const auto it =
        std::find(dim_names.begin(), dim_names.end(), perm[static_cast<std::size_t>(i)]);
    if (it == dim_names.end()) return bad;
    const auto d = static_cast<std::size_t>(it - dim_names.begin());
    if (seen[d]) return bad;
    seen[d] = true;
    order[static_cast<std::size_t>(i)] = static_cast<int>(d);
  }
  for (int i = 0; i < 3; ++i) pos[static_cast<std::size_t>(order[static_cast<std::size_t>(i)])] = i;
  return "";
}

std::string read_order(const knob_reader& v, params& p) {
  if (auto e = read_perm(v, "order", p.order, p.pos); !e.empty()) return e;
  return read_perm(v, "block_order", p.block_order, p.block_pos);
}

/// Buffer depths and reuse: bufs is the default of a_bufs and b_bufs;
/// a_home/b_home = sbuf is a_reuse/b_reuse = every block.
std::string read_buffers(const knob_reader& v, params& p) {
  p.bufs = static_cast<int>(v.integer("bufs"));
  if (p.bufs < 1) return "matmul: bufs must be at least 1";
  const std::string a_home = v.symbol("a_home"), b_home = v.symbol("b_home");
  constexpr std::int64_t all = std::int64_t{1} << 40;
  p.a_reuse = v.integer("a_reuse", a_home == "sbuf" ? all : 1);
  p.b_reuse = v.integer("b_reuse", b_home == "sbuf" ? all : 1);
  if (p.a_reuse < 1 || p.b_reuse < 1) return "matmul: a_reuse and b_reuse must be at least 1";
  p.a_cached = p.a_reuse > 1;
  p.b_cached = p.b_reuse > 1;
  p.a_bufs = static_cast<int>(v.integer("a_bufs", p.bufs));
  p.b_bufs = static_cast<int>(v.integer("b_bufs", p.bufs));
  if (!p.a_cached && !v.flag("prefetch")) p.a_bufs = 1;
  if (p.a_bufs < 1 || p.b_bufs < 1) return "matmul: a_bufs and b_bufs must be at least 1";
  p.psum_bufs = static_cast<int>(v.integer("psum_bufs", 0));
  if (p.psum_bufs < 0) return "matmul: psum_bufs must be at least 1 (0: every free bank)";
  const std::string zero = v.symbol("psum_zero");
  if (zero != "matmul" && zero != "memset")
    return fmt::format("matmul: psum_zero '{}' is not matmul or memset", zero);
  p.psum_memset = zero == "memset";
  return "";
}

}  // namespace

std::vector<knob> knobs_of_matmul() {
  return {
      knob::required_integer("M", "rows of A and C"),
      knob::required_integer("N", "columns of B and C"),
      knob::required_integer("K", "the contraction"),
      knob::symbol("dtype", {"bf16", "fp16", "fp8", "fp8_e4m3", "fp8_e5m2", "fp32"},
                   derived{"bf16 (or from const bytes)"},
                   "input type (fp8 is fp8_e4m3); C is bf16 (fp32 for fp32)"),
      knob::integer("bytes", 2,
                    "the input type by size when dtype is absent: 1 fp8, 2 bf16, 4 fp32",
                    "1 | 2 | 4"),
      knob::symbol("a_layout", {"km", "mk"}, "km",
                   "km: A given as lhsT [K,M]; mk: A [M,K], each tile transposed on TensorE"),
      knob::integer("tile_m", derived{"mm_m"}, "block size along M (rows of C computed per block)"),
      knob::integer("tile_n", derived{"mm_n"}, "block size along N"),
      knob::integer("tile_k", derived{"mm_k"}, "block size along K"),
      knob::order("order", {"m", "n", "k"}, "loop order of the blocks, outermost first"),
      knob::symbol("a_home", {"sbuf", "hbm"}, "hbm",
                   "sbuf: A blocks stay resident across the n loop; hbm: streamed"),
      knob::symbol("b_home", {"sbuf", "hbm"}, "hbm", "as a_home for B across the m loop"),
      knob::integer("bufs", 2, "block slots per streamed operand (DMA multi-buffering)", ">= 1"),
      knob::integer("a_bufs", derived{"bufs"}, "block slots (or resident sets) of A", ">= 1"),
      knob::integer("b_bufs", derived{"bufs"}, "block slots (or resident sets) of B", ">= 1"),
      knob::integer(
          "a_reuse", derived{"1 (a_home = sbuf: every n block)"},
          "n blocks served by one load of A's blocks: 1 reloads per n block, more reloads "
          "A ceil(n blocks / a_reuse) times",
          ">= 1"),
      knob::integer("b_reuse", derived{"1 (b_home = sbuf: every m block)"},
                    "m blocks served by one load of B's blocks", ">= 1"),
      knob::integer("psum_bufs", derived{"every free bank (8; 6 with a_layout = mk)"},
                    "PSUM banks in rotation for accumulation groups", "1..8"),
      knob::symbol("psum_zero", {"matmul", "memset"}, "matmul",
                   "how a PSUM group starts: the first matmul overwrites the bank, or a VectorE "
                   "memset zeroes it first (nl.zeros in PSUM)"),
      knob::order("block_order", {"m", "n", "k"},
                  "instruction loops inside a block, outermost first (m: stationary tiles, n: "
                  "moving tiles, k: contraction); k outside keeps every group of the block open "
                  "in PSUM"),
      knob::flag("prefetch", true,
                 "a_home = hbm: false gives A one slot (loads wait for the last use)"),
      knob::symbol("evict", {"vector", "scalar", "gpsimd"}, "vector",
                   "engine that drains PSUM (VectorE adds the partial sums when ScalarE drains); "
                   "gpsimd is a compile error: GpSimdE cannot access PSUM"),
      knob::flag("coalesce", true,
                 "true: one DMA per 128-row slab of a block; false: one per instruction tile"),
      knob::integer("dma_queues", 1,
                    "DMA queues per stream (A loads, B loads, C stores); not a tuning knob: NKI "
                    "assigns queues (docs/nki.md), and the data phases share the 16 DMA engines "
                    "anyway",
                    "1..5"),
      knob::symbol("scale", {"none", "row"}, "none",
                   "row: C's row m times scale[m], an fp32 [M, 1] input (fp8 dequantization: A's "
                   "row scale times B's tensor scale), applied by the evict of each PSUM group"),
      knob::symbol("acc_dtype", {"fp32", "bf16"}, derived{"the output type"},
                   "type of partial sums kept in SBUF across k blocks"),
      knob::integer("mm_m", derived{"matmul_max_stationary_free (128)"},
                    "stationary free size of one matmul"),
      knob::integer("mm_n", derived{"matmul_max_moving_free (512)"},
                    "moving free size of one matmul"),
      knob::integer("mm_k", derived{"the partitions (128; fp8 on trn2: 256)"},
                    "contraction of one matmul"),
  };
}

std::string read_params(const knob_reader& v, const machine& m, params& p) {
  p.size_m = v.integer("M");
  p.size_n = v.integer("N");
  p.size_k = v.integer("K");
  if (p.size_m <= 0 || p.size_n <= 0 || p.size_k <= 0) return "matmul: M, N and K must be positive";
  if (auto e = read_dtypes(v, p); !e.empty()) return e;
  if (auto e = read_order(v, p); !e.empty()) return e;
  const int max_k = p.in == dtype::fp8 ? m.fp8_max_contraction : m.max_contraction;
  p.mm_m = v.integer("mm_m", m.max_stationary_free);
  p.mm_n = v.integer("mm_n", m.max_moving_free);
  p.mm_k = v.integer("mm_k", max_k);
  p.ext = {p.size_m, p.size_n, p.size_k};
  p.tile = {v.integer("tile_m", p.mm_m), v.integer("tile_n", p.mm_n), v.integer("tile_k", p.mm_k)};
  for (int d = 0; d < 3; ++d)
    if (p.tile[static_cast<std::size_t>(d)] <= 0)
      return fmt::format("matmul: tile_{} must be positive",
                         dim_names[static_cast<std::size_t>(d)]);
  for (int d = 0; d < 3; ++d)
    p.tile[static_cast<std::size_t>(d)] =
        std::min(p.tile[static_cast<std::size_t>(d)], p.ext[static_cast<std::size_t>(d)]);
  if (auto e = read_buffers(v, p); !e.empty()) return e;
  const std::string evict = v.symbol("evict");
  if (evict == "gpsimd")
    return "matmul: evict = gpsimd cannot drain PSUM: GpSimdE has no access to PSUM "
           "(nki.isa.tensor_copy); use vector or scalar";
  p.evict = evict == "scalar" ? scalar_engine : vector_engine;
  if (evict != "vector" && evict != "scalar")
    return fmt::format("matmul: evict '{}' is not vector or scalar", evict);
  p.coalesce = v.flag("coalesce");
  p.queues =
      static_cast<int>(std::clamp<std::int64_t>(v.integer("dma_queues"), 1, dma_queue_count / 3));
  return "";
}

std::string check_tiles(const params& p, const machine& m) {
  const int max_k = p.in == dtype::fp8 ? m.fp8_max_contraction : m.max_contraction;
  if (p.mm_k > max_k)
    return fmt::format(
        "partition dim {} > {}: a matmul contraction tile (mm_k) spans at most {} partitions "
        "for {} on {}",
        p.mm_k, max_k, max_k, to_string(p.in), m.target_name);
  if (p.mm_m > m.max_stationary_free)
    return fmt::format("stationary free size {} > {}: mm_m exceeds the TensorE array", p.mm_m,
                       m.max_stationary_free);
  if (p.mm_n > m.max_moving_free)
    return fmt::format("moving free size {} > {}: mm_n exceeds what one matmul streams", p.mm_n,
                       m.max_moving_free);
  if (p.mm_m <= 0 || p.mm_n <= 0 || p.mm_k <= 0)
    return "matmul: mm_m, mm_n and mm_k must be positive";
  return check_contraction(p, m);
}

std::string check_contraction(const params& p, const machine& m) {
  const std::int64_t parts = m.partitions;
  // blocks are loaded a 128-row slab at a time, and a matmul reads one
  // partition range: a contraction tile must not straddle two slabs
  if (p.mm_k <= parts && parts % p.mm_k != 0)
    return fmt::format(
        "mm_k = {} must divide the {} partitions: a contraction tile lies within one {}-row slab "
        "of a block",
        p.mm_k, parts, parts);
  if (p.mm_k <= parts) return "";
  // NKI's double_row nc_matmul takes [rows, 2, free] tiles: two slabs of equal
  // partitions side by side (docs/nki.md, "FP8 matmul"); a contraction tile of
  // parts < rows < 2 x parts is no such pair, and is refused rather than timed
  // as one instruction that no kernel can issue.
  if (p.mm_k != 2 * parts)
    return fmt::format(
        "mm_k = {}: a contraction tile deeper than the {} partitions is an fp8 double_row "
        "matmul, which pairs two full slabs; mm_k must be {} or divide {}",
        p.mm_k, parts, 2 * parts, parts);
  const std::int64_t tile_k = p.tile[dim_k];
  const std::int64_t tail = p.size_k - (ceil_div(p.size_k, tile_k) - 1) * tile_k;
  for (const std::int64_t rows : {tile_k, tail}) {
    const std::int64_t last = rows % p.mm_k;
    if (last > parts)
      return fmt::format(
          "mm_k = {} (fp8 double_row): a k block of {} rows ends in a contraction tile of {} "
          "rows, which is neither two full {}-row slabs (double_row) nor one (an ordinary "
          "matmul): NKI cannot issue it; use tile_k and K multiples of {} (or ending in at most "
          "{} rows)",
          p.mm_k, rows, last, parts, p.mm_k, parts);
  }
  return "";
}

namespace {

/// Blocks of operand X kept resident when X is reused across its free loop
/// `u` (A: n, B: m) and u is not innermost: every block of the loops inside u.
int cached_blocks(const plan& pl, int u, bool cached) {
  const int pu = pl.p.pos[static_cast<std::size_t>(u)];
  if (!cached || pu == 2) return 1;
  std::int64_t blocks = 1;
  for (int i = pu + 1; i < 3; ++i)
    blocks *= pl.nb[static_cast<std::size_t>(pl.p.order[static_cast<std::size_t>(i)])];
  return static_cast<int>(std::min<std::int64_t>(blocks, 1 << 20));
}

std::string psum_plan(plan& pl, const machine& m) {
  const auto& p = pl.p;
  const int free_banks = m.psum_banks - (p.a_mk ? 2 : 0);
  if (free_banks < 1)
    return fmt::format("PSUM overflow: transposes need 2 banks and the target has {}",
                       m.psum_banks);
  pl.transpose_bank = free_banks;
  if (p.psum_bufs > free_banks)
    return fmt::format("PSUM overflow: psum_bufs = {} banks in rotation; the target has {}{}",
                       p.psum_bufs, m.psum_banks, p.a_mk ? " and transposes hold 2" : "");
  pl.acc_banks = p.psum_bufs > 0 ? p.psum_bufs : free_banks;
  pl.groups = pl.tm * pl.tn;
  // k outside a stationary or moving loop inside the block: every group of
  // the block is open at once
  const bool k_inner = p.block_pos[dim_k] == 2;
  if (!k_inner && pl.acc != accumulation::psum_across && pl.groups > pl.acc_banks)
    return fmt::format(
        "PSUM overflow: block_order with k outside keeps {} accumulation groups open (a {} x {} "
        "block in {} x {} tiles); {} banks rotate (over by {})",
        pl.groups, p.tile[dim_m], p.tile[dim_n], p.mm_m, p.mm_n, pl.acc_banks,
        pl.groups - pl.acc_banks);
  if (pl.acc != accumulation::psum_across) return "";
  if (pl.groups > pl.acc_banks)
    return fmt::format(
        "PSUM overflow: {} accumulation groups outstanding (a {} x {} C block in {} x {} tiles "
        "accumulating across k blocks); {}{}",
        pl.groups, p.tile[dim_m], p.tile[dim_n], p.mm_m, p.mm_n,
        p.psum_bufs > 0 ? fmt::format("psum_bufs = {} banks rotate", p.psum_bufs)
                        : fmt::format("the target has {} banks", m.psum_banks),
        p.a_mk ? fmt::format(" and transposes hold 2 (over by {})", pl.groups - pl.acc_banks)
               : fmt::format(" (over by {})", pl.groups - pl.acc_banks));
  pl.psum_sets = pl.acc_banks / pl.groups;
  return "";
}

std::string check_sbuf(const plan& pl, const machine& m) {
  const sbuf_use u = sbuf_needs(pl, m);
  const std::int64_t cap = m.sbuf_bytes_per_partition;
  if (u.total() <= cap) return "";
  const std::array<std::pair<const char*, std::int64_t>, 5> parts{{{"A blocks", u.a},
                                                                   {"B blocks", u.b},
                                                                   {"C partial sums", u.c},
                                                                   {"output staging", u.stage},
                                                                   {"row scales", u.scale}}};
  for (const auto& [what, bytes] : parts)
    if (bytes > cap)
      return fmt::format(
          "SBUF overflow: {} need {} B per partition with bufs={}; the target has {} (over by {} "
          "B)",
          what, bytes, pl.p.bufs, cap, bytes - cap);
  std::string list;
  int shown = 0;
  for (const auto& [what, bytes] : parts)
    if (bytes > 0) list += fmt::format("{}{} ({} B)", shown++ ? ", " : "", what, bytes);
  return fmt::format(
      "SBUF overflow: {} need {} B per partition with bufs={}; the target has {} (over by {} B)",
      list, u.total(), pl.p.bufs, cap, u.total() - cap);
}

}  // namespace

sbuf_use sbuf_needs(const plan& pl, const machine& m) {
  const auto& p = pl.p;
  const std::int64_t parts = m.partitions, in_b = dtype_bytes(p.in);
  sbuf_use u;
  std::int64_t a_block = ceil_div(p.tile[dim_k], parts) * p.tile[dim_m] * in_b;
  if (p.a_mk)
    a_block += ceil_div(p.tile[dim_m], parts) * p.tile[dim_k] * in_b;  // the untransposed rows
  u.a = a_block * pl.a_slots;
  u.b = ceil_div(p.tile[dim_k], parts) * p.tile[dim_n] * in_b * pl.b_slots;
  // one row of instruction tiles per stationary tile of every m block the partial sums span
  if (pl.acc == accumulation::sbuf)
    u.c = (p.pos[dim_m] > p.pos[dim_k] ? pl.nb[dim_m] : 1) * pl.tm * pl.c_cols * dtype_bytes(p.acc);
  u.stage = pl.stage_slots * (p.coalesce ? p.tile[dim_n] : std::min(p.mm_n, p.tile[dim_n])) *
            dtype_bytes(p.out);
  if (p.scaled) u.scale = pl.nb[dim_m] * pl.tm * dtype_bytes(dtype::fp32);
  return u;
}

std::string make_plan(const params& p, const machine& m, plan& pl) {
  pl.p = p;
  for (int d = 0; d < 3; ++d)
    pl.nb[static_cast<std::size_t>(d)] =
        ceil_div(p.ext[static_cast<std::size_t>(d)], p.tile[static_cast<std::size_t>(d)]);
  pl.tm = static_cast<int>(ceil_div(p.tile[dim_m], p.mm_m));
  pl.tn = static_cast<int>(ceil_div(p.tile[dim_n], p.mm_n));
  pl.tk = static_cast<int>(ceil_div(p.tile[dim_k], p.mm_k));
  pl.slabs = static_cast<int>(ceil_div(p.tile[dim_k], m.partitions));
  if (pl.nb[dim_k] == 1)
    pl.acc = accumulation::single_k;
  else
    pl.acc = p.order[2] == dim_k ? accumulation::psum_across : accumulation::sbuf;
  pl.open_rows = p.coalesce && p.block_pos[dim_n] < p.block_pos[dim_m] ? pl.tm : 1;
  pl.stage_slots = pl.open_rows + 1;
  pl.a_resident = cached_blocks(pl, dim_n, p.a_cached);
  pl.b_resident = cached_blocks(pl, dim_m, p.b_cached);
  pl.a_slots = pl.a_resident * p.a_bufs;
  pl.b_slots = pl.b_resident * p.b_bufs;
  // C partial sums live from a C tile's first k block to its last: every
  // block of a free dim whose loop runs inside the k loop.
  pl.c_rows = p.pos[dim_m] > p.pos[dim_k] ? pl.nb[dim_m] * p.tile[dim_m] : p.tile[dim_m];
  pl.c_cols = p.pos[dim_n] > p.pos[dim_k] ? pl.nb[dim_n] * p.tile[dim_n] : p.tile[dim_n];
  pl.c_rows = std::min(pl.c_rows, p.size_m);
  pl.c_cols = std::min(pl.c_cols, p.size_n);
  if (auto e = psum_plan(pl, m); !e.empty()) return e;
  if (auto e = check_sbuf(pl, m); !e.empty()) return e;
  const double matmuls = static_cast<double>(ceil_div(p.size_m, p.mm_m)) *
                         static_cast<double>(ceil_div(p.size_n, p.mm_n)) *
                         static_cast<double>(ceil_div(p.size_k, p.mm_k));
  if (matmuls > 5e7)
    return fmt::format("matmul: {:.3g} matmul instructions is more than the simulator lowers",
                       matmuls);
  return "";
}

std::string read_checked(const knob_reader& v, const machine& m, params& p) {
  if (auto e = read_params(v, m, p); !e.empty()) return e;
  return check_tiles(p, m);
}

std::string plan_for(const space& s, const config& c, const machine& m, plan& pl) {
  params p;
  if (auto e = read_checked(knob_reader(matmul_workload().knobs(), s, c), m, p); !e.empty())
    return e;
  return make_plan(p, m, pl);
}

instruction matmul_instruction(const params& p, std::int64_t k, std::int64_t rows,
                               std::int64_t cols) {
  return make_matmul(p.in, k, rows, cols);
}

instruction transpose_instruction(const params& p, std::int64_t rows, std::int64_t cols) {
  return make_transpose(p.in, rows, cols);
}

instruction evict_instruction(const params& p, op kind, std::int64_t rows, std::int64_t cols,
                              bool scaled) {
  // ScalarE has no two-tensor add (its activation takes a per-partition
  // bias only): with evict = scalar, the partial-sum adds run on VectorE.
  const engine_id e =
      p.evict == scalar_engine && kind == op::tensor_tensor ? vector_engine : p.evict;
  if (e == scalar_engine && kind == op::copy) kind = op::activation;
  if (scaled && kind == op::copy) kind = op::tensor_scalar;
  return make_elementwise(e, kind, dtype::fp32, rows, cols, flag_reads_psum);
}

instruction psum_zero_instruction(std::int64_t rows, std::int64_t cols) {
  return make_elementwise(vector_engine, op::tensor_scalar, dtype::fp32, rows, cols,
                          flag_writes_psum);
}

}  // namespace tessel::sim::mm
