// matmul_nki.cpp: the matmul plan (matmul_plan.hpp) written as an NKI
// kernel (docs/nki.md): the block loops in the plan's order, A and B blocks
// in SBUF slots (`bufs` deep, or a resident set when a_home/b_home = sbuf
// keeps them across the free loop), instruction tiles of mm_m x mm_n x mm_k
// on TensorE accumulating in fp32 PSUM, and the partial sums closed per k
// block, held open across k blocks, or added into SBUF in acc_dtype by the
// evict engine, as the plan's accumulation says.
#include "../../nki/nki.hpp"
#include "matmul_plan.hpp"

#include <fmt/format.h>

#include <array>
#include <cmath>
#include <string>
#include <tuple>
#include <vector>

namespace tessel::sim::mm {
namespace {

const std::array<const char*, 3> block_counts{"M_BLOCKS", "N_BLOCKS", "K_BLOCKS"};

/// One operand's placement: which block loops index it, and where it loads.
struct operand_plan {
  char name = 'a';          ///< 'a' or 'b'
  std::array<int, 2> dims;  ///< the block loops that index it (A: m, k; B: k, n)
  int free_loop = dim_n;    ///< the loop it is reused across (A: n; B: m)
  bool resident = false;    ///< a set of blocks loaded before the free loop and kept
  [[nodiscard]] std::string upper() const { return name == 'a' ? "A" : "B"; }
};

class matmul_writer {
 public:
  matmul_writer(const plan& pl, const nki::context& ctx) : pl_(pl), p_(pl.p), ctx_(ctx) {
    a_ = {'a', {dim_m, dim_k}, dim_n, p_.a_cached && p_.pos[dim_n] != 2};
    b_ = {'b', {dim_k, dim_n}, dim_m, p_.b_cached && p_.pos[dim_m] != 2};
    evict_ = p_.evict == gpsimd_engine ? vector_engine : p_.evict;
  }

  std::string write(std::string& out) {
    if (p_.a_mk) return "a_layout = mk (A transposed on TensorE) is not emitted yet";
    for (const auto& [name, reuse, loop] :
         {std::tuple{"a_reuse", p_.a_reuse, dim_n}, std::tuple{"b_reuse", p_.b_reuse, dim_m}})
      if (reuse > 1 && reuse < pl_.nb[static_cast<std::size_t>(loop)])
        return fmt::format("{} = {} (a partial reuse of {} blocks) is not emitted yet", name, reuse,
                           pl_.nb[static_cast<std::size_t>(loop)]);
    if (p_.in != dtype::bf16 && p_.in != dtype::fp32)
      return fmt::format("dtype {} is not emitted yet (bf16 and fp32 are)", to_string(p_.in));
    if (p_.mm_k > ctx_.m.partitions || ctx_.m.partitions % p_.mm_k != 0)
      return fmt::format("mm_k = {} must divide the {} partitions", p_.mm_k, ctx_.m.partitions);
    if (pl_.acc == accumulation::sbuf && p_.tile[dim_m] % p_.mm_m != 0 && pl_.nb[dim_m] > 1)
      return fmt::format("tile_m = {} must be a multiple of mm_m = {} for SBUF accumulation",
                         p_.tile[dim_m], p_.mm_m);
    nki::kernel_file f;
    f.workload = "matmul";
    f.summary = "C = A^T B with A given as [K, M] (lhsT) and B as [K, N]";
    if (p_.evict == gpsimd_engine)
      f.notes.emplace_back(
          "evict = gpsimd: GpSimdE cannot read PSUM (nki.isa.tensor_copy), so VectorE drains it");
    if (p_.queues > 1)
      f.notes.push_back(fmt::format(
          "dma_queues = {}: NKI assigns DMA queues itself; the loads are issued in plan order",
          p_.queues));
    if (p_.block_order != std::array<int, 3>{dim_m, dim_n, dim_k})
      f.notes.push_back(fmt::format(
          "block_order = ({}, {}, {}): the kernel writes the loops inside a block as (m, n, k) "
          "and leaves the instruction order to the compiler's scheduler",
          dim_names[static_cast<std::size_t>(p_.block_order[0])],
          dim_names[static_cast<std::size_t>(p_.block_order[1])],
          dim_names[static_cast<std::size_t>(p_.block_order[2])]));
    if (!p_.psum_memset)
      f.notes.emplace_back(
          "psum_zero = matmul: the kernel zeroes each PSUM group with nisa.memset; the simulated "
          "plan lets the first matmul overwrite it");
    if (p_.psum_bufs > 0)
      f.notes.push_back(fmt::format(
          "psum_bufs = {}: the compiler allocates PSUM banks; this many accumulation tiles are "
          "live at once in the simulated schedule",
          p_.psum_bufs));
    constants(f);
    f.signature = fmt::format(
        "INPUTS = {{\"A\": ((K, M), \"{0}\"), \"B\": ((K, N), \"{0}\")}}\n"
        "OUTPUTS = {{\"C\": ((M, N), \"{1}\")}}\n"
        "TOLERANCE = {2}  # the gate's, in units of |reference| + rms(reference)",
        nki::dtype_name(p_.in), nki::dtype_name(p_.out), nki::py_float(tolerance()));
    kernel();
    f.kernel = w_.text();
    f.reference =
        "def reference(A, B):\n"
        "    \"\"\"C in float64, from the same inputs.\"\"\"\n"
        "    return {\"C\": A.astype(np.float64).T @ B.astype(np.float64)}\n";
    out = nki::assemble(f, ctx_);
    return "";
  }

