// attention_nki.cpp: the attention plan (attention_plan.hpp) written as an
// NKI kernel (docs/nki.md): for each q tile, the kv tiles it visits
// (visited_kv_tiles: skip_masked drops those wholly above the diagonal) in
// `kv_bufs` slots; per 128-row q sub-tile S = Q K^T in fp32 PSUM, the causal
// mask on diagonal tiles, the running max with the accumulator corrected
// every kv tile (eager) or every rescale_every tiles unless the max grew by
// more than e^8 (lazy), P = exp((S - max) / sqrt(d)) in the input type with
// its row sum in fp32, P transposed on TensorE 128 columns at a time, O_part
// = P V in PSUM, O_acc in fp32 SBUF, and O = O_acc / l.
#include "../../nki/nki.hpp"
#include "attention_plan.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>
#include <string>

namespace tessel::sim::attn {

std::string emit_nki(const params& p, const nki::context& ctx, std::string& out, std::int64_t heads,
                     bool split_heads) {
  const std::int64_t P = ctx.m.partitions;
  const bool drop = ctx.injected == nki::fault::drop_tail;
  const bool skip = ctx.injected == nki::fault::skip_accumulation;
  nki::kernel_file f;
  f.workload = "attention";
  // heads > 1 (sharded_attention): the heads stacked, one after another
  const bool many = heads > 1;
  f.summary = fmt::format("O = softmax(Q^T K / sqrt(d){}) V with Q, K given as [d, seq], {}",
                          p.causal ? ", causal" : "",
                          many ? fmt::format("{} heads stacked", heads) : "one head");
  f.note_dma_queues(p.queues);
  auto add = [&](std::string n, auto v, std::string meaning) {
    f.constants.push_back({std::move(n), fmt::format("{}", v), std::move(meaning)});
  };
  add("SEQ", p.seq, "sequence length");
  if (many)
    add("HEADS", heads, "heads: Q, K stacked as [HEADS * D, SEQ], V, O as [HEADS * SEQ, D]");
  add("D", p.d, "head_dim (the contraction of Q^T K, on the partitions)");
  add("P", P, "partitions (nl.tile_size.pmax)");
  add("Q_TILE", p.q_tile, "q_tile: rows of O per q tile");
  add("KV_TILE", p.kv_tile, "kv_tile: keys per kv tile");
  add("SUBS", ceil_div(p.q_tile, P), "128-row sub-tiles of a q tile");
  add("KV_BLOCKS", ceil_div(p.kv_tile, P), "128-key blocks of a kv tile (P V contraction)");
  add("Q_TILES", ceil_div(p.seq, p.q_tile), "");
  add("KV_TILES", ceil_div(p.seq, p.kv_tile), "");
  add("KV_BUFS", p.kv_bufs, "K and V tile slots (kv_bufs)");
  add("S_CHUNK", ctx.m.max_moving_free, "score columns per matmul (one PSUM bank)");
  add("BANK", ctx.m.psum_bank_bytes / 4, "fp32 columns of a PSUM bank");
  const std::int64_t s_banks = ceil_div(p.kv_tile * 4, ctx.m.psum_bank_bytes);
  add("S_COLS", s_banks * ctx.m.psum_bank_bytes / 4, "PSUM columns of a score tile (whole banks)");
  add("S_SETS", (ctx.m.psum_banks - 3) / s_banks, "score tiles in rotation");
  add("CAUSAL", p.causal ? "True" : "False", "");
  add("SKIP_MASKED", p.causal && p.skip_masked ? "True" : "False",
      "skip kv tiles wholly above the diagonal");
  add("RESCALE_EVERY", p.rescale_every,
      p.rescale_every == 1 ? "eager: correct every kv tile" : "lazy: correct every n kv tiles");
  add("LAZY_GUARD", "8.0", "lazy: correct early when the max grew by more than this (exponent)");
  add("SCALE", nki::py_float(1.0 / std::sqrt(static_cast<double>(p.d))), "1 / sqrt(D)");
  add("MASK", "-3.0e38", "added to masked scores: exp() of them is 0");
  add("DT", nki::nl_dtype(p.type), "dtype of Q, K, V, P and O");
  const std::string dt = nki::dtype_name(p.type);
  const char* hd = many ? "HEADS * D" : "D";
  const char* hs = many ? "HEADS * SEQ" : "SEQ";
  f.signature = fmt::format(
      "INPUTS = {{\"Q\": (({2}, SEQ), \"{0}\"), \"K\": (({2}, SEQ), \"{0}\"), \"V\": (({3}, D), "
      "\"{0}\")}}\n"
      "OUTPUTS = {{\"O\": (({3}, D), \"{0}\")}}\n"
      "TOLERANCE = {1}  # the gate's, in units of |reference| + rms(reference)",
      dt, nki::py_float(nki::tolerance(p.type)), hd, hs);

  nki::writer w;
  const bool lazy = p.rescale_every > 1;
  // attention: no core split (one core runs it, as the simulator times it), the tensors
  // go whole; sharded_attention: the split cuts the stacked heads, D rows of Q and K and
  // SEQ rows of V and O each
  const int axis = split_heads ? 0 : -1;
  f.inputs = {{"Q", 2, axis, "", "D"}, {"K", 2, axis, "", "D"}, {"V", 2, axis, "", "SEQ"}};
  f.outputs = {{"O", 2, axis,
                fmt::format("nl.ndarray(({}, D), dtype=DT, buffer=nl.shared_hbm)", hs), "SEQ"}};
  nki::open_kernel(w, f, ctx);
  w.line("q_sb = nl.ndarray((D, Q_TILE), dtype=DT, buffer=nl.sbuf)  # Q^T tile: [d, q]");
  w.line(
      "k_sb = nl.ndarray((D, KV_BUFS, KV_TILE), dtype=DT, buffer=nl.sbuf)  # K^T tiles: [d, key]");
  w.line(
      "v_sb = nl.ndarray((P, KV_BUFS, KV_BLOCKS, D), dtype=DT, buffer=nl.sbuf)  # V: [key, ..., "
      "d]");
  w.line("# PSUM: two banks for the transposes of P, one for P V, then the score sets");
  w.line("pt_psum = nl.ndarray((P, 2, BANK), dtype=nl.float32, buffer=nl.psum)");
  w.line("o_psum = nl.ndarray((P, D), dtype=nl.float32, buffer=nl.psum)  # P V of a kv tile");
  w.line("s_psum = nl.ndarray((P, S_SETS, S_COLS), dtype=nl.float32, buffer=nl.psum)  # S");
  if (p.causal)
    w.line("s_sb = nl.ndarray((P, KV_TILE), dtype=nl.float32, buffer=nl.sbuf)  # masked scores");
  w.line("p_sb = nl.ndarray((P, KV_TILE), dtype=DT, buffer=nl.sbuf)  # P in the input type");
  w.line("pt_sb = nl.ndarray((P, P), dtype=DT, buffer=nl.sbuf)");
  w.line("acc = nl.ndarray((P, SUBS, D), dtype=nl.float32, buffer=nl.sbuf)  # O_acc");
  w.line(
      "state = nl.ndarray((P, SUBS, 4), dtype=nl.float32, buffer=nl.sbuf)  # per sub-tile: two "
      "max slots, l{}",
      lazy ? ", the running max (the slots hold the reference)" : "");
  w.line("tmp = nl.ndarray((P, 5), dtype=nl.float32, buffer=nl.sbuf)  # per-row scratch");
  w.line("o_stage = nl.ndarray((P, D), dtype=DT, buffer=nl.sbuf)");
  // each head as the timed program's copies: its own mask, from its own state
  if (many) w.open("for h in nl.sequential_range(HEADS):  # each head alone, in the same buffers");
  if (p.causal)
    w.line(
        "diag = nisa.iota(nl.arange(KV_TILE)[None, :] - nl.arange(P)[:, None], "
        "dtype=nl.float32)  # key - row");
  w.line();
  std::string kv_order;
  for (const auto& o : p.dma_order)
    if (o != "q") kv_order += o;
  w.line("# trace-time state: the K/V tile in its slot, the score sets, the transposes' banks");
  w.line("kv_last, units, transposes = None, 0, 0");
  // the rows of head h in the stacked tensors
  const std::string qk = many ? "h * D:h * D + D" : "0:D", row = many ? "h * SEQ + " : "";
  w.open("for qt in nl.affine_range(Q_TILES{}):  # q tiles", drop ? " - 1" : "");
  if (drop) w.line("# FAULT drop_tail: the last q tile is dropped");
  w.line("q0 = qt * Q_TILE");
  w.line("qn = min(Q_TILE, SEQ - q0)");
  w.line(fmt::format("nisa.dma_copy(dst=q_sb[0:D, 0:qn], src=Q[{}, q0:q0 + qn])", qk));
  w.line("kv_count = KV_TILES");
  w.open("if SKIP_MASKED:  # the kv tiles this q tile attends to");
  w.line("kv_count = min(KV_TILES, (q0 + qn + KV_TILE - 1) // KV_TILE)");
  w.close();
  w.open("for idx in nl.sequential_range(kv_count):  # carries max, sum and O_acc");
  w.line("k0 = idx * KV_TILE");
  w.line("kn = min(KV_TILE, SEQ - k0)");
  w.line("slot = idx % KV_BUFS");
  w.open("if idx != kv_last:  # dma_order {}: K and V load in that order",
         fmt::join(p.dma_order, ", "));
  w.line("kv_last = idx");
  for (const char c : kv_order) {
    if (c == 'k') {
      w.line(fmt::format("nisa.dma_copy(dst=k_sb[0:D, slot, 0:kn], src=K[{}, k0:k0 + kn])", qk));
    } else {
      w.open("for b in nl.affine_range((kn + P - 1) // P):");
      w.line("bn = min(P, kn - b * P)");
      w.line(fmt::format(
          "nisa.dma_copy(dst=v_sb[0:bn, slot, b, 0:D], src=V[{0}k0 + b * P:{0}k0 + b * P + bn, "
          "0:D])",
          row));
      w.close();
    }
  }
  w.close();
  w.open("for sub in nl.affine_range(SUBS):");
  w.line("r0 = sub * P");
  w.open("if r0 >= qn:");
  w.line("continue");
  w.close();
  w.line("rn = min(P, qn - r0)");
  w.line("zs = units % S_SETS");
  w.line("units += 1");
  w.line(
      "cur, old = state[0:rn, sub, idx % 2:idx % 2 + 1], state[0:rn, sub, (idx + 1) % 2:(idx + 1) "
      "% 2 + 1]");
  w.line("l = state[0:rn, sub, 2:3]");
  if (lazy) w.line("m_run = state[0:rn, sub, 3:4]");
  w.line("tile_max, row_sum, alpha, bias, diff = (tmp[0:rn, i:i + 1] for i in range(5))");
  w.line("# S = Q^T K in fp32 PSUM, S_CHUNK keys per matmul");
  w.open("for c in nl.affine_range((kn + S_CHUNK - 1) // S_CHUNK):");
  w.line("cw = min(S_CHUNK, kn - c * S_CHUNK)");
  w.line(
      "nisa.nc_matmul(dst=s_psum[0:rn, zs, c * S_CHUNK:c * S_CHUNK + cw], stationary=q_sb[0:D, "
      "r0:r0 + rn],");
  w.line("               moving=k_sb[0:D, slot, c * S_CHUNK:c * S_CHUNK + cw], accumulate=False)");
  w.close();
  w.line("scores = s_psum[0:rn, zs, 0:kn]");
  if (p.causal) {
    w.open("if k0 + kn - 1 > q0 + r0:  # the tile crosses the diagonal: mask key > row");
    w.line("nisa.tensor_scalar(dst=s_sb[0:rn, 0:kn], data=diag[0:rn, 0:kn], op0=nl.greater,");
    w.line(
        "                   operand0=float(q0 + r0 - k0), op1=nl.multiply, operand1=MASK, "
        "engine=nisa.engine.gpsimd)");
    w.line(
        "nisa.tensor_tensor(dst=s_sb[0:rn, 0:kn], data1=s_sb[0:rn, 0:kn], data2=scores, "
        "op=nl.add,\n                   engine=nisa.engine.vector)");
    w.line("scores = s_sb[0:rn, 0:kn]");
    w.close();
  }
  const char* running = lazy ? "m_run" : "cur";
  w.open("if idx == 0:");
  w.line("nisa.tensor_reduce(dst={}, op=nl.max, data=scores, axis=1, keepdims=True)", running);
  w.close();
  w.open("else:");
  w.line("nisa.tensor_reduce(dst=tile_max, op=nl.max, data=scores, axis=1, keepdims=True)");
  w.line(
      "nisa.tensor_tensor(dst={}, data1={}, data2=tile_max, op=nl.maximum, "
      "engine=nisa.engine.vector)",
      running, lazy ? "m_run" : "old");
  w.close();
  if (lazy) {
    w.line("# lazy: the reference max the exps use (slot cur) moves every RESCALE_EVERY tiles,");
    w.line("# or for the rows whose max grew past the guard");
    w.open("if idx % RESCALE_EVERY == 0:");
    w.line("nisa.tensor_copy(dst=cur, src=m_run, engine=nisa.engine.vector)");
    w.close();
    w.open("else:");
    w.line(
        "nisa.tensor_tensor(dst=diff, data1=m_run, data2=old, op=nl.subtract, "
        "engine=nisa.engine.vector)");
    w.line(
        "nisa.tensor_scalar(dst=alpha, data=diff, op0=nl.multiply, operand0=SCALE, "
        "op1=nl.greater,\n                   operand1=LAZY_GUARD, engine=nisa.engine.vector)");
    w.line(
        "nisa.tensor_tensor(dst=diff, data1=diff, data2=alpha, op=nl.multiply, "
        "engine=nisa.engine.vector)");
    w.line(
        "nisa.tensor_tensor(dst=cur, data1=old, data2=diff, op=nl.add, "
        "engine=nisa.engine.vector)");
    w.close();
  }
  w.line(
      "nisa.tensor_scalar(dst=bias, data=cur, op0=nl.multiply, operand0=-SCALE, "
      "engine=nisa.engine.vector)");
  w.open("if idx > 0:  # O_acc *= exp((old max - new max) * SCALE)");
  w.line("nisa.activation(dst=alpha, op=nl.exp, data=old, scale=SCALE, bias=bias)");
  w.line(
      "nisa.tensor_scalar(dst=acc[0:rn, sub, :], data=acc[0:rn, sub, :], op0=nl.multiply, "
      "operand0=alpha,\n                   engine=nisa.engine.vector)");
  w.close();
  w.line("# P = exp((S - max) * SCALE) in DT, its row sum in fp32 (ScalarE)");
  w.line("nisa.activation(dst=p_sb[0:rn, 0:kn], op=nl.exp, data=scores, scale=SCALE, bias=bias,");
  w.line(
      "                reduce_op=nl.add, reduce_res=l if idx == 0 else row_sum, "
      "reduce_cmd=nisa.reduce_cmd.reset_reduce)");
  w.open("if idx > 0:  # l = l * alpha + row_sum");
  w.line(
      "nisa.scalar_tensor_tensor(dst=l, data=l, op0=nl.multiply, operand0=alpha, op1=nl.add, "
      "operand1=row_sum)");
  w.close();
  w.line("# O_part = P V: P transposed on TensorE a 128-key block at a time, accumulated in PSUM");
  w.line("blocks = (kn + P - 1) // P");
  if (skip) {
    w.open("if idx == kv_count - 1:");
    w.line("blocks -= 1  # FAULT skip_accumulation: the last P V block is lost");
    w.close();
  }
  w.open("for b in nl.affine_range(blocks):");
  w.line("bn = min(P, kn - b * P)");
  w.line("pt = transposes % 2");
  w.line("transposes += 1");
  w.line("nisa.nc_transpose(dst=pt_psum[0:bn, pt, 0:rn], data=p_sb[0:rn, b * P:b * P + bn])");
  w.line(
      "nisa.tensor_copy(dst=pt_sb[0:bn, 0:rn], src=pt_psum[0:bn, pt, 0:rn], "
      "engine=nisa.engine.vector)");
  w.line(
      "nisa.nc_matmul(dst=o_psum[0:rn, 0:D], stationary=pt_sb[0:bn, 0:rn], moving=v_sb[0:bn, "
      "slot, b, 0:D],");
  w.line("               accumulate=b > 0)");
  w.close();
  w.open("if idx == 0:");
  w.line(
      "nisa.tensor_copy(dst=acc[0:rn, sub, :], src=o_psum[0:rn, 0:D], engine=nisa.engine.vector)");
  w.close();
  w.open("else:");
  w.line(
      "nisa.tensor_tensor(dst=acc[0:rn, sub, :], data1=acc[0:rn, sub, :], data2=o_psum[0:rn, "
      "0:D], op=nl.add,\n                   engine=nisa.engine.vector)");
  w.close();
  w.open("if idx == kv_count - 1:  # O = O_acc / l");
  w.line("nisa.reciprocal(dst=row_sum, data=l)");
  w.line(
      "nisa.tensor_scalar(dst=o_stage[0:rn, 0:D], data=acc[0:rn, sub, :], op0=nl.multiply, "
      "operand0=row_sum,\n                   engine=nisa.engine.vector)");
  w.line(fmt::format(
      "nisa.dma_copy(dst=O[{0}q0 + r0:{0}q0 + r0 + rn, 0:D], src=o_stage[0:rn, 0:D])", row));
  w.close(many ? 5 : 4);
  w.line("return O");
  w.close();
  f.kernel = w.text();
  f.reference =
      many ? "def reference(Q, K, V):\n"
             "    \"\"\"O in float64, from the same inputs, head by head.\"\"\"\n"
             "    out = []\n"
             "    for h in range(HEADS):\n"
             "        q, k = Q[h * D:(h + 1) * D], K[h * D:(h + 1) * D]\n"
             "        v = V[h * SEQ:(h + 1) * SEQ].astype(np.float64)\n"
             "        s = q.astype(np.float64).T @ k.astype(np.float64) * SCALE\n"
             "        if CAUSAL:\n"
             "            s = np.where(np.tri(SEQ, dtype=bool), s, -np.inf)\n"
             "        e = np.exp(s - s.max(axis=1, keepdims=True))\n"
             "        out.append((e @ v) / e.sum(axis=1, keepdims=True))\n"
             "    return {\"O\": np.concatenate(out)}\n"
           : "def reference(Q, K, V):\n"
             "    \"\"\"O in float64, from the same inputs.\"\"\"\n"
             "    s = Q.astype(np.float64).T @ K.astype(np.float64) * SCALE\n"
             "    if CAUSAL:\n"
             "        s = np.where(np.tri(SEQ, dtype=bool), s, -np.inf)\n"
             "    e = np.exp(s - s.max(axis=1, keepdims=True))\n"
             "    return {\"O\": (e @ V.astype(np.float64)) / e.sum(axis=1, keepdims=True)}\n";
  out = nki::assemble(f, ctx);
  return "";
}

}  // namespace tessel::sim::attn
