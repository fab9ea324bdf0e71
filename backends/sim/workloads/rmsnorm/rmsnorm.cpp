// rmsnorm.cpp: RMSNorm with a residual add, row by row:
//   h = x + residual;  y = h / sqrt(mean(h^2) + eps) * w
// (h is stored too: the next layer's residual). Reads the names of
// examples/rmsnorm.tsl (rows, hidden, rows_per_tile, cols_per_step, bufs,
// square_engine, scale_engine, stages, fuse_weight) and a few of its own.
#include "../../functional.hpp"
#include "../../nki/nki.hpp"
#include "../emit.hpp"
#include "../rows/rows.hpp"

#include <tessel/gate.hpp>

#include <fmt/format.h>

namespace tessel::sim {
namespace {

/// The engine a symbol names; anything else is VectorE.
engine_id engine_named(const std::string& name) {
  return emit::engine_named(name).value_or(vector_engine);
}

class rmsnorm final : public rows::pipeline_workload {
 public:
  [[nodiscard]] std::string_view name() const override { return "rmsnorm"; }
  [[nodiscard]] std::string_view summary() const override {
    return "RMSNorm with a residual add over the rows of x: h = x + r, y = h * rsqrt(mean(h^2) + "
           "eps) * w";
  }

  [[nodiscard]] std::vector<name_doc> names() const override {
    auto out = rows::common_names("rows", "hidden");
    out.push_back(
        {"residual", "bool", "true", "add a residual input first and store the sum h too"});
    out.push_back({"add_engine", "vector | gpsimd", "vector", "engine of the residual add"});
    out.push_back({"square_engine", "vector | scalar | gpsimd", "scalar",
                   "sum of squares: one ScalarE activation accumulating the row sum, or a "
                   "multiply on VectorE or GpSimdE summed by a VectorE tensor_reduce"});
    out.push_back({"scale_engine", "vector | scalar", "vector",
                   "multiplies by the per-row rsqrt (fuse_weight = false)"});
    out.push_back({"fuse_weight", "bool", "false",
                   "(h * rsqrt) * w in one VectorE scalar_tensor_tensor pass instead of two"});
    return out;
  }

  [[nodiscard]] std::vector<std::string> own_suggestions(const bottleneck& b,
                                                         const value_reader& v) const override {
    std::vector<std::string> out;
    if ((b.tag == "scale" || b.tag == "weight") && !v.flag("fuse_weight", false))
      out.emplace_back("fuse_weight = true: one VectorE pass applies rsqrt and the weight");
    if (b.tag == "square-sum" && v.symbol("square_engine", "scalar") != "scalar")
      out.emplace_back(
          "square_engine = scalar: one activation pass accumulates the sum of squares");
    return out;
  }

 private:
  [[nodiscard]] std::unique_ptr<functional_kernel> executor(const rows::pipeline_spec& spec,
                                                            const value_reader& v) const override {
    return rows::rmsnorm_functional(spec, v.flag("residual", true), v.flag("fuse_weight", false));
  }

  [[nodiscard]] std::string write_nki(const rows::pipeline_spec& spec, const value_reader& v,
                                      const nki::context& ctx, std::string& out) const override {
    rows::rmsnorm_choices choice;
    choice.residual = v.flag("residual", true);
    choice.fuse_weight = v.flag("fuse_weight", false);
    choice.add = engine_named(v.symbol("add_engine", "vector"));
    choice.square = engine_named(v.symbol("square_engine", "scalar"));
    choice.scale = engine_named(v.symbol("scale_engine", "vector"));
    return rows::rmsnorm_nki(spec, choice, ctx, out);
  }

  [[nodiscard]] std::string build(const value_reader& v, rows::pipeline_spec& spec) const override {
    spec.name = "rmsnorm";
    spec.rows = v.integer("rows", 0);
    spec.cols = v.integer("hidden", 0);
    if (auto e = rows::read_common(v, spec); !e.empty()) return e;
    const bool residual = v.flag("residual", true);
    const std::string square = v.symbol("square_engine", "scalar");
    const bool fuse = v.flag("fuse_weight", false);
    const std::string scale = fuse ? "vector" : v.symbol("scale_engine", "vector");
    const std::string add = v.symbol("add_engine", "vector");
    if (square != "scalar" && square != "vector" && square != "gpsimd")
      return fmt::format("rmsnorm: square_engine '{}' is not scalar, vector or gpsimd", square);
    if (scale != "scalar" && scale != "vector")
      return fmt::format("rmsnorm: scale_engine '{}' is not vector or scalar", scale);
    if (add != "vector" && add != "gpsimd")
      return fmt::format("rmsnorm: add_engine '{}' is not vector or gpsimd", add);
    spec.inputs = residual ? 2 : 1;
    spec.outputs = residual ? 2 : 1;
    spec.input_names = {"x", "residual"};
    spec.output_names = {"y", "h"};
    spec.broadcasts = 1;
    spec.flops_per_element = residual ? 5 : 4;

    using rows::op_on;
    rows::row_step sums;  // per chunk and row group
    if (residual) {
      sums.ops.push_back(op_on(engine_named(add), op::tensor_tensor, "residual add"));
      rows::row_op store = op_on(vector_engine, op::dma, "store h");
      store.store = true;
      store.output = 1;
      sums.ops.push_back(store);
    }
    if (square == "scalar") {  // square with the activation's accumulate: one pass
      sums.ops.push_back(op_on(scalar_engine, op::activation, "square-sum"));
    } else {  // square on that engine, summed by VectorE (tensor_reduce runs on VectorE only)
      sums.ops.push_back(op_on(engine_named(square), op::tensor_tensor, "square-sum"));
      sums.ops.push_back(op_on(vector_engine, op::reduce, "square-sum"));
    }
    rows::row_step rstd;  // per tile: the chunks' partial sums, then rsqrt(mean + eps)
    rstd.per_chunk = false;
    rstd.ops.push_back(op_on(vector_engine, op::reduce, "rstd"));
    rstd.ops.push_back(op_on(scalar_engine, op::activation, "rstd"));
    spec.reduce = {sums, rstd};

    rows::row_step apply;
    if (fuse) {  // (h * rstd) * w in one VectorE pass (scalar_tensor_tensor)
      rows::row_op o = op_on(vector_engine, op::tensor_tensor, "scale");
      o.to_staging = o.uses_broadcast = true;
      apply.ops.push_back(o);
    } else {
      if (scale == "scalar") {
        apply.ops.push_back(op_on(scalar_engine, op::activation, "scale"));
      } else {
        rows::row_op o = op_on(vector_engine, op::tensor_scalar, "scale");
        o.perf_mode = true;
        apply.ops.push_back(o);
      }
      rows::row_op weight = op_on(vector_engine, op::tensor_tensor, "weight");
      weight.to_staging = weight.uses_broadcast = true;
      apply.ops.push_back(weight);
    }
    rows::row_op store = op_on(vector_engine, op::dma, "store y");
    store.store = true;
    apply.ops.push_back(store);
    spec.scale = {apply};
    return "";
  }
};

}  // namespace

const workload& rmsnorm_workload() {
  static const rmsnorm instance;
  return instance;
}

}  // namespace tessel::sim