 private:
  [[nodiscard]] double tolerance() const {
    double tol = nki::tolerance(p_.out);
    if (pl_.acc == accumulation::sbuf)
      tol += 2 * std::sqrt(static_cast<double>(pl_.nb[dim_k])) *
             (p_.acc == dtype::fp32 ? std::ldexp(1.0, -24) : std::ldexp(1.0, -8));
    return tol;
  }

  void constants(nki::kernel_file& f) const {
    auto add = [&](std::string n, auto v, std::string meaning) {
      f.constants.push_back({std::move(n), fmt::format("{}", v), std::move(meaning)});
    };
    add("M", p_.size_m, "rows of C");
    add("N", p_.size_n, "columns of C");
    add("K", p_.size_k, "the contraction");
    add("P", ctx_.m.partitions, "partitions (nl.tile_size.pmax)");
    add("TILE_M", p_.tile[dim_m], "block sizes: tile_m, tile_n, tile_k");
    add("TILE_N", p_.tile[dim_n], "");
    add("TILE_K", p_.tile[dim_k], "");
    add("MM_M", p_.mm_m, "one matmul: stationary free size (<= 128)");
    add("MM_N", p_.mm_n, "moving free size (<= 512, one PSUM bank of fp32)");
    add("MM_K", p_.mm_k, "contraction rows (partitions)");
    add("M_BLOCKS", pl_.nb[dim_m], "");
    add("N_BLOCKS", pl_.nb[dim_n], "");
    add("K_BLOCKS", pl_.nb[dim_k], "");
    add("SLABS", pl_.slabs, "128-row slabs of a k block");
    add("A_BUFS", p_.a_bufs,
        a_.resident ? "resident sets of A blocks in rotation (bufs)"
                    : "A block slots (bufs; 1 without prefetch)");
    add("B_BUFS", p_.b_bufs,
        b_.resident ? "resident sets of B blocks in rotation (bufs)" : "B block slots (bufs)");
    add("A_RESIDENT", pl_.a_resident, "A blocks kept per set (a_home = sbuf)");
    add("B_RESIDENT", pl_.b_resident, "B blocks kept per set (b_home = sbuf)");
    if (pl_.acc == accumulation::psum_across) {
      add("GROUPS", pl_.groups, "PSUM accumulation groups of one C block (one bank each)");
      add("PSUM_SETS", pl_.psum_sets, "sets of GROUPS banks in rotation");
    } else {
      add("ACC_BANKS", pl_.acc_banks, "PSUM banks the groups rotate through");
    }
    if (pl_.acc == accumulation::sbuf) {
      add("C_ROW_TILES", ceil_div(pl_.c_rows, p_.mm_m), "C partial sums kept in SBUF: row tiles");
      add("C_COLS", pl_.c_cols, "and columns");
    }
    add("STAGE_COLS", stage_cols(),
        p_.coalesce ? "output staging: a block row (coalesce)"
                    : "output staging: one instruction tile");
    add("IN", nki::nl_dtype(p_.in), "input dtype");
    add("OUT", nki::nl_dtype(p_.out), "output dtype");
    add("ACC", nki::nl_dtype(p_.acc), "partial sums in SBUF (acc_dtype)");
    add("EVICT", nki::engine(evict_), "drains PSUM (evict)");
  }

