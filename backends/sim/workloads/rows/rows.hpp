// rows.hpp: the software pipeline shared by the row-wise workloads (RMSNorm
// with residual, softmax, LayerNorm). Rows are split into tiles of
// `rows_per_tile` rows and columns into chunks of `cols_per_step`. A tile
// lies on the partitions G = rows_per_tile / 128 rows to a partition (rows
// r0 + p * G + g, the row groups g), so one DMA moves a chunk of the whole
// tile. Each tile goes through three stages, issued as a software pipeline in
// the order `stages` names:
//   load   — DMA the tile's input chunks into a slot (`bufs` slots);
//   reduce — per-chunk steps and tiny per-tile steps (row max, sum of squares, ...);
//   scale  — per-chunk steps ending in the store of each chunk.
// A per-chunk compute instruction works on one row group (its per-row
// operands are per partition, as NKI's are), so it is issued G times; a
// per-tile one works on the [partitions, G] per-row values at once. The NKI
// kernels (rows_nki.cpp) issue exactly these instructions.
// docs/simulator.md describes the workloads built on it.
#pragma once

#include "../../program.hpp"
#include "../../typed_workload.hpp"

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace tessel::sim {
class functional_kernel;
namespace nki {
struct context;
}
}  // namespace tessel::sim

namespace tessel::sim::rows {

/// One instruction of a step, applied to a chunk (or, for a tile step, to
/// the tile's per-row values).
struct row_op {
  engine_id engine = vector_engine;
  op kind = op::copy;
  double cycles_per_element = 1;  ///< scales the element count (1 = one pass over the chunk)
  bool perf_mode = false;         ///< SBUF -> SBUF 2-byte data (VectorE perf mode on trn2)
  bool store = false;             ///< a DMA of the chunk's current value to HBM output `output`
  int output = 0;
  bool to_staging = false;      ///< writes the output staging (the store after it reads there)
  bool uses_broadcast = false;  ///< reads the broadcast vector
  bool fp32_out = false;        ///< writes fp32 scratch, not the pipeline's type
  std::string tag;              ///< label ("square-sum", "exp")
};

/// A row_op on engine `e` of `kind`, labelled `tag` (set the other fields after).
[[nodiscard]] inline row_op op_on(engine_id e, op kind, std::string tag) {
  row_op o;
  o.engine = e;
  o.kind = kind;
  o.tag = std::move(tag);
  return o;
}

/// The store of a chunk's current value to HBM output `output` (0: the
/// first), labelled `tag` ("store y").
[[nodiscard]] inline row_op store_op(std::string tag, int output = 0) {
  row_op o = op_on(vector_engine, op::dma, std::move(tag));
  o.store = true;
  o.output = output;
  return o;
}

struct row_step {
  bool per_chunk = true;    ///< false: once per tile on `rows per partition` values
  std::vector<row_op> ops;  ///< chained in order (a store is a side branch)
};

/// `steps` moved into a list in order (a braced list would copy each step's ops).
template <class... S>
[[nodiscard]] std::vector<row_step> steps_of(S&&... steps) {
  std::vector<row_step> out;
  out.reserve(sizeof...(steps));
  (out.push_back(std::forward<S>(steps)), ...);
  return out;
}

/// The workload's description of one tile's work.
struct pipeline_spec {
  std::string name;  ///< "rmsnorm"
  std::int64_t rows = 0, cols = 0;
  dtype type = dtype::bf16;
  int inputs = 1;   ///< input tensors per tile (x, residual)
  int outputs = 1;  ///< output tensors (y, h)
  std::vector<std::string> input_names{"x"},
      output_names{"y"};  ///< for labels: "load x", "store y"
  std::int64_t rows_per_tile = 128, cols_per_step = 0;
  int bufs = 2;
  int queues = 1;  ///< DMA queues per stream (loads of each input, stores of each output)
  std::vector<std::string> stage_order{"load", "reduce", "scale"};
  std::vector<row_step> reduce, scale;
  /// Vectors of `cols` elements loaded once to every partition (RMSNorm's
  /// weight; LayerNorm's gamma and beta): one row from HBM into partition 0,
  /// then doubled across the partitions by SBUF-to-SBUF copies (1 + log2 128 DMAs).
  int broadcasts = 0;
  /// The kernel's second chunk of scratch is fp32 (LayerNorm keeps its
  /// normalized rows at full precision), not the pipeline's type.
  bool fp32_scratch = false;
  double flops_per_element = 1;
};

/// How a pipeline tiles its rows and columns: the plan its lowering issues
/// and its functional executor follows (rows_functional.cpp).
struct tiling {
  std::int64_t rows_per_tile = 128;  ///< min(spec.rows_per_tile, rows)
  std::int64_t cols_per_step = 0;    ///< min(spec.cols_per_step, cols), or cols
  std::int64_t tiles = 0, chunks = 0;
};
[[nodiscard]] tiling tiling_of(const pipeline_spec& spec);

/// The compute instruction of `o` on `elements` per partition over `parts`
/// partitions (its engine, kind, type, size and flags; the lowering adds the
/// buffers and the label).
[[nodiscard]] instruction op_instruction(const pipeline_spec& spec, const row_op& o,
                                         std::int64_t parts, std::int64_t elements);

/// The compiler's checks of a spec (its shape and tiling, SBUF): "" or the
/// compile error. Planning runs them, so both timing models agree on which
/// configs compile.
[[nodiscard]] std::string check(const pipeline_spec& spec, const machine& m);
/// check(), then lowers the pipeline; returns "" or the compile error.
[[nodiscard]] std::string lower(const pipeline_spec& spec, const machine& m, program& out);

/// The steady-state screening estimate of a spec check() accepted
/// (rows_steady.cpp; docs/simulator.md, "Speed").
[[nodiscard]] steady_estimate estimate_steady(const pipeline_spec& spec, const machine& m);

/// Names `spec` `name` and reads its shape (the constants `rows_name` and
/// `cols_name`, as knobs_with() declared them) and the shared names
/// (rows_per_tile, cols_per_step, bufs, stages, dma_queues, dtype/bytes)
/// into it; returns "" or an error.
[[nodiscard]] std::string read_common(const knob_reader& v, std::string name,
                                      std::string_view rows_name, std::string_view cols_name,
                                      pipeline_spec& spec);

/// The shared knobs, then `own`: a row workload's knob table.
[[nodiscard]] std::vector<knob> knobs_with(const std::string& rows_name,
                                           const std::string& cols_name, std::vector<knob> own);

/// Functional executors (rows_functional.cpp). RMSNorm: inputs x, residual
/// (when `residual`) and the weight w; outputs y and h (when `residual`).
[[nodiscard]] std::unique_ptr<functional_kernel> rmsnorm_functional(const pipeline_spec& spec,
                                                                    bool residual,
                                                                    bool fuse_weight);
/// LayerNorm: inputs x, gamma and beta; output y.
[[nodiscard]] std::unique_ptr<functional_kernel> layernorm_functional(const pipeline_spec& spec);
/// Softmax: input x, output y.
[[nodiscard]] std::unique_ptr<functional_kernel> softmax_functional(const pipeline_spec& spec);

/// The engines and options of an RMSNorm pipeline, for its NKI kernel.
struct rmsnorm_choices {
  bool residual = true, fuse_weight = false;
  engine_id add = vector_engine, square = scalar_engine, scale = vector_engine;
};
/// The engines of a softmax pipeline, for its NKI kernel.
struct softmax_choices {
  engine_id max = vector_engine, scale = vector_engine;
};
/// The engines of a LayerNorm pipeline, for its NKI kernel.
struct layernorm_choices {
  engine_id stats = scalar_engine, scale = vector_engine;
};
/// NKI kernels of the pipelines (rows_nki.cpp): "" or why not.
[[nodiscard]] std::string rmsnorm_nki(const pipeline_spec& spec, const rmsnorm_choices& choice,
                                      const nki::context& ctx, std::string& out);
[[nodiscard]] std::string layernorm_nki(const pipeline_spec& spec, const layernorm_choices& choice,
                                        const nki::context& ctx, std::string& out);
[[nodiscard]] std::string softmax_nki(const pipeline_spec& spec, const softmax_choices& choice,
                                      const nki::context& ctx, std::string& out);

/// Suggestions that hold for any row pipeline.
[[nodiscard]] std::vector<std::string> suggest(const bottleneck& b, const knob_reader& v);

/// The plan of a row workload: the pipeline and the workload's own choices
/// (its engines and options) that the executor and the NKI kernel follow.
template <class Choices>
struct row_plan {
  pipeline_spec spec;
  Choices choice;
};

/// A workload built on the row pipeline: build() reads a config into a
/// pipeline_spec and the workload's Choices; the lowering follows from the
/// spec, the functional executor and the NKI kernel from both.
template <class Choices>
class pipeline_workload : public typed_workload<row_plan<Choices>> {
 public:
  using typed_workload<row_plan<Choices>>::typed_workload;

