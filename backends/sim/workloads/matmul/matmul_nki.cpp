// matmul_nki.cpp: the matmul plan (matmul_plan.hpp) written as an NKI
// kernel (docs/nki.md), statement for statement the program matmul.cpp
// lowers: the block loops in `order`; A and B blocks loaded when the
// lowering loads them (a new block, or the first of `a_reuse` blocks of the
// free loop sharing one load) into the same slots; inside a block the
// instruction loops in `block_order`, each accumulation group in the PSUM
// bank the lowering gives it (psum_bufs banks in rotation, or a set of
// banks held open across k blocks), started by a memset or by the first
// matmul (psum_zero); the evict engine drains each group into the output
// staging (stage slots per open C row) or adds it into SBUF partial sums,
// and the stores go out per instruction tile or per block row (coalesce).
#include "../../nki/nki.hpp"
#include "matmul_plan.hpp"

#include <fmt/format.h>

#include <array>
#include <cmath>
#include <string>
#include <vector>

namespace tessel::sim::mm {
namespace {

const std::array<const char*, 3> block_counts{"M_BLOCKS", "N_BLOCKS", "K_BLOCKS"};
const std::array<const char*, 3> tile_vars{"mi", "ni", "t"};  ///< instruction-tile loop variables

/// One operand: the block loops that index it and the free loop it may be reused across.
struct operand_plan {
  char name = 'a';          ///< 'a' or 'b'
  std::array<int, 2> dims;  ///< the block loops that index it (A: m, k; B: k, n)
  int free_loop = dim_n;    ///< the loop it is reused across (A: n; B: m)
  std::int64_t reuse = 1;   ///< free-loop blocks served by one load (a_reuse, b_reuse)
  bool panel = false;       ///< reuse > 1 with the free loop not innermost: resident sets
  [[nodiscard]] std::string upper() const { return name == 'a' ? "A" : "B"; }
};

class matmul_writer {
 public:
  matmul_writer(const plan& pl, const nki::context& ctx) : pl_(pl), p_(pl.p), ctx_(ctx) {
    a_ = {'a', {dim_m, dim_k}, dim_n, p_.a_reuse, false};
    b_ = {'b', {dim_k, dim_n}, dim_m, p_.b_reuse, false};
    for (auto* x : {&a_, &b_}) {
      x->reuse = std::min(x->reuse, pl_.nb[static_cast<std::size_t>(x->free_loop)]);
      x->panel = x->reuse > 1 && pos(x->free_loop) < 2;
    }
  }

