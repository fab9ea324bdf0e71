// cross_entropy_nki.cpp: the fused cross-entropy schedule written as an NKI
// kernel (docs/nki.md), instruction for instruction what cross_entropy.cpp
// lowers: units of (token tile, vocabulary chunk) in `order`, x tiles and W
// chunks loaded when their block changes; per 128-token row tile the chunk's
// logits accumulate over d_model in fp32 PSUM (bank sets rotating per unit),
// then the online log-sum-exp folds them into a running (-max, sum, label
// logit) per token; after the last chunk loss = max + ln(sum) - label logit.
// The logits never leave the chip.
#include "cross_entropy_nki.hpp"
#include "../../nki/nki.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <string>

namespace tessel::sim::ce {

namespace {

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

void constants(const nki_params& p, const nki::context& ctx, nki::kernel_file& f) {
  auto add = [&](std::string n, auto v, std::string meaning) {
    f.constants.push_back({std::move(n), fmt::format("{}", v), std::move(meaning)});
  };
  const std::int64_t P = ctx.m.partitions, bank = ctx.m.psum_bank_bytes / 4;
  const int outer = std::min(p.bufs, 2);
  const std::int64_t subs = ceil_div(p.token_tile, P), chunk_banks = ceil_div(p.vocab_chunk, bank);
  add("TOKENS", p.tokens, "");
  add("D_MODEL", p.d_model, "");
  add("VOCAB", p.vocab, "");
  add("P", P, "partitions (nl.tile_size.pmax)");
  add("TOKEN_TILE", p.token_tile, "token_tile: tokens per x tile");
  add("VOCAB_CHUNK", p.vocab_chunk, "vocab_chunk: logits per W chunk");
  add("MM_N", p.mm_n, "logits per matmul (divides a PSUM bank)");
  add("Z_COLS", chunk_banks * bank,
      "PSUM columns per row tile: whole banks, so no matmul output crosses one");
  add("Z_SETS", std::max<std::int64_t>(1, ctx.m.psum_banks / (subs * chunk_banks)),
      "units whose logits fit PSUM at once (bank sets in rotation)");
  add("MM_K", p.mm_k, "contraction of a matmul: rows of a d_model slab (mm_k)");
  add("K_SLABS", ceil_div(p.d_model, p.mm_k), "MM_K-row slabs of d_model (the contraction)");
  add("T_SUBS", subs, "128-token row tiles of a token tile");
  add("STATE_SUBS", p.vocab_outer ? ceil_div(p.tokens, P) : subs,
      p.vocab_outer ? "row tiles whose running state is kept: every token's"
                    : "row tiles whose running state is kept: the token tile's");
  add("TOKEN_TILES", ceil_div(p.tokens, p.token_tile), "");
  add("CHUNKS", ceil_div(p.vocab, p.vocab_chunk), "");
  add("X_SLOTS", p.vocab_outer ? p.bufs : outer,
      p.vocab_outer ? "x tiles stream (bufs slots)" : "x tiles are outer (min(bufs, 2) slots)");
  add("W_SLOTS", p.vocab_outer ? outer : p.bufs,
      p.vocab_outer ? "W chunks are outer (min(bufs, 2) slots)" : "W chunks stream (bufs slots)");
  add("PICK_ENGINE", nki::engine(p.pick_engine), "builds the one-hot masks (pick_engine)");
  add("DT", nki::nl_dtype(p.type), "dtype of x and W");
}

/// unit(): the logits of one (token tile, chunk) and their online log-sum-exp.
void unit_function(nki::writer& w, bool skip) {
  w.open("def unit(t0, tn, xs, c, ws, zs):");
  w.line(
      "\"\"\"The logits of chunk c for a token tile (bank set zs), folded into each token's "
      "running state.\"\"\"");
  w.line("c0 = c * VOCAB_CHUNK");
  w.line("cw = min(VOCAB_CHUNK, VOCAB - c0)");
  w.open("for ts in nl.affine_range((tn + P - 1) // P):");
  w.line("tr = min(P, tn - ts * P)");
  w.line("g = {}  # the row tile's running state", "t0 // P + ts if STATE_SUBS > T_SUBS else ts");
  w.line("zt = zs * T_SUBS + ts");
  w.line("slabs = K_SLABS{}", skip ? " - 1  # FAULT skip_accumulation: the last slab is lost" : "");
  w.open("for n in nl.affine_range((cw + MM_N - 1) // MM_N):");
  w.line("nw = min(MM_N, cw - n * MM_N)");
  w.open("for s in nl.affine_range(slabs):  # logits accumulate over d_model in PSUM");
  w.line("r = min(MM_K, D_MODEL - s * MM_K)");
  w.line("nisa.nc_matmul(dst=z_psum[0:tr, zt, n * MM_N:n * MM_N + nw],");
  w.line("               stationary=x_sb[0:r, xs, s, ts * P:ts * P + tr],");
  w.line("               moving=w_sb[0:r, ws, s, n * MM_N:n * MM_N + nw], accumulate=s > 0)");
  w.close(2);
  w.line("z = z_psum[0:tr, zt, 0:cw]");
  w.line("# the running -max sits in slot c % 2, so the old one stays for the correction");
  w.line(
      "nm_old, nm = state[0:tr, g, (c + 1) % 2:(c + 1) % 2 + 1], state[0:tr, g, c % 2:c % 2 + 1]");
  w.line("l, picked = state[0:tr, g, 2:3], state[0:tr, g, 3:4]");
  w.line("chunk_nm, chunk_sum, picked_now, alpha = (tmp[0:tr, i:i + 1] for i in range(4))");
  w.open("if c == 0:");
  w.line("nisa.tensor_reduce(dst=nm, op=nl.max, data=z, axis=1, keepdims=True, negate=True)");
  w.close();
  w.open("else:");
  w.line("nisa.tensor_reduce(dst=chunk_nm, op=nl.max, data=z, axis=1, keepdims=True, negate=True)");
  w.line(
      "nisa.tensor_tensor(dst=nm, data1=nm_old, data2=chunk_nm, op=nl.minimum, "
      "engine=nisa.engine.vector)");
  w.close();
  w.line("nisa.activation(dst=e_sb[0:tr, 0:cw], op=nl.exp, data=z, bias=nm, reduce_op=nl.add,");
  w.line(
      "                reduce_res=l if c == 0 else chunk_sum, "
      "reduce_cmd=nisa.reduce_cmd.reset_reduce)");
  w.line("# the label's logit: a one-hot mask (column + c0 == label) times the logits, summed");
  w.line(
      "nisa.tensor_scalar(dst=pick_sb[0:tr, 0:cw], data=column[0:tr, 0:cw], op0=nl.add, "
      "operand0=float(c0),");
  w.line("                   op1=nl.equal, operand1=label_i[0:tr, g:g + 1], engine=PICK_ENGINE)");
  w.line(
      "nisa.tensor_tensor(dst=pick_sb[0:tr, 0:cw], data1=pick_sb[0:tr, 0:cw], data2=z, "
      "op=nl.multiply,");
  w.line("                   engine=nisa.engine.vector)");
  w.line(
      "nisa.tensor_reduce(dst=picked if c == 0 else picked_now, op=nl.add, data=pick_sb[0:tr, "
      "0:cw], axis=1,");
  w.line("                   keepdims=True)");
  w.open("if c > 0:  # l = l * exp(m_old - m_new) + chunk_sum; picked += picked_now");
  w.line("nisa.activation(dst=alpha, op=nl.exp, data=nm_old, scale=-1.0, bias=nm)");
  w.line(
      "nisa.scalar_tensor_tensor(dst=l, data=l, op0=nl.multiply, operand0=alpha, op1=nl.add, "
      "operand1=chunk_sum)");
  w.line(
      "nisa.tensor_tensor(dst=picked, data1=picked, data2=picked_now, op=nl.add, "
      "engine=nisa.engine.vector)");
  w.close();
  w.open("if c == CHUNKS - 1:  # loss = ln(sum) - (-max) - label logit");
  w.line("ln = tmp[0:tr, 0:1]");
  w.line("nisa.activation(dst=ln, op=nl.log, data=l)");
  w.line(
      "nisa.scalar_tensor_tensor(dst=ln, data=ln, op0=nl.subtract, operand0=nm, op1=nl.subtract, "
      "operand1=picked)");
  w.line("nisa.dma_copy(dst=loss_rows[t0 + ts * P:t0 + ts * P + tr, 0:1], src=ln)");
  w.close(3);
  w.line();
}

}  // namespace

std::string emit_nki(const nki_params& p, const nki::context& ctx, std::string& out) {
  const bool drop = ctx.injected == nki::fault::drop_tail;
  nki::kernel_file f;
  f.workload = "cross_entropy";
  f.summary = "loss = logsumexp(x^T W) - (x^T W)[label] per token, x given as [d_model, tokens]";
  f.note_dma_queues(p.queues);
  constants(p, ctx, f);
  const std::string dt = nki::dtype_name(p.type);
  f.signature = fmt::format(
      "INPUTS = {{\"x\": ((D_MODEL, TOKENS), \"{0}\"), \"W\": ((D_MODEL, VOCAB), \"{0}\"),\n"
      "          \"labels\": ((TOKENS,), \"int32\", VOCAB)}}  # labels in [0, VOCAB)\n"
      "OUTPUTS = {{\"loss\": ((TOKENS,), \"float32\")}}\n"
      "TOLERANCE = {1}  # the gate's, in units of |reference| + rms(reference)",
      dt, nki::py_float(nki::tolerance(dtype::fp32)));

  // the core split cuts the tokens: x's columns, the labels and the losses; W goes whole to both
  f.inputs = {{"x", 2, 1, ""}, {"W", 2, -1, ""}, {"labels", 1, 0, ""}};
  f.outputs = {{"loss", 1, 0, "nl.ndarray((TOKENS,), dtype=nl.float32, buffer=nl.shared_hbm)"}};
  nki::writer w;
  nki::open_kernel(w, f, ctx);
  w.line("loss_rows, label_rows = loss.reshape((TOKENS, 1)), labels.reshape((TOKENS, 1))");
  w.line("x_sb = nl.ndarray((P, X_SLOTS, K_SLABS, TOKEN_TILE), dtype=DT, buffer=nl.sbuf)  # x^T");
  w.line("w_sb = nl.ndarray((P, W_SLOTS, K_SLABS, VOCAB_CHUNK), dtype=DT, buffer=nl.sbuf)");
  w.line(
      "z_psum = nl.ndarray((P, Z_SETS * T_SUBS, Z_COLS), dtype=nl.float32, buffer=nl.psum)  # "
      "logits");
  w.line("e_sb = nl.ndarray((P, VOCAB_CHUNK), dtype=nl.float32, buffer=nl.sbuf)  # exp scratch");
  w.line("pick_sb = nl.ndarray((P, VOCAB_CHUNK), dtype=nl.float32, buffer=nl.sbuf)  # one-hot");
  w.line(
      "state = nl.ndarray((P, STATE_SUBS, 4), dtype=nl.float32, buffer=nl.sbuf)  # -max (two "
      "slots), sum, label logit");
  w.line("label_i = nl.ndarray((P, STATE_SUBS), dtype=nl.int32, buffer=nl.sbuf)");
  w.line("tmp = nl.ndarray((P, 4), dtype=nl.float32, buffer=nl.sbuf)  # per-token scratch");
  w.line(
      "column = nisa.iota(nl.arange(VOCAB_CHUNK)[None, :] + 0 * nl.arange(P)[:, None], "
      "dtype=nl.float32)");
  w.line();
  w.open("def load_labels(t0, tn):");
  w.line("\"\"\"A token tile's labels, one DMA per row tile.\"\"\"");
  w.open("for ts in nl.affine_range((tn + P - 1) // P):");
  w.line("tr = min(P, tn - ts * P)");
  w.line("g = t0 // P + ts if STATE_SUBS > T_SUBS else ts");
  w.line(
      "nisa.dma_copy(dst=label_i[0:tr, g:g + 1], src=label_rows[t0 + ts * P:t0 + ts * P + tr, "
      "0:1])");
  w.close(2);
  w.line();
  w.open("def load_slabs(dst, src, col0, cols):");
  w.line("\"\"\"Rows of d_model, one DMA per MM_K-row slab.\"\"\"");
  w.open("for s in nl.affine_range(K_SLABS):");
  w.line("r = min(MM_K, D_MODEL - s * MM_K)");
  w.line(
      "nisa.dma_copy(dst=dst[0:r, s, 0:cols], src=src[s * MM_K:s * MM_K + r, col0:col0 + "
      "cols])");
  w.close(2);
  w.line();
  unit_function(w, ctx.injected == nki::fault::skip_accumulation);
  w.line("# trace-time state: slot rotations, the blocks in them, the PSUM bank sets");
  w.line("x_loads = w_loads = units = 0");
  w.line("x_last = w_last = None");
  const char* fault_note = "# FAULT drop_tail: the last iteration of the outer loop is dropped";
  if (p.vocab_outer) {
    w.open("for tt in nl.affine_range(TOKEN_TILES):  # every token's labels, once");
    w.line("load_labels(tt * TOKEN_TILE, min(TOKEN_TILE, TOKENS - tt * TOKEN_TILE))");
    w.close();
    w.line("# order (v, t): W chunks outer, x tiles streamed");
    w.open("for c in nl.sequential_range(CHUNKS{}):  # carries the running state",
           drop ? " - 1" : "");
    if (drop) w.line(fault_note);
    w.open("for tt in nl.affine_range(TOKEN_TILES):");
  } else {
    w.line("# order (t, v): x tiles outer, W chunks streamed");
    w.open("for tt in nl.affine_range(TOKEN_TILES{}):", drop ? " - 1" : "");
    if (drop) w.line(fault_note);
    w.open("for c in nl.sequential_range(CHUNKS):  # carries the running state");
  }
  w.line("t0, c0 = tt * TOKEN_TILE, c * VOCAB_CHUNK");
  w.line("tn = min(TOKEN_TILE, TOKENS - t0)");
  w.open("if tt != x_last:  # a new x tile: the next slot{}",
         p.vocab_outer ? "" : " (and its labels)");
  w.line("x_last, xs = tt, x_loads % X_SLOTS");
  w.line("x_loads += 1");
  w.line("load_slabs(x_sb[:, xs], x, t0, tn)");
  if (!p.vocab_outer) w.line("load_labels(t0, tn)");
  w.close();
  w.open("if c != w_last:  # a new W chunk: the next slot");
  w.line("w_last, ws = c, w_loads % W_SLOTS");
  w.line("w_loads += 1");
  w.line("load_slabs(w_sb[:, ws], W, c0, min(VOCAB_CHUNK, VOCAB - c0))");
  w.close();
  w.line("unit(t0, tn, xs, c, ws, units % Z_SETS)");
  w.line("units += 1");
  w.close(2);
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
