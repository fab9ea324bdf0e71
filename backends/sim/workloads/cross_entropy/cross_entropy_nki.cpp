// cross_entropy_nki.cpp: the fused cross-entropy schedule written as an NKI
// kernel (docs/nki.md): units of (token tile, vocabulary chunk) in `order`;
// per 128-token row tile the chunk's logits accumulate over d_model in fp32
// PSUM, then the online log-sum-exp folds them into a running (max, sum,
// label logit) per token; after the last chunk loss = max + ln(sum) - label
// logit. The logits never leave the chip.
#include "cross_entropy_nki.hpp"
#include "../../nki/nki.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <string>

namespace tessel::sim::ce {

namespace {
std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }
}  // namespace

std::string emit_nki(const nki_params& p, const nki::context& ctx, std::string& out) {
  if (p.type != dtype::bf16 && p.type != dtype::fp32)
    return fmt::format("dtype {} is not emitted yet (bf16 and fp32 are)", to_string(p.type));
  const std::int64_t P = ctx.m.partitions;
  if (p.mm_k != P) return fmt::format("mm_k = {} is not emitted yet (mm_k = {} is)", p.mm_k, P);
  const bool drop = ctx.injected == nki::fault::drop_tail;
  const bool skip = ctx.injected == nki::fault::skip_accumulation;
  nki::kernel_file f;
  f.workload = "cross_entropy";
  f.summary = "loss = logsumexp(x^T W) - (x^T W)[label] per token, x given as [d_model, tokens]";
  if (p.max_engine == gpsimd_engine)
    f.notes.emplace_back(
        "max_engine = gpsimd: GpSimdE cannot read PSUM and tensor_reduce runs on VectorE only");
  if (p.exp_engine != scalar_engine)
    f.notes.emplace_back("exp_engine = vector: nki.isa.activation (exp) runs on ScalarE");
  if (p.pick_engine == gpsimd_engine)
    f.notes.emplace_back(
        "pick_engine = gpsimd: the one-hot product reads PSUM, so VectorE does it");
  f.notes.emplace_back("the labels of every token load once at the start");
  f.note_dma_queues(p.queues);
  auto add = [&](std::string n, auto v, std::string meaning) {
    f.constants.push_back({std::move(n), fmt::format("{}", v), std::move(meaning)});
  };
  const int outer = std::min(p.bufs, 2);
  add("TOKENS", p.tokens, "");
  add("D_MODEL", p.d_model, "");
  add("VOCAB", p.vocab, "");
  add("P", P, "partitions (nl.tile_size.pmax)");
  add("TOKEN_TILE", p.token_tile, "token_tile: tokens per x tile");
  add("VOCAB_CHUNK", p.vocab_chunk, "vocab_chunk: logits per W chunk");
  add("MM_N", p.mm_n, "logits per matmul (one PSUM bank of fp32)");
  add("Z_COLS", ceil_div(p.vocab_chunk, 512) * 512,
      "PSUM columns per row tile: whole banks, so no matmul output crosses one");
  add("K_SLABS", ceil_div(p.d_model, P), "128-row slabs of d_model (the contraction)");
  add("T_SUBS", ceil_div(p.token_tile, P), "128-token row tiles of a token tile");
  add("ALL_SUBS", ceil_div(p.tokens, P), "128-token row tiles of all tokens");
  add("TOKEN_TILES", ceil_div(p.tokens, p.token_tile), "");
  add("CHUNKS", ceil_div(p.vocab, p.vocab_chunk), "");
  add("X_SLOTS", p.vocab_outer ? p.bufs : outer,
      p.vocab_outer ? "x tiles stream (bufs slots)" : "x tiles are outer (min(bufs, 2) slots)");
  add("W_SLOTS", p.vocab_outer ? outer : p.bufs,
      p.vocab_outer ? "W chunks are outer (min(bufs, 2) slots)" : "W chunks stream (bufs slots)");
  add("DT", nki::nl_dtype(p.type), "dtype of x and W");
  const std::string dt = nki::dtype_name(p.type);
  f.signature = fmt::format(
      "INPUTS = {{\"x\": ((D_MODEL, TOKENS), \"{0}\"), \"W\": ((D_MODEL, VOCAB), \"{0}\"),\n"
      "          \"labels\": ((TOKENS,), \"int32\", VOCAB)}}  # labels in [0, VOCAB)\n"
      "OUTPUTS = {{\"loss\": ((TOKENS,), \"float32\")}}\n"
      "TOLERANCE = {1}  # the gate's, in units of |reference| + rms(reference)",
      dt, nki::py_float(nki::tolerance(dtype::fp32)));

  nki::writer w;
  w.line("@nki.jit");
  w.open("def cross_entropy_kernel(x, W, labels):");
  w.line("loss = nl.ndarray((TOKENS,), dtype=nl.float32, buffer=nl.shared_hbm)");
  w.line("loss_rows, label_rows = loss.reshape((TOKENS, 1)), labels.reshape((TOKENS, 1))");
  w.line("x_sb = nl.ndarray((P, X_SLOTS, K_SLABS, TOKEN_TILE), dtype=DT, buffer=nl.sbuf)  # x^T");
  w.line("w_sb = nl.ndarray((P, W_SLOTS, K_SLABS, VOCAB_CHUNK), dtype=DT, buffer=nl.sbuf)");
  w.line(
      "z_psum = nl.ndarray((P, T_SUBS, Z_COLS), dtype=nl.float32, buffer=nl.psum)  # "
      "logits");
  w.line("e_sb = nl.ndarray((P, VOCAB_CHUNK), dtype=nl.float32, buffer=nl.sbuf)  # exp scratch");
  w.line("pick_sb = nl.ndarray((P, VOCAB_CHUNK), dtype=nl.float32, buffer=nl.sbuf)  # one-hot");
  w.line(
      "state = nl.ndarray((P, ALL_SUBS, 3), dtype=nl.float32, buffer=nl.sbuf)  # max, sum, "
      "label logit");
  w.line("label_i = nl.ndarray((P, ALL_SUBS), dtype=nl.int32, buffer=nl.sbuf)");
  w.line("label_f = nl.ndarray((P, ALL_SUBS), dtype=nl.float32, buffer=nl.sbuf)");
  w.line("tmp = nl.ndarray((P, 6), dtype=nl.float32, buffer=nl.sbuf)  # per-token scratch");
  w.line(
      "column = nisa.iota(nl.arange(VOCAB_CHUNK)[None, :] + 0 * nl.arange(P)[:, None], "
      "dtype=nl.float32)");
  w.open("for g in nl.affine_range(ALL_SUBS):");
  w.line("rows = min(P, TOKENS - g * P)");
  w.line("nisa.dma_copy(dst=label_i[0:rows, g:g + 1], src=label_rows[g * P:g * P + rows, 0:1])");
  w.line(
      "nisa.tensor_copy(dst=label_f[0:rows, g:g + 1], src=label_i[0:rows, g:g + 1], "
      "engine=nisa.engine.vector)");
  w.close();
  w.line();
  w.open("def load_slabs(dst, src, col0, cols):");
  w.line("\"\"\"Rows of d_model, one DMA per 128-row slab.\"\"\"");
  w.open("for s in nl.affine_range(K_SLABS):");
  w.line("r = min(P, D_MODEL - s * P)");
  w.line("nisa.dma_copy(dst=dst[0:r, s, 0:cols], src=src[s * P:s * P + r, col0:col0 + cols])");
  w.close(2);
  w.line();
  w.open("def unit(t0, tn, xs, c, ws):");
  w.line(
      "\"\"\"The logits of chunk c for a token tile, folded into each token's running "
      "state.\"\"\"");
  w.line("c0 = c * VOCAB_CHUNK");
  w.line("cw = min(VOCAB_CHUNK, VOCAB - c0)");
  w.open("for ts in nl.affine_range((tn + P - 1) // P):");
  w.line("tr = min(P, tn - ts * P)");
  w.line("g = t0 // P + ts");
  w.line("slabs = K_SLABS{}", skip ? " - 1  # FAULT skip_accumulation: the last slab is lost" : "");
  w.open("for n in nl.affine_range((cw + MM_N - 1) // MM_N):");
  w.line("nw = min(MM_N, cw - n * MM_N)");
  w.open("for s in nl.affine_range(slabs):  # logits accumulate over d_model in PSUM");
  w.line("r = min(P, D_MODEL - s * P)");
  w.line("nisa.nc_matmul(dst=z_psum[0:tr, ts, n * MM_N:n * MM_N + nw],");
  w.line("               stationary=x_sb[0:r, xs, s, ts * P:ts * P + tr],");
  w.line("               moving=w_sb[0:r, ws, s, n * MM_N:n * MM_N + nw], accumulate=s > 0)");
  w.close(2);
  w.line("z = z_psum[0:tr, ts, 0:cw]");
  w.line("m, l, picked = state[0:tr, g, 0:1], state[0:tr, g, 1:2], state[0:tr, g, 2:3]");
  w.line(
      "chunk_max, m_new, neg, chunk_sum, label_at, picked_now = (tmp[0:tr, i:i + 1] for i in "
      "range(6))");
  w.line("nisa.tensor_reduce(dst=chunk_max, op=nl.max, data=z, axis=1, keepdims=True)");
  w.open("if c == 0:");
  w.line("nisa.tensor_copy(dst=m_new, src=chunk_max, engine=nisa.engine.vector)");
  w.close();
  w.open("else:");
  w.line("nisa.tensor_tensor(dst=m_new, data1=m, data2=chunk_max, op=nl.maximum)");
  w.close();
  w.line("nisa.tensor_scalar(dst=neg, data=m_new, op0=nl.multiply, operand0=-1.0)");
  w.line("nisa.activation(dst=e_sb[0:tr, 0:cw], op=nl.exp, data=z, bias=neg, reduce_op=nl.add,");
  w.line("                reduce_res=chunk_sum, reduce_cmd=nisa.reduce_cmd.reset_reduce)");
  w.line("# the label's logit: a one-hot (column == label - c0) multiply-reduce");
  w.line(
      "nisa.tensor_scalar(dst=label_at, data=label_f[0:tr, g:g + 1], op0=nl.subtract, "
      "operand0=float(c0))");
  w.line(
      "nisa.tensor_scalar(dst=pick_sb[0:tr, 0:cw], data=column[0:tr, 0:cw], op0=nl.equal, "
      "operand0=label_at)");
  w.line(
      "nisa.tensor_tensor(dst=pick_sb[0:tr, 0:cw], data1=pick_sb[0:tr, 0:cw], data2=z, "
      "op=nl.multiply)");
  w.line(
      "nisa.tensor_reduce(dst=picked_now, op=nl.add, data=pick_sb[0:tr, 0:cw], axis=1, "
      "keepdims=True)");
  w.open("if c == 0:");
  w.line("nisa.tensor_copy(dst=picked, src=picked_now, engine=nisa.engine.vector)");
  w.line("nisa.tensor_copy(dst=l, src=chunk_sum, engine=nisa.engine.vector)");
  w.close();
  w.open("else:  # l = l * exp(m - m_new) + chunk_sum");
  w.line("nisa.tensor_tensor(dst=picked, data1=picked, data2=picked_now, op=nl.add)");
  w.line("nisa.tensor_tensor(dst=chunk_max, data1=m, data2=m_new, op=nl.subtract)");
  w.line("nisa.activation(dst=chunk_max, op=nl.exp, data=chunk_max)");
  w.line("nisa.tensor_tensor(dst=l, data1=l, data2=chunk_max, op=nl.multiply)");
  w.line("nisa.tensor_tensor(dst=l, data1=l, data2=chunk_sum, op=nl.add)");
  w.close();
  w.line("nisa.tensor_copy(dst=m, src=m_new, engine=nisa.engine.vector)");
  w.close(2);
  w.line();
  w.open("def finish(g):");
  w.line("\"\"\"loss = max + ln(sum) - label logit, for row tile g.\"\"\"");
  w.line("rows = min(P, TOKENS - g * P)");
  w.line("ln = tmp[0:rows, 0:1]");
  w.line("nisa.activation(dst=ln, op=nl.log, data=state[0:rows, g, 1:2])");
  w.line("nisa.tensor_tensor(dst=ln, data1=state[0:rows, g, 0:1], data2=ln, op=nl.add)");
  w.line("nisa.tensor_tensor(dst=ln, data1=ln, data2=state[0:rows, g, 2:3], op=nl.subtract)");
  w.line("nisa.dma_copy(dst=loss_rows[g * P:g * P + rows, 0:1], src=ln)");
  w.close();
  w.line();
  w.line("x_loads = w_loads = 0");
  const char* fault_note = "# FAULT drop_tail: the last iteration of the outer loop is dropped";
  if (!p.vocab_outer) {
    w.line("# order (t, v): x tiles outer, W chunks streamed");
    w.open("for tt in nl.affine_range(TOKEN_TILES{}):", drop ? " - 1" : "");
    if (drop) w.line(fault_note);
    w.line("t0 = tt * TOKEN_TILE");
    w.line("tn = min(TOKEN_TILE, TOKENS - t0)");
    w.line("xs = x_loads % X_SLOTS");
    w.line("x_loads += 1");
    w.line("load_slabs(x_sb[:, xs], x, t0, tn)");
    w.open("for c in nl.sequential_range(CHUNKS):  # carries the running state");
    w.line("ws = w_loads % W_SLOTS");
    w.line("w_loads += 1");
    w.line(
        "load_slabs(w_sb[:, ws], W, c * VOCAB_CHUNK, min(VOCAB_CHUNK, VOCAB - c * "
        "VOCAB_CHUNK))");
    w.line("unit(t0, tn, xs, c, ws)");
    w.close();
    w.open("for ts in nl.affine_range((tn + P - 1) // P):");
    w.line("finish(t0 // P + ts)");
    w.close(2);
  } else {
    w.line("# order (v, t): W chunks outer, x tiles streamed");
    w.open("for c in nl.sequential_range(CHUNKS{}):  # carries the running state",
           drop ? " - 1" : "");
    if (drop) w.line(fault_note);
    w.line("ws = w_loads % W_SLOTS");
    w.line("w_loads += 1");
    w.line(
        "load_slabs(w_sb[:, ws], W, c * VOCAB_CHUNK, min(VOCAB_CHUNK, VOCAB - c * VOCAB_CHUNK))");
    w.open("for tt in nl.affine_range(TOKEN_TILES):");
    w.line("t0 = tt * TOKEN_TILE");
    w.line("tn = min(TOKEN_TILE, TOKENS - t0)");
    w.line("xs = x_loads % X_SLOTS");
    w.line("x_loads += 1");
    w.line("load_slabs(x_sb[:, xs], x, t0, tn)");
    w.line("unit(t0, tn, xs, c, ws)");
    w.close(2);
    w.open("for g in nl.affine_range(ALL_SUBS):");
    w.line("finish(g)");
    w.close();
  }
  w.line("return loss");
  w.close();
  f.kernel = w.text();
  f.reference =
      "def reference(x, W, labels):\n"
      "    \"\"\"loss in float64, from the same inputs.\"\"\"\n"
      "    z = x.astype(np.float64).T @ W.astype(np.float64)\n"
      "    top = z.max(axis=1)\n"
      "    lse = top + np.log(np.exp(z - top[:, None]).sum(axis=1))\n"
      "    return {\"loss\": lse - z[np.arange(TOKENS), labels.astype(np.int64)]}\n";
  out = nki::assemble(f, ctx);
  return "";
}

}  // namespace tessel::sim::ce
