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

class layernorm final : public rows::pipeline_workload {
 public:
  [[nodiscard]] std::string_view name() const override { return "layernorm"; }
  [[nodiscard]] std::string_view summary() const override {
    return "LayerNorm over the rows of x: y = (x - mean) * rsqrt(var + eps) * gamma + beta";
  }

  [[nodiscard]] std::vector<name_doc> names() const override {
    auto out = rows::common_names("rows", "hidden");
    out.push_back({"stats_engine", "scalar | vector", "scalar",
                   "row sum and sum of squares: two ScalarE activations with accumulation, or "
                   "VectorE bn_stats"});
    out.push_back({"scale_engine", "vector | scalar", "vector",
                   "(x - mean) * rstd in one pass: VectorE tensor_scalar or ScalarE activation"});
    return out;
  }

  [[nodiscard]] std::vector<std::string> own_suggestions(const bottleneck& b,
                                                         const value_reader& v) const override {
    std::vector<std::string> out;
    if (b.tag == "stats" && v.symbol("stats_engine", "scalar") == "scalar")
      out.emplace_back("stats_engine = vector: one bn_stats pass instead of two activations");
    return out;
  }

 private:
  [[nodiscard]] std::unique_ptr<functional_kernel> executor(const rows::pipeline_spec& spec,
                                                            const value_reader& v) const override {
    (void)v;
    return rows::layernorm_functional(spec);
  }

  [[nodiscard]] std::string write_nki(const rows::pipeline_spec& spec, const value_reader& v,
                                      const nki::context& ctx, std::string& out) const override {
    rows::layernorm_choices choice;
    choice.stats = emit::engine_named(v.symbol("stats_engine", "scalar")).value_or(scalar_engine);
    choice.scale = emit::engine_named(v.symbol("scale_engine", "vector")).value_or(vector_engine);
    return rows::layernorm_nki(spec, choice, ctx, out);
  }

  [[nodiscard]] std::string build(const value_reader& v, rows::pipeline_spec& spec) const override {
    spec.name = "layernorm";
    spec.rows = v.integer("rows", 0);
    spec.cols = v.integer("hidden", 0);
    if (auto e = rows::read_common(v, spec); !e.empty()) return e;
    const std::string stats = v.symbol("stats_engine", "scalar");
    const std::string scale = v.symbol("scale_engine", "vector");
    if (stats != "scalar" && stats != "vector")
      return "layernorm: stats_engine must be scalar or vector";
    if (scale != "scalar" && scale != "vector")
      return "layernorm: scale_engine must be vector or scalar";
    spec.broadcast_bytes = 2 * spec.cols * dtype_bytes(spec.type);  // gamma and beta
    spec.flops_per_element = 7;

    rows::row_step sums;  // the row sum and the sum of squares, per chunk
    if (stats == "scalar") {
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
    if (scale == "scalar")
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
