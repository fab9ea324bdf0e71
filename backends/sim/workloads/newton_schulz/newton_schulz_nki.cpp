// newton_schulz_nki.cpp: newton_schulz's plan (newton_schulz.hpp) written as
// an NKI kernel (docs/nki.md). Every operand stays in SBUF: X in two slots
// ([partition = row % P, slot, row tile, column]), X^T, A' and B; PSUM banks
// rotate as the simulator's lowering rotates them. The numpy reference is
// the iteration as the schedule rounds it (reference(), below).
#include "../../nki/nki.hpp"
#include "../emit.hpp"
#include "newton_schulz.hpp"

#include <fmt/format.h>

#include <string>

namespace tessel::sim::ns_detail {
namespace {

void constants(const plan& pl, const nki::context& ctx, nki::kernel_file& f) {
  const auto& p = pl.p;
  auto add = [&](std::string n, auto v, std::string meaning) {
    f.constants.push_back({std::move(n), fmt::format("{}", v), std::move(meaning)});
  };
  add("ROWS", p.rows, "rows of G and X");
  add("COLS", p.cols, "columns of G and X");
  add("ITERATIONS", p.iterations, "Newton-Schulz steps");
  add("P", ctx.m.partitions, "partitions (nl.tile_size.pmax)");
  add("MM_N", p.mm_n, "mm_n: moving free size of a matmul");
  add("ROW_TILES", pl.row_tiles, "");
  add("COL_TILES", pl.col_tiles, "128-row slabs of X^T (the contraction of X X^T)");
  add("ROW_GROUPS", pl.row_groups, "MM_N-wide column groups of A' and B");
  add("COL_GROUPS", pl.col_groups, "MM_N-wide column groups of X");
  add("PER_BANK", pl.t_width / ctx.m.partitions, "transposes drained together (one PSUM bank)");
  add("PSUM_BUFS", p.psum_bufs, "psum_bufs: PSUM banks in rotation");
  add("COEF_A", nki::py_float(coeff_a), "Muon's quintic: X <- a X + (b A + c A^2) X");
  add("COEF_B", nki::py_float(coeff_b), "");
  add("COEF_S", nki::py_float(coeff_c / (coeff_b * coeff_b)), "c / b^2: B = S A'A' + A'");
  add("EPS", nki::py_float(norm_eps), "X0 = G / sqrt(||G||^2 + EPS)");
  add("EVICT", nki::engine(p.evict), "drains A' and the transposes (evict)");
  add("DT", nki::nl_dtype(p.type), "dtype of G, X, A' and B");
}

/// A drain of `src` (PSUM) into `dst` on the evict engine, times `scale`.
std::string evict(const params& p, const std::string& dst, const std::string& src,
                  const std::string& scale) {
  if (p.evict == scalar_engine)
    return fmt::format("nisa.activation(dst={}, op=nl.copy, data={}, scale={})", dst, src, scale);
  return fmt::format(
      "nisa.tensor_scalar(dst={}, data={}, op0=nl.multiply, operand0={}, engine=EVICT)", dst, src,
      scale);
}

void normalise(const plan& pl, nki::writer& w) {
  w.line("# X0 = G * rsqrt(sum of squares + EPS): ScalarE row sums, a ones matmul over the");
  w.line("# partitions, rsqrt, then the evict engine scales into X's slot 0");
  w.line("nisa.memset(dst=ones[0:P, 0:P], value=1.0, engine=nisa.engine.vector)");
  w.open("for i in nl.affine_range(ROW_TILES):");
  w.line("n = min(P, ROWS - i * P)");
  w.line("nisa.dma_copy(dst=x_sb[0:n, 0, i, 0:COLS], src=G[i * P:i * P + n, 0:COLS])");
  w.line("nisa.activation(dst=sq[0:n, 0:COLS], op=nl.square, data=x_sb[0:n, 0, i, 0:COLS],");
  w.line("                reduce_op=nl.add, reduce_res=sums[0:n, i:i + 1],");
  w.line("                reduce_cmd=nisa.reduce_cmd.reset_reduce)");
  w.close();
  w.line("bank = next_bank()");
  w.open("for i in nl.sequential_range(ROW_TILES):");
  w.line("n = min(P, ROWS - i * P)");
  w.line("nisa.nc_matmul(dst=ps[0:P, bank, 0:1], stationary=ones[0:n, 0:P],");
  w.line("               moving=sums[0:n, i:i + 1], accumulate=i > 0)");
  w.close();
  w.line("nisa.activation(dst=inv[0:P, 0:1], op=nl.rsqrt, data=ps[0:P, bank, 0:1], bias=EPS)");
  w.open("for i in nl.affine_range(ROW_TILES):");
  w.line("n = min(P, ROWS - i * P)");
  w.line(evict(pl.p, "x_sb[0:n, 0, i, 0:COLS]", "x_sb[0:n, 0, i, 0:COLS]", "inv[0:n, 0:1]"));
  w.close();
}

void transpose(nki::writer& w) {
  w.open("def transpose(s):");
  w.line("\"\"\"X^T from X's slot s: 128 x 128 TensorE transposes, PER_BANK to a bank.\"\"\"");
  w.open("for j in nl.sequential_range(COL_TILES):");
  w.line("c0 = j * P");
  w.line("cw = min(P, COLS - c0)");
  w.open("for i0 in nl.sequential_range(0, ROW_TILES, PER_BANK):");
  w.line("bank = next_bank()");
  w.open("for i in nl.sequential_range(i0, min(ROW_TILES, i0 + PER_BANK)):");
  w.line("n = min(P, ROWS - i * P)");
  w.line("o = (i - i0) * P");
  w.line("nisa.nc_transpose(dst=ps[0:cw, bank, o:o + n], data=x_sb[0:n, s, i, c0:c0 + cw])");
  w.close();
  w.line("width = min(PER_BANK * P, ROWS - i0 * P)");
  w.line(
      "nisa.tensor_copy(dst=xt_sb[0:cw, j, i0 * P:i0 * P + width], src=ps[0:cw, bank, 0:width],");
  w.line("                 engine=EVICT)");
  w.close(3);
}

/// Opens the loop over the MM_N-wide column groups g of a ROWS-wide
/// product (A' or B), each with its PSUM bank.
void open_row_groups(nki::writer& w) {
  w.open("for g in nl.sequential_range(ROW_GROUPS):");
  w.line("g0 = g * MM_N");
  w.line("gw = min(MM_N, ROWS - g0)");
  w.line("bank = next_bank()");
}

/// Opens the loops over the row tiles i of a ROWS x ROWS product and, in
/// each, its column groups (open_row_groups).
void open_row_tiles_and_groups(nki::writer& w) {
  w.open("for i in nl.sequential_range(ROW_TILES):");
  w.line("n = min(P, ROWS - i * P)");
  open_row_groups(w);
}

void step(const plan& pl, const nki::context& ctx, nki::writer& w) {
  const bool skip = ctx.injected == nki::fault::skip_accumulation;
  w.open("def step(cur, nxt):");
  w.line("\"\"\"A' = b X X^T; B = S A'A' + A'; X+ = a X + B X into slot nxt.\"\"\"");
  open_row_tiles_and_groups(w);
  w.open("for k in nl.sequential_range(COL_TILES{}):", skip ? " - 1" : "");
  if (skip) w.line("# FAULT skip_accumulation: the last slab of X^T is not accumulated");
  w.line("kw = min(P, COLS - k * P)");
  w.line("nisa.nc_matmul(dst=ps[0:n, bank, 0:gw], stationary=xt_sb[0:kw, k, i * P:i * P + n],");
  w.line("               moving=xt_sb[0:kw, k, g0:g0 + gw], accumulate=k > 0)");
  w.close();
  w.line(evict(pl.p, "a_sb[0:n, i, g0:g0 + gw]", "ps[0:n, bank, 0:gw]", "COEF_B"));
  w.close(2);
  open_row_tiles_and_groups(w);
  w.open("for k in nl.sequential_range(ROW_TILES):  # A' is symmetric: its rows are A'^T's");
  w.line("kn = min(P, ROWS - k * P)");
  w.line("nisa.nc_matmul(dst=ps[0:n, bank, 0:gw], stationary=a_sb[0:kn, k, i * P:i * P + n],");
  w.line("               moving=a_sb[0:kn, k, g0:g0 + gw], accumulate=k > 0)");
  w.close();
  w.line("nisa.scalar_tensor_tensor(dst=b_sb[0:n, i, g0:g0 + gw], data=ps[0:n, bank, 0:gw],");
  w.line("                          op0=nl.multiply, operand0=COEF_S, op1=nl.add,");
  w.line("                          operand1=a_sb[0:n, i, g0:g0 + gw])");
  w.close(2);
  w.open("for i in nl.sequential_range(ROW_TILES):");
  w.line("n = min(P, ROWS - i * P)");
  w.open("for g in nl.sequential_range(COL_GROUPS):");
  w.line("c0 = g * MM_N");
  w.line("cw = min(MM_N, COLS - c0)");
  w.line("bank = next_bank()");
  w.open("for k in nl.sequential_range(ROW_TILES):  # B is symmetric");
  w.line("kn = min(P, ROWS - k * P)");
  w.line("nisa.nc_matmul(dst=ps[0:n, bank, 0:cw], stationary=b_sb[0:kn, k, i * P:i * P + n],");
  w.line("               moving=x_sb[0:kn, cur, k, c0:c0 + cw], accumulate=k > 0)");
  w.close();
  w.line("nisa.scalar_tensor_tensor(dst=x_sb[0:n, nxt, i, c0:c0 + cw],");
  w.line("                          data=x_sb[0:n, cur, i, c0:c0 + cw], op0=nl.multiply,");
  w.line("                          operand0=COEF_A, op1=nl.add, operand1=ps[0:n, bank, 0:cw])");
  w.close(3);
}

void recompute(nki::writer& w) {
  w.open("def recompute(cur):");
  w.line("\"\"\"X+^T = a X^T + X^T B in place (stationary: X's slot cur).\"\"\"");
  w.open("for j in nl.sequential_range(COL_TILES):");
  w.line("c0 = j * P");
  w.line("cw = min(P, COLS - c0)");
  open_row_groups(w);
  w.open("for k in nl.sequential_range(ROW_TILES):");
  w.line("kn = min(P, ROWS - k * P)");
  w.line("nisa.nc_matmul(dst=ps[0:cw, bank, 0:gw], stationary=x_sb[0:kn, cur, k, c0:c0 + cw],");
  w.line("               moving=b_sb[0:kn, k, g0:g0 + gw], accumulate=k > 0)");
  w.close();
  w.line(
      "nisa.scalar_tensor_tensor(dst=xt_sb[0:cw, j, g0:g0 + gw], data=xt_sb[0:cw, j, g0:g0 + gw],");
  w.line("                          op0=nl.multiply, operand0=COEF_A, op1=nl.add,");
  w.line("                          operand1=ps[0:cw, bank, 0:gw])");
  w.close(3);
}

/// The numpy reference: the iteration as the schedule rounds it (the
/// functional executor's `scheduled`, newton_schulz_functional.cpp), so that
/// the gate's tight tolerance holds over all ITERATIONS steps: each matmul in
/// fp32, accumulated in PSUM over P-row slabs of its contraction; X0, A', B,
/// X+ (and a recomputed X^T) rounded to DT where the kernel stores them. An
/// iteration in fp64 drifts from every kernel by rounding flips the quintic
/// amplifies (up to COEF_A a step), past fp16's and fp32's tolerances.
std::string reference(dtype t, bool recompute_t) {
  std::string store;
  if (t == dtype::fp32) {
    store = "    return np.asarray(v, dtype=np.float32)\n";
  } else if (t == dtype::fp16) {  // fp16's grid, saturating at 65504 (as the gate rounds)
    store =
        "    v = np.asarray(v, dtype=np.float32)\n"
        "    v = np.where(np.isfinite(v), np.clip(v, -65504.0, 65504.0), v)\n"
        "    return v.astype(np.float16).astype(np.float32)\n";
  } else {
    store =
        "    v = np.asarray(v, dtype=np.float32)\n"
        "    u = v.view(np.uint32).astype(np.uint64)\n"
        "    u = (u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000\n"
        "    return np.where(np.isfinite(v), u.astype(np.uint32).view(np.float32), v)\n";
  }
  const std::string next_t =
      recompute_t ? "            xt = store(xt * np.float32(COEF_A) + mm(x, b))  # recomputed\n"
                  : "            xt = x_next.T.copy()  # transposed\n";
  return "def store(v):\n"
         "    \"\"\"v rounded to DT (nearest even) as the kernel stores it, held in "
         "float32.\"\"\"\n" +
         store +
         "\n\n"
         "def mm(stationary, moving):\n"
         "    \"\"\"stationary^T @ moving as TensorE computes it: fp32, accumulated in PSUM\n"
         "    over P-row slabs of the contraction.\"\"\"\n"
         "    out = np.zeros((stationary.shape[1], moving.shape[1]), dtype=np.float32)\n"
         "    for k in range(0, stationary.shape[0], P):\n"
         "        out += stationary[k:k + P].T @ moving[k:k + P]\n"
         "    return out\n"
         "\n\n"
         "def reference(G):\n"
         "    \"\"\"X as the schedule rounds it: fp32 arithmetic, each matmul accumulated in "
         "fp32,\n"
         "    rounded to DT where the kernel stores (X0, A', B, X+, X^T).\"\"\"\n"
         "    x = np.asarray(G, dtype=np.float32)\n"
         "    sums = np.sum(x * x, axis=1, keepdims=True, dtype=np.float32)\n"
         "    total = mm(sums, np.ones((x.shape[0], 1), dtype=np.float32))[0, 0]\n"
         "    x = store(x * (np.float32(1) / np.sqrt(total + np.float32(EPS))))\n"
         "    xt = x.T.copy()\n"
         "    for t in range(ITERATIONS):\n"
         "        a1 = store(mm(xt, xt) * np.float32(COEF_B))\n"
         "        b = store(mm(a1, a1) * np.float32(COEF_S) + a1)\n"
         "        x_next = store(x * np.float32(COEF_A) + mm(b, x))\n"
         "        if t + 1 < ITERATIONS:\n" +
         next_t +
         "        x = x_next\n"
         "    return {\"X\": x.astype(np.float64)}\n";
}

}  // namespace

std::string emit_nki(const plan& pl, const nki::context& ctx, std::string& out) {
  const auto& p = pl.p;
  nki::kernel_file f;
  f.workload = "newton_schulz";
  f.summary = "X = G / ||G||_F, then ITERATIONS steps of X <- a X + (b A + c A^2) X, A = X X^T";
  constants(pl, ctx, f);
  const std::string dt = nki::dtype_name(p.type);
  f.signature = fmt::format(
      "INPUTS = {{\"G\": ((ROWS, COLS), \"{0}\")}}\n"
      "OUTPUTS = {{\"X\": ((ROWS, COLS), \"{0}\")}}\n"
      "TOLERANCE = {1}  # the gate's, in units of |reference| + rms(reference)",
      dt, nki::py_float(tolerance(p.type, p.cols)));
  const bool drop = ctx.injected == nki::fault::drop_tail;
  // no core split (one core runs it, as the simulator times it): the tensors go whole
  f.inputs = {{"G", 2, -1, ""}};
  f.outputs = {{"X", 2, -1, "nl.ndarray((ROWS, COLS), dtype=DT, buffer=nl.shared_hbm)"}};
  nki::writer w;
  nki::open_kernel(w, f, ctx);
  w.line("x_sb = nl.ndarray((P, 2, ROW_TILES, COLS), dtype=DT, buffer=nl.sbuf)  # two slots");
  w.line("xt_sb = nl.ndarray((P, COL_TILES, ROWS), dtype=DT, buffer=nl.sbuf)");
  w.line("a_sb = nl.ndarray((P, ROW_TILES, ROWS), dtype=DT, buffer=nl.sbuf)  # A' = b X X^T");
  w.line("b_sb = nl.ndarray((P, ROW_TILES, ROWS), dtype=DT, buffer=nl.sbuf)  # B = S A'A' + A'");
  w.line("ones = nl.ndarray((P, P), dtype=nl.float32, buffer=nl.sbuf)");
  w.line("sums = nl.ndarray((P, ROW_TILES), dtype=nl.float32, buffer=nl.sbuf)");
  w.line("sq = nl.ndarray((P, COLS), dtype=nl.float32, buffer=nl.sbuf)");
  w.line("inv = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)");
  w.line(
      "ps = nl.ndarray((P, PSUM_BUFS, nl.tile_size.psum_fmax), dtype=nl.float32, "
      "buffer=nl.psum)");
  w.line("banks = [0]");
  w.line();
  w.open("def next_bank():");
  w.line("banks[0] += 1");
  w.line("return (banks[0] - 1) % PSUM_BUFS");
  w.close();
  w.line();
  transpose(w);
  w.line();
  step(pl, ctx, w);
  w.line();
  if (p.recompute_t) {
    recompute(w);
    w.line();
  }
  normalise(pl, w);
  w.line("transpose(0)");
  w.open("for t in nl.sequential_range(ITERATIONS):");
  w.line("step(t % 2, 1 - t % 2)");
  w.open("if t + 1 < ITERATIONS:");
  w.line(p.recompute_t ? "recompute(t % 2)" : "transpose(1 - t % 2)");
  w.close(2);
  w.line("last = ITERATIONS % 2");
  w.open("for i in nl.affine_range(ROW_TILES{}):", drop ? " - 1" : "");
  if (drop) w.line("# FAULT drop_tail: the last row tile is not stored");
  w.line("n = min(P, ROWS - i * P)");
  w.line("nisa.dma_copy(dst=X[i * P:i * P + n, 0:COLS], src=x_sb[0:n, last, i, 0:COLS])");
  w.close();
  w.line("return X");
  w.close();
  f.kernel = w.text();
  f.reference = reference(p.type, p.recompute_t);
  out = nki::assemble(f, ctx);
  return "";
}

}  // namespace tessel::sim::ns_detail
