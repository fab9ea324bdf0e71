// layernorm.cpp: LayerNorm over the rows of x, on the row pipeline (rows.hpp):
//   y = (x - mean) / sqrt(var + eps) * gamma + beta
// Added through docs/simulator.md's recipe ("Adding a workload"): this file
// reads the names into a pipeline_spec; rows_functional.cpp executes it for
// the gate and rows_nki.cpp writes its NKI kernel.
#include "../../functional.hpp"
#include "../../nki/nki.hpp"
#include "../emit.hpp"
#include "../rows/rows.hpp"

#include <tessel/gate.hpp>

namespace tessel::sim {
namespace {

class layernorm final : public rows::pipeline_workload<rows::layernorm_choices> {
 public:
  layernorm()
      : pipeline_workload({
            "layernorm",
            "LayerNorm over the rows of x: y = (x - mean) * rsqrt(var + eps) * gamma + beta",
            rows::knobs_with(
                "rows", "hidden",
                {
                    knob::symbol("stats_engine", {"scalar", "vector"}, "scalar",
                                 "row sum and sum of squares: two ScalarE activations with "
                                 "accumulation, or VectorE bn_stats"),
                    knob::symbol("scale_engine", {"vector", "scalar"}, "vector",
                                 "(x - mean) * rstd in one pass: VectorE tensor_scalar or ScalarE "
                                 "activation"),
                }),
            "rows",
        }) {}

 private:
  [[nodiscard]] std::vector<std::string> own_suggestions(const bottleneck& b,
                                                         const knob_reader& v) const override {
    std::vector<std::string> out;
    if (b.tag == "stats" && v.symbol("stats_engine") == "scalar")
      out.emplace_back("stats_engine = vector: one bn_stats pass instead of two activations");
    return out;
  }

  [[nodiscard]] std::unique_ptr<functional_kernel> executor_of(
      const rows::pipeline_spec& spec, const rows::layernorm_choices& choice) const override {
    (void)choice;
    return rows::layernorm_functional(spec);
  }

  [[nodiscard]] std::string nki_of(const rows::pipeline_spec& spec,
                                   const rows::layernorm_choices& choice, const nki::context& ctx,
                                   std::string& out) const override {
    return rows::layernorm_nki(spec, choice, ctx, out);
  }

  [[nodiscard]] std::string build(const knob_reader& v, rows::pipeline_spec& spec,
                                  rows::layernorm_choices& choice) const override {
    spec.name = "layernorm";
    spec.rows = v.integer("rows");
    spec.cols = v.integer("hidden");
    if (auto e = rows::read_common(v, spec); !e.empty()) return e;
    choice.stats = emit::read_engine(v, "stats_engine");
    choice.scale = emit::read_engine(v, "scale_engine");
    spec.broadcast_bytes = 2 * spec.cols * dtype_bytes(spec.type);  // gamma and beta
    spec.flops_per_element = 7;

    rows::row_step sums;  // the row sum and the sum of squares, per chunk
    if (choice.stats == scalar_engine) {
      sums.ops.push_back(
          {scalar_engine, op::activation, 1, false, false, 0, false, false, "stats"});
      sums.ops.push_back(
          {scalar_engine, op::activation, 1, false, false, 0, false, false, "stats"});
    } else {
      sums.ops.push_back({vector_engine, op::bn_stats, 1, false, false, 0, false, false, "stats"});
    }
    rows::row_step moments;  // mean, variance, rstd and -mean * rstd, per row
    moments.per_chunk = false;
    moments.ops.push_back(
        {vector_engine, op::tensor_scalar, 1, false, false, 0, false, false, "moments"});
    moments.ops.push_back(
        {scalar_engine, op::activation, 1, false, false, 0, false, false, "rstd"});
    spec.reduce = {sums, moments};

    rows::row_step apply;
    if (choice.scale == scalar_engine)
      apply.ops.push_back(
          {scalar_engine, op::activation, 1, false, false, 0, false, false, "normalize"});
    else
      apply.ops.push_back(
          {vector_engine, op::tensor_scalar, 1, true, false, 0, false, false, "normalize"});
    apply.ops.push_back(
        {vector_engine, op::tensor_tensor, 1, false, false, 0, false, true, "gamma"});
    apply.ops.push_back({vector_engine, op::tensor_tensor, 1, false, false, 0, true, true, "beta"});
    apply.ops.push_back({vector_engine, op::dma, 1, false, true, 0, false, false, "store y"});
    spec.scale = {apply};
    return "";
  }
};

}  // namespace

const workload& layernorm_workload() {
  static const layernorm instance;
  return instance;
}

}  // namespace tessel::sim