  /// own_suggestions(), then what holds for any row pipeline (rows::suggest).
  [[nodiscard]] std::vector<std::string> suggest(const bottleneck& b, const space& s,
                                                 const config& c) const final {
    const knob_reader v = this->reader(s, c);
    auto out = own_suggestions(b, v);
    for (auto& x : rows::suggest(b, v)) out.push_back(std::move(x));
    return out;
  }

 protected:
  /// Reads `v` into `spec` and `choice`; "" or the error.
  [[nodiscard]] virtual std::string build(const knob_reader& v, pipeline_spec& spec,
                                          Choices& choice) const = 0;
  /// The functional executor of a spec build() accepted.
  [[nodiscard]] virtual std::unique_ptr<functional_kernel> executor_of(
      const pipeline_spec& spec, const Choices& choice) const = 0;
  /// The NKI kernel of a spec build() accepted.
  [[nodiscard]] virtual std::string nki_of(const pipeline_spec& spec, const Choices& choice,
                                           const nki::context& ctx, std::string& out) const = 0;
  /// The workload's own suggestions for its bottleneck `b`.
  [[nodiscard]] virtual std::vector<std::string> own_suggestions(const bottleneck& b,
                                                                 const knob_reader& v) const = 0;

 private:
  [[nodiscard]] std::string read_plan(const knob_reader& v, const machine& m,
                                      row_plan<Choices>& out) const final {
    if (auto e = build(v, out.spec, out.choice); !e.empty()) return e;
    return rows::check(out.spec, m);
  }
  [[nodiscard]] std::string lower_program(const row_plan<Choices>& p, const machine& m,
                                          program& out) const final {
    return rows::lower(p.spec, m, out);
  }
  /// nullptr when the spec has no rows or columns.
  [[nodiscard]] std::unique_ptr<functional_kernel> executor(const row_plan<Choices>& p,
                                                            const machine& m) const final {
    (void)m;
    if (p.spec.rows <= 0 || p.spec.cols <= 0 || p.spec.rows_per_tile <= 0) return nullptr;
    return executor_of(p.spec, p.choice);
  }
  [[nodiscard]] std::optional<steady_estimate> steady(const row_plan<Choices>& p,
                                                      const machine& m) const final {
    return estimate_steady(p.spec, m);
  }
  [[nodiscard]] std::string write_nki(const row_plan<Choices>& p, const nki::context& ctx,
                                      std::string& out) const final {
    return nki_of(p.spec, p.choice, ctx, out);
  }
};

}  // namespace tessel::sim::rows