  std::string write(std::string& out) {
    nki::kernel_file f;
    f.workload = "matmul";
    f.summary = p_.a_mk ? "C = A B with A given as [M, K] (each 128 x 128 tile transposed on "
                          "TensorE) and B as [K, N]"
                        : "C = A^T B with A given as [K, M] (lhsT) and B as [K, N]";
    if (p_.scaled) f.summary += ", row m of C times scale[m]";
    constants(f);
    // the core split cuts M: A's columns (rows with a_layout = mk), C's and scale's rows
    f.inputs = {{"A", 2, p_.a_mk ? 0 : 1, ""}, {"B", 2, -1, ""}};
    if (p_.scaled) f.inputs.push_back({"scale", 2, 0, ""});
    f.outputs = {{"C", 2, 0, "nl.ndarray((M, N), dtype=OUT, buffer=nl.shared_hbm)"}};
    f.signature = fmt::format(
        "INPUTS = {{\"A\": ({4}, \"{0}\"), \"B\": ((K, N), \"{0}\"){3}}}\n"
        "OUTPUTS = {{\"C\": ((M, N), \"{1}\")}}\n"
        "TOLERANCE = {2}  # the gate's, in units of |reference| + rms(reference)",
        in_name(), nki::dtype_name(p_.out), nki::py_float(tolerance()),
        p_.scaled ? ", \"scale\": ((M, 1), \"float32\")" : "", p_.a_mk ? "(M, K)" : "(K, M)");
    kernel(f);
    f.kernel = w_.text();
    const std::string product =
        fmt::format("A.astype(np.float64){} @ B.astype(np.float64)", p_.a_mk ? "" : ".T");
    if (p_.scaled)
      f.reference = fmt::format(
          "def reference(A, B, scale):\n"
          "    \"\"\"C in float64, from the same inputs: row m of the product times "
          "scale[m].\"\"\"\n"
          "    return {{\"C\": scale.astype(np.float64) * ({})}}\n",
          product);
    else
      f.reference = fmt::format(
          "def reference(A, B):\n"
          "    \"\"\"C in float64, from the same inputs.\"\"\"\n"
          "    return {{\"C\": {}}}\n",
          product);
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

  /// The inputs' NKI dtype: fp8 in its format (nl.float8_e4m3 or nl.float8_e5m2).
  [[nodiscard]] std::string in_name() const {
    return p_.in_format == element_type::fp8_e5m2 ? "float8_e5m2" : nki::dtype_name(p_.in);
  }

  [[nodiscard]] bool double_row() const { return p_.mm_k > ctx_.m.partitions; }

  [[nodiscard]] int pos(int d) const { return p_.pos[static_cast<std::size_t>(d)]; }
  [[nodiscard]] static const char* var(int d) { return dim_names[static_cast<std::size_t>(d)]; }
  [[nodiscard]] static const char* count(int d) {
    return block_counts[static_cast<std::size_t>(d)];
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
    add("TM", pl_.tm, "stationary tiles of a full block");
    add("SLABS", pl_.slabs, "128-row slabs of a k block");
    if (p_.a_mk)
      add("M_ROWS", ceil_div(p_.tile[dim_m], ctx_.m.partitions),
          "a_layout = mk: 128-row chunks of an A block's rows");
    for (const auto* x : {&a_, &b_}) {
      const std::string up = x->upper();
      add(up + "_BUFS", x->name == 'a' ? p_.a_bufs : p_.b_bufs,
          x->panel
              ? fmt::format("resident sets of {} blocks in rotation", up)
              : fmt::format("{} block slots{}", up, x->name == 'a' ? " (1 without prefetch)" : ""));
      add(up + "_RESIDENT", x->name == 'a' ? pl_.a_resident : pl_.b_resident,
          fmt::format("{} blocks per set: every block of the loops inside {}", up,
                      var(x->free_loop)));
      if (x->panel) {
        add(up + "_REUSE", x->reuse,
            fmt::format("{} blocks served by one load of {} ({}_reuse)", var(x->free_loop), up,
                        x->name));
        add(up + "_PANELS", ceil_div(pl_.nb[static_cast<std::size_t>(x->free_loop)], x->reuse),
            fmt::format("loads of each {} block per pass of the {} loop", up, var(x->free_loop)));
      }
    }
    if (pl_.acc == accumulation::psum_across) {
      add("GROUPS", pl_.groups, "PSUM accumulation groups of one C block (one bank each)");
      add("PSUM_SETS", pl_.psum_sets, "sets of GROUPS banks in rotation (psum_bufs)");
    } else {
      add("ACC_BANKS", pl_.acc_banks, "PSUM banks the groups rotate through (psum_bufs)");
    }
    if (pl_.acc == accumulation::sbuf) {
      add("C_ROW_TILES", c_row_tiles(), "C partial sums kept in SBUF: row tiles");
      add("C_COLS", pl_.c_cols, "and columns");
    }
    add("STAGE_SLOTS", pl_.stage_slots, "output staging slots (the C rows open at once, + 1)");
    add("STAGE_COLS", stage_cols(),
        p_.coalesce ? "output staging: a block row (coalesce)"
                    : "output staging: one instruction tile");
    add("IN", "nl." + in_name(), "input dtype");
    add("OUT", nki::nl_dtype(p_.out), "output dtype");
    add("ACC", nki::nl_dtype(p_.acc), "partial sums in SBUF (acc_dtype)");
  }

  [[nodiscard]] std::int64_t c_row_tiles() const {
    return (pos(dim_m) > pos(dim_k) ? pl_.nb[dim_m] : 1) * pl_.tm;
  }
  [[nodiscard]] std::int64_t stage_cols() const {
    return p_.coalesce ? p_.tile[dim_n] : std::min(p_.mm_n, p_.tile[dim_n]);
  }

  void kernel(const nki::kernel_file& f) {
    nki::open_kernel(w_, f, ctx_);
    w_.line("# SBUF: A and B blocks, [partition = k row, slot, slab, free]");
    w_.line("a_sb = nl.ndarray((P, A_BUFS * A_RESIDENT, SLABS, TILE_M), dtype=IN, buffer=nl.sbuf)");
    w_.line("b_sb = nl.ndarray((P, B_BUFS * B_RESIDENT, SLABS, TILE_N), dtype=IN, buffer=nl.sbuf)");
    w_.line("c_stage = nl.ndarray((MM_M, STAGE_SLOTS, STAGE_COLS), dtype=OUT, buffer=nl.sbuf)");
    if (pl_.acc == accumulation::sbuf)
      w_.line("c_part = nl.ndarray((MM_M, C_ROW_TILES, C_COLS), dtype=ACC, buffer=nl.sbuf)");
    w_.line("# PSUM: one bank ([MM_M, MM_N] fp32) per accumulation group");
    w_.line("c_psum = nl.ndarray((MM_M, {}, MM_N), dtype=nl.float32, buffer=nl.psum)",
            pl_.acc == accumulation::psum_across ? "PSUM_SETS * GROUPS" : "ACC_BANKS");
    if (p_.a_mk) {
      w_.line("# a_layout = mk: A's rows as given ([partition = m row, slot, chunk, k]), and two");
      w_.line("# PSUM banks the TensorE transposes alternate between");
      w_.line(
          "a_raw = nl.ndarray((P, A_BUFS * A_RESIDENT, M_ROWS, TILE_K), dtype=IN, "
          "buffer=nl.sbuf)");
      w_.line("t_psum = nl.ndarray((P, 2, 512), dtype=nl.float32, buffer=nl.psum)  # a bank each");
    }
    w_.line();
    if (p_.scaled) load_scales();
    if (p_.a_mk)
      load_rows_function();
    else
      load_function(a_);
    load_function(b_);
    w_.open("def store(rows, row0, cols, col0, slot):");
    w_.line(
        "nisa.dma_copy(dst=C[row0:row0 + rows, col0:col0 + cols], src=c_stage[0:rows, slot, "
        "0:cols])");
    w_.close();
    w_.line();
    w_.line("# trace-time state: block slots, bank rotation, staging slots");
    w_.line("a_loads = b_loads = banks = stages = c_blocks = {}0", p_.a_mk ? "transposes = " : "");
    w_.line("a_last = b_last = None");
    w_.line("stage_of = [0] * TM  # the staging slot of each stationary tile's C row");
    block_loops();
    w_.line("return C");
    w_.close();
  }

  /// scale = row: each stationary tile's row scales, one DMA each, up front,
  /// into a column of their own ([rows, 1] per-partition operands of the evicts).
  void load_scales() {
    w_.line(
        "# scale = row: the rows' scales of stationary tile mi of block m in column m * TM + mi");
    w_.line("s_sb = nl.ndarray((MM_M, M_BLOCKS * TM), dtype=nl.float32, buffer=nl.sbuf)");
    w_.open("for m in nl.affine_range(M_BLOCKS):");
    w_.line("m_cols = min(TILE_M, M - m * TILE_M)");
    w_.open("for mi in nl.affine_range(-(-m_cols // MM_M)):");
    w_.line("r0, rows = m * TILE_M + mi * MM_M, min(MM_M, m_cols - mi * MM_M)");
    w_.line(
        "nisa.dma_copy(dst=s_sb[0:rows, m * TM + mi:m * TM + mi + 1], src=scale[r0:r0 + rows, "
        "0:1])");
    w_.close(2);
    w_.line();
  }

  /// a_layout = mk: load_a(m, k, slot, transposes) loads the block's rows of A
  /// (one DMA per 128-row chunk, or per chunk and slab without coalesce), then
  /// transposes each 128 x 128 tile on TensorE into one of two PSUM banks in
  /// turn and copies it into the lhsT slab with the evict engine, as the
  /// lowering's load_a_transposed; returns the transposes so far.
  void load_rows_function() {
    w_.open("def load_a(m, k, slot, transposes):");
    w_.line("\"\"\"A block (m, k) from A [M, K]: rows, then TensorE transposes into lhsT.\"\"\"");
    w_.line("k0, m0 = k * TILE_K, m * TILE_M");
    w_.line("rows, cols = min(TILE_K, K - k0), min(TILE_M, M - m0)");
    w_.open("for r in nl.affine_range((cols + P - 1) // P):");
    w_.line("mr = min(P, cols - r * P)");
    if (p_.coalesce) {
      w_.line(
          "nisa.dma_copy(dst=a_raw[0:mr, slot, r, 0:rows], src=A[m0 + r * P:m0 + r * P + mr, "
          "k0:k0 + rows])");
    } else {
      w_.open("for s in nl.affine_range((rows + P - 1) // P):");
      w_.line("kc = min(P, rows - s * P)");
      w_.line(
          "nisa.dma_copy(dst=a_raw[0:mr, slot, r, s * P:s * P + kc], src=A[m0 + r * P:m0 + r * P + "
          "mr, k0 + s * P:k0 + s * P + kc])");
      w_.close();
    }
    w_.close();
    w_.open("for r in nl.affine_range((cols + P - 1) // P):");
    w_.line("mr = min(P, cols - r * P)");
    w_.open("for s in nl.affine_range((rows + P - 1) // P):");
    w_.line("kc, bank = min(P, rows - s * P), transposes % 2");
    w_.line("transposes += 1");
    w_.line(
        "nisa.nc_transpose(dst=t_psum[0:kc, bank, 0:mr], data=a_raw[0:mr, slot, r, s * P:s * P + "
        "kc])");
    w_.line(copy("a_sb[0:kc, slot, s, r * P:r * P + mr]", "t_psum[0:kc, bank, 0:mr]", false));
    w_.close(2);
    w_.line("return transposes");
    w_.close();
    w_.line();
  }

  /// load_a(m, k, slot) / load_b(k, n, slot): one block, as the lowering's load_a/load_b.
  void load_function(const operand_plan& x) {
    const bool a = x.name == 'a';
    const std::string free = a ? "m" : "n", free_up = a ? "M" : "N";
    w_.open("def load_{}({}, slot):", x.name, a ? "m, k" : "k, n");
    w_.line("\"\"\"{} block ({}) into slot `slot`: one DMA per 128-row slab{}.\"\"\"", x.upper(),
            a ? "m, k" : "k, n", p_.coalesce ? " (coalesce)" : " and instruction tile");
    w_.line("k0, {0}0 = k * TILE_K, {0} * TILE_{1}", free, free_up);
    w_.line("rows, cols = min(TILE_K, K - k0), min(TILE_{0}, {0} - {1}0)", free_up, free);
    if (p_.coalesce) {
      w_.line("c0, c1 = 0, cols");
    } else {
      w_.open("for c0 in range(0, cols, MM_{}):  # instruction-tile columns", free_up);
      w_.line("c1 = min(cols, c0 + MM_{})", free_up);
    }
    w_.open("for s in nl.affine_range((rows + P - 1) // P):");
    w_.line("r = min(P, rows - s * P)");
    w_.line(
        "nisa.dma_copy(dst={0}_sb[0:r, slot, s, c0:c1], src={1}[k0 + s * P:k0 + s * P + r, "
        "{2}0 + c0:{2}0 + c1])",
        x.name, x.upper(), free);
    w_.close(p_.coalesce ? 2 : 3);
    w_.line();
  }

  /// Mixed-radix index of the block loops at positions [from, to) of `order`.
  [[nodiscard]] std::string radix(int from, int to) const {
    std::string out;
    for (int i = from; i < to; ++i) {
      const int d = p_.order[static_cast<std::size_t>(i)];
      out = out.empty() ? var(d) : fmt::format("({}) * {} + {}", out, count(d), var(d));
    }
    return out.empty() ? "0" : out;
  }

  /// The lowering's place(): when the operand loads and into which slot.
  void place(const operand_plan& x) {
    const std::string up = x.upper(), blk = fmt::format("{}, {}", var(x.dims[0]), var(x.dims[1]));
    if (x.panel) {
      const int pu = pos(x.free_loop);
      const std::string panel = pu == 0 ? fmt::format("{} // {}_REUSE", var(x.free_loop), up)
                                        : fmt::format("({}) * {}_PANELS + {} // {}_REUSE",
                                                      radix(0, pu), up, var(x.free_loop), up);
      w_.line("# {}_reuse: {}_REUSE {} blocks share one load of the {} blocks inside {}", x.name,
              up, var(x.free_loop), up, var(x.free_loop));
      w_.line("{}_slot = ({}) % {}_BUFS * {}_RESIDENT + {}", x.name, panel, up, up,
              radix(pu + 1, 3));
      w_.open("if {} % {}_REUSE == 0:", var(x.free_loop), up);
    } else {
      w_.open("if ({}) != {}_last:  # a new {} block: the next slot", blk, x.name, up);
      w_.line("{}_last = ({})", x.name, blk);
      w_.line("{0}_slot = {0}_loads % {1}_BUFS", x.name, up);
      w_.line("{}_loads += 1", x.name);
    }
    if (x.name == 'a' && p_.a_mk)
      w_.line("transposes = load_a({}, a_slot, transposes)", blk);
    else
      w_.line("load_{0}({1}, {0}_slot)", x.name, blk);
    w_.close();
  }

  void block_loops() {
    for (int i = 0; i < 3; ++i) {
      const int d = p_.order[static_cast<std::size_t>(i)];
      std::string n = count(d);
      const bool dropped = i == 0 && ctx_.injected == nki::fault::drop_tail;
      if (dropped) n += " - 1";
      // the k loop carries the SBUF partial sums (the first block copies, later ones add)
      const char* range =
          d == dim_k && pl_.acc == accumulation::sbuf ? "nl.sequential_range" : "nl.affine_range";
      w_.open("for {} in {}({}):  # {} blocks{}", var(d), range, n, var(d),
              i == 0   ? " (outermost)"
              : i == 2 ? " (innermost)"
                       : "");
      if (dropped) w_.line("# FAULT drop_tail: the last block of the outermost loop is dropped");
    }
    place(a_);
    place(b_);
    block();
    w_.close(3);
  }

  void block() {
    w_.line("m0, n0 = m * TILE_M, n * TILE_N");
    w_.line(
        "m_cols, n_cols, k_rows = min(TILE_M, M - m0), min(TILE_N, N - n0), min(TILE_K, K - "
        "k * TILE_K)");
    w_.line("tm, tn, tk = -(-m_cols // MM_M), -(-n_cols // MM_N), -(-k_rows // MM_K)");
    if (ctx_.injected == nki::fault::skip_accumulation) {
      w_.open("if k == K_BLOCKS - 1:");
      w_.line("tk -= 1  # FAULT skip_accumulation: the last contraction step is lost");
      w_.close();
    }
    const bool across = pl_.acc == accumulation::psum_across;
    if (across) {
      w_.line("# k innermost: the C block's groups stay open in PSUM across the k blocks");
      w_.line("opens, closes = k == 0, k == K_BLOCKS - 1");
      w_.open("if opens:");
      w_.line("c_blocks += 1");
      w_.close();
    }
    w_.line("bank = [0] * (tm * tn)");
    const auto& bo = p_.block_order;
    w_.line("# the instruction loops in block_order ({}, {}, {})",
            dim_names[static_cast<std::size_t>(bo[0])], dim_names[static_cast<std::size_t>(bo[1])],
            dim_names[static_cast<std::size_t>(bo[2])]);
    for (int i = 0; i < 3; ++i) {
      const int d = bo[static_cast<std::size_t>(i)];
      w_.open("for {} in nl.affine_range({}):", tile_vars[static_cast<std::size_t>(d)],
              d == dim_m   ? "tm"
              : d == dim_n ? "tn"
                           : "tk");
    }
    w_.line("rows, cols = min(MM_M, m_cols - mi * MM_M), min(MM_N, n_cols - ni * MM_N)");
    w_.line("group = mi * tn + ni");
    w_.open("if t == 0:  # the group opens: its PSUM bank");
    if (across) {
      w_.line("bank[group] = (c_blocks - 1) % PSUM_SETS * GROUPS + group");
    } else {
      w_.line("bank[group] = banks % ACC_BANKS");
      w_.line("banks += 1");
    }
    if (p_.psum_memset) {
      if (across) w_.open("if opens:");
      w_.line("# psum_zero = memset");
      w_.line(
          "nisa.memset(dst=c_psum[0:rows, bank[group], 0:cols], value=0.0, "
          "engine=nisa.engine.vector)");
      if (across) w_.close();
    }
    w_.close();
    w_.line("slab, row = divmod(t * MM_K, P)");
    w_.line("kw = min(MM_K, k_rows - t * MM_K)");
    if (double_row()) {
      w_.open("if kw > P:  # fp8 double_row: two full slabs pair up, contraction 2 x P");
      matmul_call(across, "0:P", "slab:slab + 2", true);
      w_.close();
      w_.open("else:  # the last contraction tile fits one slab: an ordinary matmul");
      matmul_call(across, "row:row + kw", "slab", false);
      w_.close();
    } else {
      matmul_call(across, "row:row + kw", "slab", false);
    }
    w_.open("if t == tk - 1{}:  # the group is complete: drain it", across ? " and closes" : "");
    evict();
    w_.close(4);
  }

  /// nisa.nc_matmul of the group's tiles: contraction rows `rows` of slab(s) `slabs`
  /// (paired: [P, 2, free] tiles in double_row mode).
  void matmul_call(bool across, const char* rows, const char* slabs, bool paired) {
    w_.line("nisa.nc_matmul(dst=c_psum[0:rows, bank[group], 0:cols],");
    w_.line("               stationary=a_sb[{}, a_slot, {}, mi * MM_M:mi * MM_M + rows],", rows,
            slabs);
    w_.line("               moving=b_sb[{}, b_slot, {}, ni * MM_N:ni * MM_N + cols],", rows, slabs);
    const std::string acc = p_.psum_memset ? std::string("True")
                                           : fmt::format("t > 0{}", across ? " or not opens" : "");
    const char* note = p_.psum_memset ? "" : "  # psum_zero = matmul: the first overwrites";
    if (!paired) {
      w_.line("               accumulate={}){}", acc, note);
      return;
    }
    w_.line("               accumulate={},{}", acc, note);
    w_.line("               perf_mode=nisa.matmul_perf_mode.double_row)");
  }

  /// The row scales of the group's stationary tile (scale = row).
  static constexpr const char* scale_tile = "s_sb[0:rows, m * TM + mi:m * TM + mi + 1]";

  /// A copy out of PSUM on the evict engine (ScalarE copies with activation);
  /// scale = row multiplies by the rows' scales on the way.
  [[nodiscard]] std::string copy(const std::string& dst, const std::string& src,
                                 bool scaled) const {
    if (p_.evict == scalar_engine)
      return fmt::format("nisa.activation(dst={}, op=nl.copy, data={}{})", dst, src,
                         scaled ? fmt::format(", scale={}", scale_tile) : "");
    if (scaled)
      return fmt::format(
          "nisa.tensor_scalar(dst={}, data={}, op0=nl.multiply, operand0={}, engine={})", dst, src,
          scale_tile, nki::engine(p_.evict));
    return fmt::format("nisa.tensor_copy(dst={}, src={}, engine={})", dst, src,
                       nki::engine(p_.evict));
  }
  /// An add of PSUM partial sums (ScalarE has no two-tensor add: VectorE does
  /// it); scale = row: part + psum x the rows' scales, one VectorE instruction.
  [[nodiscard]] std::string add(const std::string& dst, const std::string& part,
                                const std::string& psum) const {
    if (p_.scaled)
      return fmt::format(
          "nisa.scalar_tensor_tensor(dst={}, data={}, op0=nl.multiply, operand0={}, op1=nl.add, "
          "operand1={})",
          dst, psum, scale_tile, part);
    const engine_id e = p_.evict == scalar_engine ? vector_engine : p_.evict;
    return fmt::format("nisa.tensor_tensor(dst={}, data1={}, data2={}, op=nl.add, engine={})", dst,
                       part, psum, nki::engine(e));
  }

  void evict() {
    const std::string psum = "c_psum[0:rows, bank[group], 0:cols]";
    const std::string stage = fmt::format("c_stage[0:rows, stage_of[mi], {}]",
                                          p_.coalesce ? "ni * MM_N:ni * MM_N + cols" : "0:cols");
    if (pl_.acc == accumulation::sbuf) {
      const std::string row = pos(dim_m) > pos(dim_k) ? "m * TM + mi" : "mi";
      const std::string col = pos(dim_n) > pos(dim_k) ? "n0 + ni * MM_N" : "ni * MM_N";
      w_.line("# k is not innermost: partial sums of each k block are added in SBUF (ACC)");
      w_.line("part = c_part[0:rows, {}, {}:{} + cols]", row, col, col);
      w_.open("if k == 0:");
      w_.line(copy("part", psum, p_.scaled));
      w_.close();
      w_.open("elif k < K_BLOCKS - 1:");
      w_.line(add("part", "part", psum));
      w_.close();
      w_.open("else:  # the last k block: the sum goes to the output staging in OUT");
      stage_slot();
      w_.line(add(stage, "part", psum));
      store();
      w_.close();
      return;
    }
    stage_slot();
    w_.line(copy(stage, psum, p_.scaled));
    store();
  }

  void stage_slot() {
    if (p_.coalesce) w_.open("if ni == 0:  # a new C row: the next staging slot");
    w_.line("stage_of[mi] = stages % STAGE_SLOTS");
    w_.line("stages += 1");
    if (p_.coalesce) w_.close();
  }

  void store() {
    if (!p_.coalesce) {
      w_.line("store(rows, m0 + mi * MM_M, cols, n0 + ni * MM_N, stage_of[mi])");
      return;
    }
    w_.open("if ni == tn - 1:  # the row is complete: one DMA (coalesce)");
    w_.line("store(rows, m0 + mi * MM_M, n_cols, n0, stage_of[mi])");
    w_.close();
  }

  const plan& pl_;
  const params& p_;
  const nki::context& ctx_;
  operand_plan a_, b_;
  nki::writer w_;
};

}  // namespace

std::string emit_nki(const plan& pl, const nki::context& ctx, std::string& out) {
  return matmul_writer(pl, ctx).write(out);
}

}  // namespace tessel::sim::mm
