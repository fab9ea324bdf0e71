// moe_nki.cpp: moe's plan (moe.hpp) written as an NKI kernel (docs/nki.md).
// The routing is the plan's: a table of group tiles (expert, (token, slot)
// rows) known when the kernel is traced. Per group tile the rows of x are
// gathered (one dma_copy per row) and transposed on TensorE (or, with x
// given transposed, its columns gathered), each out block of the expert's
// weights is loaded and multiplied into PSUM, the evict engine scales each
// row by its router weight and the rows are scattered to fp32 partials in
// HBM; the combine sums each token's top_k partials into y.
#include "../../nki/nki.hpp"
#include "../emit.hpp"
#include "moe.hpp"

#include <fmt/format.h>

#include <string>
#include <string_view>

namespace tessel::sim::moe_detail {
namespace {

using emit::ceil_div;

/// The group tiles of every core, in order, as a Python list.
std::string group_table(const plan& pl) {
  std::string out = "GROUP_TILES = [  # (expert, ((token, slot), ...)) per group tile\n";
  for (const auto& core : pl.tiles)
    for (const auto& g : core) {
      std::string rows;
      for (const auto& r : g.rows) rows += fmt::format("({}, {}), ", r.token, r.slot);
      out += fmt::format("    ({}, ({})),\n", g.expert, rows);
    }
  return out + "]\n\n";
}

void constants(const plan& pl, const nki::context& ctx, nki::kernel_file& f) {
  const auto& p = pl.p;
  auto add = [&](std::string n, auto v, std::string meaning) {
    f.constants.push_back({std::move(n), fmt::format("{}", v), std::move(meaning)});
  };
  add("TOKENS", p.tokens, "");
  add("D_IN", p.d_in, "");
  add("D_OUT", p.d_out, "");
  add("EXPERTS", p.experts, "");
  add("TOP_K", p.top_k, "experts per token");
  add("P", ctx.m.partitions, "partitions (nl.tile_size.pmax)");
  add("TOKEN_TILE", p.token_tile, "token_tile: rows per group tile");
  add("OUT_TILE", p.out_tile, "out_tile: d_out columns per weight block and combine step");
  add("MM_N", p.mm_n, "moving free size of a matmul (one PSUM bank of fp32)");
  add("K_SLABS", ceil_div(p.d_in, ctx.m.partitions), "128-row slabs of d_in (the contraction)");
  add("OUT_BLOCKS", ceil_div(p.d_out, p.out_tile), "");
  add("TOKEN_TILES", ceil_div(p.tokens, ctx.m.partitions), "128-token tiles of the combine");
  add("PARTIALS", p.sbuf_partials ? "\"sbuf\"" : "\"hbm\"", "where the partials wait (partials)");
  add("BUFS", p.bufs, "expert weight block slots (bufs)");
  add("X_BUFS", p.x_bufs, "x^T tile slots (x_bufs)");
  const engine_id evict = p.evict == gpsimd_engine ? vector_engine : p.evict;
  add("EVICT", nki::engine(evict), "drains PSUM times the router weights (evict)");
  add("COMBINE", nki::engine(p.combine_engine), "sums the top_k partials (combine_engine)");
  add("DT", nki::nl_dtype(p.type), "dtype of x, the weights and y");
}

void gather_x(const plan& pl, nki::writer& w) {
  if (pl.p.x_rows) {
    w.line("# gather the rows of x, transpose each 128 x 128 piece on TensorE");
    w.open("for i in nl.sequential_range(n):");
    w.line("t, j = rows[r0 + i]");
    w.line("nisa.dma_copy(dst=xg[i:i + 1, 0:D_IN], src=x[t:t + 1, 0:D_IN])");
    w.close();
    w.open("for s in nl.affine_range(K_SLABS):");
    w.line("r = min(P, D_IN - s * P)");
    w.line("nisa.nc_transpose(dst=t_psum[0:r, 0:n], data=xg[0:n, s * P:s * P + r])");
    w.line("nisa.tensor_copy(dst=xT[0:r, xs, s, r0:r0 + n], src=t_psum[0:r, 0:n], engine=EVICT)");
    w.close();
  } else {
    w.line("# gather the columns of x^T: one element per partition and descriptor");
    w.open("for i in nl.sequential_range(n):");
    w.line("t, j = rows[r0 + i]");
    w.open("for s in nl.affine_range(K_SLABS):");
    w.line("r = min(P, D_IN - s * P)");
    w.line("nisa.dma_copy(dst=xT[0:r, xs, s, r0 + i:r0 + i + 1], src=x[s * P:s * P + r, t:t + 1])");
    w.close(2);
  }
}

void group_loop(const plan& pl, const nki::context& ctx, nki::writer& w) {
  const bool drop = ctx.injected == nki::fault::drop_tail;
  const bool skip = ctx.injected == nki::fault::skip_accumulation;
  w.line("x_loads = w_loads = stages = 0");
  w.open("for e, rows in GROUP_TILES{}:  # group tiles", drop ? "[:-1]" : "");
  if (drop) w.line("# FAULT drop_tail: the last group tile is dropped");
  w.line("xs = x_loads % X_BUFS");
  w.line("x_loads += 1");
  w.open("for r0 in nl.sequential_range(0, len(rows), P):  # 128-row sub-tiles");
  w.line("n = min(P, len(rows) - r0)");
  gather_x(pl, w);
  w.close();
  w.open("for ob in nl.sequential_range(OUT_BLOCKS):");
  w.line("o0 = ob * OUT_TILE");
  w.line("ow = min(OUT_TILE, D_OUT - o0)");
  w.line("ws = w_loads % BUFS");
  w.line("w_loads += 1");
  w.open("for s in nl.affine_range(K_SLABS):");
  w.line("r = min(P, D_IN - s * P)");
  w.line("nisa.dma_copy(dst=w_sb[0:r, ws, s, 0:ow], src=W[e, s * P:s * P + r, o0:o0 + ow])");
  w.close();
  w.open("for r0 in nl.sequential_range(0, len(rows), P):");
  w.line("n = min(P, len(rows) - r0)");
  w.open("for i in nl.sequential_range(n):");
  w.line("t, j = rows[r0 + i]");
  w.line("nisa.dma_copy(dst=p_sb[i:i + 1, 0:1], src=router_weights[t:t + 1, j:j + 1])");
  w.close();
  w.line("out = o_sb[0:n, stages % 2, 0:ow]");
  w.line("stages += 1");
  w.open("for c0 in nl.sequential_range(0, ow, MM_N):");
  w.line("cw = min(MM_N, ow - c0)");
  w.open("for s in nl.affine_range(K_SLABS{}):  # accumulates over d_in in PSUM",
         skip ? " - 1" : "");
  if (skip) w.line("# FAULT skip_accumulation: the last slab of d_in is not accumulated");
  w.line("r = min(P, D_IN - s * P)");
  w.line("nisa.nc_matmul(dst=ps[0:n, 0:cw], stationary=xT[0:r, xs, s, r0:r0 + n],");
  w.line("               moving=w_sb[0:r, ws, s, c0:c0 + cw], accumulate=s > 0)");
  w.close();
  if (pl.p.evict == scalar_engine)
    w.line(
        "nisa.activation(dst=out[:, c0:c0 + cw], op=nl.copy, data=ps[0:n, 0:cw], "
        "scale=p_sb[0:n, 0:1])");
  else
    w.line(
        "nisa.tensor_scalar(dst=out[:, c0:c0 + cw], data=ps[0:n, 0:cw], op0=nl.multiply, "
        "operand0=p_sb[0:n, 0:1], engine=EVICT)");
  w.close();
  w.line("# scatter the scaled rows to their (token, slot) partials");
  w.open("for i in nl.sequential_range(n):");
  w.line("t, j = rows[r0 + i]");
  if (pl.p.sbuf_partials)
    w.line("nisa.dma_copy(dst=part[t % P:t % P + 1, t // P, j, o0:o0 + ow], src=out[i:i + 1, :])");
  else
    w.line("nisa.dma_copy(dst=part[t:t + 1, j, o0:o0 + ow], src=out[i:i + 1, :])");
  w.close(4);
}

void combine_loop(const plan& pl, nki::writer& w) {
  // slot j of the token tile's partials: loaded from HBM, or where they are in SBUF
  const auto slot = [&](std::string_view j) {
    return pl.p.sbuf_partials ? fmt::format("part[0:tr, t0 // P, {}, o0:o0 + ow]", j)
                              : fmt::format("cb[0:tr, {}, 0:ow]", j);
  };
  w.line("# the combine: y = the sum of each token's top_k partials");
  w.open("for t0 in nl.sequential_range(0, TOKENS, P):");
  w.line("tr = min(P, TOKENS - t0)");
  w.open("for ob in nl.sequential_range(OUT_BLOCKS):");
  w.line("o0 = ob * OUT_TILE");
  w.line("ow = min(OUT_TILE, D_OUT - o0)");
  if (!pl.p.sbuf_partials)
    w.line("nisa.dma_copy(dst=cb[0:tr, 0:TOP_K, 0:ow], src=part[t0:t0 + tr, 0:TOP_K, o0:o0 + ow])");
  w.line("nisa.tensor_copy(dst=acc[0:tr, 0:ow], src={}, engine=COMBINE)", slot("0"));
  w.open("for j in nl.sequential_range(1, TOP_K):");
  w.line(
      "nisa.tensor_tensor(dst=acc[0:tr, 0:ow], data1=acc[0:tr, 0:ow], data2={}, op=nl.add, "
      "engine=COMBINE)",
      slot("j"));
  w.close();
  w.line("nisa.tensor_copy(dst=y_sb[0:tr, 0:ow], src=acc[0:tr, 0:ow], engine=COMBINE)");
  w.line("nisa.dma_copy(dst=y[t0:t0 + tr, o0:o0 + ow], src=y_sb[0:tr, 0:ow])");
  w.close(2);
}

}  // namespace

std::string emit_nki(const plan& pl, const nki::context& ctx, std::string& out) {
  const auto& p = pl.p;
  if (p.type != dtype::bf16 && p.type != dtype::fp32)
    return fmt::format("dtype {} is not emitted yet (bf16 and fp32 are)", to_string(p.type));
  nki::kernel_file f;
  f.workload = "moe";
  f.summary =
      "y[t] = sum over t's top_k experts e of router_weights[t, slot] * (x[t] @ W[e]), the "
      "routing fixed when the kernel is traced";
  if (p.evict == gpsimd_engine)
    f.notes.emplace_back("evict = gpsimd: GpSimdE cannot read PSUM, so VectorE drains it");
  f.note_dma_queues(p.queues);
  f.notes.emplace_back(
      "the rows of x, the router weights and the partials move one dma_copy per row (the "
      "routing is fixed when the kernel is traced); the simulator times one "
      "descriptor-generated gather or scatter per 128 rows (docs/nki.md, \"Still different\")");
  if (pl.cores > 1)
    f.notes.emplace_back(
        "lnc = 2: the simulator splits the group tiles over two physical cores; this kernel "
        "runs them all on one (no nl.program_id split)");
  constants(pl, ctx, f);
  const std::string dt = nki::dtype_name(p.type);
  f.signature = fmt::format(
      "INPUTS = {{\"x\": (({0}), \"{1}\"), \"W\": ((EXPERTS, D_IN, D_OUT), \"{1}\"),\n"
      "          \"router_weights\": ((TOKENS, TOP_K), \"float32\")}}\n"
      "OUTPUTS = {{\"y\": ((TOKENS, D_OUT), \"{1}\")}}\n"
      "TOLERANCE = {2}  # the gate's, in units of |reference| + rms(reference)",
      p.x_rows ? "TOKENS, D_IN" : "D_IN, TOKENS", dt, nki::py_float(nki::tolerance(p.type)));
  nki::writer w;
  w.line("@nki.jit");
  w.open("def moe_kernel(x, W, router_weights):");
  w.line("y = nl.ndarray((TOKENS, D_OUT), dtype=DT, buffer=nl.shared_hbm)");
  if (p.sbuf_partials)
    w.line(
        "part = nl.ndarray((P, TOKEN_TILES, TOP_K, D_OUT), dtype=nl.float32, buffer=nl.sbuf)  "
        "# token t at [t % P, t // P]");
  else
    w.line("part = nl.ndarray((TOKENS, TOP_K, D_OUT), dtype=nl.float32, buffer=nl.shared_hbm)");
  w.line("xT = nl.ndarray((P, X_BUFS, K_SLABS, TOKEN_TILE), dtype=DT, buffer=nl.sbuf)");
  if (p.x_rows) w.line("xg = nl.ndarray((P, D_IN), dtype=DT, buffer=nl.sbuf)  # gathered rows");
  w.line("w_sb = nl.ndarray((P, BUFS, K_SLABS, OUT_TILE), dtype=DT, buffer=nl.sbuf)");
  w.line("p_sb = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)  # router weights");
  w.line("o_sb = nl.ndarray((P, 2, OUT_TILE), dtype=nl.float32, buffer=nl.sbuf)");
  if (!p.sbuf_partials)
    w.line("cb = nl.ndarray((P, TOP_K, OUT_TILE), dtype=nl.float32, buffer=nl.sbuf)");
  w.line("acc = nl.ndarray((P, OUT_TILE), dtype=nl.float32, buffer=nl.sbuf)");
  w.line("y_sb = nl.ndarray((P, OUT_TILE), dtype=DT, buffer=nl.sbuf)");
  w.line("ps = nl.ndarray((P, MM_N), dtype=nl.float32, buffer=nl.psum)");
  if (p.x_rows) w.line("t_psum = nl.ndarray((P, P), dtype=nl.float32, buffer=nl.psum)");
  group_loop(pl, ctx, w);
  combine_loop(pl, w);
  w.line("return y");
  w.close();
  f.kernel = group_table(pl) + w.text();
  f.reference = fmt::format(
      "EXPERT_OF = {}  # [token][slot]\n\n"
      "def reference(x, W, router_weights):\n"
      "    \"\"\"y in float64, from the same inputs.\"\"\"\n"
      "    x = x.astype(np.float64){}\n"
      "    y = np.zeros((TOKENS, D_OUT))\n"
      "    for t in range(TOKENS):\n"
      "        for j in range(TOP_K):\n"
      "            y[t] += router_weights[t, j] * (x[t] @ W[EXPERT_OF[t][j]].astype(np.float64))\n"
      "    return {{\"y\": y}}\n",
      [&] {
        std::string s = "[";
        for (std::int64_t t = 0; t < p.tokens; ++t) {
          s += "[";
          for (std::int64_t j = 0; j < p.top_k; ++j)
            s += fmt::format("{}{}", j ? ", " : "",
                             pl.expert_of[static_cast<std::size_t>(t * p.top_k + j)]);
          s += t + 1 < p.tokens ? "], " : "]";
        }
        return s + "]";
      }(),
      p.x_rows ? "" : ".T");
  out = nki::assemble(f, ctx);
  return "";
}

}  // namespace tessel::sim::moe_detail
