// rows_nki.cpp: the row pipelines (rows.hpp) written as NKI kernels
// (docs/nki.md), instruction for instruction what rows.cpp lowers: a tile
// of rows_per_tile rows lies G = rows_per_tile / 128 rows to a partition
// (rows r0 + p * G + g: the HBM tensors are viewed as [rows / G, G, cols]),
// so one DMA moves a chunk of cols_per_step columns of the whole tile; the
// per-chunk compute instructions run row group by row group (per-row
// operands are per partition), the per-tile ones on the [partitions, G]
// per-row values; the three stages (load, reduce, scale) run as the
// simulator's software pipeline: at step i, stage s works on tile
// i - lag(s), in the `stages` issue order, with `bufs` input slots.
// Broadcast vectors (RMSNorm's weight, LayerNorm's gamma and beta) reach the
// partitions as the lowering moves them: one row from HBM, then doubled.
#include "../../nki/nki.hpp"
#include "rows.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tessel::sim::rows {
namespace {

/// RMSNorm's epsilon (rows_functional.cpp).
constexpr double rms_epsilon = 1e-6;

/// What every pipeline writes: constants, views, broadcasts, the load stage, the driver.
class pipeline_writer {
 public:
  pipeline_writer(const pipeline_spec& spec, const nki::context& ctx)
      : s_(spec), t_(tiling_of(spec)), ctx_(ctx) {}

