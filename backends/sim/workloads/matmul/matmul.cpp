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
#include "../../functional.hpp"
#include "../../nki/nki.hpp"
#include "../../timing.hpp"
#include "../../typed_workload.hpp"
#include "../emit.hpp"
#include "matmul_plan.hpp"
#include "matmul_steady.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <string>
#include <vector>

namespace tessel::sim {
namespace {

using namespace mm;

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
    psum_ = emit::psum_banks(out_, m_, m_.psum_banks);
    tag_load_a_ = out_.add_tag("load A");
    tag_load_b_ = out_.add_tag("load B");
    tag_matmul_ = out_.add_tag("matmul");
    tag_transpose_ = out_.add_tag("transpose A");
    tag_evict_ = out_.add_tag("evict");
    tag_zero_ = out_.add_tag("zero PSUM");
    tag_store_ = out_.add_tag("store C");
    if (p_.scaled) load_scales(u.scale);
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

  /// scale = row: every stationary tile's row scales, loaded once up front
  /// (one transfer each, on A's queue) into a column of their own.
  void load_scales(std::int64_t bytes_per_partition) {
    hbm_s_ = out_.add_buffer({"scale (HBM)", memory::hbm, 0, 1, p_.size_m * 4});
    sb_s_ = out_.add_buffer({"row scales", memory::sbuf, bytes_per_partition, 1, 0});
    tag_load_s_ = out_.add_tag("load scale");
    scale_load_.clear();
    for (std::int64_t bm = 0; bm < pl_.nb[dim_m]; ++bm) {
      const std::int64_t mb = size(dim_m, bm);
      for (std::int64_t r0 = 0; r0 < mb; r0 += p_.mm_m)
        scale_load_.push_back(
            out_.add(dma(queue(0), hbm_s_, sb_s_, std::min(p_.mm_m, mb - r0), 4, tag_load_s_), {}));
    }
  }

  [[nodiscard]] std::int64_t size(int d, std::int64_t block) const {
    const auto t = p_.tile[static_cast<std::size_t>(d)];
    return std::min(t, p_.ext[static_cast<std::size_t>(d)] - block * t);
  }

  /// The compiler's assignment: each stream (A loads, B loads, C stores)
  /// has its own queue (dma_queues of them), so a store that waits for its
  /// evict never blocks a load, and a stream's transfers move in order.
  engine_id queue(int stream) {
    const int q = p_.queues;
    const int n = static_cast<int>(stream_count_[static_cast<std::size_t>(stream)]++ % q);
    return static_cast<engine_id>((stream * q + n) % dma_queue_count);
  }

  // --- residency: does this iteration load the operand, and into which slot? ----------

  /// u: the operand's free loop that does not index it (A: n, B: m); a
  /// resident set serves `reuse` consecutive blocks of u, then reloads.
  bool place(operand& x, int u, std::int64_t reuse, int bufs, int resident,
             const std::array<std::int64_t, 3>& b, const std::array<std::int64_t, 3>& idx,
             std::array<std::int64_t, 2> block) {
    const int pu = p_.pos[static_cast<std::size_t>(u)];
    const bool changed = block != x.last_block;
    x.last_block = block;
    if (reuse > 1 && pu < 2) {
      const auto nu = pl_.nb[static_cast<std::size_t>(u)];
      const auto bu = b[static_cast<std::size_t>(u)];
      std::int64_t panel = 0, inner = 0;
      for (int i = 0; i < pu; ++i)
        panel = panel * pl_.nb[static_cast<std::size_t>(p_.order[static_cast<std::size_t>(i)])] +
                idx[static_cast<std::size_t>(i)];
      panel = panel * ceil_div(nu, std::min(reuse, nu)) + bu / std::min(reuse, nu);
      for (int i = pu + 1; i < 3; ++i)
        inner = inner * pl_.nb[static_cast<std::size_t>(p_.order[static_cast<std::size_t>(i)])] +
                idx[static_cast<std::size_t>(i)];
      x.slot = static_cast<int>((panel % bufs) * resident + inner);
      return bu % std::min(reuse, nu) == 0;
    }
    if (changed) x.slot = static_cast<int>(++x.serial % bufs);
    return changed;
  }

