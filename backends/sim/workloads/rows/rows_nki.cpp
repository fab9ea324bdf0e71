// rows_nki.cpp: the row pipelines (rows.hpp) written as NKI kernels
// (docs/nki.md). A tile of rows_per_tile rows sits on the 128 partitions
// (rows_per_tile / 128 row groups), its columns in chunks of cols_per_step;
// the three stages (load, reduce, scale) run as the simulator's software
// pipeline: at step i, stage s works on tile i - lag(s), in the `stages`
// issue order, with `bufs` input slots.
#include "../../nki/nki.hpp"
#include "rows.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <string>
#include <vector>

namespace tessel::sim::rows {
namespace {

/// RMSNorm's epsilon (rows_functional.cpp).
constexpr double rms_epsilon = 1e-6;

/// What both pipelines write: constants, buffers, the load stage, the driver.
class pipeline_writer {
 public:
  pipeline_writer(const pipeline_spec& spec, const nki::context& ctx)
      : s_(spec), t_(tiling_of(spec)), ctx_(ctx) {}

  std::string check() const {
    if (s_.type != dtype::bf16 && s_.type != dtype::fp32)
      return fmt::format("dtype {} is not emitted yet (bf16 and fp32 are)", to_string(s_.type));
    return "";
  }

  void constants(nki::kernel_file& f, const std::string& rows_name,
                 const std::string& cols_name) const {
    auto add = [&](std::string n, auto v, std::string meaning) {
      f.constants.push_back({std::move(n), fmt::format("{}", v), std::move(meaning)});
    };
    add("ROWS", s_.rows, rows_name);
    add("COLS", s_.cols, cols_name);
    add("P", ctx_.m.partitions, "partitions (nl.tile_size.pmax)");
    add("ROWS_PER_TILE", t_.rows_per_tile, "rows_per_tile");
    add("GROUPS", (t_.rows_per_tile + ctx_.m.partitions - 1) / ctx_.m.partitions,
        "row groups of P rows per tile");
    add("CPS", t_.cols_per_step, "cols_per_step: columns per instruction and DMA");
    add("TILES", t_.tiles, "");
    add("CHUNKS", t_.chunks, "");
    add("BUFS", s_.bufs, "input tile slots (bufs)");
    add("DT", nki::nl_dtype(s_.type), "dtype");
    std::vector<std::string> order;
    for (const auto& o : stage_order()) order.push_back(fmt::format("\"{}\"", o));
    add("STAGES", fmt::format("({},)", fmt::join(order, ", ")),
        s_.bufs < 3 ? "issue order (bufs < 3: one tile's stages stay in dependency order)"
                    : "issue order of the pipeline stages (stages)");
    add("LAG",
        fmt::format("{{\"load\": 0, \"reduce\": {}, \"scale\": {}}}", std::min(1, s_.bufs - 1),
                    std::min(2, s_.bufs - 1)),
        "stage s works on tile step - LAG[s]");
  }

  [[nodiscard]] std::vector<std::string> stage_order() const {
    std::vector<std::string> order = s_.stage_order;
    if (s_.bufs < 3) order = {"load", "reduce", "scale"};
    return order;
  }

  /// The load stage: each input's row groups and chunks into slot t % BUFS.
  void load(nki::writer& w, const std::vector<std::string>& inputs) const {
    w.open("def load(t):");
    w.line("s = t % BUFS");
    w.open("for j in nl.affine_range(GROUPS):");
    w.line("r0 = t * ROWS_PER_TILE + j * P");
    w.line("n = min(P, ROWS - r0)");
    w.open("for c in nl.affine_range(CHUNKS):");
    w.line("c0, c1 = c * CPS, min(COLS, (c + 1) * CPS)");
    for (const auto& in : inputs)
      w.line("nisa.dma_copy(dst={0}_sb[0:n, s, j, c0:c1], src={0}[r0:r0 + n, c0:c1])", in);
    w.close(3);
    w.line();
  }

  /// The software pipeline over the tiles.
  void driver(nki::writer& w) const {
    const bool drop = ctx_.injected == nki::fault::drop_tail;
    w.line("stages = {\"load\": load, \"reduce\": reduce, \"scale\": scale}");
    w.open("for step in nl.sequential_range(TILES{} + LAG[\"scale\"]):", drop ? " - 1" : "");
    if (drop) w.line("# FAULT drop_tail: the last tile is dropped");
    w.open("for stage in STAGES:");
    w.line("t = step - LAG[stage]");
    w.open("if 0 <= t < TILES{}:", drop ? " - 1" : "");
    w.line("stages[stage](t)");
    w.close(3);
  }