  /// Starts kernel file `f` of `workload` (what it computes: `summary`): its
  /// DMA queues and the pipeline's constants, the shape's named `rows_name`
  /// and `cols_name` as the space names them.
  void begin(nki::kernel_file& f, std::string workload, std::string summary,
             const std::string& rows_name, const std::string& cols_name) const {
    f.workload = std::move(workload);
    f.summary = std::move(summary);
    f.note_dma_queues(s_.queues);
    auto add = [&](std::string n, auto v, std::string meaning) {
      f.constants.push_back({std::move(n), fmt::format("{}", v), std::move(meaning)});
    };
    const std::int64_t groups = (t_.rows_per_tile + ctx_.m.partitions - 1) / ctx_.m.partitions;
    add("ROWS", s_.rows, rows_name);
    add("COLS", s_.cols, cols_name);
    add("P", ctx_.m.partitions, "partitions (nl.tile_size.pmax)");
    add("ROWS_PER_TILE", t_.rows_per_tile, "rows_per_tile");
    add("G", groups, "rows of a tile per partition (row groups)");
    add("TILE_PARTS", t_.rows_per_tile / groups, "partitions of a full tile");
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

  /// `<name>v = <name>.reshape((ROWS // G, G, COLS))` for each HBM tensor.
  static void views(nki::writer& w, const std::vector<std::string>& names) {
    for (const auto& n : names) w.line("{0}v = {0}.reshape((ROWS // G, G, COLS))", n);
  }

  /// A vector of COLS into `dst` [P, COLS] on every partition: one row from
  /// HBM into partition 0, then partitions [0, n) copied to [n, 2n).
  static void broadcast(nki::writer& w, const std::string& dst, const std::string& src) {
    w.line("nisa.dma_copy(dst={}[0:1, :], src={}.reshape((1, COLS))[0:1, :])", dst, src);
    w.open("for have in (1 << i for i in range((P - 1).bit_length())):  # doubled on chip");
    w.line("n = min(have, P - have)");
    w.line("nisa.dma_copy(dst={0}[have:have + n, :], src={0}[0:n, :])", dst);
    w.close();
  }

  /// The first lines of a stage function: slot, first partition row, partitions.
  static void tile_lines(nki::writer& w) {
    w.line("s = t % BUFS");
    w.line("q0 = t * TILE_PARTS  # the tile's first row of the [ROWS // G, G, COLS] view");
    w.line("n = min(TILE_PARTS, ROWS // G - q0)");
  }

  static void chunk_lines(nki::writer& w) {
    w.line("c0, c1 = c * CPS, min(COLS, (c + 1) * CPS)");
    w.line("cw = c1 - c0");
  }

  /// The load stage: each chunk of each input into slot t % BUFS, one DMA each.
  static void load(nki::writer& w, const std::vector<std::string>& inputs) {
    w.open("def load(t):");
    tile_lines(w);
    w.open("for c in nl.affine_range(CHUNKS):");
    w.line("c0, c1 = c * CPS, min(COLS, (c + 1) * CPS)");
    for (const auto& in : inputs)
      w.line("nisa.dma_copy(dst={0}_sb[0:n, s, :, c0:c1], src={0}v[q0:q0 + n, :, c0:c1])", in);
    w.close(2);
    w.line();
  }

  /// The next output staging slot (the lowering's per-chunk rotation).
  static void stage_slot(nki::writer& w) {
    w.line("nonlocal stages");
    w.line("slot = stages % 2");
    w.line("stages += 1");
  }

  /// Opens stage function `name` (its docstring `doc`) through its loop over
  /// the chunks.
  static void open_stage(nki::writer& w, std::string_view name, std::string_view doc) {
    w.open("def {}(t):", name);
    w.line("\"\"\"{}\"\"\"", doc);
    tile_lines(w);
    w.open("for c in nl.affine_range(CHUNKS):");
  }

  /// Opens the scale stage (its docstring `doc`) through its loop over the
  /// row groups of a chunk, with the chunk's output staging slot.
  static void open_scale(nki::writer& w, std::string_view doc) {
    open_stage(w, "scale", doc);
    chunk_lines(w);
    stage_slot(w);
    w.open("for g in nl.affine_range(G):");
  }

  /// Closes the scale stage opened by open_scale() with the store of the
  /// chunk's staged y, writes the driver and `return <returns>`, sets
  /// f.kernel to the kernel's text and f.reference to `reference` (the
  /// float64 reference function), and assembles the file into `out`: "".
  [[nodiscard]] std::string finish(nki::writer& w, nki::kernel_file& f, std::string_view returns,
                                   std::string reference, std::string& out) const {
    w.close();
    w.line("nisa.dma_copy(dst=yv[q0:q0 + n, :, c0:c1], src=y_stage[0:n, slot, :, 0:cw])");
    w.close(2);
    w.line();
    driver(w);
    w.line("return {}", returns);
    w.close();
    f.kernel = w.text();
    f.reference = std::move(reference);
    out = nki::assemble(f, ctx_);
    return "";
  }

  /// The software pipeline over the tiles.
  void driver(nki::writer& w) const {
    const bool drop = ctx_.injected == nki::fault::drop_tail;
    w.line("stages = 0  # output staging slots used (trace-time)");
    w.line("run = {\"load\": load, \"reduce\": reduce, \"scale\": scale}");
    w.open("for step in nl.sequential_range(TILES{} + LAG[\"scale\"]):", drop ? " - 1" : "");
    if (drop) w.line("# FAULT drop_tail: the last tile is dropped");
    w.open("for stage in STAGES:");
    w.line("t = step - LAG[stage]");
    w.open("if 0 <= t < TILES{}:", drop ? " - 1" : "");
    w.line("run[stage](t)");
    w.close(3);
  }

  /// The fault: the last chunk's partial sums are zeroed before they are combined.
  void skip_last(nki::writer& w, const std::string& parts) const {
    if (ctx_.injected != nki::fault::skip_accumulation) return;
    w.line(
        "nisa.memset(dst={}[0:n, s, :, CHUNKS - 1:CHUNKS], value=0.0, engine=nisa.engine.vector)"
        "  # FAULT skip_accumulation",
        parts);
  }

  const pipeline_spec& s_;
  tiling t_;
  const nki::context& ctx_;
};

std::string tolerance_line(dtype t) {
  return fmt::format("TOLERANCE = {}  # the gate's, in units of |reference| + rms(reference)",
                     nki::py_float(nki::tolerance(t)));
}

/// A row-wise kernel's output in shared HBM (the split cuts its rows).
constexpr const char* row_output = "nl.ndarray((ROWS, COLS), dtype=DT, buffer=nl.shared_hbm)";

}  // namespace

std::string rmsnorm_nki(const pipeline_spec& spec, const rmsnorm_choices& choice,
                        const nki::context& ctx, std::string& out) {
  pipeline_writer pw(spec, ctx);
  nki::kernel_file f;
  pw.begin(f, "rmsnorm",
           choice.residual ? "h = x + residual; y = h / sqrt(mean(h^2) + eps) * w, row by row"
                           : "y = x / sqrt(mean(x^2) + eps) * w, row by row",
           "rows", "hidden");
  f.constants.push_back({"EPS", nki::py_float(rms_epsilon), "epsilon"});
  f.constants.push_back({"ADD_ENGINE", nki::engine(choice.add), "residual add (add_engine)"});
  f.constants.push_back({"SQUARE_ENGINE", nki::engine(choice.square), "squares (square_engine)"});
  const std::string dt = nki::dtype_name(spec.type);
  f.signature = fmt::format(
      "INPUTS = {{\"x\": ((ROWS, COLS), \"{0}\"), {1}\"w\": ((COLS,), \"{0}\")}}\n"
      "OUTPUTS = {{\"y\": ((ROWS, COLS), \"{0}\"){2}}}\n{3}",
      dt, choice.residual ? fmt::format("\"residual\": ((ROWS, COLS), \"{}\"), ", dt) : "",
      choice.residual ? fmt::format(", \"h\": ((ROWS, COLS), \"{}\")", dt) : "",
      tolerance_line(spec.type));

  // the core split cuts the rows of x, residual, y and h
  f.inputs = {{"x", 2, 0, ""}};
  if (choice.residual) f.inputs.push_back({"residual", 2, 0, ""});
  f.inputs.push_back({"w", 1, -1, ""});
  f.outputs = {{"y", 2, 0, row_output}};
  if (choice.residual) f.outputs.push_back({"h", 2, 0, row_output});
  nki::writer w;
  nki::open_kernel(w, f, ctx);
  pipeline_writer::views(w, choice.residual ? std::vector<std::string>{"x", "residual", "y", "h"}
                                            : std::vector<std::string>{"x", "y"});
  w.line("# SBUF: BUFS slots of whole-row tiles, [partition, slot, row group, column]");
  w.line("x_sb = nl.ndarray((P, BUFS, G, COLS), dtype=DT, buffer=nl.sbuf)");
  if (choice.residual)
    w.line("residual_sb = nl.ndarray((P, BUFS, G, COLS), dtype=DT, buffer=nl.sbuf)");
  w.line("w_sb = nl.ndarray((P, COLS), dtype=DT, buffer=nl.sbuf)  # the weight on every partition");
  w.line(
      "parts = nl.ndarray((P, BUFS, G, CHUNKS), dtype=nl.float32, buffer=nl.sbuf)  # sums of h^2");
  w.line("rstd = nl.ndarray((P, BUFS, G), dtype=nl.float32, buffer=nl.sbuf)");
  w.line("squares = nl.ndarray((P, 2, CPS), dtype=nl.float32, buffer=nl.sbuf)");
  if (!choice.fuse_weight) w.line("scaled = nl.ndarray((P, 2, CPS), dtype=DT, buffer=nl.sbuf)");
  w.line("y_stage = nl.ndarray((P, 2, G, CPS), dtype=DT, buffer=nl.sbuf)  # output staging");
  pipeline_writer::broadcast(w, "w_sb", "w");
  w.line();
  pw.load(w, choice.residual ? std::vector<std::string>{"x", "residual"}
                             : std::vector<std::string>{"x"});

  pipeline_writer::open_stage(
      w, "reduce",
      fmt::format("{}the sum of squares per chunk and row (fp32), then rstd per row.",
                  choice.residual ? "h = x + residual (stored), " : ""));
  pipeline_writer::chunk_lines(w);
  if (choice.residual) {
    w.open("for g in nl.affine_range(G):");
    w.line(
        "nisa.tensor_tensor(dst=x_sb[0:n, s, g, c0:c1], data1=x_sb[0:n, s, g, c0:c1],\n"
        "                   data2=residual_sb[0:n, s, g, c0:c1], op=nl.add, engine=ADD_ENGINE)");
    w.close();
    w.line("nisa.dma_copy(dst=hv[q0:q0 + n, :, c0:c1], src=x_sb[0:n, s, :, c0:c1])  # h");
  }
  w.open("for g in nl.affine_range(G):");
  w.line("xs, sq = x_sb[0:n, s, g, c0:c1], squares[0:n, g % 2, 0:cw]");
  if (choice.square == scalar_engine) {
    w.line("nisa.activation(dst=sq, op=nl.square, data=xs, reduce_op=nl.add,");
    w.line(
        "                reduce_res=parts[0:n, s, g, c:c + 1], "
        "reduce_cmd=nisa.reduce_cmd.reset_reduce)");
  } else {
    w.line("nisa.tensor_tensor(dst=sq, data1=xs, data2=xs, op=nl.multiply, engine=SQUARE_ENGINE)");
    w.line(
        "nisa.tensor_reduce(dst=parts[0:n, s, g, c:c + 1], op=nl.add, data=sq, axis=1, "
        "keepdims=True)");
  }
  w.close(2);
  pw.skip_last(w, "parts");
  w.line("nisa.tensor_reduce(dst=rstd[0:n, s, :], op=nl.add, data=parts[0:n, s, :, :], axis=2)");
  w.line(
      "nisa.activation(dst=rstd[0:n, s, :], op=nl.rsqrt, data=rstd[0:n, s, :], scale=1.0 / COLS, "
      "bias=EPS)");
  w.close();
  w.line();

  pipeline_writer::open_scale(w, "y = h * rstd * w, chunk by chunk, through the output staging.");
  w.line("xs, out, r = x_sb[0:n, s, g, c0:c1], y_stage[0:n, slot, g, 0:cw], rstd[0:n, s, g:g + 1]");
  if (choice.fuse_weight) {
    w.line("# fuse_weight: (h * rstd) * w in one VectorE pass");
    w.line(
        "nisa.scalar_tensor_tensor(dst=out, data=xs, op0=nl.multiply, operand0=r, "
        "op1=nl.multiply,\n"
        "                          operand1=w_sb[0:n, c0:c1])");
  } else {
    w.line("sc = scaled[0:n, g % 2, 0:cw]");
    if (choice.scale == scalar_engine)
      w.line("nisa.activation(dst=sc, op=nl.copy, data=xs, scale=r)");
    else
      w.line(
          "nisa.tensor_scalar(dst=sc, data=xs, op0=nl.multiply, operand0=r, "
          "engine=nisa.engine.vector)");
    w.line(
        "nisa.tensor_tensor(dst=out, data1=sc, data2=w_sb[0:n, c0:c1], op=nl.multiply, "
        "engine=nisa.engine.vector)");
  }
  return pw.finish(
      w, f, choice.residual ? "y, h" : "y",
      fmt::format("def reference(x, {0}w):\n"
                  "    \"\"\"The outputs in float64, from the same inputs.\"\"\"\n"
                  "    h = x.astype(np.float64){1}\n"
                  "    rstd = 1.0 / np.sqrt(np.mean(h * h, axis=1, keepdims=True) + EPS)\n"
                  "    return {{\"y\": h * rstd * w.astype(np.float64)[None, :]{2}}}\n",
                  choice.residual ? "residual, " : "", choice.residual ? " + residual" : "",
                  choice.residual ? ", \"h\": h" : ""),
      out);
}

std::string softmax_nki(const pipeline_spec& spec, const softmax_choices& choice,
                        const nki::context& ctx, std::string& out) {
  pipeline_writer pw(spec, ctx);
  nki::kernel_file f;
  pw.begin(f, "softmax", "y = exp(x - rowmax) / rowsum, row by row", "rows", "cols");
  f.constants.push_back(
      {"SCALE_ENGINE", nki::engine(choice.scale), "multiplies by 1/sum (scale_engine)"});
  const std::string dt = nki::dtype_name(spec.type);
  f.signature = fmt::format(
      "INPUTS = {{\"x\": ((ROWS, COLS), \"{0}\")}}\n"
      "OUTPUTS = {{\"y\": ((ROWS, COLS), \"{0}\")}}\n{1}",
      dt, tolerance_line(spec.type));

  f.inputs = {{"x", 2, 0, ""}};  // the core split cuts the rows of x and y
  f.outputs = {{"y", 2, 0, row_output}};
  nki::writer w;
  nki::open_kernel(w, f, ctx);
  pipeline_writer::views(w, {"x", "y"});
  w.line("# SBUF: BUFS slots of whole-row tiles, [partition, slot, row group, column]");
  w.line("x_sb = nl.ndarray((P, BUFS, G, COLS), dtype=DT, buffer=nl.sbuf)");
  w.line("parts = nl.ndarray((P, BUFS, G, CHUNKS), dtype=nl.float32, buffer=nl.sbuf)");
  w.line("stat = nl.ndarray((P, BUFS, G), dtype=nl.float32, buffer=nl.sbuf)  # -max, then 1/sum");
  w.line("y_stage = nl.ndarray((P, 2, G, CPS), dtype=DT, buffer=nl.sbuf)  # output staging");
  w.line();
  pw.load(w, {"x"});

  pipeline_writer::open_stage(
      w, "reduce",
      "Row max per chunk, -max per row, exp in place with the row sums (fp32), 1/sum.");
  w.line("c0, c1 = c * CPS, min(COLS, (c + 1) * CPS)");
  w.open("for g in nl.affine_range(G):");
  w.line(
      "nisa.tensor_reduce(dst=parts[0:n, s, g, c:c + 1], op=nl.max, data=x_sb[0:n, s, g, "
      "c0:c1],\n"
      "                   axis=1, keepdims=True)");
  w.close(2);
  w.line(
      "nisa.tensor_reduce(dst=stat[0:n, s, :], op=nl.max, data=parts[0:n, s, :, :], axis=2, "
      "negate=True)");
  w.open("for c in nl.affine_range(CHUNKS):");
  w.line("c0, c1 = c * CPS, min(COLS, (c + 1) * CPS)");
  w.open("for g in nl.affine_range(G):");
  w.line("xs = x_sb[0:n, s, g, c0:c1]");
  w.line(
      "nisa.activation(dst=xs, op=nl.exp, data=xs, bias=stat[0:n, s, g:g + 1], reduce_op=nl.add,");
  w.line(
      "                reduce_res=parts[0:n, s, g, c:c + 1], "
      "reduce_cmd=nisa.reduce_cmd.reset_reduce)");
  w.close(2);
  pw.skip_last(w, "parts");
  w.line("nisa.tensor_reduce(dst=stat[0:n, s, :], op=nl.add, data=parts[0:n, s, :, :], axis=2)");
  w.line("nisa.reciprocal(dst=stat[0:n, s, :], data=stat[0:n, s, :])");
  w.close();
  w.line();

  pipeline_writer::open_scale(w, "y = exp * (1/sum), chunk by chunk, through the output staging.");
  w.line("xs, out, r = x_sb[0:n, s, g, c0:c1], y_stage[0:n, slot, g, 0:cw], stat[0:n, s, g:g + 1]");
  if (choice.scale == scalar_engine)
    w.line("nisa.activation(dst=out, op=nl.copy, data=xs, scale=r)");
  else
    w.line(
        "nisa.tensor_scalar(dst=out, data=xs, op0=nl.multiply, operand0=r, engine=SCALE_ENGINE)");
  return pw.finish(w, f, "y",
                   "def reference(x):\n"
                   "    \"\"\"y in float64, from the same inputs.\"\"\"\n"
                   "    e = np.exp(x - x.max(axis=1, keepdims=True))\n"
                   "    return {\"y\": e / e.sum(axis=1, keepdims=True)}\n",
                   out);
}

std::string layernorm_nki(const pipeline_spec& spec, const layernorm_choices& choice,
                          const nki::context& ctx, std::string& out) {
  pipeline_writer pw(spec, ctx);
  nki::kernel_file f;
  pw.begin(f, "layernorm", "y = (x - mean) / sqrt(var + eps) * gamma + beta, row by row", "rows",
           "hidden");
  f.constants.push_back({"EPS", "1e-05", "epsilon"});
  const std::string dt = nki::dtype_name(spec.type);
  f.signature = fmt::format(
      "INPUTS = {{\"x\": ((ROWS, COLS), \"{0}\"), \"gamma\": ((COLS,), \"{0}\"), \"beta\": "
      "((COLS,), \"{0}\")}}\n"
      "OUTPUTS = {{\"y\": ((ROWS, COLS), \"{0}\")}}\n{1}",
      dt, tolerance_line(spec.type));

  // the core split cuts the rows of x and y
  f.inputs = {{"x", 2, 0, ""}, {"gamma", 1, -1, ""}, {"beta", 1, -1, ""}};
  f.outputs = {{"y", 2, 0, row_output}};
  nki::writer w;
  nki::open_kernel(w, f, ctx);
  pipeline_writer::views(w, {"x", "y"});
  w.line("# SBUF: BUFS slots of whole-row tiles, [partition, slot, row group, column]");
  w.line("x_sb = nl.ndarray((P, BUFS, G, COLS), dtype=DT, buffer=nl.sbuf)");
  w.line("gamma_sb = nl.ndarray((P, COLS), dtype=DT, buffer=nl.sbuf)  # on every partition");
  w.line("beta_sb = nl.ndarray((P, COLS), dtype=DT, buffer=nl.sbuf)");
  w.line("sums = nl.ndarray((P, BUFS, G, CHUNKS), dtype=nl.float32, buffer=nl.sbuf)");
  w.line("squares = nl.ndarray((P, BUFS, G, CHUNKS), dtype=nl.float32, buffer=nl.sbuf)");
  w.line("rstd = nl.ndarray((P, BUFS, G), dtype=nl.float32, buffer=nl.sbuf)");
  w.line("bias = nl.ndarray((P, BUFS, G), dtype=nl.float32, buffer=nl.sbuf)  # -mean * rstd");
  w.line("tmp = nl.ndarray((P, 3, G), dtype=nl.float32, buffer=nl.sbuf)  # per-row scratch");
  w.line("scratch = nl.ndarray((P, 2, CPS), dtype=nl.float32, buffer=nl.sbuf)");
  w.line("normalized = nl.ndarray((P, 2, CPS), dtype=nl.float32, buffer=nl.sbuf)  # y rounds once");
  w.line("y_stage = nl.ndarray((P, 2, G, CPS), dtype=DT, buffer=nl.sbuf)  # output staging");
  pipeline_writer::broadcast(w, "gamma_sb", "gamma");
  pipeline_writer::broadcast(w, "beta_sb", "beta");
  w.line();
  pw.load(w, {"x"});

  pipeline_writer::open_stage(
      w, "reduce",
      "Row sums and sums of squares per chunk (fp32), then rstd and -mean * rstd per row.");
  pipeline_writer::chunk_lines(w);
  w.open("for g in nl.affine_range(G):");
  w.line("xs, sc = x_sb[0:n, s, g, c0:c1], scratch[0:n, g % 2, 0:cw]");
  if (choice.stats == scalar_engine) {
    for (const auto& [fn, dst] : {std::pair{"copy", "sums"}, std::pair{"square", "squares"}}) {
      w.line("nisa.activation(dst=sc, op=nl.{}, data=xs, reduce_op=nl.add,", fn);
      w.line(
          "                reduce_res={}[0:n, s, g, c:c + 1], "
          "reduce_cmd=nisa.reduce_cmd.reset_reduce)",
          dst);
    }
  } else {
    w.line(
        "nisa.tensor_reduce(dst=sums[0:n, s, g, c:c + 1], op=nl.add, data=xs, axis=1, "
        "keepdims=True)");
    w.line(
        "nisa.tensor_tensor(dst=sc, data1=xs, data2=xs, op=nl.multiply, "
        "engine=nisa.engine.vector)");
    w.line(
        "nisa.tensor_reduce(dst=squares[0:n, s, g, c:c + 1], op=nl.add, data=sc, axis=1, "
        "keepdims=True)");
  }
  w.close(2);
  if (ctx.injected == nki::fault::skip_accumulation) {
    pw.skip_last(w, "sums");
    pw.skip_last(w, "squares");
  }
  w.line("s1, s2, nm2 = tmp[0:n, 0, :], tmp[0:n, 1, :], tmp[0:n, 2, :]");
  w.line("r, b = rstd[0:n, s, :], bias[0:n, s, :]");
  w.line("nisa.tensor_reduce(dst=s1, op=nl.add, data=sums[0:n, s, :, :], axis=2)");
  w.line("nisa.tensor_reduce(dst=s2, op=nl.add, data=squares[0:n, s, :, :], axis=2)");
  w.line(
      "nisa.scalar_tensor_tensor(dst=nm2, data=s1, op0=nl.multiply, operand0=-1.0 / (COLS * COLS),"
      "\n                          op1=nl.multiply, operand1=s1)  # -mean^2");
  w.line(
      "nisa.scalar_tensor_tensor(dst=r, data=s2, op0=nl.multiply, operand0=1.0 / COLS, "
      "op1=nl.add,\n                          operand1=nm2)  # var");
  w.line(
      "nisa.tensor_scalar(dst=r, data=r, op0=nl.maximum, operand0=0.0, engine=nisa.engine.vector)"
      "  # rounding can make it < 0");
  w.line("nisa.activation(dst=r, op=nl.rsqrt, data=r, bias=EPS)");
  w.line(
      "nisa.scalar_tensor_tensor(dst=b, data=s1, op0=nl.multiply, operand0=-1.0 / COLS, "
      "op1=nl.multiply,\n                          operand1=r)  # -mean * rstd");
  w.close();
  w.line();

  pipeline_writer::open_scale(w, "y = (x * rstd - mean * rstd) * gamma + beta, chunk by chunk.");
  w.line("xs, xn = x_sb[0:n, s, g, c0:c1], normalized[0:n, g % 2, 0:cw]");
  w.line("r, b = rstd[0:n, s, g:g + 1], bias[0:n, s, g:g + 1]");
  if (choice.scale == scalar_engine)
    w.line("nisa.activation(dst=xn, op=nl.copy, data=xs, scale=r, bias=b)");
  else
    w.line(
        "nisa.tensor_scalar(dst=xn, data=xs, op0=nl.multiply, operand0=r, op1=nl.add, "
        "operand1=b,\n"
        "                   engine=nisa.engine.vector)");
  w.line(
      "nisa.tensor_tensor(dst=xn, data1=xn, data2=gamma_sb[0:n, c0:c1], op=nl.multiply, "
      "engine=nisa.engine.vector)");
  w.line(
      "nisa.tensor_tensor(dst=y_stage[0:n, slot, g, 0:cw], data1=xn, data2=beta_sb[0:n, c0:c1], "
      "op=nl.add,\n                   engine=nisa.engine.vector)");
  return pw.finish(
      w, f, "y",
      "def reference(x, gamma, beta):\n"
      "    \"\"\"y in float64, from the same inputs.\"\"\"\n"
      "    x = x.astype(np.float64)\n"
      "    mean = x.mean(axis=1, keepdims=True)\n"
      "    var = ((x - mean) ** 2).mean(axis=1, keepdims=True)\n"
      "    return {\"y\": (x - mean) / np.sqrt(var + EPS) * gamma[None, :] + beta[None, :]}\n",
      out);
}

}  // namespace tessel::sim::rows