  // --- one block iteration -------------------------------------------------------------------

  void iteration(const std::array<std::int64_t, 3>& b, const std::array<std::int64_t, 3>& idx) {
    if (place(a_, dim_n, p_.a_reuse, p_.a_bufs, pl_.a_resident, b, idx, {b[dim_m], b[dim_k]})) {
      a_raw_.slot = a_.slot;
      load_a(b[dim_m], b[dim_k]);
    }
    if (place(b_, dim_m, p_.b_reuse, p_.b_bufs, pl_.b_resident, b, idx, {b[dim_k], b[dim_n]}))
      load_b(b[dim_k], b[dim_n]);
    compute(b);
  }

  instruction dma(engine_id q, buffer_id src, buffer_id dst, std::int64_t rows, std::int64_t bytes,
                  std::uint16_t tag) const {
    return make_dma(q, rows, bytes, 0, {src, dst, tag});
  }

  void fill(operand& x, int piece, instruction_id id) {
    const auto i = x.at(piece);
    x.load[i] = id;
    x.reader[i] = program::none;
    x.consumed[i] = 0;
  }

  void load_a(std::int64_t im, std::int64_t ik) {
    const std::int64_t mb = size(dim_m, im), kb = size(dim_k, ik);
    if (p_.a_mk) return load_a_transposed(mb, kb);
    load_slabs(a_, 0, hbm_a_, sb_a_, tag_load_a_, mb, kb, p_.mm_m, pl_.tm);
  }

  /// A block of `x` (stream 0: A given as lhsT [K, M], 1: B) `width` wide
  /// and `kb` deep, loaded in 128-row K slabs of instruction tiles `mm` wide
  /// (`tiles` to a full block), or of the whole width when coalesced: tile
  /// column outer, slab inner (the tutorial's `for bm: for k: load`).
  void load_slabs(operand& x, int stream, buffer_id hbm, buffer_id sb, std::uint16_t tag,
                  std::int64_t width, std::int64_t kb, std::int64_t mm, int tiles) {
    const std::int64_t parts = m_.partitions, in_b = dtype_bytes(p_.in);
    const auto slabs = static_cast<int>(ceil_div(kb, parts));
    const int widths = p_.coalesce ? 1 : static_cast<int>(ceil_div(width, mm));
    for (int w = 0; w < widths; ++w)
      for (int s = 0; s < slabs; ++s) {
        const std::int64_t cols = p_.coalesce ? width : std::min(mm, width - w * mm);
        const int piece = s * (p_.coalesce ? 1 : tiles) + w;
        const auto id =
            out_.add(dma(queue(stream), hbm, sb, std::min(parts, kb - s * parts), cols * in_b, tag),
                     {x.reader[x.at(piece)]});
        fill(x, piece, id);
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
        const auto bank = static_cast<std::size_t>(pl_.transpose_bank + (transposes_++ % 2));
        instruction t = transpose_instruction(p_, m_rows, k_cols);
        t.src = sb_a_;
        t.dst = psum_[bank];
        t.tag = tag_transpose_;
        const auto raw_i = a_raw_.at(raw_piece);
        const auto tid = out_.add(t, {a_raw_.load[raw_i], bank_evict_[bank]});
        a_raw_.reader[raw_i] = tid;
        const int piece = s * rows + r;
        instruction c = evict_instruction(op::copy, k_cols, m_rows, bank);
        c.dst = sb_a_;
        const auto cid = out_.add(c, {tid, a_.reader[a_.at(piece)]});
        bank_evict_[bank] = cid;
        fill(a_, piece, cid);
      }
  }

  void load_b(std::int64_t ik, std::int64_t in) {
    load_slabs(b_, 1, hbm_b_, sb_b_, tag_load_b_, size(dim_n, in), size(dim_k, ik), p_.mm_n,
               pl_.tn);
  }

  // --- compute ---------------------------------------------------------------------------------

