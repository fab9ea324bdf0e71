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
                                 "sum of squares: ScalarE activation with accumulation, VectorE "
                                 "bn_stats, or GpSimdE multiply + reduce"),
                    knob::symbol("scale_engine", {"vector", "scalar"}, "vector",
                                 "multiplies by the per-row rsqrt"),
                    knob::flag("fuse_weight", false,
                               "ScalarE applies rsqrt and the weight in one pass (needs "
                               "scale_engine = scalar)"),
                }),
            "rows",
        }) {}

 private:
  [[nodiscard]] std::vector<std::string> own_suggestions(const bottleneck& b,
                                                         const knob_reader& v) const override {
    std::vector<std::string> out;
    if ((b.tag == "scale" || b.tag == "weight") && !v.flag("fuse_weight"))
      out.emplace_back("fuse_weight = true with scale_engine = scalar: one pass instead of two");
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
    spec.name = "rmsnorm";
    spec.rows = v.integer("rows");
    spec.cols = v.integer("hidden");
    if (auto e = rows::read_common(v, spec); !e.empty()) return e;
    choice.residual = v.flag("residual");
    choice.fuse_weight = v.flag("fuse_weight");
    choice.add = emit::read_engine(v, "add_engine");
    choice.square = emit::read_engine(v, "square_engine");
    choice.scale = emit::read_engine(v, "scale_engine");
    if (choice.fuse_weight && choice.scale != scalar_engine)
      return "rmsnorm: fuse_weight needs scale_engine = scalar (only ScalarE fuses the weight "
             "multiply)";
    spec.inputs = choice.residual ? 2 : 1;
    spec.outputs = choice.residual ? 2 : 1;
    spec.input_names = {"x", "residual"};
    spec.output_names = {"y", "h"};
    spec.broadcast_bytes = spec.cols * dtype_bytes(spec.type);
    spec.flops_per_element = choice.residual ? 5 : 4;

    rows::row_step sums;
    if (choice.residual) {
      sums.ops.push_back(
          {choice.add, op::tensor_tensor, 1, false, false, 0, false, false, "residual add"});
      sums.ops.push_back({vector_engine, op::dma, 1, false, true, 1, false, false, "store h"});
    }
    if (choice.square == scalar_engine) {
      sums.ops.push_back(
          {scalar_engine, op::activation, 1, false, false, 0, false, false, "square-sum"});
    } else if (choice.square == vector_engine) {
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
    if (choice.fuse_weight) {
      apply.ops.push_back({scalar_engine, op::activation, 1, false, false, 0, true, true, "scale"});
    } else {
      if (choice.scale == scalar_engine)
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