  [[nodiscard]] std::int64_t stage_cols() const {
    return p_.coalesce ? p_.tile[dim_n] : std::min(p_.mm_n, p_.tile[dim_n]);
  }

  [[nodiscard]] static const char* var(int d) { return dim_names[static_cast<std::size_t>(d)]; }
  [[nodiscard]] int pos(int d) const { return p_.pos[static_cast<std::size_t>(d)]; }

  void kernel() {
    w_.line("@nki.jit");
    w_.open("def matmul_kernel(A, B):");
    w_.line("C = nl.ndarray((M, N), dtype=OUT, buffer=nl.shared_hbm)");
    w_.line("# SBUF: A and B blocks, [partition = k row, slot, slab, free]");
    w_.line("a_sb = nl.ndarray((P, A_BUFS * A_RESIDENT, SLABS, TILE_M), dtype=IN, buffer=nl.sbuf)");
    w_.line("b_sb = nl.ndarray((P, B_BUFS * B_RESIDENT, SLABS, TILE_N), dtype=IN, buffer=nl.sbuf)");
    w_.line("c_stage = nl.ndarray((MM_M, 2, STAGE_COLS), dtype=OUT, buffer=nl.sbuf)");
    if (pl_.acc == accumulation::sbuf)
      w_.line("c_part = nl.ndarray((MM_M, C_ROW_TILES, C_COLS), dtype=ACC, buffer=nl.sbuf)");
    if (pl_.acc == accumulation::psum_across)
      w_.line(
          "c_psum = nl.ndarray((MM_M, PSUM_SETS * GROUPS, MM_N), dtype=nl.float32, "
          "buffer=nl.psum)");
    else
      w_.line("c_psum = nl.ndarray((MM_M, ACC_BANKS, MM_N), dtype=nl.float32, buffer=nl.psum)");
    w_.line();
    load_function(a_);
    load_function(b_);
    store_function();
    w_.line("a_loads = b_loads = a_sets = b_sets = stages = psum_sets = banks = 0");
    loops();
    w_.line("return C");
    w_.close();
  }

