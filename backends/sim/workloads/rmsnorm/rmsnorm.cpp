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

class rmsnorm final : public rows::pipeline_workload<rows::rmsnorm_choices> {
 public:
  rmsnorm()
      : pipeline_workload({
            "rmsnorm",
            "RMSNorm with a residual add over the rows of x: h = x + r, y = h * rsqrt(mean(h^2) + "
            "eps) * w",
            rows::knobs_with(
                "rows", "hidden",
                {
                    knob::flag("residual", true,
                               "add a residual input first and store the sum h too"),
                    knob::symbol("add_engine", {"vector", "gpsimd"}, "vector",
                                 "engine of the residual add"),
                    knob::symbol("square_engine", {"vector", "scalar", "gpsimd"}, "scalar",
                                 "sum of squares: one ScalarE activation accumulating the row "
                                 "sum, or a multiply on VectorE or GpSimdE summed by a VectorE "
                                 "tensor_reduce"),
                    knob::symbol("scale_engine", {"vector", "scalar"}, "vector",
                                 "multiplies by the per-row rsqrt (fuse_weight = false)"),
                    knob::flag("fuse_weight", false,
                               "(h * rsqrt) * w in one VectorE scalar_tensor_tensor pass instead "
                               "of two"),
                }),
            "rows",
        }) {}

 private:
  [[nodiscard]] std::vector<std::string> own_suggestions(const bottleneck& b,
                                                         const knob_reader& v) const override {
    std::vector<std::string> out;
    if ((b.tag == "scale" || b.tag == "weight") && !v.flag("fuse_weight"))
      out.emplace_back("fuse_weight = true: one VectorE pass applies rsqrt and the weight");
    if (b.tag == "square-sum" && v.symbol("square_engine") != "scalar")
      out.emplace_back(
          "square_engine = scalar: one activation pass accumulates the sum of squares");
    return out;
  }

  [[nodiscard]] std::unique_ptr<functional_kernel> executor_of(
      const rows::pipeline_spec& spec, const rows::rmsnorm_choices& choice) const override {
    return rows::rmsnorm_functional(spec, choice.residual, choice.fuse_weight);
  }

  [[nodiscard]] std::string nki_of(const rows::pipeline_spec& spec,
                                   const rows::rmsnorm_choices& choice, const nki::context& ctx,
                                   std::string& out) const override {
    return rows::rmsnorm_nki(spec, choice, ctx, out);
  }

  [[nodiscard]] std::string build(const knob_reader& v, rows::pipeline_spec& spec,
                                  rows::rmsnorm_choices& choice) const override {
    if (auto e = rows::read_common(v, "rmsnorm", "rows", "hidden", spec); !e.empty()) return e;
    choice.residual = v.flag("residual");
    choice.fuse_weight = v.flag("fuse_weight");
    choice.add = emit::read_engine(v, "add_engine");
    choice.square = emit::read_engine(v, "square_engine");
    choice.scale = choice.fuse_weight ? vector_engine : emit::read_engine(v, "scale_engine");
    spec.inputs = choice.residual ? 2 : 1;
    spec.outputs = choice.residual ? 2 : 1;
    spec.input_names = {"x", "residual"};
    spec.output_names = {"y", "h"};
    spec.broadcasts = 1;
    spec.flops_per_element = choice.residual ? 5 : 4;

    using rows::op_on;
    rows::row_step sums;  // per chunk and row group
    if (choice.residual) {
      sums.ops.push_back(op_on(choice.add, op::tensor_tensor, "residual add"));
      sums.ops.push_back(rows::store_op("store h", 1));
    }
    if (choice.square == scalar_engine) {  // square with the activation's accumulate: one pass
      sums.ops.push_back(op_on(scalar_engine, op::activation, "square-sum"));
    } else {  // square on that engine, summed by VectorE (tensor_reduce runs on VectorE only)
      sums.ops.push_back(op_on(choice.square, op::tensor_tensor, "square-sum"));
      sums.ops.push_back(op_on(vector_engine, op::reduce, "square-sum"));
    }
    rows::row_step rstd;  // per tile: the chunks' partial sums, then rsqrt(mean + eps)
    rstd.per_chunk = false;
    rstd.ops.push_back(op_on(vector_engine, op::reduce, "rstd"));
    rstd.ops.push_back(op_on(scalar_engine, op::activation, "rstd"));
    spec.reduce = rows::steps_of(std::move(sums), std::move(rstd));

    rows::row_step apply;
    if (choice.fuse_weight) {  // (h * rstd) * w in one VectorE pass (scalar_tensor_tensor)
      rows::row_op o = op_on(vector_engine, op::tensor_tensor, "scale");
      o.to_staging = o.uses_broadcast = true;
      apply.ops.push_back(o);
    } else {
      if (choice.scale == scalar_engine) {
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
    apply.ops.push_back(rows::store_op("store y"));
    spec.scale = rows::steps_of(std::move(apply));
    return "";
  }
};

}  // namespace

const workload& rmsnorm_workload() {
  static const rmsnorm instance;
  return instance;
}

}  // namespace tessel::sim
