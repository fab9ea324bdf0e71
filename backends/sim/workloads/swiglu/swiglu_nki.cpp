// swiglu_nki.cpp: swiglu's schedule (swiglu.hpp) written as an NKI kernel
// (docs/nki.md): per token tile, x^T resident in SBUF; per ff block the
// W_gate and W_up blocks (`bufs` slots), g^T and u^T in fp32 PSUM (psum_sets
// bank pairs in rotation), h^T = silu(g) * u in the input type; then the
// down projection y = h W_down, d_tile columns per pass, accumulated in PSUM
// over all of d_ff, or (fuse_down) per ff block and added into an fp32 y
// accumulator in SBUF.
#include "../../nki/nki.hpp"
#include "swiglu.hpp"

#include <fmt/format.h>

#include <string>

namespace tessel::sim::swiglu_detail {

namespace {
std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }
}  // namespace

std::string emit_nki(const params& p, const nki::context& ctx, std::string& out) {
  if (p.type != dtype::bf16 && p.type != dtype::fp32)
    return fmt::format("dtype {} is not emitted yet (bf16 and fp32 are)", to_string(p.type));
  const std::int64_t P = ctx.m.partitions;
  if (p.mm_k != P) return fmt::format("mm_k = {} is not emitted yet (mm_k = {} is)", p.mm_k, P);
  const bool drop = ctx.injected == nki::fault::drop_tail;
  const bool skip = ctx.injected == nki::fault::skip_accumulation;
  const engine_id evict = p.evict == gpsimd_engine ? vector_engine : p.evict;
  nki::kernel_file f;
  f.workload = "swiglu";
  f.summary = "y = (silu(x W_gate) * (x W_up)) W_down with x given as [d_model, tokens]";
  if (p.silu_engine != scalar_engine)
    f.notes.push_back(fmt::format("silu_engine = {}: nki.isa.activation (silu) runs on ScalarE",
                                  nki::engine_word(p.silu_engine)));
  if (p.evict == gpsimd_engine)
    f.notes.emplace_back("evict = gpsimd: GpSimdE cannot read PSUM, so VectorE drains it");
  if (p.mul_engine == gpsimd_engine)
    f.notes.emplace_back(
        "mul_engine = gpsimd: GpSimdE cannot read PSUM, so u is evicted to SBUF first");
  if (p.fuse_gate_up)
    f.notes.emplace_back(
        "fuse_gate_up: W_gate and W_up are separate HBM tensors, loaded back to back");
  f.note_dma_queues(p.queues);
  auto add = [&](std::string n, auto v, std::string meaning) {
    f.constants.push_back({std::move(n), fmt::format("{}", v), std::move(meaning)});
  };
  const std::int64_t subs_per_block = ceil_div(p.ff_tile, P);
  add("TOKENS", p.tokens, "");
  add("D_MODEL", p.d_model, "");
  add("D_FF", p.d_ff, "");
  add("P", P, "partitions (nl.tile_size.pmax)");
  add("TOKEN_TILE", p.token_tile, "token_tile: x^T and h^T stay in SBUF per token tile");
  add("FF_TILE", p.ff_tile, "ff_tile: d_ff columns per W_gate/W_up block");
  add("D_TILE", p.d_tile, "d_tile: output columns per down-projection pass");
  add("MM_N", p.mm_n, "moving free size of a matmul (one PSUM bank of fp32)");
  add("K_SLABS", ceil_div(p.d_model, P), "128-row slabs of d_model (the gate/up contraction)");
  add("T_SUBS", ceil_div(p.token_tile, P), "128-token row tiles of a token tile");
  add("SUBS_PER_BLOCK", subs_per_block, "128-row sub-tiles of h^T per ff block");
  add("TOKEN_TILES", ceil_div(p.tokens, p.token_tile), "");
  add("F_BLOCKS", ceil_div(p.d_ff, p.ff_tile), "");
  add("D_BLOCKS", ceil_div(p.d_model, p.d_tile), "");
  add("BUFS", p.bufs, "weight block slots (bufs)");
  add("X_BUFS", p.x_bufs, "x tile slots (x_bufs)");
  add("PSUM_SETS", p.psum_sets, "(g, u) PSUM bank pairs in rotation (psum_sets)");
  add("FUSE_DOWN", p.fuse_down ? "True" : "False",
      "down projection per ff block into an fp32 accumulator");
  add("MUL_ENGINE", nki::engine(p.mul_engine), "h = silu(g) * u (mul_engine)");
  add("EVICT", nki::engine(evict), "drains PSUM (evict)");
  add("EVICT_ADD", nki::engine(evict == scalar_engine ? vector_engine : evict),
      "adds PSUM partials (ScalarE has no two-tensor add)");
  add("DT", nki::nl_dtype(p.type), "dtype of x, the weights, h and y");
  const std::string dt = nki::dtype_name(p.type);
  f.signature = fmt::format(
      "INPUTS = {{\"x\": ((D_MODEL, TOKENS), \"{0}\"), \"W_gate\": ((D_MODEL, D_FF), \"{0}\"),\n"
      "          \"W_up\": ((D_MODEL, D_FF), \"{0}\"), \"W_down\": ((D_FF, D_MODEL), \"{0}\")}}\n"
      "OUTPUTS = {{\"y\": ((TOKENS, D_MODEL), \"{0}\")}}\n"
      "TOLERANCE = {1}  # the gate's, in units of |reference| + rms(reference)",
      dt, nki::py_float(nki::tolerance(p.type)));

  nki::writer w;
  w.line("@nki.jit");
  w.open("def swiglu_kernel(x, W_gate, W_up, W_down):");
  w.line("y = nl.ndarray((TOKENS, D_MODEL), dtype=DT, buffer=nl.shared_hbm)");
  w.line("x_sb = nl.ndarray((P, X_BUFS, K_SLABS, TOKEN_TILE), dtype=DT, buffer=nl.sbuf)  # x^T");
  w.line("wg_sb = nl.ndarray((P, BUFS, K_SLABS, FF_TILE), dtype=DT, buffer=nl.sbuf)");
  w.line("wu_sb = nl.ndarray((P, BUFS, K_SLABS, FF_TILE), dtype=DT, buffer=nl.sbuf)");
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
  w.line("silu_sb = nl.ndarray((P, MM_N), dtype=nl.float32, buffer=nl.sbuf)");
  if (p.mul_engine == gpsimd_engine)
    w.line("u_sb = nl.ndarray((P, MM_N), dtype=nl.float32, buffer=nl.sbuf)");
  w.line("y_stage = nl.ndarray((P, 2, D_TILE), dtype=DT, buffer=nl.sbuf)");
  w.line("g_psum = nl.ndarray((P, PSUM_SETS, MM_N), dtype=nl.float32, buffer=nl.psum)");
  w.line("u_psum = nl.ndarray((P, PSUM_SETS, MM_N), dtype=nl.float32, buffer=nl.psum)");
  w.line("y_psum = nl.ndarray((P, T_SUBS, D_TILE), dtype=nl.float32, buffer=nl.psum)");
  w.line();
  w.open("def load_slabs(dst, src, col0, cols):");
  w.line(
      "\"\"\"Rows of d_model, one DMA per 128-row slab: dst[0:r, s, 0:cols] = src[slab s, "
      "cols].\"\"\"");
  w.open("for s in nl.affine_range(K_SLABS):");
  w.line("r = min(P, D_MODEL - s * P)");
  w.line("nisa.dma_copy(dst=dst[0:r, s, 0:cols], src=src[s * P:s * P + r, col0:col0 + cols])");
  w.close(2);
  w.line();
  w.open("def down_pass(t0, tn, f0, fw, d0, dw, slot, hsub0, last_block):");
  w.line(
      "\"\"\"y_psum[tokens, d block] += h^T[ff rows f0:f0+fw]^T W_down[f0:f0+fw, d block].\"\"\"");
  w.open("for fs in nl.affine_range((fw + P - 1) // P):");
  w.line("fr = min(P, fw - fs * P)");
  w.line(
      "nisa.dma_copy(dst=wd_sb[0:fr, slot, fs, 0:dw], src=W_down[f0 + fs * P:f0 + fs * P + fr, "
      "d0:d0 + dw])");
  w.close();
  w.open("for ts in nl.affine_range((tn + P - 1) // P):");
  w.line("tr = min(P, tn - ts * P)");
  w.line("steps = (fw + P - 1) // P");
  if (skip) {
    w.open("if last_block:");
    w.line("steps -= 1  # FAULT skip_accumulation: the last 128-row step of d_ff is lost");
    w.close();
  }
  w.open("for fs in nl.affine_range(steps):  # accumulates in PSUM over the ff rows");
  w.line("fr = min(P, fw - fs * P)");
  w.open("for dc in nl.affine_range((dw + MM_N - 1) // MM_N):");
  w.line("cw = min(MM_N, dw - dc * MM_N)");
  w.line("nisa.nc_matmul(dst=y_psum[0:tr, ts, dc * MM_N:dc * MM_N + cw],");
  w.line("               stationary=h_sb[0:fr, hsub0 + fs, ts * P:ts * P + tr],");
  w.line("               moving=wd_sb[0:fr, slot, fs, dc * MM_N:dc * MM_N + cw], accumulate=True)");
  w.close(4);
  w.line();
  w.line("x_loads = w_loads = gu_sets = stages = 0");
  w.open("for tt in nl.affine_range(TOKEN_TILES{}):  # token tiles", drop ? " - 1" : "");
  if (drop) w.line("# FAULT drop_tail: the last token tile is dropped");
  w.line("t0 = tt * TOKEN_TILE");
  w.line("tn = min(TOKEN_TILE, TOKENS - t0)");
  w.line("xs = x_loads % X_BUFS");
  w.line("x_loads += 1");
  w.line("load_slabs(x_sb[:, xs], x, t0, tn)");
  w.open("for fb in nl.{}(F_BLOCKS):  # ff blocks",
         p.fuse_down ? "sequential_range" : "affine_range");
  w.line("f0 = fb * FF_TILE");
  w.line("fw = min(FF_TILE, D_FF - f0)");
  w.line("ws = w_loads % BUFS");
  w.line("w_loads += 1");
  w.line("load_slabs(wg_sb[:, ws], W_gate, f0, fw)");
  w.line("load_slabs(wu_sb[:, ws], W_up, f0, fw)");
  w.line("hsub0 = {}", p.fuse_down ? "(fb % 2) * SUBS_PER_BLOCK" : "fb * SUBS_PER_BLOCK");
  w.open("for fs in nl.affine_range((fw + P - 1) // P):  # 128 rows of h^T (ff on partitions)");
  w.line("fr = min(P, fw - fs * P)");
  w.open("for tc in nl.affine_range((tn + MM_N - 1) // MM_N):");
  w.line("cw = min(MM_N, tn - tc * MM_N)");
  w.line("g = gu_sets % PSUM_SETS");
  w.line("gu_sets += 1");
  w.open("for s in nl.affine_range(K_SLABS):  # g^T and u^T accumulate over d_model in PSUM");
  w.line("r = min(P, D_MODEL - s * P)");
  w.line("moving = x_sb[0:r, xs, s, tc * MM_N:tc * MM_N + cw]");
  w.line(
      "nisa.nc_matmul(dst=g_psum[0:fr, g, 0:cw], stationary=wg_sb[0:r, ws, s, fs * P:fs * P + "
      "fr],");
  w.line("               moving=moving, accumulate=s > 0)");
  w.line(
      "nisa.nc_matmul(dst=u_psum[0:fr, g, 0:cw], stationary=wu_sb[0:r, ws, s, fs * P:fs * P + "
      "fr],");
  w.line("               moving=moving, accumulate=s > 0)");
  w.close();
  w.line("nisa.activation(dst=silu_sb[0:fr, 0:cw], op=nl.silu, data=g_psum[0:fr, g, 0:cw])");
  w.line("h = h_sb[0:fr, hsub0 + fs, tc * MM_N:tc * MM_N + cw]");
  if (p.mul_engine == gpsimd_engine) {
    w.line("nisa.tensor_copy(dst=u_sb[0:fr, 0:cw], src=u_psum[0:fr, g, 0:cw], engine=EVICT)");
    w.line(
        "nisa.tensor_tensor(dst=h, data1=silu_sb[0:fr, 0:cw], data2=u_sb[0:fr, 0:cw], "
        "op=nl.multiply, engine=MUL_ENGINE)");
  } else {
    w.line(
        "nisa.tensor_tensor(dst=h, data1=silu_sb[0:fr, 0:cw], data2=u_psum[0:fr, g, 0:cw], "
        "op=nl.multiply, engine=MUL_ENGINE)");
  }
  w.close(2);
  if (p.fuse_down) {
    w.line("# fuse_down: this ff block's share of y, added into the fp32 accumulator");
    w.open("for db in nl.affine_range(D_BLOCKS):");
    w.line("d0 = db * D_TILE");
    w.line("dw = min(D_TILE, D_MODEL - d0)");
    w.line("nisa.memset(dst=y_psum[:, :, 0:dw], value=0.0)");
    w.line("ds = w_loads % BUFS");
    w.line("w_loads += 1");
    w.line("down_pass(t0, tn, f0, fw, d0, dw, ds, hsub0, fb == F_BLOCKS - 1)");
    w.open("for ts in nl.affine_range((tn + P - 1) // P):");
    w.line("tr = min(P, tn - ts * P)");
    w.line("part = acc[0:tr, ts, d0:d0 + dw]");
    w.open("if fb == 0:");
    w.line("nisa.tensor_copy(dst=part, src=y_psum[0:tr, ts, 0:dw], engine=EVICT)");
    w.close();
    w.open("else:");
    w.line(
        "nisa.tensor_tensor(dst=part, data1=part, data2=y_psum[0:tr, ts, 0:dw], op=nl.add, "
        "engine=EVICT_ADD)");
    w.close(4);
    w.open("for ts in nl.affine_range((tn + P - 1) // P):  # y = the accumulator in DT");
    w.line("tr = min(P, tn - ts * P)");
    w.open("for db in nl.affine_range(D_BLOCKS):");
    w.line("d0 = db * D_TILE");
    w.line("dw = min(D_TILE, D_MODEL - d0)");
    w.line("out = y_stage[0:tr, stages % 2, 0:dw]");
    w.line("stages += 1");
    w.line("nisa.tensor_copy(dst=out, src=acc[0:tr, ts, d0:d0 + dw], engine=EVICT)");
    w.line("nisa.dma_copy(dst=y[t0 + ts * P:t0 + ts * P + tr, d0:d0 + dw], src=out)");
    w.close(3);
  } else {
    w.close();
    w.line("# the down projection: all of d_ff accumulates in PSUM per d block");
    w.open("for db in nl.affine_range(D_BLOCKS):");
    w.line("d0 = db * D_TILE");
    w.line("dw = min(D_TILE, D_MODEL - d0)");
    w.line("nisa.memset(dst=y_psum[:, :, 0:dw], value=0.0)");
    w.open("for fb in nl.affine_range(F_BLOCKS):");
    w.line("f0 = fb * FF_TILE");
    w.line("fw = min(FF_TILE, D_FF - f0)");
    w.line("ds = w_loads % BUFS");
    w.line("w_loads += 1");
    w.line("down_pass(t0, tn, f0, fw, d0, dw, ds, fb * SUBS_PER_BLOCK, fb == F_BLOCKS - 1)");
    w.close();
    w.open("for ts in nl.affine_range((tn + P - 1) // P):");
    w.line("tr = min(P, tn - ts * P)");
    w.line("out = y_stage[0:tr, stages % 2, 0:dw]");
    w.line("stages += 1");
    w.line("nisa.tensor_copy(dst=out, src=y_psum[0:tr, ts, 0:dw], engine=EVICT)");
    w.line("nisa.dma_copy(dst=y[t0 + ts * P:t0 + ts * P + tr, d0:d0 + dw], src=out)");
    w.close(3);
  }
  w.line("return y");
  w.close();
  f.kernel = w.text();
  f.reference =
      "def reference(x, W_gate, W_up, W_down):\n"
      "    \"\"\"y in float64, from the same inputs.\"\"\"\n"
      "    xt = x.astype(np.float64).T\n"
      "    g, u = xt @ W_gate.astype(np.float64), xt @ W_up.astype(np.float64)\n"
      "    return {\"y\": (g / (1.0 + np.exp(-g)) * u) @ W_down.astype(np.float64)}\n";
  out = nki::assemble(f, ctx);
  return "";
}

}  // namespace tessel::sim::swiglu_detail