  /// load_a(m, k, slot) / load_b(k, n, slot): one block, slab by slab.
  void load_function(const operand_plan& x) {
    const bool a = x.name == 'a';
    const std::string free = a ? "m" : "n", free_up = a ? "M" : "N";
    const std::string piece = a ? "MM_M" : "MM_N";
    w_.open("def load_{}({}, slot):", x.name, a ? "m, k" : "k, n");
    w_.line("\"\"\"{} block ({}) into slot `slot`, one DMA per 128-row slab{}.\"\"\"", x.upper(),
            a ? "m, k" : "k, n", p_.coalesce ? " (coalesce)" : " and instruction tile");
    w_.line("k0, {0}0 = k * TILE_K, {0} * TILE_{1}", free, free_up);
    w_.line("rows, cols = min(TILE_K, K - k0), min(TILE_{0}, {0} - {1}0)", free_up, free);
    w_.open("for s in nl.affine_range((rows + P - 1) // P):");
    w_.line("r = min(P, rows - s * P)");
    if (p_.coalesce) {
      w_.line(
          "nisa.dma_copy(dst={}_sb[0:r, slot, s, 0:cols], src={}[k0 + s * P:k0 + s * P + r, "
          "{}0:{}0 + cols])",
          x.name, x.upper(), free, free);
    } else {
      w_.open("for c0 in range(0, cols, {}):", piece);
      w_.line("c1 = min(cols, c0 + {})", piece);
      w_.line(
          "nisa.dma_copy(dst={}_sb[0:r, slot, s, c0:c1], src={}[k0 + s * P:k0 + s * P + r, "
          "{}0 + c0:{}0 + c1])",
          x.name, x.upper(), free, free);
      w_.close();
    }
    w_.close(2);
    w_.line();
  }

  void store_function() {
    w_.open("def store(rows, row0, cols, col0, slot):");
    w_.line(
        "nisa.dma_copy(dst=C[row0:row0 + rows, col0:col0 + cols], src=c_stage[0:rows, slot, "
        "0:cols])");
    w_.close();
    w_.line();
  }

  [[nodiscard]] std::string range_kind(int d) const {
    // the k loop carries the SBUF partial sums (first block copies, later ones add)
    if (d == dim_k && pl_.acc == accumulation::sbuf) return "nl.sequential_range";
    return "nl.affine_range";
  }

  void loops() {
    resident_loads(0);
    for (int i = 0; i < 3; ++i) {
      const int d = p_.order[static_cast<std::size_t>(i)];
      std::string count = block_counts[static_cast<std::size_t>(d)];
      const bool dropped = i == 0 && ctx_.injected == nki::fault::drop_tail;
      if (dropped) count += " - 1";
      w_.open("for {} in {}({}):  # {} blocks{}", var(d), range_kind(d), count, var(d),
              i == 0   ? " (outermost)"
              : i == 2 ? " (innermost)"
                       : "");
      if (dropped) w_.line("# FAULT drop_tail: the last block of the outermost loop is dropped");
      resident_loads(i + 1);
      streamed_load(a_, i);
      streamed_load(b_, i);
      if (i == 1 && pl_.acc == accumulation::psum_across) open_groups();
    }
    block();
    w_.close();
    if (pl_.acc == accumulation::psum_across) close_groups();
    w_.close(2);
  }

  /// A resident set is loaded just before its free loop opens at `depth`.
  void resident_loads(int depth) {
    for (const auto* x : {&a_, &b_}) {
      if (!x->resident || pos(x->free_loop) != depth) continue;
      w_.line(
          "# {} stays in SBUF across the {} loop ({}_home = sbuf): its blocks inside that "
          "loop load once",
          x->upper(), var(x->free_loop), x->name);
      w_.line("{0}_set = {0}_sets % {1}_BUFS", x->name, x->upper());
      w_.line("{}_sets += 1", x->name);
      int opened = 0;
      for (const int d : x->dims)
        if (pos(d) > depth) {
          w_.open("for {} in nl.affine_range({}):", var(d),
                  block_counts[static_cast<std::size_t>(d)]);
          ++opened;
        }
      w_.line("load_{}({}, {}_set * {}_RESIDENT + {})", x->name, x->name == 'a' ? "m, k" : "k, n",
              x->name, x->upper(), resident_index(*x, depth));
      w_.close(opened);
    }
  }

  /// The index of the current block within its resident set.
  [[nodiscard]] std::string resident_index(const operand_plan& x, int depth) const {
    std::vector<int> inside;
    for (const int d : x.dims)
      if (pos(d) > depth) inside.push_back(d);
    if (inside.empty()) return "0";
    if (inside.size() == 1) return var(inside[0]);
    return fmt::format("{} * {} + {}", var(inside[0]),
                       block_counts[static_cast<std::size_t>(inside[1])], var(inside[1]));
  }

