// moe_nki.cpp: moe's plan (moe.hpp) written as an NKI kernel (docs/nki.md).
// The routing is the plan's: a table of group tiles (expert, (token, slot)
// rows) known when the kernel is traced, and its index input `routing` (a
// router's output: each row's token and token * TOP_K + slot). Per 128-row
// sub-tile the indices are loaded and the router weights and rows of x
// gathered through them (indirect DMA), the rows transposed on TensorE (or,
// with x given transposed, each token's column moved by itself); each out
// block of the expert's weights is loaded and multiplied into a rotating set
// of PSUM banks, the evict engine scales each row by its router weight and
// the rows are scattered to fp32 partials (one indirect DMA into HBM, or a
// transfer per row into SBUF); the combine sums each token's top_k partials.
// On two physical cores each program of the SPMD kernel runs its core's
// group tiles and combine tiles (moe_plan.cpp), with a core barrier between
// the two phases when the cores split the experts (needs_barrier).
#include "../../nki/nki.hpp"
#include "../emit.hpp"
#include "moe.hpp"

#include <fmt/format.h>

#include <string>
#include <string_view>

namespace tessel::sim::moe_detail {
namespace {

using emit::ceil_div;

/// GROUP_TILES of the cores `core` runs (-1: all), in order, as a Python list.
void group_tiles(const plan& pl, int core, nki::writer& w) {
  w.line("GROUP_TILES = [  # (expert, ((token, slot), ...)) per group tile");
  for (std::size_t c = 0; c < pl.tiles.size(); ++c)
    if (core < 0 || static_cast<int>(c) == core)
      for (const auto& g : pl.tiles[c]) {
        std::string rows;
        for (const auto& r : g.rows) rows += fmt::format("({}, {}), ", r.token, r.slot);
        w.line("    ({}, ({})),", g.expert, rows);
      }
  w.line("]");
}

/// ROUTING: each routed row's (token, token * TOP_K + slot), in the order of
/// every core's group tiles — the kernel's index input (a router's output).
std::string routing_table(const plan& pl) {
  std::string routing = "ROUTING = [  # (token, token * TOP_K + slot) of each row, in tile order\n";
  for (const auto& core : pl.tiles)
    for (const auto& g : core) {
      std::string index;
      for (const auto& r : g.rows)
        index += fmt::format("({}, {}), ", r.token, r.token * pl.p.top_k + r.slot);
      routing += fmt::format("    {}\n", index);
    }
  return routing + "]\n";
}

/// The group tiles of every core and ROUTING, before a kernel of one instance.
std::string group_table(const plan& pl) {
  nki::writer w;
  group_tiles(pl, -1, w);
  return w.text() + routing_table(pl) + "\n";
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
  add("BANK", ctx.m.psum_bank_bytes / 4, "fp32 columns of a PSUM bank");
  add("TOKEN_TILE", p.token_tile, "token_tile: rows per group tile");
  add("T_SUBS", pl.t_subs, "128-row sub-tiles of a group tile");
  add("OUT_TILE", p.out_tile, "out_tile: d_out columns per weight block and combine step");
  add("MM_N", p.mm_n, "moving free size of a matmul (one PSUM bank of fp32)");
  add("OUT_BANKS", pl.out_banks, "PSUM banks of a sub-tile's out block (one per MM_N columns)");
  add("PSUM_SETS", pl.psum_sets, "out-block bank sets in rotation");
  add("K_SLABS", ceil_div(p.d_in, ctx.m.partitions), "128-row slabs of d_in (the contraction)");
  add("OUT_BLOCKS", ceil_div(p.d_out, p.out_tile), "");
  add("TOKEN_TILES", ceil_div(p.tokens, ctx.m.partitions), "128-token tiles of the combine");
  add("ROUTED", p.tokens * p.top_k, "routed (token, slot) rows");
  add("PARTIALS", p.sbuf_partials ? "\"sbuf\"" : "\"hbm\"", "where the partials wait (partials)");
  add("BUFS", p.bufs, "expert weight block slots (bufs)");
  add("X_BUFS", p.x_bufs, "x^T tile slots (x_bufs)");
  add("EVICT", nki::engine(p.evict), "drains PSUM times the router weights (evict)");
  add("COMBINE", nki::engine(p.combine_engine), "sums the top_k partials (combine_engine)");
  add("DT", nki::nl_dtype(p.type), "dtype of x, the weights and y");
  if (ctx.program < 0) return;
  // program `core` of an SPMD kernel: where its rows start in ROUTING, and its combine's tokens
  std::int64_t before = 0;
  for (int c = 0; c < pl.core; ++c)
    for (const auto& g : pl.tiles[static_cast<std::size_t>(c)])
      before += static_cast<std::int64_t>(g.rows.size());
  const auto& mine = pl.combine.at(static_cast<std::size_t>(pl.core));
  const std::int64_t from = mine.empty() ? 0 : mine.front().first;
  add("ROUTED_FROM", before, "its group tiles' first row in ROUTING");
  add("TOKENS_FROM", from, "its combine's tokens: TOKENS_FROM:TOKENS_TO");
  add("TOKENS_TO", mine.empty() ? from : mine.back().second, "");
}

/// A copy out of PSUM on the evict engine (ScalarE copies with an activation).
std::string evict_copy(const plan& pl, const std::string& dst, const std::string& src) {
  if (pl.p.evict == scalar_engine)
    return fmt::format("nisa.activation(dst={}, op=nl.copy, data={})", dst, src);
  return fmt::format("nisa.tensor_copy(dst={}, src={}, engine=EVICT)", dst, src);
}

/// Per 128-row sub-tile: the routing indices and router weights, then x^T.
/// `ep`: sharded_moe's rank (emit_ep_nki), x the rows it received, a row of
/// `rows` its (block, place in the block) there.
void gather_x(const plan& pl, nki::writer& w, bool ep) {
  w.line("# the sub-tile's (token, row) indices, then its router weights through them");
  w.line("nisa.dma_copy(dst=idx_sb[0:n, xs, ts, :], src=routing[routed + r0:routed + r0 + n, :])");
  w.line(
      "nisa.dma_copy(dst=p_sb[0:n, xs, ts, :], src=rw_rows.ap(pattern=[[1, n], [1, 1]], offset=0,");
  w.line("              vector_offset=idx_sb[0:n, xs, ts, 1:2], indirect_dim=0))");
  if (pl.p.x_rows) {
    w.line("# gather the rows of x through the token indices, transpose each piece on TensorE");
    w.line("raw = raws % 2");
    w.line("raws += 1");
    w.line("nisa.dma_copy(dst=xg[0:n, raw, :], src=x.ap(pattern=[[D_IN, n], [1, D_IN]], offset=0,");
    w.line("              vector_offset=idx_sb[0:n, xs, ts, 0:1], indirect_dim=0))");
    w.open("for s in nl.affine_range(K_SLABS):");
    w.line("r = min(P, D_IN - s * P)");
    w.line("tb = transposes % 2");
    w.line("transposes += 1");
    w.line("nisa.nc_transpose(dst=t_psum[0:r, tb, 0:n], data=xg[0:n, raw, s * P:s * P + r])");
    w.line(evict_copy(pl, "xT[0:r, xs, s, r0:r0 + n]", "t_psum[0:r, tb, 0:n]"));
    w.close();
  } else {
    w.line("# x^T [d_in, tokens]: each token's column of every slab, one transfer each");
    w.open("for i in nl.sequential_range(n):");
    w.line(ep ? "blk, at = rows[r0 + i]" : "t, j = rows[r0 + i]");
    w.open("for s in nl.affine_range(K_SLABS):");
    w.line("r = min(P, D_IN - s * P)");
    if (ep)
      w.line(
          "nisa.dma_copy(dst=xT[0:r, xs, s, r0 + i:r0 + i + 1], src=x[blk, s * P:s * P + r, "
          "at:at + 1])");
    else
      w.line(
          "nisa.dma_copy(dst=xT[0:r, xs, s, r0 + i:r0 + i + 1], src=x[s * P:s * P + r, t:t + 1])");
    w.close(2);
  }
}

/// The group tiles of `tiles` ("GROUP_TILES"); `ep`: a chunk of sharded_moe's
/// rank (emit_ep_nki), whose caller starts the trace-time state.
void group_loop(const plan& pl, const nki::context& ctx, nki::writer& w,
                std::string_view tiles = "GROUP_TILES", bool ep = false) {
  const bool drop = ctx.injected == nki::fault::drop_tail;
  const bool skip = ctx.injected == nki::fault::skip_accumulation;
  if (!ep) {
    w.line("# trace-time state: slot and bank rotations, the rows routed so far");
    w.line("x_loads = w_loads = stages = raws = transposes = out_sets = routed = 0");
  }
  if (ctx.program >= 0) w.line("routed = ROUTED_FROM  # the rows of the programs before");
  w.open("for e, rows in {}{}:  # group tiles", tiles, drop ? "[:-1]" : "");
  if (drop) w.line("# FAULT drop_tail: the last group tile is dropped");
  w.line("xs = x_loads % X_BUFS");
  w.line("x_loads += 1");
  w.open("for ts in nl.sequential_range((len(rows) + P - 1) // P):  # 128-row sub-tiles");
  w.line("r0 = ts * P");
  w.line("n = min(P, len(rows) - r0)");
  gather_x(pl, w, ep);
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
  w.line("oset = out_sets % PSUM_SETS");
  w.line("out_sets += 1");
  w.open("for ts in nl.sequential_range((len(rows) + P - 1) // P):");
  w.line("r0 = ts * P");
  w.line("n = min(P, len(rows) - r0)");
  w.line("out = o_sb[0:n, stages % 2, 0:ow]");
  w.line("stages += 1");
  w.open("for ci in nl.sequential_range((ow + MM_N - 1) // MM_N):");
  w.line("c0 = ci * MM_N");
  w.line("cw = min(MM_N, ow - c0)");
  w.line("ps = ps_psum[0:n, (oset * T_SUBS + ts) * OUT_BANKS + ci, 0:cw]");
  w.open("for s in nl.affine_range(K_SLABS{}):  # accumulates over d_in in PSUM",
         skip ? " - 1" : "");
  if (skip) w.line("# FAULT skip_accumulation: the last slab of d_in is not accumulated");
  w.line("r = min(P, D_IN - s * P)");
  w.line("nisa.nc_matmul(dst=ps, stationary=xT[0:r, xs, s, r0:r0 + n],");
  w.line("               moving=w_sb[0:r, ws, s, c0:c0 + cw], accumulate=s > 0)");
  w.close();
  if (pl.p.evict == scalar_engine) {
    w.line(
        "nisa.activation(dst=out[:, c0:c0 + cw], op=nl.copy, data=ps, scale=p_sb[0:n, xs, ts, :])");
  } else {
    w.line("nisa.tensor_scalar(dst=out[:, c0:c0 + cw], data=ps, op0=nl.multiply,");
    w.line("                   operand0=p_sb[0:n, xs, ts, :], engine=EVICT)");
  }
  w.close();
  if (pl.p.sbuf_partials) {
    w.line("# each row to its token's partition: one transfer per row");
    w.open("for i in nl.sequential_range(n):");
    w.line("t, j = rows[r0 + i]");
    w.line("nisa.dma_copy(dst=part[t % P:t % P + 1, t // P, j, o0:o0 + ow], src=out[i:i + 1, :])");
    w.close();
  } else {
    w.line("# the rows to their (token, slot) partials: one indirect scatter");
    w.line("nisa.dma_copy(dst=part.ap(pattern=[[D_OUT, n], [1, ow]], offset=o0,");
    w.line("              vector_offset=idx_sb[0:n, xs, ts, 1:2], indirect_dim=0), src=out)");
  }
  w.close(2);
  w.line("routed += len(rows)");
  w.close();
}

/// The combine; `ep`: of sharded_moe's rank (emit_ep_nki), its tokens' rows
/// gathered from where the combine all-to-all left them (`back`).
void combine_loop(const plan& pl, const nki::context& ctx, nki::writer& w, bool ep = false) {
  // slot j of the token tile's partials: loaded from HBM, or where they are in SBUF
  const auto slot = [&](std::string_view j) {
    return pl.p.sbuf_partials ? fmt::format("part[0:tr, t0 // P, {}, o0:o0 + ow]", j)
                              : fmt::format("cb[0:tr, {}, 0:ow]", j);
  };
  w.line("# the combine: y = the sum of each token's top_k partials (fp32, the last add in DT)");
  if (ep) {
    w.line("back_rows = back.reshape((CHUNKS * RANKS * CAP, D_OUT))");
    w.open("for t0 in nl.sequential_range(0, RANK_TOKENS, P):  # this rank's tokens");
    w.line("tr = min(P, RANK_TOKENS - t0)");
  } else {
    if (!pl.p.sbuf_partials) w.line("part_rows = part.reshape((TOKENS, TOP_K, D_OUT))");
    if (ctx.program >= 0)
      w.open("for t0 in nl.sequential_range(TOKENS_FROM, TOKENS_TO, P):  # this program's tokens");
    else
      w.open("for t0 in nl.sequential_range(0, TOKENS, P):");
    w.line("tr = min(P, TOKENS - t0)");
  }
  w.open("for ob in nl.sequential_range(OUT_BLOCKS):");
  w.line("o0 = ob * OUT_TILE");
  w.line("ow = min(OUT_TILE, D_OUT - o0)");
  if (ep) {
    w.line("# each token's top_k rows: their places in `back`, then a gather per slot");
    w.line("nisa.dma_copy(dst=gi_sb[0:tr, 0:TOP_K], src=gather[t0:t0 + tr, :])");
    w.open("for j in nl.sequential_range(TOP_K):");
    w.line("nisa.dma_copy(dst=cb[0:tr, j, 0:ow], src=back_rows.ap(pattern=[[D_OUT, tr], [1, ow]],");
    w.line("              offset=o0, vector_offset=gi_sb[0:tr, j:j + 1], indirect_dim=0))");
    w.close();
  } else if (!pl.p.sbuf_partials)
    w.line(
        "nisa.dma_copy(dst=cb[0:tr, 0:TOP_K, 0:ow], src=part_rows[t0:t0 + tr, 0:TOP_K, o0:o0 + "
        "ow])");
  if (pl.p.top_k == 1) {
    w.line("nisa.tensor_copy(dst=y_sb[0:tr, 0:ow], src={}, engine=COMBINE)", slot("0"));
  } else {
    w.line("acc = y_sb[0:tr, 0:ow] if TOP_K == 2 else acc_sb[0:tr, 0:ow]");
    w.line("nisa.tensor_tensor(dst=acc, data1={}, data2={}, op=nl.add, engine=COMBINE)", slot("0"),
           slot("1"));
    w.open("for j in nl.sequential_range(2, TOP_K):");
    w.line("dst = y_sb[0:tr, 0:ow] if j == TOP_K - 1 else acc");
    w.line("nisa.tensor_tensor(dst=dst, data1=acc, data2={}, op=nl.add, engine=COMBINE)",
           slot("j"));
    w.close();
  }
  w.line("nisa.dma_copy(dst=y[t0:t0 + tr, o0:o0 + ow], src=y_sb[0:tr, 0:ow])");
  w.close(2);
}

/// INPUTS, OUTPUTS and TOLERANCE of the whole layer.
std::string signature(const params& p) {
  const std::string dt = nki::dtype_name(p.type);
  return fmt::format(
      "INPUTS = {{\"x\": (({0}), \"{1}\"), \"W\": ((EXPERTS, D_IN, D_OUT), \"{1}\"),\n"
      "          \"router_weights\": ((TOKENS, TOP_K), \"float32\"),\n"
      "          \"routing\": ((ROUTED, 2), \"int32\", \"ROUTING\")}}  # the router's output: "
      "ROUTING\n"
      "OUTPUTS = {{\"y\": ((TOKENS, D_OUT), \"{1}\")}}\n"
      "TOLERANCE = {2}  # the gate's, in units of |reference| + rms(reference)",
      p.x_rows ? "TOKENS, D_IN" : "D_IN, TOKENS", dt, nki::py_float(nki::tolerance(p.type)));
}

/// The SBUF and PSUM tiles of the group tiles and the combine (not the partials).
void on_chip_tiles(const params& p, nki::writer& w) {
  w.line("xT = nl.ndarray((P, X_BUFS, K_SLABS, TOKEN_TILE), dtype=DT, buffer=nl.sbuf)");
  if (p.x_rows)
    w.line("xg = nl.ndarray((P, 2, D_IN), dtype=DT, buffer=nl.sbuf)  # gathered rows, 2 slots");
  w.line("w_sb = nl.ndarray((P, BUFS, K_SLABS, OUT_TILE), dtype=DT, buffer=nl.sbuf)");
  w.line("idx_sb = nl.ndarray((P, X_BUFS, T_SUBS, 2), dtype=nl.int32, buffer=nl.sbuf)  # routing");
  w.line("p_sb = nl.ndarray((P, X_BUFS, T_SUBS, 1), dtype=nl.float32, buffer=nl.sbuf)  # weights");
  w.line("o_sb = nl.ndarray((P, 2, OUT_TILE), dtype=nl.float32, buffer=nl.sbuf)");
  if (!p.sbuf_partials)
    w.line("cb = nl.ndarray((P, TOP_K, OUT_TILE), dtype=nl.float32, buffer=nl.sbuf)");
  if (p.top_k > 2) w.line("acc_sb = nl.ndarray((P, OUT_TILE), dtype=nl.float32, buffer=nl.sbuf)");
  w.line("y_sb = nl.ndarray((P, OUT_TILE), dtype=DT, buffer=nl.sbuf)");
  if (p.x_rows) w.line("t_psum = nl.ndarray((P, 2, BANK), dtype=nl.float32, buffer=nl.psum)");
  w.line(
      "ps_psum = nl.ndarray((P, PSUM_SETS * T_SUBS * OUT_BANKS, BANK), dtype=nl.float32, "
      "buffer=nl.psum)");
}

/// The reference: y in float64 through EXPERT_OF (after `before`).
std::string reference(const plan& pl, const std::string& before) {
  const auto& p = pl.p;
  std::string s = "[";
  for (std::int64_t t = 0; t < p.tokens; ++t) {
    s += "[";
    for (std::int64_t j = 0; j < p.top_k; ++j)
      s += fmt::format("{}{}", j ? ", " : "",
                       pl.expert_of[static_cast<std::size_t>(t * p.top_k + j)]);
    s += t + 1 < p.tokens ? "], " : "]";
  }
  s += "]";
  return fmt::format(
      "EXPERT_OF = {}  # [token][slot]\n\n"
      "{}def reference(x, W, router_weights, routing):\n"
      "    \"\"\"y in float64, from the same inputs (the routing is EXPERT_OF's).\"\"\"\n"
      "    x = x.astype(np.float64){}\n"
      "    y = np.zeros((TOKENS, D_OUT))\n"
      "    for t in range(TOKENS):\n"
      "        for j in range(TOP_K):\n"
      "            y[t] += router_weights[t, j] * (x[t] @ W[EXPERT_OF[t][j]].astype(np.float64))\n"
      "    return {{\"y\": y}}\n",
      s, before, p.x_rows ? "" : ".T");
}

// The file's frame both kernels share: workload, what it computes, the DMA queues, the constants.
nki::kernel_file kernel_file_for(const plan& pl, const nki::context& ctx, std::string workload,
                                 std::string_view routing) {
  nki::kernel_file f;
  f.workload = std::move(workload);
  f.summary = fmt::format(
      "y[t] = sum over t's top_k experts e of router_weights[t, slot] * (x[t] @ W[e]), {}",
      routing);
  f.note_dma_queues(pl.p.queues);
  constants(pl, ctx, f);
  return f;
}

}  // namespace

std::string emit_nki(const plan& pl, const nki::context& ctx, std::string& out) {
  const auto& p = pl.p;
  nki::kernel_file f =
      kernel_file_for(pl, ctx, "moe", "the routing fixed when the kernel is traced");
  f.signature = signature(p);
  for (const char* name : {"x", "W", "router_weights", "routing"})
    f.inputs.push_back({name, name == std::string_view("W") ? 3 : 2, -1, ""});
  f.outputs.push_back({"y", 2, -1, "nl.ndarray((TOKENS, D_OUT), dtype=DT, buffer=nl.shared_hbm)"});
  if (ctx.program >= 0)
    f.share = fmt::format("the group tiles of its {} and the combine of its tokens",
                          p.split == core_split::tokens ? "tokens" : "experts");
  nki::writer w;
  nki::open_kernel(w, f, ctx);
  if (ctx.program >= 0) group_tiles(pl, pl.core, w);
  if (p.sbuf_partials)
    w.line(
        "part = nl.ndarray((P, TOKEN_TILES, TOP_K, D_OUT), dtype=nl.float32, buffer=nl.sbuf)  "
        "# token t at [t % P, t // P]");
  else
    w.line(
        "part = nl.ndarray((ROUTED, D_OUT), dtype=nl.float32, buffer=nl.shared_hbm)  # row "
        "token * TOP_K + slot");
  w.line("rw_rows = router_weights.reshape((ROUTED, 1))");
  on_chip_tiles(p, w);
  group_loop(pl, ctx, w);
  if (ctx.program >= 0 && needs_barrier(pl)) {
    w.line("# the combine reads partials the other program's experts write: both wait here");
    w.line("# until both have written theirs (docs/nki.md, \"Two physical cores\")");
    w.line("nisa.core_barrier(data=part, cores=(0, 1), engine=nisa.engine.gpsimd)");
  }
  combine_loop(pl, ctx, w);
  if (ctx.program < 0) w.line("return y");
  w.close();
  f.kernel = ctx.m.cores > 1 ? w.text() : group_table(pl) + w.text();
  f.reference = reference(pl, ctx.m.cores > 1 ? routing_table(pl) + "\n" : "");
  out = nki::assemble(f, ctx);
  return "";
}

std::string emit_ep_nki(const std::vector<plan>& ranks, const ep_exchange& ex, int straggler,
                        const std::string& structure, const nki::context& ctx, std::string& out) {
  const plan& pl = ranks.at(static_cast<std::size_t>(straggler));
  const auto& p = pl.p;
  if (ctx.m.cores > 1 || p.sbuf_partials)
    return "sharded_moe: ep > 1 emits for one physical core per rank and partials = hbm";
  nki::kernel_file f = kernel_file_for(pl, ctx, "sharded_moe",
                                       "the experts split over RANKS ranks joined by all-to-alls");
  auto add = [&](std::string n, auto v, std::string meaning) {
    f.constants.push_back({std::move(n), fmt::format("{}", v), std::move(meaning)});
  };
  add("RANKS", ex.ranks, "ranks (NeuronCores): rank r runs RANK_KERNELS[r] on rank_inputs(r, ...)");
  add("RANK_EXPERTS", ex.rank_experts, "experts per rank: rank r's are r * RANK_EXPERTS onwards");
  add("RANK_TOKENS", ex.rank_tokens, "tokens per rank: its combine's, r * RANK_TOKENS onwards");
  add("CHUNKS", ex.chunks,
      ex.chunks > 1 ? "overlap: one dispatch and combine per expert of a rank" : "one exchange");
  add("CAP", ex.cap, "rows of an all-to-all block (the most a rank sends another, padded)");
  add("STRUCTURE_RANK", straggler, "the rank the simulator times (its straggler): STRUCTURE");
  f.signature = signature(p) + "\nSHARDED_OUTPUTS = (\"y\",)  # rank r returns its tokens' rows";
  f.notes.push_back(
      "rank_inputs() (numpy, on the host, not timed) places each rank's inputs: the rows of its "
      "tokens' x in dispatch order (blocks of CAP rows per destination rank, zero-padded), its "
      "experts' weights, the router weight of each row it will receive and the index tables; the "
      "routing is known when the kernel is traced");
  if (ex.chunks > 1)
    f.notes.push_back(
        "overlap: the group tiles run expert by expert (the plan's order within an expert), each "
        "expert's rows dispatched before and combined after them; NKI's scheduler may overlap "
        "an exchange with the next expert's compute, as the simulator times it (not checked on "
        "hardware)");
  // a row of rank q's group tiles: where it arrived (block k * RANKS + source, place)
  std::vector<std::int64_t> place(static_cast<std::size_t>(p.tokens * p.top_k), 0);
  for (const auto& from : ex.send)
    for (const auto& chunk : from)
      for (const auto& to : chunk)
        for (std::size_t i = 0; i < to.size(); ++i)
          place[static_cast<std::size_t>(to[i].token * p.top_k + to[i].slot)] =
              static_cast<std::int64_t>(i);
  std::string kernel = "import nki.collectives as ncc\n\n";
  kernel +=
      "SEND = [  # [rank][chunk][destination rank]: the (token, slot) rows it sends, in order\n";
  for (const auto& from : ex.send) {
    kernel += "    [\n";
    for (const auto& chunk : from) {
      kernel += "        [";
      for (const auto& to : chunk) {
        kernel += "[";
        for (const auto& r : to) kernel += fmt::format("({}, {}), ", r.token, r.slot);
        kernel += "], ";
      }
      kernel += "],\n";
    }
    kernel += "    ],\n";
  }
  kernel += "]\n";
  kernel +=
      "GROUP_TILES = [  # [rank][chunk]: (the rank's expert, ((block, place), ...)) per group "
      "tile;\n    # a row's block is chunk * RANKS + its source rank, in the rows received\n";
  for (std::size_t q = 0; q < ranks.size(); ++q) {
    kernel += "    [\n";
    for (int k = 0; k < ex.chunks; ++k) {
      kernel += "        [\n";
      for (const auto& g : ranks[q].tiles[0]) {
        const std::int64_t local = g.expert - static_cast<std::int64_t>(q) * ex.rank_experts;
        if (ex.chunks > 1 && local != k) continue;
        std::string rows;
        for (const auto& r : g.rows)
          rows += fmt::format("({}, {}), ", k * ex.ranks + r.token / ex.rank_tokens,
                              place[static_cast<std::size_t>(r.token * p.top_k + r.slot)]);
        kernel += fmt::format("            ({}, ({})),\n", local, rows);
      }
      kernel += "        ],\n";
    }
    kernel += "    ],\n";
  }
  plan whole = pl;  // ROUTING (the router's output, INPUTS): the whole layer's, in its tile order
  restrict_plan(whole, {});
  kernel += "]\n" + routing_table(whole) + "\n\n";
  const std::string transpose =
      p.x_rows ? "" : ".reshape((CHUNKS * RANKS, CAP, D_IN)).transpose(0, 2, 1)";
  kernel += fmt::format(
      "def rank_inputs(rank, x, W, router_weights, routing):\n"
      "    \"\"\"Rank `rank`'s inputs (numpy, on the host, not timed; `routing` is SEND's and\n"
      "    GROUP_TILES'): x's rows of its tokens in SEND's order, CAP rows per (chunk,\n"
      "    destination), zero-padded; its experts' W; the router weight of each row it receives,\n"
      "    where it arrives; each group-tile row's place in the rows received (twice: the rows of\n"
      "    x and of the partials); each of its tokens' top_k places in the rows sent back.\"\"\"\n"
      "    rows = np.asarray(x){0}\n"
      "    send = np.zeros((CHUNKS * RANKS * CAP, D_IN), dtype=rows.dtype)\n"
      "    where = {{}}\n"
      "    for c in range(CHUNKS):\n"
      "        for d in range(RANKS):\n"
      "            for i, (t, j) in enumerate(SEND[rank][c][d]):\n"
      "                send[(c * RANKS + d) * CAP + i] = rows[t]\n"
      "                where[(t, j)] = (c * RANKS + d) * CAP + i\n"
      "    weights = np.zeros((CHUNKS * RANKS * CAP, 1))\n"
      "    for c in range(CHUNKS):\n"
      "        for s in range(RANKS):\n"
      "            for i, (t, j) in enumerate(SEND[s][c][rank]):\n"
      "                weights[(c * RANKS + s) * CAP + i] = router_weights[t, j]\n"
      "    index = [(b * CAP + i, b * CAP + i) for chunk in GROUP_TILES[rank]\n"
      "             for _, tile in chunk for b, i in tile] or [(0, 0)]\n"
      "    gather = [[where[(t, j)] for j in range(TOP_K)]\n"
      "              for t in range(rank * RANK_TOKENS, (rank + 1) * RANK_TOKENS)]\n"
      "    return {{\"x\": send{1}.reshape({2}),\n"
      "            \"W\": W[rank * RANK_EXPERTS:(rank + 1) * RANK_EXPERTS],\n"
      "            \"router_weights\": weights, \"routing\": np.array(index, dtype=np.int32),\n"
      "            \"gather\": np.array(gather, dtype=np.int32)}}\n\n\n",
      p.x_rows ? "" : ".T", transpose,
      p.x_rows ? "(CHUNKS, RANKS * CAP, D_IN)" : "(CHUNKS, RANKS, D_IN, CAP)");
  const bool drop = ctx.injected == nki::fault::drop_collective;
  nki::writer w;
  w.open("def sharded_moe_rank(tiles, x, W, router_weights, routing, gather):");
  w.line("\"\"\"One rank: per chunk, the dispatch all-to-all, its experts' group tiles of the");
  w.line("chunk (`tiles`, moe's kernel on the rows received) and the combine all-to-all; then");
  w.line("the combine of its tokens from the rows sent back.\"\"\"");
  w.line("group = ncc.ReplicaGroup([list(range(RANKS))])");
  w.line("x_in = nl.ndarray(x.shape, dtype=DT, buffer=nl.private_hbm)  # the rows received");
  w.line(
      "rows_out = nl.ndarray((CHUNKS, RANKS * CAP, D_OUT), dtype=nl.float32, "
      "buffer=nl.private_hbm)");
  w.line(
      "back = nl.ndarray((CHUNKS, RANKS * CAP, D_OUT), dtype=nl.float32, "
      "buffer=nl.private_hbm)  # sent back");
  w.line("y = nl.ndarray((RANK_TOKENS, D_OUT), dtype=DT, buffer=nl.shared_hbm)");
  w.line("part = rows_out.reshape((CHUNKS * RANKS * CAP, D_OUT))  # a row where it arrived");
  w.line("rw_rows = router_weights");
  on_chip_tiles(p, w);
  w.line("gi_sb = nl.ndarray((P, TOP_K), dtype=nl.int32, buffer=nl.sbuf)  # the combine's index");
  w.line("# trace-time state: slot and bank rotations, the rows routed so far");
  w.line("x_loads = w_loads = stages = raws = transposes = out_sets = routed = 0");
  w.open("for c in nl.sequential_range(CHUNKS):");
  w.line("ncc.all_to_all(srcs=[x[c]], dsts=[x_in[c]], replica_group=group, collective_dim=0)");
  w.line(p.x_rows ? "x_rows = x_in.reshape((CHUNKS * RANKS * CAP, D_IN))"
                  : "x_rows = x_in.reshape((CHUNKS * RANKS, D_IN, CAP))");
  {
    // moe's group loop reads `x`: the rows received
    nki::writer g;
    group_loop(pl, ctx, g, "tiles[c]", true);
    std::string text = g.text();
    for (const char* from : {"src=x.ap(", "src=x[blk,"}) {
      const std::string to = std::string(from).replace(4, 1, "x_rows");
      for (auto at = text.find(from); at != std::string::npos; at = text.find(from, at + 1))
        text.replace(at, std::string(from).size(), to);
    }
    for (std::size_t at = 0; at < text.size();) {
      const auto end = text.find('\n', at);
      w.line(std::string_view(text).substr(at, end - at));
      at = end + 1;
    }
  }
  if (drop) {
    w.line("# FAULT drop_collective: the last chunk's combine all-to-all is not called");
    w.open("if c < CHUNKS - 1:");
  }
  w.line(
      "ncc.all_to_all(srcs=[rows_out[c]], dsts=[back[c]], replica_group=group, "
      "collective_dim=0)");
  if (drop) w.close();
  w.close();
  combine_loop(pl, ctx, w, true);
  w.line("return y");
  w.close();
  kernel += w.text();
  for (std::size_t q = 0; q < ranks.size(); ++q) {
    kernel += fmt::format(
        "\n\n@nki.jit\n"
        "def sharded_moe_kernel_{0}(x, W, router_weights, routing, gather):\n"
        "    return sharded_moe_rank(GROUP_TILES[{0}], x, W, router_weights, routing, gather)\n",
        q);
  }
  kernel += "\n\nRANK_KERNELS = [";
  for (std::size_t q = 0; q < ranks.size(); ++q)
    kernel += fmt::format("{}sharded_moe_kernel_{}", q ? ", " : "", q);
  kernel += "]";
  f.kernel = kernel;
  f.reference = reference(pl, "");
  nki::context with = ctx;
  with.structure = structure;
  out = nki::assemble(f, with);
  return "";
}

}  // namespace tessel::sim::moe_detail