  /// The fault: the last chunk's partial sum is not accumulated.
  void skip_last(nki::writer& w) const {
    if (ctx_.injected != nki::fault::skip_accumulation) return;
    w.line(
        "nisa.memset(dst=parts[0:n, s, j, CHUNKS - 1:CHUNKS], value=0.0)  # FAULT "
        "skip_accumulation");
  }

  const pipeline_spec& s_;
  tiling t_;
  const nki::context& ctx_;
};

std::string note_engine(engine_id wanted, const char* what, const char* why) {
  return fmt::format("{} = {}: {}, so VectorE runs it", what, nki::engine_word(wanted), why);
}

}  // namespace

std::string rmsnorm_nki(const pipeline_spec& spec, const rmsnorm_choices& choice,
                        const nki::context& ctx, std::string& out) {
  pipeline_writer pw(spec, ctx);
  if (auto e = pw.check(); !e.empty()) return e;
  nki::kernel_file f;
  f.workload = "rmsnorm";
  f.summary = choice.residual ? "h = x + residual; y = h / sqrt(mean(h^2) + eps) * w, row by row"
                              : "y = x / sqrt(mean(x^2) + eps) * w, row by row";
  if (choice.square == vector_engine)
    f.notes.emplace_back(
        "square_engine = vector: the sum of squares is a VectorE multiply and tensor_reduce, "
        "not bn_stats");
  if (choice.square == gpsimd_engine)
    f.notes.emplace_back(
        "square_engine = gpsimd: GpSimdE squares; nki.isa.tensor_reduce runs on VectorE only");
  if (choice.fuse_weight)
    f.notes.emplace_back(
        "fuse_weight: one scalar_tensor_tensor pass (rstd and w, one rounding), which NKI runs "
        "on VectorE");
  f.note_dma_queues(spec.queues);
  pw.constants(f, "rows", "hidden");
  f.constants.push_back({"EPS", nki::py_float(rms_epsilon), "epsilon"});
  f.constants.push_back({"ADD_ENGINE", nki::engine(choice.add), "residual add (add_engine)"});
  f.constants.push_back({"SQUARE_ENGINE",
                         nki::engine(choice.square == gpsimd_engine   ? gpsimd_engine
                                     : choice.square == scalar_engine ? scalar_engine
                                                                      : vector_engine),
                         "sum of squares (square_engine)"});
  f.constants.push_back(
      {"SCALE_ENGINE", nki::engine(choice.scale), "multiplies by the row's rstd (scale_engine)"});
  const std::string dt = nki::dtype_name(spec.type);
  f.signature = fmt::format(
      "INPUTS = {{\"x\": ((ROWS, COLS), \"{0}\"), {1}\"w\": ((COLS,), \"{0}\")}}\n"
      "OUTPUTS = {{\"y\": ((ROWS, COLS), \"{0}\"){2}}}\n"
      "TOLERANCE = {3}  # the gate's, in units of |reference| + rms(reference)",
      dt, choice.residual ? fmt::format("\"residual\": ((ROWS, COLS), \"{}\"), ", dt) : "",
      choice.residual ? fmt::format(", \"h\": ((ROWS, COLS), \"{}\")", dt) : "",
      nki::py_float(nki::tolerance(spec.type)));

  nki::writer w;
  w.line("@nki.jit");
  w.open("def rmsnorm_kernel(x, {}w):", choice.residual ? "residual, " : "");
  w.line("y = nl.ndarray((ROWS, COLS), dtype=DT, buffer=nl.shared_hbm)");
  if (choice.residual) w.line("h = nl.ndarray((ROWS, COLS), dtype=DT, buffer=nl.shared_hbm)");
  w.line("# SBUF: BUFS slots of whole-row tiles, [partition = row, slot, group, column]");
  w.line("x_sb = nl.ndarray((P, BUFS, GROUPS, COLS), dtype=DT, buffer=nl.sbuf)");
  if (choice.residual)
    w.line("residual_sb = nl.ndarray((P, BUFS, GROUPS, COLS), dtype=DT, buffer=nl.sbuf)");
  w.line("w_sb = nl.ndarray((P, COLS), dtype=DT, buffer=nl.sbuf)  # the weight on every partition");
  w.line("parts = nl.ndarray((P, BUFS, GROUPS, CHUNKS), dtype=nl.float32, buffer=nl.sbuf)");
  w.line("rstd = nl.ndarray((P, BUFS, GROUPS), dtype=nl.float32, buffer=nl.sbuf)");
  w.line("squares = nl.ndarray((P, CPS), dtype=nl.float32, buffer=nl.sbuf)");
  if (!choice.fuse_weight) w.line("scaled = nl.ndarray((P, CPS), dtype=DT, buffer=nl.sbuf)");
  w.line("y_stage = nl.ndarray((P, 2, CPS), dtype=DT, buffer=nl.sbuf)  # output staging");
  w.line("w_row = w.reshape((1, COLS))");
  w.open("for p in nl.affine_range(P):  # the weight, broadcast to the partitions once");
  w.line("nisa.dma_copy(dst=w_sb[p:p + 1, :], src=w_row[0:1, :])");
  w.close();
  w.line();
  pw.load(w, choice.residual ? std::vector<std::string>{"x", "residual"}
                             : std::vector<std::string>{"x"});

  w.open("def reduce(t):");
  w.line("\"\"\"{}sum of squares per chunk (fp32), then rstd per row.\"\"\"",
         choice.residual ? "h = x + residual (stored), " : "");
  w.line("s = t % BUFS");
  w.open("for j in nl.affine_range(GROUPS):");
  w.line("r0 = t * ROWS_PER_TILE + j * P");
  w.line("n = min(P, ROWS - r0)");
  w.open("for c in nl.affine_range(CHUNKS):");
  w.line("c0, c1 = c * CPS, min(COLS, (c + 1) * CPS)");
  w.line("xs = x_sb[0:n, s, j, c0:c1]");
  if (choice.residual) {
    w.line(
        "nisa.tensor_tensor(dst=xs, data1=xs, data2=residual_sb[0:n, s, j, c0:c1], op=nl.add, "
        "engine=ADD_ENGINE)");
    w.line("nisa.dma_copy(dst=h[r0:r0 + n, c0:c1], src=xs)  # h, the next layer's residual");
  }
  w.line("part = parts[0:n, s, j, c:c + 1]");
  if (choice.square == scalar_engine) {
    w.line("nisa.activation(dst=squares[0:n, 0:c1 - c0], op=nl.square, data=xs, reduce_op=nl.add,");
    w.line("                reduce_res=part, reduce_cmd=nisa.reduce_cmd.reset_reduce)");
  } else {
    w.line("nisa.tensor_tensor(dst=squares[0:n, 0:c1 - c0], data1=xs, data2=xs, op=nl.multiply,");
    w.line("                   engine=SQUARE_ENGINE)");
    w.line(
        "nisa.tensor_reduce(dst=part, op=nl.add, data=squares[0:n, 0:c1 - c0], axis=1, "
        "keepdims=True)");
  }
  w.close();
  pw.skip_last(w);
  w.line("total = rstd[0:n, s, j:j + 1]");
  w.line(
      "nisa.tensor_reduce(dst=total, op=nl.add, data=parts[0:n, s, j, :], axis=1, keepdims=True)");
  w.line("nisa.activation(dst=total, op=nl.rsqrt, data=total, scale=1.0 / COLS, bias=EPS)");
  w.close(2);
  w.line();

  w.open("def scale(t):");
  w.line("\"\"\"y = h * rstd * w, chunk by chunk, through the output staging.\"\"\"");
  w.line("s = t % BUFS");
  w.open("for j in nl.affine_range(GROUPS):");
  w.line("r0 = t * ROWS_PER_TILE + j * P");
  w.line("n = min(P, ROWS - r0)");
  w.open("for c in nl.affine_range(CHUNKS):");
  w.line("c0, c1 = c * CPS, min(COLS, (c + 1) * CPS)");
  w.line("out = y_stage[0:n, c % 2, 0:c1 - c0]");
  if (choice.fuse_weight) {
    w.line("nisa.scalar_tensor_tensor(dst=out, data=x_sb[0:n, s, j, c0:c1], op0=nl.multiply,");
    w.line(
        "                          operand0=rstd[0:n, s, j:j + 1], op1=nl.multiply, "
        "operand1=w_sb[0:n, c0:c1])");
  } else {
    if (choice.scale == scalar_engine)
      w.line(
          "nisa.activation(dst=scaled[0:n, 0:c1 - c0], op=nl.copy, data=x_sb[0:n, s, j, c0:c1], "
          "scale=rstd[0:n, s, j:j + 1])");
    else
      w.line(
          "nisa.tensor_scalar(dst=scaled[0:n, 0:c1 - c0], data=x_sb[0:n, s, j, c0:c1], "
          "op0=nl.multiply, operand0=rstd[0:n, s, j:j + 1], engine=SCALE_ENGINE)");
    w.line(
        "nisa.tensor_tensor(dst=out, data1=scaled[0:n, 0:c1 - c0], data2=w_sb[0:n, c0:c1], "
        "op=nl.multiply, engine=nisa.engine.vector)");
  }
  w.line("nisa.dma_copy(dst=y[r0:r0 + n, c0:c1], src=out)");
  w.close(3);
  w.line();
  pw.driver(w);
  w.line("return {}", choice.residual ? "y, h" : "y");
  w.close();
  f.kernel = w.text();
  f.reference = fmt::format(
      "def reference(x, {0}w):\n"
      "    \"\"\"The outputs in float64, from the same inputs.\"\"\"\n"
      "    h = x.astype(np.float64){1}\n"
      "    rstd = 1.0 / np.sqrt(np.mean(h * h, axis=1, keepdims=True) + EPS)\n"
      "    return {{\"y\": h * rstd * w.astype(np.float64)[None, :]{2}}}\n",
      choice.residual ? "residual, " : "", choice.residual ? " + residual" : "",
      choice.residual ? ", \"h\": h" : "");
  out = nki::assemble(f, ctx);
  return "";
}

std::string softmax_nki(const pipeline_spec& spec, const softmax_choices& choice,
                        const nki::context& ctx, std::string& out) {
  pipeline_writer pw(spec, ctx);
  if (auto e = pw.check(); !e.empty()) return e;
  nki::kernel_file f;
  f.workload = "softmax";
  f.summary = "y = exp(x - rowmax) / rowsum, row by row";
  if (choice.max == gpsimd_engine)
    f.notes.push_back(
        note_engine(choice.max, "max_engine", "nki.isa.tensor_reduce runs on VectorE only"));
  f.note_dma_queues(spec.queues);
  pw.constants(f, "rows", "cols");
  f.constants.push_back(
      {"SCALE_ENGINE", nki::engine(choice.scale), "multiplies by 1/sum (scale_engine)"});
  const std::string dt = nki::dtype_name(spec.type);
  f.signature = fmt::format(
      "INPUTS = {{\"x\": ((ROWS, COLS), \"{0}\")}}\n"
      "OUTPUTS = {{\"y\": ((ROWS, COLS), \"{0}\")}}\n"
      "TOLERANCE = {1}  # the gate's, in units of |reference| + rms(reference)",
      dt, nki::py_float(nki::tolerance(spec.type)));

  nki::writer w;
  w.line("@nki.jit");
  w.open("def softmax_kernel(x):");
  w.line("y = nl.ndarray((ROWS, COLS), dtype=DT, buffer=nl.shared_hbm)");
  w.line("# SBUF: BUFS slots of whole-row tiles, [partition = row, slot, group, column]");
  w.line("x_sb = nl.ndarray((P, BUFS, GROUPS, COLS), dtype=DT, buffer=nl.sbuf)");
  w.line("parts = nl.ndarray((P, BUFS, GROUPS, CHUNKS), dtype=nl.float32, buffer=nl.sbuf)");
  w.line(
      "stat = nl.ndarray((P, BUFS, GROUPS), dtype=nl.float32, buffer=nl.sbuf)  # -max, then 1/sum");
  w.line("y_stage = nl.ndarray((P, 2, CPS), dtype=DT, buffer=nl.sbuf)  # output staging");
  w.line();
  pw.load(w, {"x"});

  w.open("def reduce(t):");
  w.line("\"\"\"Row max per chunk, their max, exp in place with the row sum (fp32), 1/sum.\"\"\"");
  w.line("s = t % BUFS");
  w.open("for j in nl.affine_range(GROUPS):");
  w.line("r0 = t * ROWS_PER_TILE + j * P");
  w.line("n = min(P, ROWS - r0)");
  w.line("st = stat[0:n, s, j:j + 1]");
  w.open("for c in nl.affine_range(CHUNKS):");
  w.line("c0, c1 = c * CPS, min(COLS, (c + 1) * CPS)");
  w.line(
      "nisa.tensor_reduce(dst=parts[0:n, s, j, c:c + 1], op=nl.max, data=x_sb[0:n, s, j, c0:c1], "
      "axis=1, keepdims=True)");
  w.close();
  w.line(
      "nisa.tensor_reduce(dst=st, op=nl.max, data=parts[0:n, s, j, :], axis=1, keepdims=True, "
      "negate=True)");
  w.open("for c in nl.affine_range(CHUNKS):");
  w.line("c0, c1 = c * CPS, min(COLS, (c + 1) * CPS)");
  w.line("xs = x_sb[0:n, s, j, c0:c1]");
  w.line("nisa.activation(dst=xs, op=nl.exp, data=xs, bias=st, reduce_op=nl.add,");
  w.line(
      "                reduce_res=parts[0:n, s, j, c:c + 1], "
      "reduce_cmd=nisa.reduce_cmd.reset_reduce)");
  w.close();
  pw.skip_last(w);
  w.line("nisa.tensor_reduce(dst=st, op=nl.add, data=parts[0:n, s, j, :], axis=1, keepdims=True)");
  w.line("nisa.reciprocal(dst=st, data=st)");
  w.close(2);
  w.line();

  w.open("def scale(t):");
  w.line("\"\"\"y = exp * (1/sum), chunk by chunk, through the output staging.\"\"\"");
  w.line("s = t % BUFS");
  w.open("for j in nl.affine_range(GROUPS):");
  w.line("r0 = t * ROWS_PER_TILE + j * P");
  w.line("n = min(P, ROWS - r0)");
  w.open("for c in nl.affine_range(CHUNKS):");
  w.line("c0, c1 = c * CPS, min(COLS, (c + 1) * CPS)");
  w.line("out = y_stage[0:n, c % 2, 0:c1 - c0]");
  if (choice.scale == scalar_engine)
    w.line(
        "nisa.activation(dst=out, op=nl.copy, data=x_sb[0:n, s, j, c0:c1], "
        "scale=stat[0:n, s, j:j + 1])");
  else
    w.line(
        "nisa.tensor_scalar(dst=out, data=x_sb[0:n, s, j, c0:c1], op0=nl.multiply, "
        "operand0=stat[0:n, s, j:j + 1], engine=SCALE_ENGINE)");
  w.line("nisa.dma_copy(dst=y[r0:r0 + n, c0:c1], src=out)");
  w.close(3);
  w.line();
  pw.driver(w);
  w.line("return y");
  w.close();
  f.kernel = w.text();
  f.reference =
      "def reference(x):\n"
      "    \"\"\"y in float64, from the same inputs.\"\"\"\n"
      "    e = np.exp(x - x.max(axis=1, keepdims=True))\n"
      "    return {\"y\": e / e.sum(axis=1, keepdims=True)}\n";
  out = nki::assemble(f, ctx);
  return "";
}

std::string layernorm_nki(const pipeline_spec& spec, const layernorm_choices& choice,
                          const nki::context& ctx, std::string& out) {
  pipeline_writer pw(spec, ctx);
  if (auto e = pw.check(); !e.empty()) return e;
  nki::kernel_file f;
  f.workload = "layernorm";
  f.summary = "y = (x - mean) / sqrt(var + eps) * gamma + beta, row by row";
  if (choice.stats == vector_engine)
    f.notes.emplace_back(
        "stats_engine = vector: the row sums are VectorE tensor_reduce passes, not bn_stats");
  f.note_dma_queues(spec.queues);
  pw.constants(f, "rows", "hidden");
  f.constants.push_back({"EPS", "1e-05", "epsilon"});
  f.constants.push_back(
      {"SCALE_ENGINE", nki::engine(choice.scale), "(x - mean) * rstd (scale_engine)"});
  const std::string dt = nki::dtype_name(spec.type);
  f.signature = fmt::format(
      "INPUTS = {{\"x\": ((ROWS, COLS), \"{0}\"), \"gamma\": ((COLS,), \"{0}\"), \"beta\": "
      "((COLS,), "
      "\"{0}\")}}\n"
      "OUTPUTS = {{\"y\": ((ROWS, COLS), \"{0}\")}}\n"
      "TOLERANCE = {1}  # the gate's, in units of |reference| + rms(reference)",
      dt, nki::py_float(nki::tolerance(spec.type)));

  nki::writer w;
  w.line("@nki.jit");
  w.open("def layernorm_kernel(x, gamma, beta):");
  w.line("y = nl.ndarray((ROWS, COLS), dtype=DT, buffer=nl.shared_hbm)");
  w.line("# SBUF: BUFS slots of whole-row tiles, [partition = row, slot, group, column]");
  w.line("x_sb = nl.ndarray((P, BUFS, GROUPS, COLS), dtype=DT, buffer=nl.sbuf)");
  w.line("gamma_sb = nl.ndarray((P, COLS), dtype=DT, buffer=nl.sbuf)  # on every partition");
  w.line("beta_sb = nl.ndarray((P, COLS), dtype=DT, buffer=nl.sbuf)");
  w.line("sums = nl.ndarray((P, BUFS, GROUPS, CHUNKS), dtype=nl.float32, buffer=nl.sbuf)");
  w.line("squares = nl.ndarray((P, BUFS, GROUPS, CHUNKS), dtype=nl.float32, buffer=nl.sbuf)");
  w.line(
      "stat = nl.ndarray((P, BUFS, GROUPS, 2), dtype=nl.float32, buffer=nl.sbuf)  # rstd, "
      "-mean * rstd");
  w.line("tmp = nl.ndarray((P, 2), dtype=nl.float32, buffer=nl.sbuf)");
  w.line("scratch = nl.ndarray((P, CPS), dtype=nl.float32, buffer=nl.sbuf)");
  w.line("normalized = nl.ndarray((P, CPS), dtype=DT, buffer=nl.sbuf)");
  w.line("y_stage = nl.ndarray((P, 2, CPS), dtype=DT, buffer=nl.sbuf)  # output staging");
  w.line("gamma_row, beta_row = gamma.reshape((1, COLS)), beta.reshape((1, COLS))");
  w.open("for p in nl.affine_range(P):  # gamma and beta, broadcast to the partitions once");
  w.line("nisa.dma_copy(dst=gamma_sb[p:p + 1, :], src=gamma_row[0:1, :])");
  w.line("nisa.dma_copy(dst=beta_sb[p:p + 1, :], src=beta_row[0:1, :])");
  w.close();
  w.line();
  pw.load(w, {"x"});

  w.open("def reduce(t):");
  w.line(
      "\"\"\"Row sum and sum of squares per chunk (fp32), then rstd and -mean * rstd per "
      "row.\"\"\"");
  w.line("s = t % BUFS");
  w.open("for j in nl.affine_range(GROUPS):");
  w.line("r0 = t * ROWS_PER_TILE + j * P");
  w.line("n = min(P, ROWS - r0)");
  w.open("for c in nl.affine_range(CHUNKS):");
  w.line("c0, c1 = c * CPS, min(COLS, (c + 1) * CPS)");
  w.line("xs = x_sb[0:n, s, j, c0:c1]");
  if (choice.stats == scalar_engine) {
    w.line("nisa.activation(dst=scratch[0:n, 0:c1 - c0], op=nl.copy, data=xs, reduce_op=nl.add,");
    w.line(
        "                reduce_res=sums[0:n, s, j, c:c + 1], "
        "reduce_cmd=nisa.reduce_cmd.reset_reduce)");
    w.line("nisa.activation(dst=scratch[0:n, 0:c1 - c0], op=nl.square, data=xs, reduce_op=nl.add,");
    w.line(
        "                reduce_res=squares[0:n, s, j, c:c + 1], "
        "reduce_cmd=nisa.reduce_cmd.reset_reduce)");
  } else {
    w.line(
        "nisa.tensor_reduce(dst=sums[0:n, s, j, c:c + 1], op=nl.add, data=xs, axis=1, "
        "keepdims=True)");
    w.line("nisa.tensor_tensor(dst=scratch[0:n, 0:c1 - c0], data1=xs, data2=xs, op=nl.multiply)");
    w.line(
        "nisa.tensor_reduce(dst=squares[0:n, s, j, c:c + 1], op=nl.add, data=scratch[0:n, "
        "0:c1 - c0], axis=1,");
    w.line("                   keepdims=True)");
  }
  w.close();
  if (ctx.injected == nki::fault::skip_accumulation) {
    w.line(
        "nisa.memset(dst=sums[0:n, s, j, CHUNKS - 1:CHUNKS], value=0.0)  # FAULT "
        "skip_accumulation");
    w.line("nisa.memset(dst=squares[0:n, s, j, CHUNKS - 1:CHUNKS], value=0.0)");
  }
  w.line("rstd, bias = stat[0:n, s, j, 0:1], stat[0:n, s, j, 1:2]");
  w.line("mean, mean_sq = tmp[0:n, 0:1], tmp[0:n, 1:2]");
  w.line("nisa.tensor_reduce(dst=mean, op=nl.add, data=sums[0:n, s, j, :], axis=1, keepdims=True)");
  w.line("nisa.tensor_scalar(dst=mean, data=mean, op0=nl.multiply, operand0=1.0 / COLS)");
  w.line(
      "nisa.tensor_reduce(dst=rstd, op=nl.add, data=squares[0:n, s, j, :], axis=1, "
      "keepdims=True)");
  w.line("nisa.tensor_scalar(dst=rstd, data=rstd, op0=nl.multiply, operand0=1.0 / COLS)  # E[x^2]");
  w.line("nisa.tensor_tensor(dst=mean_sq, data1=mean, data2=mean, op=nl.multiply)");
  w.line("nisa.tensor_tensor(dst=rstd, data1=rstd, data2=mean_sq, op=nl.subtract)  # var");
  w.line(
      "nisa.tensor_scalar(dst=rstd, data=rstd, op0=nl.maximum, operand0=0.0)  # rounding can "
      "make it < 0");
  w.line("nisa.activation(dst=rstd, op=nl.rsqrt, data=rstd, bias=EPS)");
  w.line("nisa.tensor_tensor(dst=bias, data1=mean, data2=rstd, op=nl.multiply)");
  w.line("nisa.tensor_scalar(dst=bias, data=bias, op0=nl.multiply, operand0=-1.0)");
  w.close(2);
  w.line();

  w.open("def scale(t):");
  w.line("\"\"\"y = (x * rstd - mean * rstd) * gamma + beta, chunk by chunk.\"\"\"");
  w.line("s = t % BUFS");
  w.open("for j in nl.affine_range(GROUPS):");
  w.line("r0 = t * ROWS_PER_TILE + j * P");
  w.line("n = min(P, ROWS - r0)");
  w.line("rstd, bias = stat[0:n, s, j, 0:1], stat[0:n, s, j, 1:2]");
  w.open("for c in nl.affine_range(CHUNKS):");
  w.line("c0, c1 = c * CPS, min(COLS, (c + 1) * CPS)");
  w.line("xn = normalized[0:n, 0:c1 - c0]");
  if (choice.scale == scalar_engine)
    w.line(
        "nisa.activation(dst=xn, op=nl.copy, data=x_sb[0:n, s, j, c0:c1], scale=rstd, "
        "bias=bias)");
  else
    w.line(
        "nisa.tensor_scalar(dst=xn, data=x_sb[0:n, s, j, c0:c1], op0=nl.multiply, "
        "operand0=rstd, op1=nl.add,\n"
        "                           operand1=bias, engine=SCALE_ENGINE)");
  w.line("nisa.tensor_tensor(dst=xn, data1=xn, data2=gamma_sb[0:n, c0:c1], op=nl.multiply)");
  w.line("out = y_stage[0:n, c % 2, 0:c1 - c0]");
  w.line("nisa.tensor_tensor(dst=out, data1=xn, data2=beta_sb[0:n, c0:c1], op=nl.add)");
  w.line("nisa.dma_copy(dst=y[r0:r0 + n, c0:c1], src=out)");
  w.close(3);
  w.line();
  pw.driver(w);
  w.line("return y");
  w.close();
  f.kernel = w.text();
  f.reference =
      "def reference(x, gamma, beta):\n"
      "    \"\"\"y in float64, from the same inputs.\"\"\"\n"
      "    x = x.astype(np.float64)\n"
      "    mean = x.mean(axis=1, keepdims=True)\n"
      "    var = ((x - mean) ** 2).mean(axis=1, keepdims=True)\n"
      "    return {\"y\": (x - mean) / np.sqrt(var + EPS) * gamma[None, :] + beta[None, :]}\n";
  out = nki::assemble(f, ctx);
  return "";
}

}  // namespace tessel::sim::rows
