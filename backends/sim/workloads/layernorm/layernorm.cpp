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
                                 "row sum and sum of squares: two ScalarE activations "
                                 "accumulating them, or three VectorE passes (sum, square, sum)"),
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
      out.emplace_back("stats_engine = vector: the statistics move off ScalarE to VectorE");
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
    if (auto e = rows::read_common(v, "layernorm", "rows", "hidden", spec); !e.empty()) return e;
    choice.stats = emit::read_engine(v, "stats_engine");
    choice.scale = emit::read_engine(v, "scale_engine");
    spec.broadcasts = 2;  // gamma and beta
    spec.flops_per_element = 7;
    using rows::op_on;

    rows::row_step sums;  // the row sum and the sum of squares, per chunk and row group
    if (choice.stats == scalar_engine) {  // two activations accumulating their row sums
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
    spec.reduce = rows::steps_of(std::move(sums), std::move(moments));

    rows::row_step apply;
    // normalized and times gamma stay in fp32 (y rounds once, at the add of beta: in
    // bf16 the two roundings before it exceed the gate's bound where beta cancels)
    spec.fp32_scratch = true;
    auto normalize =
        op_on(choice.scale, choice.scale == scalar_engine ? op::activation : op::tensor_scalar,
              "normalize");
    normalize.fp32_out = true;
    apply.ops.push_back(normalize);
    auto gamma = op_on(vector_engine, op::tensor_tensor, "gamma");
    gamma.uses_broadcast = gamma.fp32_out = true;
    apply.ops.push_back(gamma);
    auto beta = op_on(vector_engine, op::tensor_tensor, "beta");
    beta.uses_broadcast = beta.to_staging = true;
    apply.ops.push_back(beta);
    apply.ops.push_back(rows::store_op("store y"));
    spec.scale = rows::steps_of(std::move(apply));
    return "";
  }
};

}  // namespace

const workload& layernorm_workload() {
  static const layernorm instance;
  return instance;
}

}  // namespace tessel::sim
