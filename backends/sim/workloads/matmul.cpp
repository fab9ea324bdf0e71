// matmul.cpp: C[M,N] = A[M,K] @ B[K,N] on one NeuronCore, the tiled NKI
// kernel of the matmul tutorial generalized by the DESIGN.md §3 parameters.
//
// Blocks: the loops over blocks of tile_m x tile_n x tile_k run in `order`
// (outermost first). Each block is computed as in the tutorial: for each
// stationary tile (mm_m columns of A) and each moving tile (mm_n columns of
// B), the contraction tiles (mm_k rows) accumulate into one PSUM bank, which
// the `evict` engine drains to SBUF. A and B blocks are loaded as 128-row
// slabs (coalesce = true: one transfer per slab; false: one per instruction
// tile, as the tutorial's first stages do). docs/simulator.md has the
// parameter table and the residency rules.
#include "../timing.hpp"
#include "../workload.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <string>
#include <vector>

namespace tessel::sim {
namespace {

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
  bool a_mk = false;  ///< A given as [M, K]: TensorE transposes each tile
  std::array<std::int64_t, 3> ext{}, tile{};
  std::int64_t mm_m = 128, mm_n = 512, mm_k = 128;
  std::array<int, 3> order{dim_m, dim_n, dim_k};
  std::array<int, 3> pos{0, 1, 2};  ///< position of each dim in `order`
  bool a_cached = false, b_cached = false;
  int bufs = 2, a_bufs = 2, b_bufs = 2;
  engine_id evict = vector_engine;
  bool coalesce = true;
  int queues = 1;
};

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

std::string read_dtypes(const value_reader& v, params& p) {
  std::string type = v.symbol("dtype", "");
  if (type.empty()) {
    const auto bytes = v.integer("bytes", 2);
    type = bytes == 1 ? "fp8" : bytes == 4 ? "fp32" : bytes == 2 ? "bf16" : "";
    if (type.empty())
      return fmt::format("matmul: const bytes = {} is not 1 (fp8), 2 (bf16) or 4 (fp32)", bytes);
  }
  if (type == "bf16")
    p.in = dtype::bf16;
  else if (type == "fp8")
    p.in = dtype::fp8;
  else if (type == "fp32")
    p.in = dtype::fp32;
  else
    return fmt::format("matmul: dtype '{}' is not bf16, fp8 or fp32", type);
  p.out = p.in == dtype::fp32 ? dtype::fp32 : dtype::bf16;
  const std::string acc = v.symbol("acc_dtype", "");
  p.acc = acc == "fp32" ? dtype::fp32 : acc == "bf16" ? dtype::bf16 : p.out;
  const std::string layout = v.symbol("a_layout", "km");
  if (layout != "km" && layout != "mk")
    return fmt::format("matmul: a_layout '{}' is not km or mk", layout);
  p.a_mk = layout == "mk";
  return "";
}

std::string read_order(const value_reader& v, params& p) {
  const auto order = v.order("order");
  if (!order) return "";
  if (order->size() != 3) return "matmul: order must be a permutation of (m, n, k)";
  for (int i = 0; i < 3; ++i) {
    const auto it =
        std::find(dim_names.begin(), dim_names.end(), (*order)[static_cast<std::size_t>(i)]);
    if (it == dim_names.end()) return "matmul: order must be a permutation of (m, n, k)";
    p.order[static_cast<std::size_t>(i)] = static_cast<int>(it - dim_names.begin());
  }
  for (int i = 0; i < 3; ++i)
    p.pos[static_cast<std::size_t>(p.order[static_cast<std::size_t>(i)])] = i;
  return "";
}

std::string read_params(const value_reader& v, const machine& m, params& p) {
  p.size_m = v.integer("M", 0);
  p.size_n = v.integer("N", 0);
  p.size_k = v.integer("K", 0);
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
  p.bufs = static_cast<int>(v.integer("bufs", 2));
  if (p.bufs < 1) return "matmul: bufs must be at least 1";
  const std::string a_home = v.symbol("a_home", "hbm"), b_home = v.symbol("b_home", "hbm");
  p.a_cached = a_home == "sbuf";
  p.b_cached = b_home == "sbuf";
  p.a_bufs = p.bufs;
  p.b_bufs = p.bufs;
  if (!p.a_cached && !v.flag("prefetch", true)) p.a_bufs = 1;
  const std::string evict = v.symbol("evict", "vector");
  p.evict = evict == "scalar" ? scalar_engine : evict == "gpsimd" ? gpsimd_engine : vector_engine;
  if (evict != "vector" && evict != "scalar" && evict != "gpsimd")
    return fmt::format("matmul: evict '{}' is not vector, scalar or gpsimd", evict);
  p.coalesce = v.flag("coalesce", true);
  p.queues = static_cast<int>(
      std::clamp<std::int64_t>(v.integer("dma_queues", 1), 1, dma_queue_count / 3));
  return "";
}

/// The instruction-tile limits of the target, as a compiler checks them.
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
  return "";
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
  int acc_banks = 8, groups = 1, psum_sets = 1;
  int stage_slots = 2;
  std::int64_t c_rows = 0, c_cols = 0;  ///< C partial sums resident (sbuf accumulation)
};

