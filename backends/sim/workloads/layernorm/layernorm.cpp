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
                   "row sum and sum of squares: two ScalarE activations accumulating them, or "
                   "three VectorE passes (sum, square, sum)"});
    out.push_back({"scale_engine", "vector | scalar", "vector",
                   "(x - mean) * rstd in one pass: VectorE tensor_scalar or ScalarE activation"});
    return out;
  }

  [[nodiscard]] std::vector<std::string> own_suggestions(const bottleneck& b,
                                                         const value_reader& v) const override {
    std::vector<std::string> out;
    if (b.tag == "stats" && v.symbol("stats_engine", "scalar") == "scalar")
      out.emplace_back("stats_engine = vector: the statistics move off ScalarE to VectorE");
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
    spec.broadcasts = 2;  // gamma and beta
    spec.flops_per_element = 7;
    using rows::op_on;

    rows::row_step sums;      // the row sum and the sum of squares, per chunk and row group
    if (stats == "scalar") {  // two activations accumulating their row sums
      sums.ops.push_back(op_on(scalar_engine, op::activation, "stats"));
      sums.ops.push_back(op_on(scalar_engine, op::activation, "stats"));
    } else {  // sum, square and sum of squares on VectorE
      sums.ops.push_back(op_on(vector_engine, op::reduce, "stats"));
      sums.ops.push_back(op_on(vector_engine, op::tensor_tensor, "stats"));
      sums.ops.push_back(op_on(vector_engine, op::reduce, "stats"));
    }
    // per tile, on the rows' partial sums S1, S2: S1 and S2 over the chunks,
    // -mean^2, var = S2 / n - mean^2 (at least 0), rstd, -mean * rstd
    rows::row_step moments;
    moments.per_chunk = false;
    for (const op kind :
         {op::reduce, op::reduce, op::tensor_tensor, op::tensor_tensor, op::tensor_scalar})
      moments.ops.push_back(op_on(vector_engine, kind, "moments"));
    moments.ops.push_back(op_on(scalar_engine, op::activation, "rstd"));
    moments.ops.push_back(op_on(vector_engine, op::tensor_tensor, "moments"));
    spec.reduce = {sums, moments};

    rows::row_step apply;
    if (scale == "scalar") {
      apply.ops.push_back(op_on(scalar_engine, op::activation, "normalize"));
    } else {
      auto o = op_on(vector_engine, op::tensor_scalar, "normalize");
      o.perf_mode = true;
      apply.ops.push_back(o);
    }
    auto gamma = op_on(vector_engine, op::tensor_tensor, "gamma");
    gamma.uses_broadcast = true;
    apply.ops.push_back(gamma);
    auto beta = op_on(vector_engine, op::tensor_tensor, "beta");
    beta.uses_broadcast = beta.to_staging = true;
    apply.ops.push_back(beta);
    auto store = op_on(vector_engine, op::dma, "store y");
    store.store = true;
    apply.ops.push_back(store);
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