  /// A streamed operand loads once both of its loops are open (at loop `i`).
  void streamed_load(const operand_plan& x, int i) {
    if (x.resident) return;
    if (std::max(pos(x.dims[0]), pos(x.dims[1])) != i) return;
    w_.line("{0}_slot = {0}_loads % {1}_BUFS  # {1} block ({2}, {3}){4}", x.name, x.upper(),
            var(x.dims[0]), var(x.dims[1]),
            i < 2 ? fmt::format(", reused across the inner loops") : "");
    w_.line("{}_loads += 1", x.name);
    w_.line("load_{0}({1}, {2}, {0}_slot)", x.name, var(x.dims[0]), var(x.dims[1]));
  }

  [[nodiscard]] std::string slot_of(const operand_plan& x) const {
    if (!x.resident) return fmt::format("{}_slot", x.name);
    return fmt::format("{}_set * {}_RESIDENT + {}", x.name, x.upper(),
                       resident_index(x, pos(x.free_loop)));
  }

  void open_groups() {
    w_.line("# k is innermost: the C block's {} PSUM groups stay open across the k blocks",
            pl_.groups);
    w_.line("g0 = (psum_sets % PSUM_SETS) * GROUPS");
    w_.line("psum_sets += 1");
    w_.line("nisa.memset(dst=c_psum[:, g0:g0 + GROUPS, :], value=0.0)");
  }

  void block() {
    w_.line("m0, n0 = m * TILE_M, n * TILE_N");
    w_.line(
        "m_cols, n_cols, k_rows = min(TILE_M, M - m0), min(TILE_N, N - n0), min(TILE_K, K - "
        "k * TILE_K)");
    w_.line("k_steps = (k_rows + MM_K - 1) // MM_K");
    if (ctx_.injected == nki::fault::skip_accumulation) {
      w_.open("if k == K_BLOCKS - 1:");
      w_.line("k_steps -= 1  # FAULT skip_accumulation: the last contraction step is lost");
      w_.close();
    }
    w_.open("for mi in nl.affine_range((m_cols + MM_M - 1) // MM_M):");
    w_.line("mw = min(MM_M, m_cols - mi * MM_M)");
    if (p_.coalesce && pl_.acc != accumulation::psum_across) stage_slot();
    w_.open("for ni in nl.affine_range((n_cols + MM_N - 1) // MM_N):");
    w_.line("nw = min(MM_N, n_cols - ni * MM_N)");
    if (pl_.acc == accumulation::psum_across) {
      w_.line("g = g0 + mi * {} + ni", pl_.tn);
    } else {
      w_.line("g = banks % ACC_BANKS  # this group's PSUM bank");
      w_.line("banks += 1");
      w_.line("nisa.memset(dst=c_psum[0:mw, g, 0:nw], value=0.0)");
    }
    w_.open("for t in nl.affine_range(k_steps):  # accumulates in the PSUM bank (fp32)");
    w_.line("slab, row = divmod(t * MM_K, P)");
    w_.line("kw = min(MM_K, k_rows - t * MM_K)");
    w_.line("nisa.nc_matmul(dst=c_psum[0:mw, g, 0:nw],");
    w_.line("               stationary=a_sb[row:row + kw, {}, slab, mi * MM_M:mi * MM_M + mw],",
            slot_of(a_));
    w_.line("               moving=b_sb[row:row + kw, {}, slab, ni * MM_N:ni * MM_N + nw],",
            slot_of(b_));
    w_.line("               accumulate=True)");
    w_.close();
    if (pl_.acc == accumulation::single_k) {
      w_.line("# one k block: the group holds the whole sum; {} casts it to OUT",
              nki::engine_word(evict_));
      evict_to_stage("c_psum[0:mw, g, 0:nw]");
    } else if (pl_.acc == accumulation::sbuf) {
      sbuf_accumulate();
    }
    w_.close();  // ni
    if (p_.coalesce && pl_.acc != accumulation::psum_across) {
      if (pl_.acc == accumulation::sbuf) w_.open("if k == K_BLOCKS - 1:");
      w_.line("store(mw, m0 + mi * MM_M, n_cols, n0, slot)  # one DMA per block row (coalesce)");
      if (pl_.acc == accumulation::sbuf) w_.close();
    }
    w_.close();  // mi
  }