/// Blocks of operand X kept resident when X is cached in SBUF and its free
/// loop `u` (A: n, B: m) is not innermost: every block of the loops inside u.
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
  pl.acc_banks = m.psum_banks - (p.a_mk ? 2 : 0);
  if (pl.acc_banks < 1)
    return fmt::format("PSUM overflow: transposes need 2 banks and the target has {}",
                       m.psum_banks);
  pl.groups = pl.tm * pl.tn;
  if (pl.acc != accumulation::psum_across) return "";
  if (pl.groups > pl.acc_banks)
    return fmt::format(
        "PSUM overflow: {} accumulation groups outstanding (a {} x {} C block in {} x {} tiles "
        "accumulating across k blocks); the target has {} banks{}",
        pl.groups, p.tile[dim_m], p.tile[dim_n], p.mm_m, p.mm_n, m.psum_banks,
        p.a_mk ? fmt::format(" and transposes hold 2 (over by {})", pl.groups - pl.acc_banks)
               : fmt::format(" (over by {})", pl.groups - pl.acc_banks));
  pl.psum_sets = pl.acc_banks / pl.groups;
  return "";
}

struct sbuf_use {
  std::int64_t a = 0, b = 0, c = 0, stage = 0;
  [[nodiscard]] std::int64_t total() const { return a + b + c + stage; }
};

sbuf_use sbuf_needs(const plan& pl, const machine& m) {
  const auto& p = pl.p;
  const std::int64_t parts = m.partitions, in_b = dtype_bytes(p.in);
  sbuf_use u;
  std::int64_t a_block = ceil_div(p.tile[dim_k], parts) * p.tile[dim_m] * in_b;
  if (p.a_mk)
    a_block += ceil_div(p.tile[dim_m], parts) * p.tile[dim_k] * in_b;  // the untransposed rows
  u.a = a_block * pl.a_slots;
  u.b = ceil_div(p.tile[dim_k], parts) * p.tile[dim_n] * in_b * pl.b_slots;
  if (pl.acc == accumulation::sbuf)
    u.c = ceil_div(pl.c_rows, p.mm_m) * pl.c_cols * dtype_bytes(p.acc);
  u.stage = pl.stage_slots * (p.coalesce ? p.tile[dim_n] : std::min(p.mm_n, p.tile[dim_n])) *
            dtype_bytes(p.out);
  return u;
}