  instruction evict_instruction(op kind, std::int64_t rows, std::int64_t cols, std::size_t bank,
                                bool scaled = false) const {
    instruction in = mm::evict_instruction(p_, kind, rows, cols, scaled);
    in.src = psum_[bank];
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
    // the instruction loops in block_order; a group (a, n) opens at its first
    // contraction tile and is drained after its last
    const std::array<int, 3> extent{tm, tn, tk};
    const auto& bo = p_.block_order;
    group_bank_.resize(static_cast<std::size_t>(tm) * static_cast<std::size_t>(tn));
    group_last_.resize(group_bank_.size());
    const auto& level = p_.block_pos;  // where each dimension's counter is in i
    std::array<int, 3> i{};
    for (i[0] = 0; i[0] < extent[static_cast<std::size_t>(bo[0])]; ++i[0])
      for (i[1] = 0; i[1] < extent[static_cast<std::size_t>(bo[1])]; ++i[1])
        for (i[2] = 0; i[2] < extent[static_cast<std::size_t>(bo[2])]; ++i[2]) {
          const int a = i[static_cast<std::size_t>(level[dim_m])],
                    n = i[static_cast<std::size_t>(level[dim_n])],
                    t = i[static_cast<std::size_t>(level[dim_k])];
          const std::int64_t rows = std::min(p_.mm_m, mb - a * p_.mm_m);
          const std::int64_t cols = std::min(p_.mm_n, nbk - n * p_.mm_n);
          const int a_off =
              p_.a_mk ? static_cast<int>(a * p_.mm_m / m_.partitions) : (p_.coalesce ? 0 : a);
          const int b_off = p_.coalesce ? 0 : n;
          const auto g = static_cast<std::size_t>(a * tn + n);
          const auto ti = static_cast<std::size_t>(t);
          deps_.clear();
          if (t == 0) {
            group_bank_[g] = group_bank(a * tn + n, opens);
            const auto prev = bank_evict_[group_bank_[g]];
            if (opens && p_.psum_memset)
              deps_.push_back(zero_psum(rows, cols, group_bank_[g], prev));
            else if (opens && prev != program::none)
              deps_.push_back(prev);
          }
          for (int sl = k_slab0_[ti]; sl <= k_slab1_[ti]; ++sl) {
            need(a_, sl * a_stride + a_off, deps_);
            need(b_, sl * b_stride + b_off, deps_);
          }
          const auto last = matmul(k_rows_[ti], rows, cols, t > 0 || !opens, a, t, group_bank_[g]);
          group_last_[g] = last;
          for (int sl = k_slab0_[ti]; sl <= k_slab1_[ti]; ++sl) {
            a_.reader[a_.at(sl * a_stride + a_off)] = last;
            b_.reader[b_.at(sl * b_stride + b_off)] = last;
          }
          if (closes && t == tk - 1) evict(b, a, n, rows, cols, group_bank_[g], last, tn);
        }
  }