  void stage_slot() {
    w_.line("slot = stages % 2  # output staging, double-buffered");
    w_.line("stages += 1");
  }

  /// Evicts `src` (PSUM) into the output staging and, per instruction tile, stores it.
  void evict_to_stage(const std::string& src) {
    if (!p_.coalesce) stage_slot();
    const std::string col = p_.coalesce ? "ni * MM_N" : "0";
    w_.line("nisa.tensor_copy(dst=c_stage[0:mw, slot, {0}:{0} + nw], src={1}, engine=EVICT)", col,
            src);
    if (!p_.coalesce) w_.line("store(mw, m0 + mi * MM_M, nw, n0 + ni * MM_N, slot)");
  }

  void sbuf_accumulate() {
    const std::string row = p_.pos[dim_m] > p_.pos[dim_k] ? "m0 // MM_M + mi" : "mi";
    const std::string col = p_.pos[dim_n] > p_.pos[dim_k] ? "n0 + ni * MM_N" : "ni * MM_N";
    w_.line("# k is not innermost: {} adds each k block's partial sums into SBUF (ACC)",
            nki::engine_word(evict_));
    w_.line("part = c_part[0:mw, {}, {}:{} + nw]", row, col, col);
    w_.open("if k == 0:");
    w_.line("nisa.tensor_copy(dst=part, src=c_psum[0:mw, g, 0:nw], engine=EVICT)");
    w_.close();
    w_.open("elif k < K_BLOCKS - 1:");
    w_.line(
        "nisa.tensor_tensor(dst=part, data1=part, data2=c_psum[0:mw, g, 0:nw], op=nl.add, "
        "engine=EVICT)");
    w_.close();
    w_.open("else:  # the last k block: the sum goes to the output staging in OUT");
    if (!p_.coalesce) stage_slot();
    const std::string scol = p_.coalesce ? "ni * MM_N" : "0";
    w_.line("nisa.tensor_tensor(dst=c_stage[0:mw, slot, {0}:{0} + nw], data1=part,", scol);
    w_.line("                   data2=c_psum[0:mw, g, 0:nw], op=nl.add, engine=EVICT)");
    if (!p_.coalesce) w_.line("store(mw, m0 + mi * MM_M, nw, n0 + ni * MM_N, slot)");
    w_.close();
  }

  void close_groups() {
    w_.line("# after the last k block: drain the C block's groups");
    w_.open("for mi in nl.affine_range((m_cols + MM_M - 1) // MM_M):");
    w_.line("mw = min(MM_M, m_cols - mi * MM_M)");
    if (p_.coalesce) stage_slot();
    w_.open("for ni in nl.affine_range((n_cols + MM_N - 1) // MM_N):");
    w_.line("nw = min(MM_N, n_cols - ni * MM_N)");
    w_.line("g = g0 + mi * {} + ni", pl_.tn);
    evict_to_stage("c_psum[0:mw, g, 0:nw]");
    w_.close();
    if (p_.coalesce) w_.line("store(mw, m0 + mi * MM_M, n_cols, n0, slot)");
    w_.close();
  }

  const plan& pl_;
  const params& p_;
  const nki::context& ctx_;
  operand_plan a_, b_;
  engine_id evict_ = vector_engine;
  nki::writer w_;
};

}  // namespace

std::string emit_nki(const plan& pl, const nki::context& ctx, std::string& out) {
  return matmul_writer(pl, ctx).write(out);
}

}  // namespace tessel::sim::mm