std::string check_sbuf(const plan& pl, const machine& m) {
  const sbuf_use u = sbuf_needs(pl, m);
  const std::int64_t cap = m.sbuf_bytes_per_partition;
  if (u.total() <= cap) return "";
  const std::array<std::pair<const char*, std::int64_t>, 4> parts{
      {{"A blocks", u.a}, {"B blocks", u.b}, {"C partial sums", u.c}, {"output staging", u.stage}}};
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

// --- lowering ---------------------------------------------------------------------------------

/// Pieces (DMA transfers) of one operand's block slots: who filled each and
/// who read it last, for RAW and WAR dependencies.
struct operand {
  int pieces = 0;
  std::vector<instruction_id> load, reader;
  std::vector<std::uint8_t> consumed;  ///< TensorE already waits on this load
  std::int64_t serial = -1;            ///< streaming: loads so far
  std::array<std::int64_t, 2> last_block{-1, -1};
  int slot = 0;

  void init(int slots, int pieces_per_block) {
    pieces = pieces_per_block;
    const auto n = static_cast<std::size_t>(slots) * static_cast<std::size_t>(pieces_per_block);
    load.assign(n, program::none);
    reader.assign(n, program::none);
    consumed.assign(n, 1);
  }
  [[nodiscard]] std::size_t at(int piece) const {
    return static_cast<std::size_t>(slot) * static_cast<std::size_t>(pieces) +
           static_cast<std::size_t>(piece);
  }
};

class lowerer {
 public:
  lowerer(const plan& pl, const machine& m, program& out) : pl_(pl), p_(pl.p), m_(m), out_(out) {}

  void run() {
    setup();
    std::array<std::int64_t, 3> idx{};
    const auto& o = p_.order;
    for (idx[0] = 0; idx[0] < pl_.nb[static_cast<std::size_t>(o[0])]; ++idx[0])
      for (idx[1] = 0; idx[1] < pl_.nb[static_cast<std::size_t>(o[1])]; ++idx[1])
        for (idx[2] = 0; idx[2] < pl_.nb[static_cast<std::size_t>(o[2])]; ++idx[2]) {
          std::array<std::int64_t, 3> b{};
          for (int i = 0; i < 3; ++i)
            b[static_cast<std::size_t>(o[static_cast<std::size_t>(i)])] =
                idx[static_cast<std::size_t>(i)];
          iteration(b, idx);
        }
  }

 private:
  // --- set-up ---------------------------------------------------------------------

  void setup() {
    const std::int64_t in_b = dtype_bytes(p_.in), out_b = dtype_bytes(p_.out);
    hbm_a_ = out_.add_buffer({"A (HBM)", memory::hbm, 0, 1, p_.size_m * p_.size_k * in_b});
    hbm_b_ = out_.add_buffer({"B (HBM)", memory::hbm, 0, 1, p_.size_k * p_.size_n * in_b});
    hbm_c_ = out_.add_buffer({"C (HBM)", memory::hbm, 0, 1, p_.size_m * p_.size_n * out_b});
    const sbuf_use u = sbuf_needs(pl_, m_);
    sb_a_ =
        out_.add_buffer({"A blocks", memory::sbuf, u.a / std::max(1, pl_.a_slots), pl_.a_slots, 0});
    sb_b_ =
        out_.add_buffer({"B blocks", memory::sbuf, u.b / std::max(1, pl_.b_slots), pl_.b_slots, 0});
    sb_c_ = out_.add_buffer({"C partial sums", memory::sbuf, u.c, 1, 0});
    sb_stage_ = out_.add_buffer(
        {"output staging", memory::sbuf, u.stage / pl_.stage_slots, pl_.stage_slots, 0});
    psum_ =
        out_.add_buffer({"PSUM accumulators", memory::psum, m_.psum_bank_bytes, m_.psum_banks, 0});
    tag_load_a_ = out_.add_tag("load A");
    tag_load_b_ = out_.add_tag("load B");
    tag_matmul_ = out_.add_tag("matmul");
    tag_transpose_ = out_.add_tag("transpose A");
    tag_evict_ = out_.add_tag("evict");
    tag_store_ = out_.add_tag("store C");
    const int a_width = p_.coalesce ? 1 : pl_.tm;
    if (p_.a_mk) {
      const int rows = static_cast<int>(ceil_div(p_.tile[dim_m], m_.partitions));
      a_.init(pl_.a_slots, pl_.slabs * rows);  // transposed [128 k, 128 m] pieces
      a_raw_.init(pl_.a_slots, rows * (p_.coalesce ? 1 : pl_.slabs));  // untransposed rows
    } else {
      a_.init(pl_.a_slots, pl_.slabs * a_width);
    }
    b_.init(pl_.b_slots, pl_.slabs * (p_.coalesce ? 1 : pl_.tn));
    bank_evict_.assign(static_cast<std::size_t>(m_.psum_banks), program::none);
    stage_store_.assign(static_cast<std::size_t>(pl_.stage_slots), program::none);
    out_.totals.flops = 2.0 * static_cast<double>(p_.size_m) * static_cast<double>(p_.size_n) *
                        static_cast<double>(p_.size_k);
    out_.totals.min_hbm_bytes =
        static_cast<double>(p_.size_m * p_.size_k + p_.size_k * p_.size_n) *
            static_cast<double>(in_b) +
        static_cast<double>(p_.size_m * p_.size_n) * static_cast<double>(out_b);
    out_.totals.compute_type = p_.in;
  }

  [[nodiscard]] std::int64_t size(int d, std::int64_t block) const {
    const auto t = p_.tile[static_cast<std::size_t>(d)];
    return std::min(t, p_.ext[static_cast<std::size_t>(d)] - block * t);
  }

  engine_id queue(int stream) {
    const int q = p_.queues;
    const int n = static_cast<int>(stream_count_[static_cast<std::size_t>(stream)]++ % q);
    return static_cast<engine_id>((stream * q + n) % dma_queue_count);
  }

  // --- residency: does this iteration load the operand, and into which slot? ----------

  /// u: the operand's free loop that does not index it (A: n, B: m).
  bool place(operand& x, int u, bool cached, int bufs, int resident,
             const std::array<std::int64_t, 3>& b, const std::array<std::int64_t, 3>& idx,
             std::array<std::int64_t, 2> block) {
    const int pu = p_.pos[static_cast<std::size_t>(u)];
    const bool changed = block != x.last_block;
    x.last_block = block;
    if (cached && pu < 2) {
      std::int64_t panel = 0, inner = 0;
      for (int i = 0; i < pu; ++i)
        panel = panel * pl_.nb[static_cast<std::size_t>(p_.order[static_cast<std::size_t>(i)])] +
                idx[static_cast<std::size_t>(i)];
      for (int i = pu + 1; i < 3; ++i)
        inner = inner * pl_.nb[static_cast<std::size_t>(p_.order[static_cast<std::size_t>(i)])] +
                idx[static_cast<std::size_t>(i)];
      x.slot = static_cast<int>((panel % bufs) * resident + inner);
      return b[static_cast<std::size_t>(u)] == 0;
    }
    if (changed) x.slot = static_cast<int>(++x.serial % bufs);
    return changed;
  }

  // --- one block iteration -------------------------------------------------------------------

  void iteration(const std::array<std::int64_t, 3>& b, const std::array<std::int64_t, 3>& idx) {
    if (place(a_, dim_n, p_.a_cached, p_.a_bufs, pl_.a_resident, b, idx, {b[dim_m], b[dim_k]})) {
      a_raw_.slot = a_.slot;
      load_a(b[dim_m], b[dim_k]);
    }
    if (place(b_, dim_m, p_.b_cached, p_.b_bufs, pl_.b_resident, b, idx, {b[dim_k], b[dim_n]}))
      load_b(b[dim_k], b[dim_n]);
    compute(b);
  }

  instruction dma(engine_id q, buffer_id src, buffer_id dst, std::int64_t rows, std::int64_t bytes,
                  std::uint16_t tag) const {
    instruction in;
    in.engine = q;
    in.kind = op::dma;
    in.partitions = static_cast<std::uint32_t>(rows);
    in.free = static_cast<std::uint32_t>(bytes);
    in.src = src;
    in.dst = dst;
    in.tag = tag;
    return in;
  }

  void fill(operand& x, int piece, instruction_id id) {
    const auto i = x.at(piece);
    x.load[i] = id;
    x.reader[i] = program::none;
    x.consumed[i] = 0;
  }

  void load_a(std::int64_t im, std::int64_t ik) {
    const std::int64_t mb = size(dim_m, im), kb = size(dim_k, ik), parts = m_.partitions,
                       in_b = dtype_bytes(p_.in);
    const auto slabs = static_cast<int>(ceil_div(kb, parts));
    if (p_.a_mk) return load_a_transposed(mb, kb);
    const int widths = p_.coalesce ? 1 : static_cast<int>(ceil_div(mb, p_.mm_m));
    // tile column outer, slab inner: the tutorial's `for bm: for k: load`
    for (int w = 0; w < widths; ++w)
      for (int s = 0; s < slabs; ++s) {
        const std::int64_t cols = p_.coalesce ? mb : std::min(p_.mm_m, mb - w * p_.mm_m);
        const int piece = s * (p_.coalesce ? 1 : pl_.tm) + w;
        const auto id = out_.add(
            dma(queue(0), hbm_a_, sb_a_, std::min(parts, kb - s * parts), cols * in_b, tag_load_a_),
            {a_.reader[a_.at(piece)]});
        fill(a_, piece, id);
      }
  }

  /// A given as [M, K]: load rows of m, transpose each 128 x 128 tile on
  /// TensorE into PSUM, and copy it into the lhsT slab with the evict engine.
  void load_a_transposed(std::int64_t mb, std::int64_t kb) {
    const std::int64_t parts = m_.partitions, in_b = dtype_bytes(p_.in);
    const auto rows = static_cast<int>(ceil_div(mb, parts));
    const auto slabs = static_cast<int>(ceil_div(kb, parts));
    const int chunks = p_.coalesce ? 1 : slabs;
    for (int r = 0; r < rows; ++r)
      for (int w = 0; w < chunks; ++w) {
        const std::int64_t cols = p_.coalesce ? kb : std::min(parts, kb - w * parts);
        const int piece = r * chunks + w;
        const auto id = out_.add(
            dma(queue(0), hbm_a_, sb_a_, std::min(parts, mb - r * parts), cols * in_b, tag_load_a_),
            {a_raw_.reader[a_raw_.at(piece)]});
        fill(a_raw_, piece, id);
      }
    for (int r = 0; r < rows; ++r)
      for (int s = 0; s < slabs; ++s) {
        const int raw_piece = r * chunks + (p_.coalesce ? 0 : s);
        const std::int64_t m_rows = std::min(parts, mb - r * parts),
                           k_cols = std::min(parts, kb - s * parts);
        const auto bank = static_cast<std::size_t>(pl_.acc_banks + (transposes_++ % 2));
        instruction t;
        t.engine = tensor_engine;
        t.kind = op::transpose;
        t.type = p_.in;
        t.partitions = static_cast<std::uint32_t>(m_rows);
        t.free = static_cast<std::uint32_t>(k_cols);
        t.src = sb_a_;
        t.dst = psum_;
        t.tag = tag_transpose_;
        const auto raw_i = a_raw_.at(raw_piece);
        const auto tid = out_.add(t, {a_raw_.load[raw_i], bank_evict_[bank]});
        a_raw_.reader[raw_i] = tid;
        const int piece = s * rows + r;
        instruction c = evict_instruction(op::copy, k_cols, m_rows);
        c.dst = sb_a_;
        const auto cid = out_.add(c, {tid, a_.reader[a_.at(piece)]});
        bank_evict_[bank] = cid;
        fill(a_, piece, cid);
      }
  }

  void load_b(std::int64_t ik, std::int64_t in) {
    const std::int64_t nb = size(dim_n, in), kb = size(dim_k, ik), parts = m_.partitions,
                       in_b = dtype_bytes(p_.in);
    const auto slabs = static_cast<int>(ceil_div(kb, parts));
    const int widths = p_.coalesce ? 1 : static_cast<int>(ceil_div(nb, p_.mm_n));
    for (int w = 0; w < widths; ++w)
      for (int s = 0; s < slabs; ++s) {
        const std::int64_t cols = p_.coalesce ? nb : std::min(p_.mm_n, nb - w * p_.mm_n);
        const int piece = s * (p_.coalesce ? 1 : pl_.tn) + w;
        const auto id = out_.add(
            dma(queue(1), hbm_b_, sb_b_, std::min(parts, kb - s * parts), cols * in_b, tag_load_b_),
            {b_.reader[b_.at(piece)]});
        fill(b_, piece, id);
      }
  }

  // --- compute ---------------------------------------------------------------------------------

  instruction evict_instruction(op kind, std::int64_t rows, std::int64_t cols) const {
    instruction in;
    // ScalarE has no two-tensor add (its activation takes a per-partition
    // bias only): with evict = scalar, the partial-sum adds run on VectorE.
    in.engine = p_.evict == scalar_engine && kind == op::tensor_tensor ? vector_engine : p_.evict;
    in.kind = (in.engine == scalar_engine && kind == op::copy) ? op::activation : kind;
    in.type = dtype::fp32;
    in.flags = flag_reads_psum;
    in.partitions = static_cast<std::uint32_t>(rows);
    in.free = static_cast<std::uint32_t>(cols);
    in.src = psum_;
    in.tag = tag_evict_;
    return in;
  }

  /// Adds the load of a piece to `deps` unless TensorE already waited on it.
  void need(operand& x, int piece, std::vector<instruction_id>& deps) {
    const auto i = x.at(piece);
    if (!x.consumed[i]) {
      deps.push_back(x.load[i]);
      x.consumed[i] = 1;
    }
  }

  void compute(const std::array<std::int64_t, 3>& b) {
    const std::int64_t mb = size(dim_m, b[dim_m]), nbk = size(dim_n, b[dim_n]),
                       kb = size(dim_k, b[dim_k]);
    const auto tm = static_cast<int>(ceil_div(mb, p_.mm_m)),
               tn = static_cast<int>(ceil_div(nbk, p_.mm_n));
    const auto tk = static_cast<int>(ceil_div(kb, p_.mm_k));
    const bool first_k = b[dim_k] == 0, last_k = b[dim_k] == pl_.nb[dim_k] - 1;
    const bool opens = pl_.acc != accumulation::psum_across || first_k;
    const bool closes = pl_.acc != accumulation::psum_across || last_k;
    if (pl_.acc == accumulation::psum_across && first_k) ++c_blocks_;
    // per contraction tile: its rows and the 128-row slabs it reads
    k_rows_.resize(static_cast<std::size_t>(tk));
    k_slab0_.resize(static_cast<std::size_t>(tk));
    k_slab1_.resize(static_cast<std::size_t>(tk));
    for (int t = 0; t < tk; ++t) {
      const std::int64_t kt = std::min(p_.mm_k, kb - t * p_.mm_k);
      k_rows_[static_cast<std::size_t>(t)] = kt;
      k_slab0_[static_cast<std::size_t>(t)] = static_cast<int>(t * p_.mm_k / m_.partitions);
      k_slab1_[static_cast<std::size_t>(t)] =
          static_cast<int>((t * p_.mm_k + kt - 1) / m_.partitions);
    }
    const int a_stride = p_.a_mk ? static_cast<int>(ceil_div(p_.tile[dim_m], m_.partitions))
                                 : (p_.coalesce ? 1 : pl_.tm);
    const int b_stride = p_.coalesce ? 1 : pl_.tn;
    for (int a = 0; a < tm; ++a) {
      const std::int64_t rows = std::min(p_.mm_m, mb - a * p_.mm_m);
      const int a_off =
          p_.a_mk ? static_cast<int>(a * p_.mm_m / m_.partitions) : (p_.coalesce ? 0 : a);
      for (int n = 0; n < tn; ++n) {
        const std::int64_t cols = std::min(p_.mm_n, nbk - n * p_.mm_n);
        const int b_off = p_.coalesce ? 0 : n;
        const std::size_t bank = group_bank(a * tn + n, opens);
        instruction_id last = program::none;
        for (int t = 0; t < tk; ++t) {
          const auto ti = static_cast<std::size_t>(t);
          deps_.clear();
          if (t == 0 && opens && bank_evict_[bank] != program::none)
            deps_.push_back(bank_evict_[bank]);
          for (int sl = k_slab0_[ti]; sl <= k_slab1_[ti]; ++sl) {
            need(a_, sl * a_stride + a_off, deps_);
            need(b_, sl * b_stride + b_off, deps_);
          }
          last = matmul(k_rows_[ti], rows, cols, t > 0 || !opens, a, t);
          for (int sl = k_slab0_[ti]; sl <= k_slab1_[ti]; ++sl) {
            a_.reader[a_.at(sl * a_stride + a_off)] = last;
            b_.reader[b_.at(sl * b_stride + b_off)] = last;
          }
        }
        if (closes) evict(b, a, n, rows, cols, bank, last, tn);
      }
    }
  }

  std::size_t group_bank(int group, bool opens) {
    if (pl_.acc == accumulation::psum_across) {
      const auto set = static_cast<std::size_t>((c_blocks_ - 1) % pl_.psum_sets);
      return set * static_cast<std::size_t>(pl_.groups) + static_cast<std::size_t>(group);
    }
    (void)opens;
    return static_cast<std::size_t>(groups_++ % pl_.acc_banks);
  }

  /// Emits one matmul, merged into the previous one when it repeats it with
  /// no new dependency (same engine, same shape: the order is fixed).
  instruction_id matmul(std::int64_t kt, std::int64_t rows, std::int64_t cols, bool accumulate,
                        int a, int t) {
    instruction in;
    in.engine = tensor_engine;
    in.kind = op::matmul;
    in.type = p_.in;
    in.partitions = static_cast<std::uint32_t>(kt);
    in.free = static_cast<std::uint32_t>(cols);
    in.aux = static_cast<std::uint32_t>(rows);
    in.src = sb_b_;
    in.dst = psum_;
    in.tag = tag_matmul_;
    const bool same_stationary = last_stationary_ == std::pair<int, int>{a, t};
    last_stationary_ = {a, t};
    if (!same_stationary) in.flags |= flag_new_stationary;
    if (accumulate) in.flags |= flag_accumulate;
    if (deps_.empty() && last_matmul_ != program::none && last_matmul_ + 1 == out_.size()) {
      auto& prev = out_.at(last_matmul_);
      if (prev.partitions == in.partitions && prev.free == in.free && prev.aux == in.aux &&
          (prev.flags | flag_accumulate) == (in.flags | flag_accumulate) &&
          (in.flags & flag_accumulate)) {
        prev.count += 1;
        return last_matmul_;
      }
    }
    last_matmul_ = out_.add(in, deps_);
    return last_matmul_;
  }

  void evict(const std::array<std::int64_t, 3>& b, int a, int n, std::int64_t rows,
             std::int64_t cols, std::size_t bank, instruction_id last_matmul, int tn) {
    const bool partial_only = pl_.acc == accumulation::sbuf && b[dim_k] != pl_.nb[dim_k] - 1;
    const bool adds = pl_.acc == accumulation::sbuf && b[dim_k] != 0;
    instruction e = evict_instruction(adds ? op::tensor_tensor : op::copy, rows, cols);
    e.dst = partial_only ? sb_c_ : sb_stage_;
    deps_.clear();
    deps_.push_back(last_matmul);
    const bool row_start = !p_.coalesce || n == 0;
    if (!partial_only && row_start) {
      stage_slot_ = static_cast<std::size_t>(stages_++ % pl_.stage_slots);
      deps_.push_back(stage_store_[stage_slot_]);
    }
    const auto id = out_.add(e, deps_);
    bank_evict_[bank] = id;
    if (partial_only) return;
    const std::int64_t out_b = dtype_bytes(p_.out);
    if (p_.coalesce && n + 1 < tn) return;
    const std::int64_t width = p_.coalesce ? size(dim_n, b[dim_n]) : cols;
    const auto store =
        out_.add(dma(queue(2), sb_stage_, hbm_c_, rows, width * out_b, tag_store_), {id});
    stage_store_[stage_slot_] = store;
    (void)a;
  }

  const plan& pl_;
  const params& p_;
  const machine& m_;
  program& out_;
  buffer_id hbm_a_ = 0, hbm_b_ = 0, hbm_c_ = 0, sb_a_ = 0, sb_b_ = 0, sb_c_ = 0, sb_stage_ = 0,
            psum_ = 0;
  std::uint16_t tag_load_a_ = 0, tag_load_b_ = 0, tag_matmul_ = 0, tag_transpose_ = 0,
                tag_evict_ = 0, tag_store_ = 0;
  operand a_, a_raw_, b_;
  std::vector<instruction_id> bank_evict_, stage_store_, deps_;
  std::vector<std::int64_t> k_rows_;
  std::vector<int> k_slab0_, k_slab1_;
  std::array<std::int64_t, 3> stream_count_{};
  std::int64_t groups_ = 0, stages_ = 0, transposes_ = 0, c_blocks_ = 0;
  std::size_t stage_slot_ = 0;
  instruction_id last_matmul_ = program::none;
  std::pair<int, int> last_stationary_{-1, -1};
};

// --- the workload
// ---------------------------------------------------------------------------------

class matmul final : public workload {
 public:
  [[nodiscard]] std::string_view name() const override { return "matmul"; }
  [[nodiscard]] std::string_view summary() const override {
    return "C[M,N] = A[M,K] @ B[K,N], A given transposed (lhsT [K,M]) or not, bf16/fp8/fp32";
  }

  [[nodiscard]] std::vector<name_doc> names() const override {
    return {
        {"M", "integer", "", "rows of A and C"},
        {"N", "integer", "", "columns of B and C"},
        {"K", "integer", "", "the contraction"},
        {"dtype", "bf16 | fp8 | fp32", "bf16 (or from const bytes = 1|2|4)",
         "input type; C is bf16 (fp32 for fp32)"},
        {"a_layout", "km | mk", "km",
         "km: A given as lhsT [K,M]; mk: A [M,K], each tile transposed on TensorE"},
        {"tile_m", "integer", "mm_m", "block size along M (rows of C computed per block)"},
        {"tile_n", "integer", "mm_n", "block size along N"},
        {"tile_k", "integer", "mm_k", "block size along K"},
        {"order", "perm(m, n, k)", "(m, n, k)", "loop order of the blocks, outermost first"},
        {"a_home", "sbuf | hbm", "hbm",
         "sbuf: A blocks stay resident across the n loop; hbm: streamed"},
        {"b_home", "sbuf | hbm", "hbm", "as a_home for B across the m loop"},
        {"bufs", "integer >= 1", "2", "block slots per streamed operand (DMA multi-buffering)"},
        {"prefetch", "bool", "true",
         "a_home = hbm: false gives A one slot (loads wait for the last use)"},
        {"evict", "vector | scalar | gpsimd", "vector",
         "engine that drains PSUM (and adds partial sums)"},
        {"coalesce", "bool", "true",
         "true: one DMA per 128-row slab of a block; false: one per instruction tile"},
        {"dma_queues", "integer", "1", "DMA queues per stream (A loads, B loads, C stores)"},
        {"acc_dtype", "fp32 | bf16", "the output type",
         "type of partial sums kept in SBUF across k blocks"},
        {"mm_m", "integer", "128",
         "stationary free size of one matmul (<= matmul_max_stationary_free)"},
        {"mm_n", "integer", "512", "moving free size of one matmul (<= matmul_max_moving_free)"},
        {"mm_k", "integer", "128 (fp8 on trn2: 256)", "contraction of one matmul (<= partitions)"},
    };
  }

  [[nodiscard]] std::string lower(const space& s, const config& c, const machine& m,
                                  program& out) const override {
    out.clear();
    const value_reader v(s, c);
    params p;
    if (auto e = read_params(v, m, p); !e.empty()) return e;
    if (auto e = check_tiles(p, m); !e.empty()) return e;
    plan pl;
    if (auto e = make_plan(p, m, pl); !e.empty()) return e;
    const double matmuls =
        static_cast<double>(ceil_div(p.size_m, p.mm_m) * ceil_div(p.size_n, p.mm_n)) *
        static_cast<double>(ceil_div(p.size_k, p.mm_k));
    out.reserve(static_cast<std::size_t>(std::min(2e6, matmuls / 2 + 1024)));
    lowerer(pl, m, out).run();
    return "";
  }

  [[nodiscard]] double estimated_instructions(const space& s, const config& c,
                                              const machine& m) const override {
    const value_reader v(s, c);
    params p;
    if (!read_params(v, m, p).empty() || p.mm_m <= 0 || p.mm_n <= 0 || p.mm_k <= 0) return 1;
    const auto tiles = [&](int d, std::int64_t t) {
      return static_cast<double>(ceil_div(p.ext[static_cast<std::size_t>(d)], t));
    };
    const double matmuls = tiles(dim_m, p.mm_m) * tiles(dim_n, p.mm_n) * tiles(dim_k, p.mm_k);
    const double loads =
        tiles(dim_m, p.tile[dim_m]) * tiles(dim_n, p.tile[dim_n]) * tiles(dim_k, m.partitions) * 2;
    return matmuls + loads + tiles(dim_m, p.mm_m) * tiles(dim_n, p.mm_n) * 2;
  }

  [[nodiscard]] std::vector<std::string> suggest(const bottleneck& b, const space& s,
                                                 const config& c) const override;
};

std::vector<std::string> matmul::suggest(const bottleneck& b, const space& s,
                                         const config& c) const {
  std::vector<std::string> out;
  const value_reader v(s, c);
  const auto size_m = v.integer("M", 1), size_n = v.integer("N", 1);
  const auto tile_m = std::max<std::int64_t>(v.integer("tile_m", 128), 1);
  const auto tile_n = std::max<std::int64_t>(v.integer("tile_n", 512), 1);
  const auto queues = v.integer("dma_queues", 1);
  const bool coalesced = v.flag("coalesce", true);
  const bool dma = b.phase.rfind("dma", 0) == 0;
  const bool issue_heavy = b.issue_share > 0.25 * b.share;
  const auto issue_hints = [&](const char* what) {
    if (!coalesced)
      out.emplace_back("set coalesce = true: one transfer per 128-row slab instead of per tile");
    out.push_back(fmt::format(
        "raise dma_queues (now {}): transfers of {} pay a fixed issue cost each, and more "
        "queues issue them in parallel",
        queues, what));
  };
  if (dma && b.tag == "load B") {
    if (issue_heavy) issue_hints("B");
    out.push_back(
        fmt::format("raise tile_m: every B block is read from HBM once per m block ({} times now)",
                    ceil_div(size_m, tile_m)));
    if (b.latency_share > 0.2 * b.share)
      out.emplace_back("raise bufs so the next B block loads while this one is used");
    out.emplace_back("raise tile_k or bufs to overlap the loads with the matmuls");
  } else if (dma && b.tag == "load A") {
    if (issue_heavy) issue_hints("A");
    out.push_back(
        fmt::format("raise tile_n: every A block is read from HBM once per n block ({} times now)",
                    ceil_div(size_n, tile_n)));
    out.emplace_back("set a_home = sbuf to keep A blocks resident across the n loop");
    out.emplace_back("raise bufs so the next A block loads while this one is used");
  } else if (dma && b.tag == "store C") {
    if (!coalesced)
      out.emplace_back("set coalesce = true to store whole rows of a C block per transfer");
    out.push_back(
        fmt::format("raise dma_queues (now {}) so stores do not queue behind each other", queues));
  } else if (b.phase == "tensor") {
    const auto mm_m = v.integer("mm_m", 128), mm_n = v.integer("mm_n", 512);
    const bool full = mm_m >= 128 && mm_n >= 512 && tile_m % 128 == 0 && tile_n % 512 == 0 &&
                      size_m % tile_m == 0 && size_n % tile_n == 0;
    if (!full)
      out.emplace_back(
          "use full 128 x 512 instruction tiles (mm_m = 128, mm_n = 512) and block sizes that "
          "divide "
          "the shape in multiples of them: partial tiles cost TensorE time");
    if (v.symbol("dtype", "bf16") == "fp8")
      out.emplace_back("on trn2, mm_k = 256 doubles the fp8 rate (double-row mode)");
    if (v.symbol("a_layout", "km") == "mk")
      out.emplace_back("give A transposed (a_layout = km): the transposes take TensorE time");
  } else if (b.phase == "vector" || b.phase == "scalar" || b.phase == "gpsimd") {
    out.push_back(fmt::format("the {} engine drains PSUM on the critical path: try evict = {}",
                              b.phase, b.phase == "vector" ? "scalar" : "vector"));
    out.emplace_back("put k innermost in order (partial sums stay in PSUM; no SBUF adds)");
    out.emplace_back("raise tile_k so each PSUM group accumulates more before it is drained");
  }
  return out;
}

}  // namespace

const workload& matmul_workload() {
  static const matmul instance;
  return instance;
}

}  // namespace tessel::sim
