// swiglu_nki.cpp: swiglu's schedule (swiglu.hpp) written as an NKI kernel
// (docs/nki.md), instruction for instruction what swiglu.cpp lowers: per
// token tile, x^T in SBUF (x_bufs slots); per ff block the W_gate and W_up
// blocks (`bufs` slots; one transfer per slab for both with fuse_gate_up,
// the weights being stacked as W_gate_up [d_model, 2, d_ff]), g^T and u^T
// in fp32 PSUM (psum_sets bank pairs in rotation), h^T = silu(g) * u in the
// input type; then the down projection y = h W_down, d_tile columns per
// pass, accumulated in PSUM over all of d_ff (the first matmul of a group
// overwrites its bank), or (fuse_down) per ff block, in rotating bank sets,
// and added into an fp32 y accumulator in SBUF.
#include "../../nki/nki.hpp"
#include "swiglu.hpp"

#include <fmt/format.h>

#include <string>

namespace tessel::sim::swiglu_detail {

namespace {

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

/// A copy on the evict engine (ScalarE copies with an activation).
std::string copy(engine_id evict, const std::string& dst, const std::string& src) {
  if (evict == scalar_engine)
    return fmt::format("nisa.activation(dst={}, op=nl.copy, data={})", dst, src);
  return fmt::format("nisa.tensor_copy(dst={}, src={}, engine=EVICT)", dst, src);
}

void constants(const params& p, const nki::context& ctx, nki::kernel_file& f) {
  auto add = [&](std::string n, auto v, std::string meaning) {
    f.constants.push_back({std::move(n), fmt::format("{}", v), std::move(meaning)});
  };
  const std::int64_t P = ctx.m.partitions, bank_cols = ctx.m.psum_bank_bytes / 4;
  const std::int64_t t_subs = ceil_div(p.token_tile, P);
  const std::int64_t down_banks = ceil_div(p.d_tile * 4, ctx.m.psum_bank_bytes);
  const std::int64_t down_sets =
      std::max<std::int64_t>(1, (ctx.m.psum_banks - 2LL * p.psum_sets) / (t_subs * down_banks));
  add("TOKENS", p.tokens, "");
  add("D_MODEL", p.d_model, "");
  add("D_FF", p.d_ff, "");
  add("P", P, "partitions (nl.tile_size.pmax)");
  add("BANK", bank_cols, "fp32 columns of a PSUM bank");
  add("TOKEN_TILE", p.token_tile, "token_tile: x^T and h^T stay in SBUF per token tile");
  add("FF_TILE", p.ff_tile, "ff_tile: d_ff columns per W_gate/W_up block");
  add("D_TILE", p.d_tile, "d_tile: output columns per down-projection pass");
  add("MM_N", p.mm_n, "moving free size of a matmul (divides a bank)");
  add("MM_K", p.mm_k, "contraction of a gate/up matmul: rows of a d_model slab (mm_k)");
  add("K_SLABS", ceil_div(p.d_model, p.mm_k),
      "MM_K-row slabs of d_model (the gate/up contraction)");
  add("T_SUBS", t_subs, "128-token row tiles of a token tile");
  add("SUBS_PER_BLOCK", ceil_div(p.ff_tile, P), "128-row sub-tiles of h^T per ff block");
  add("TOKEN_TILES", ceil_div(p.tokens, p.token_tile), "");
  add("F_BLOCKS", ceil_div(p.d_ff, p.ff_tile), "");
  add("D_BLOCKS", ceil_div(p.d_model, p.d_tile), "");
  add("BUFS", p.bufs, "weight block slots (bufs)");
  add("X_BUFS", p.x_bufs, "x tile slots (x_bufs)");
  add("PSUM_SETS", p.psum_sets, "(g, u) PSUM bank pairs in rotation (psum_sets)");
  add("DOWN_BANKS", down_banks, "PSUM banks of one row tile's y block");
  add("DOWN_SETS", p.fuse_down ? down_sets : 1, "y block bank sets in rotation");
  add("MUL_ENGINE", nki::engine(p.mul_engine), "h = silu(g) * u (mul_engine)");
  add("EVICT", nki::engine(p.evict), "drains PSUM (evict)");
  add("EVICT_ADD", nki::engine(p.evict == scalar_engine ? vector_engine : p.evict),
      "adds PSUM partials (ScalarE has no two-tensor add)");
  add("DT", nki::nl_dtype(p.type), "dtype of x, the weights, h and y");
}

/// Opens the loops that stage y for its store: the 128-row sub-tiles ts of
/// the token tile (each in the next of two stage slots) and, in each, the
/// MM_N-wide pieces n of the d block.
void open_y_stage(nki::writer& w) {
  w.open("for ts in nl.affine_range((tn + P - 1) // P):");
  w.line("tr = min(P, tn - ts * P)");
  w.line("slot = stages % 2");
  w.line("stages += 1");
  w.open("for n in nl.affine_range((dw + MM_N - 1) // MM_N):");
  w.line("nw = min(MM_N, dw - n * MM_N)");
}

}  // namespace

std::string emit_nki(const params& p, const nki::context& ctx, std::string& out) {
  const bool drop = ctx.injected == nki::fault::drop_tail;
  const bool skip = ctx.injected == nki::fault::skip_accumulation;
  const bool gp_mul = p.mul_engine == gpsimd_engine;
  nki::kernel_file f;
  f.workload = "swiglu";
  f.summary =
      "y = (silu(x W_gate) * (x W_up)) W_down with x given as [d_model, tokens] and W_gate, W_up "
      "stacked as W_gate_up [d_model, 2, d_ff]";
  f.note_dma_queues(p.queues);
  constants(p, ctx, f);
  const std::string dt = nki::dtype_name(p.type);
  f.signature = fmt::format(
      "INPUTS = {{\"x\": ((D_MODEL, TOKENS), \"{0}\"), \"W_gate_up\": ((D_MODEL, 2, D_FF), "
      "\"{0}\"),\n"
      "          \"W_down\": ((D_FF, D_MODEL), \"{0}\")}}\n"
      "OUTPUTS = {{\"y\": ((TOKENS, D_MODEL), \"{0}\")}}\n"
      "TOLERANCE = {1}  # the gate's, in units of |reference| + rms(reference)",
      dt, nki::py_float(nki::tolerance(p.type)));

  // the core split cuts the tokens: x's columns and y's rows; the weights go whole to both
  f.inputs = {{"x", 2, 1, ""}, {"W_gate_up", 3, -1, ""}, {"W_down", 2, -1, ""}};
  f.outputs = {{"y", 2, 0, "nl.ndarray((TOKENS, D_MODEL), dtype=DT, buffer=nl.shared_hbm)"}};
  nki::writer w;
  nki::open_kernel(w, f, ctx);
  w.line("x_sb = nl.ndarray((P, X_BUFS, K_SLABS, TOKEN_TILE), dtype=DT, buffer=nl.sbuf)  # x^T");
  w.line("gu_sb = nl.ndarray((P, BUFS, K_SLABS, 2, FF_TILE), dtype=DT, buffer=nl.sbuf)");
  w.line("wd_sb = nl.ndarray((P, BUFS, SUBS_PER_BLOCK, D_TILE), dtype=DT, buffer=nl.sbuf)");
  if (p.fuse_down) {
    w.line(
        "h_sb = nl.ndarray((P, 2 * SUBS_PER_BLOCK, TOKEN_TILE), dtype=DT, buffer=nl.sbuf)  # two "
        "ff blocks of h^T");
    w.line("acc = nl.ndarray((P, T_SUBS, D_MODEL), dtype=nl.float32, buffer=nl.sbuf)  # y in fp32");
  } else {
    w.line(
        "h_sb = nl.ndarray((P, F_BLOCKS * SUBS_PER_BLOCK, TOKEN_TILE), dtype=DT, "
        "buffer=nl.sbuf)  # all of h^T");
  }
  w.line("silu_sb = nl.ndarray((P, 2, MM_N), dtype=nl.float32, buffer=nl.sbuf)");
  if (gp_mul) w.line("u_sb = nl.ndarray((P, 2, MM_N), dtype=nl.float32, buffer=nl.sbuf)");
  w.line("y_stage = nl.ndarray((P, 2, D_TILE), dtype=DT, buffer=nl.sbuf)");
  w.line("# PSUM: (g, u) bank pairs, then the y blocks' banks");
  w.line("gu_psum = nl.ndarray((P, 2 * PSUM_SETS, BANK), dtype=nl.float32, buffer=nl.psum)");
  w.line(
      "y_psum = nl.ndarray((P, DOWN_SETS * T_SUBS * DOWN_BANKS, BANK), dtype=nl.float32, "
      "buffer=nl.psum)");
  w.line();
  w.open("def y_bank(ys, ts, n):");
  w.line("\"\"\"The bank and first column of y's moving tile n of row tile ts in set ys.\"\"\"");
  w.line("bank, col = divmod(n * MM_N, BANK)");
  w.line("return (ys * T_SUBS + ts) * DOWN_BANKS + bank, col");
  w.close();
  w.line();
  w.line("# trace-time state: slot rotations and the PSUM bank sets");
  w.line("x_loads = gu_loads = wd_loads = gu_sets = silus = stages = passes = 0");
  w.open("for tt in nl.affine_range(TOKEN_TILES{}):  # token tiles", drop ? " - 1" : "");
  if (drop) w.line("# FAULT drop_tail: the last token tile is dropped");
  w.line("t0 = tt * TOKEN_TILE");
  w.line("tn = min(TOKEN_TILE, TOKENS - t0)");
  w.line("xs = x_loads % X_BUFS");
  w.line("x_loads += 1");
  w.open("for s in nl.affine_range(K_SLABS):");
  w.line("r = min(MM_K, D_MODEL - s * MM_K)");
  w.line("nisa.dma_copy(dst=x_sb[0:r, xs, s, 0:tn], src=x[s * MM_K:s * MM_K + r, t0:t0 + tn])");
  w.close();
  w.open("for fb in nl.sequential_range(F_BLOCKS):  # ff blocks");
  w.line("f0 = fb * FF_TILE");
  w.line("fw = min(FF_TILE, D_FF - f0)");
  w.line("ws = gu_loads % BUFS");
  w.line("gu_loads += 1");
  w.open("for s in nl.affine_range(K_SLABS):");
  w.line("r = min(MM_K, D_MODEL - s * MM_K)");
  if (p.fuse_gate_up) {
    w.line("# fuse_gate_up: one transfer moves both rows");
    w.line(
        "nisa.dma_copy(dst=gu_sb[0:r, ws, s, :, 0:fw], src=W_gate_up[s * MM_K:s * MM_K + r, :, "
        "f0:f0 + fw])");
  } else {
    w.open("for j in nl.affine_range(2):  # W_gate, then W_up");
    w.line(
        "nisa.dma_copy(dst=gu_sb[0:r, ws, s, j, 0:fw], src=W_gate_up[s * MM_K:s * MM_K + r, j, "
        "f0:f0 + fw])");
    w.close();
  }
  w.close();
  w.line("hsub0 = {}", p.fuse_down ? "(fb % 2) * SUBS_PER_BLOCK" : "fb * SUBS_PER_BLOCK");
  w.open("for fs in nl.affine_range((fw + P - 1) // P):  # 128 rows of h^T (ff on partitions)");
  w.line("fr = min(P, fw - fs * P)");
  w.open("for tc in nl.affine_range((tn + MM_N - 1) // MM_N):");
  w.line("cw = min(MM_N, tn - tc * MM_N)");
  w.line("g = gu_sets % PSUM_SETS");
  w.line("gu_sets += 1");
  w.open("for j in nl.affine_range(2):  # g^T, then u^T, each accumulating over d_model");
  w.open("for s in nl.affine_range(K_SLABS):");
  w.line("r = min(MM_K, D_MODEL - s * MM_K)");
  w.line("nisa.nc_matmul(dst=gu_psum[0:fr, 2 * g + j, 0:cw],");
  w.line("               stationary=gu_sb[0:r, ws, s, j, fs * P:fs * P + fr],");
  w.line("               moving=x_sb[0:r, xs, s, tc * MM_N:tc * MM_N + cw], accumulate=s > 0)");
  w.close(2);
  w.line("sl = silus % 2");
  w.line("silus += 1");
  w.line(
      "nisa.activation(dst=silu_sb[0:fr, sl, 0:cw], op=nl.silu, data=gu_psum[0:fr, 2 * g, "
      "0:cw])");
  w.line("h = h_sb[0:fr, hsub0 + fs, tc * MM_N:tc * MM_N + cw]");
  if (gp_mul) {
    w.line("# mul_engine = gpsimd: GpSimdE cannot read PSUM, so u is copied out first");
    w.line(copy(p.evict, "u_sb[0:fr, sl, 0:cw]", "gu_psum[0:fr, 2 * g + 1, 0:cw]"));
    w.line(
        "nisa.tensor_tensor(dst=h, data1=silu_sb[0:fr, sl, 0:cw], data2=u_sb[0:fr, sl, 0:cw], "
        "op=nl.multiply,\n                   engine=MUL_ENGINE)");
  } else {
    w.line(
        "nisa.tensor_tensor(dst=h, data1=silu_sb[0:fr, sl, 0:cw], data2=gu_psum[0:fr, 2 * g + 1, "
        "0:cw],\n                   op=nl.multiply, engine=MUL_ENGINE)");
  }
  w.close(2);
  if (!p.fuse_down) {
    w.close();  // fb: all of h^T is resident before the down projection
    w.line("# the down projection: all of d_ff accumulates in PSUM per d block");
    w.line("fb_first, fb_end = 0, F_BLOCKS");
  } else {
    w.line("# fuse_down: this ff block's share of y, added into the fp32 accumulator");
    w.line("fb_first, fb_end = fb, fb + 1");
  }
  w.open("for db in nl.affine_range(D_BLOCKS):");
  w.line("d0 = db * D_TILE");
  w.line("dw = min(D_TILE, D_MODEL - d0)");
  w.line("ys = passes % DOWN_SETS");
  w.line("passes += 1");
  w.open("for fd in nl.sequential_range(fb_first, fb_end):");
  w.line("fd0 = fd * FF_TILE");
  w.line("fdw = min(FF_TILE, D_FF - fd0)");
  w.line("ds = wd_loads % BUFS");
  w.line("wd_loads += 1");
  w.open("for fs in nl.affine_range((fdw + P - 1) // P):");
  w.line("fr = min(P, fdw - fs * P)");
  w.line(
      "nisa.dma_copy(dst=wd_sb[0:fr, ds, fs, 0:dw], src=W_down[fd0 + fs * P:fd0 + fs * P + fr, "
      "d0:d0 + dw])");
  w.close();
  w.line("steps = (fdw + P - 1) // P");
  if (skip) {
    w.open("if fd == F_BLOCKS - 1:");
    w.line("steps -= 1  # FAULT skip_accumulation: the last 128-row step of d_ff is lost");
    w.close();
  }
  w.open("for fs in nl.affine_range(steps):  # accumulates in PSUM over the ff rows");
  w.line("fr = min(P, fdw - fs * P)");
  w.line("hsub = {} + fs", p.fuse_down ? "(fd % 2) * SUBS_PER_BLOCK" : "fd * SUBS_PER_BLOCK");
  w.open("for ts in nl.affine_range((tn + P - 1) // P):");
  w.line("tr = min(P, tn - ts * P)");
  w.open("for n in nl.affine_range((dw + MM_N - 1) // MM_N):");
  w.line("nw = min(MM_N, dw - n * MM_N)");
  w.line("bank, col = y_bank(ys, ts, n)");
  w.line("nisa.nc_matmul(dst=y_psum[0:tr, bank, col:col + nw],");
  w.line("               stationary=h_sb[0:fr, hsub, ts * P:ts * P + tr],");
  w.line("               moving=wd_sb[0:fr, ds, fs, n * MM_N:n * MM_N + nw],");
  w.line("               accumulate=fd > fb_first or fs > 0)  # the first matmul overwrites");
  w.close(4);
  if (p.fuse_down) {
    w.open("for ts in nl.affine_range((tn + P - 1) // P):");
    w.line("tr = min(P, tn - ts * P)");
    w.open("for n in nl.affine_range((dw + MM_N - 1) // MM_N):");
    w.line("nw = min(MM_N, dw - n * MM_N)");
    w.line("bank, col = y_bank(ys, ts, n)");
    w.line(
        "part, ps = acc[0:tr, ts, d0 + n * MM_N:d0 + n * MM_N + nw], y_psum[0:tr, bank, col:col + "
        "nw]");
    w.open("if fb == 0:");
    w.line(copy(p.evict, "part", "ps"));
    w.close();
    w.open("else:");
    w.line("nisa.tensor_tensor(dst=part, data1=part, data2=ps, op=nl.add, engine=EVICT_ADD)");
    w.close(3);
    w.open("if fb == F_BLOCKS - 1:  # y = the accumulator in DT, stored");
    open_y_stage(w);
    w.line(copy(p.evict, "y_stage[0:tr, slot, n * MM_N:n * MM_N + nw]",
                "acc[0:tr, ts, d0 + n * MM_N:d0 + n * MM_N + nw]"));
    w.close();
    w.line(
        "nisa.dma_copy(dst=y[t0 + ts * P:t0 + ts * P + tr, d0:d0 + dw], src=y_stage[0:tr, slot, "
        "0:dw])");
    w.close(5);
  } else {
    open_y_stage(w);
    w.line("bank, col = y_bank(ys, ts, n)");
    w.line(copy(p.evict, "y_stage[0:tr, slot, n * MM_N:n * MM_N + nw]",
                "y_psum[0:tr, bank, col:col + nw]"));
    w.close();
    w.line(
        "nisa.dma_copy(dst=y[t0 + ts * P:t0 + ts * P + tr, d0:d0 + dw], src=y_stage[0:tr, slot, "
        "0:dw])");
    w.close(3);
  }
  w.line("return y");
  w.close();
  f.kernel = w.text();
  f.reference =
      "def reference(x, W_gate_up, W_down):\n"
      "    \"\"\"y in float64, from the same inputs.\"\"\"\n"
      "    xt, w = x.astype(np.float64).T, W_gate_up.astype(np.float64)\n"
      "    g, u = xt @ w[:, 0, :], xt @ w[:, 1, :]\n"
      "    return {\"y\": (g / (1.0 + np.exp(-g)) * u) @ W_down.astype(np.float64)}\n";
  out = nki::assemble(f, ctx);
  return "";
}

}  // namespace tessel::sim::swiglu_detail