  /// psum_zero = memset: VectorE zeroes the group's bank once its last
  /// reader (the previous group's evict) is done.
  instruction_id zero_psum(std::int64_t rows, std::int64_t cols, std::size_t bank,
                           instruction_id prev) {
    instruction z = psum_zero_instruction(rows, cols);
    z.src = psum_[bank];
    z.dst = psum_[bank];
    z.tag = tag_zero_;
    return out_.add(z, {prev});
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
                        int a, int t, std::size_t bank) {
    // the shape repeats for long runs: build it once per shape
    if (const std::array<std::int64_t, 3> shape{kt, rows, cols}; shape != matmul_shape_) {
      matmul_shape_ = shape;
      matmul_template_ = matmul_instruction(p_, kt, rows, cols);
    }
    instruction in = matmul_template_;
    in.src = sb_b_;
    in.dst = psum_[bank];
    in.tag = tag_matmul_;
    const bool same_stationary = last_stationary_ == std::pair<int, int>{a, t};
    last_stationary_ = {a, t};
    if (!same_stationary) in.flags |= flag_new_stationary;
    if (accumulate) in.flags |= flag_accumulate;
    if (deps_.empty() && last_matmul_ != program::none && last_matmul_ + 1 == out_.size()) {
      auto& prev = out_.at(last_matmul_);
      if (prev.partitions == in.partitions && prev.free == in.free && prev.aux == in.aux &&
          prev.dst == in.dst && (prev.flags | flag_accumulate) == (in.flags | flag_accumulate) &&
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
    instruction e =
        evict_instruction(adds ? op::tensor_tensor : op::copy, rows, cols, bank, p_.scaled);
    e.dst = partial_only ? sb_c_ : sb_stage_;
    deps_.clear();
    deps_.push_back(last_matmul);
    if (p_.scaled) deps_.push_back(scale_load_[static_cast<std::size_t>(b[dim_m] * pl_.tm + a)]);
    const bool row_start = !p_.coalesce || n == 0;
    if (row_slot_.size() < static_cast<std::size_t>(a + 1))
      row_slot_.resize(static_cast<std::size_t>(a + 1));
    auto& stage_slot = row_slot_[static_cast<std::size_t>(a)];
    if (!partial_only && row_start) {
      stage_slot = static_cast<std::size_t>(stages_++ % pl_.stage_slots);
      deps_.push_back(stage_store_[stage_slot]);
    }
    const auto id = out_.add(e, deps_);
    bank_evict_[bank] = id;
    if (partial_only) return;
    const std::int64_t out_b = dtype_bytes(p_.out);
    if (p_.coalesce && n + 1 < tn) return;
    const std::int64_t width = p_.coalesce ? size(dim_n, b[dim_n]) : cols;
    const auto store =
        out_.add(dma(queue(2), sb_stage_, hbm_c_, rows, width * out_b, tag_store_), {id});
    stage_store_[stage_slot] = store;
  }

  const plan& pl_;
  const params& p_;
  const machine& m_;
  program& out_;
  buffer_id hbm_a_ = 0, hbm_b_ = 0, hbm_c_ = 0, sb_a_ = 0, sb_b_ = 0, sb_c_ = 0, sb_stage_ = 0,
            hbm_s_ = 0, sb_s_ = 0;
  std::vector<buffer_id> psum_;  ///< one per bank
  std::uint16_t tag_load_a_ = 0, tag_load_b_ = 0, tag_matmul_ = 0, tag_transpose_ = 0,
                tag_evict_ = 0, tag_store_ = 0, tag_zero_ = 0, tag_load_s_ = 0;
  operand a_, a_raw_, b_;
  std::vector<instruction_id> bank_evict_, stage_store_, deps_;
  std::vector<instruction_id> scale_load_;  ///< per stationary tile (m block x tm + tile)
  std::vector<std::int64_t> k_rows_;
  std::vector<int> k_slab0_, k_slab1_;
  std::vector<std::size_t> group_bank_, row_slot_;  ///< per group: its bank; per C row: its stage
  std::vector<instruction_id> group_last_;
  std::array<std::int64_t, 3> stream_count_{};
  std::int64_t groups_ = 0, stages_ = 0, transposes_ = 0, c_blocks_ = 0;
  instruction_id last_matmul_ = program::none;
  std::array<std::int64_t, 3> matmul_shape_{-1, -1, -1};  ///< of matmul_template_
  instruction matmul_template_;
  std::pair<int, int> last_stationary_{-1, -1};
};

// --- the workload ---------------------------------------------------------------------------

class matmul final : public planned_workload<plan, params, read_checked, make_plan, lowerer> {
 public:
  matmul()
      : planned_workload({
            "matmul",
            "C[M,N] = A[M,K] @ B[K,N], A given transposed (lhsT [K,M]) or not, bf16/fp8/fp32",
            knobs_of_matmul(),
            "M",
        }) {}

  [[nodiscard]] double estimated_instructions(const space& s, const config& c,
                                              const machine& m) const override {
    params p;
    if (!read_params(reader(s, c), m, p).empty() || p.mm_m <= 0 || p.mm_n <= 0 || p.mm_k <= 0)
      return 1;
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

 private:
  [[nodiscard]] std::string lower_program(const plan& pl, const machine& m,
                                          program& out) const override {
    const params& p = pl.p;
    const double matmuls =
        static_cast<double>(ceil_div(p.size_m, p.mm_m) * ceil_div(p.size_n, p.mm_n)) *
        static_cast<double>(ceil_div(p.size_k, p.mm_k));
    out.reserve(static_cast<std::size_t>(std::min(2e6, matmuls / 2 + 1024)));
    return planned_workload::lower_program(pl, m, out);
  }

  [[nodiscard]] std::optional<steady_estimate> steady(const plan& pl,
                                                      const machine& m) const override {
    return estimate_steady(pl, m);
  }

  [[nodiscard]] std::unique_ptr<functional_kernel> executor(const plan& pl,
                                                            const machine& m) const override {
    (void)m;
    return make_functional(pl);
  }

  [[nodiscard]] std::string write_nki(const plan& pl, const nki::context& ctx,
                                      std::string& out) const override {
    return mm::emit_nki(pl, ctx, out);
  }
};

std::vector<std::string> matmul::suggest(const bottleneck& b, const space& s,
                                         const config& c) const {
  std::vector<std::string> out;
  const knob_reader v = reader(s, c);
  const auto size_m = v.integer("M"), size_n = v.integer("N");
  const auto tile_m = std::max<std::int64_t>(v.integer("tile_m", 128), 1);
  const auto tile_n = std::max<std::int64_t>(v.integer("tile_n", 512), 1);
  const bool coalesced = v.flag("coalesce");
  // a space with one `bufs` moves both operands' slots with it
  const char* a_bufs = s.parameter_index("a_bufs") ? "a_bufs" : "bufs";
  const char* b_bufs = s.parameter_index("b_bufs") ? "b_bufs" : "bufs";
  const bool dma = b.phase.rfind("dma", 0) == 0;
  const bool issue_heavy = b.issue_share > 0.25 * b.share;
  const auto issue_hints = [&](const char* what, const char* wider) {
    if (!coalesced)
      out.emplace_back("set coalesce = true: one transfer per 128-row slab instead of per tile");
    out.push_back(fmt::format(
        "raise {}: transfers of {} pay a fixed issue cost each, and wider rows move more bytes "
        "per transfer and per descriptor",
        wider, what));
  };
  if (dma && b.tag == "load B") {
    if (issue_heavy) issue_hints("B", "tile_n");
    out.push_back(
        fmt::format("raise tile_m: every B block is read from HBM once per m block ({} times now)",
                    ceil_div(size_m, tile_m)));
    if (b.latency_share > 0.2 * b.share)
      out.push_back(
          fmt::format("raise {} so the next B block loads while this one is used", b_bufs));
    out.push_back(fmt::format("raise tile_k or {} to overlap the loads with the matmuls", b_bufs));
  } else if (dma && b.tag == "load A") {
    if (issue_heavy) issue_hints("A", "tile_m");
    out.push_back(
        fmt::format("raise tile_n: every A block is read from HBM once per n block ({} times now)",
                    ceil_div(size_n, tile_n)));
    out.emplace_back("set a_home = sbuf to keep A blocks resident across the n loop");
    out.emplace_back("raise a_reuse so one load of A serves several n blocks");
    out.push_back(fmt::format("raise {} so the next A block loads while this one is used", a_bufs));
  } else if (dma && b.tag == "store C") {
    if (!coalesced)
      out.emplace_back("set coalesce = true to store whole rows of a C block per transfer");
    out.emplace_back("raise tile_n so each store moves a wider row of C");
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
    if (v.symbol("a_layout") == "mk")
      out.emplace_back("give A transposed (a_layout = km): the transposes take TensorE time");
  } else if (b.phase == "vector" || b.phase == "scalar" || b.phase == "gpsimd") {
    out.push_back(fmt::format("the {} engine drains PSUM on the critical path: try evict = {}",
                              b.phase, b.phase == "vector" ? "scalar" : "vector"));
    out.emplace_back("put k innermost in order (partial sums stay in PSUM; no SBUF adds)");
    out.emplace_back("raise tile_k so each PSUM group accumulates more before it is drained");
    out.emplace_back("raise psum_bufs so TensorE fills one bank while another is drained");
  }
  return out;
}

}  // namespace

const workload& matmul_workload() {
  static const matmul instance;
  return instance;
}

}  // namespace tessel::sim
