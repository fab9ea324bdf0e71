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
                   "sum of squares: ScalarE activation with accumulation, VectorE bn_stats, or "
                   "GpSimdE multiply + reduce"});
    out.push_back({"scale_engine", "vector | scalar", "vector", "multiplies by the per-row rsqrt"});
    out.push_back(
        {"fuse_weight", "bool", "false",
         "ScalarE applies rsqrt and the weight in one pass (needs scale_engine = scalar)"});
    return out;
  }

  [[nodiscard]] std::vector<std::string> own_suggestions(const bottleneck& b,
                                                         const value_reader& v) const override {
    std::vector<std::string> out;
    if ((b.tag == "scale" || b.tag == "weight") && !v.flag("fuse_weight", false))
      out.emplace_back("fuse_weight = true with scale_engine = scalar: one pass instead of two");
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
    const std::string scale = v.symbol("scale_engine", "vector");
    const bool fuse = v.flag("fuse_weight", false);
    if (fuse && scale != "scalar")
      return "rmsnorm: fuse_weight needs scale_engine = scalar (only ScalarE fuses the weight "
             "multiply)";
    spec.inputs = residual ? 2 : 1;
    spec.outputs = residual ? 2 : 1;
    spec.input_names = {"x", "residual"};
    spec.output_names = {"y", "h"};
    spec.broadcast_bytes = spec.cols * dtype_bytes(spec.type);
    spec.flops_per_element = residual ? 5 : 4;

    rows::row_step sums;
    if (residual) {
      sums.ops.push_back({engine_named(v.symbol("add_engine", "vector")), op::tensor_tensor, 1,
                          false, false, 0, false, false, "residual add"});
      sums.ops.push_back({vector_engine, op::dma, 1, false, true, 1, false, false, "store h"});
    }
    if (square == "scalar") {
      sums.ops.push_back(
          {scalar_engine, op::activation, 1, false, false, 0, false, false, "square-sum"});
    } else if (square == "vector") {
      sums.ops.push_back(
          {vector_engine, op::bn_stats, 1, false, false, 0, false, false, "square-sum"});
    } else {
      sums.ops.push_back(
          {gpsimd_engine, op::tensor_tensor, 1, false, false, 0, false, false, "square-sum"});
      sums.ops.push_back(
          {gpsimd_engine, op::reduce, 1, false, false, 0, false, false, "square-sum"});
    }
    rows::row_step rstd;
    rstd.per_chunk = false;
    rstd.ops.push_back({scalar_engine, op::activation, 1, false, false, 0, false, false, "rstd"});
    spec.reduce = {sums, rstd};

    rows::row_step apply;
    if (fuse) {
      apply.ops.push_back({scalar_engine, op::activation, 1, false, false, 0, true, true, "scale"});
    } else {
      if (scale == "scalar")
        apply.ops.push_back(
            {scalar_engine, op::activation, 1, false, false, 0, false, false, "scale"});
      else
        apply.ops.push_back(
            {vector_engine, op::tensor_scalar, 1, true, false, 0, false, false, "scale"});
      apply.ops.push_back(
          {vector_engine, op::tensor_tensor, 1, false, false, 0, true, true, "weight"});
    }
    apply.ops.push_back({vector_engine, op::dma, 1, false, true, 0, false, false, "store y"});
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
