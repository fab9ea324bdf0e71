// softmax.cpp: softmax over the rows of x: y = exp(x - max) / sum(exp(x - max)).
// Reduce stage: row max per chunk, their max, exp with a running sum
// (ScalarE activation with accumulation), the reciprocal; scale stage: the
// multiply by 1/sum and the store.
#include "../../functional.hpp"
#include "../../nki/nki.hpp"
#include "../emit.hpp"
#include "../rows/rows.hpp"

#include <tessel/gate.hpp>

#include <fmt/format.h>

namespace tessel::sim {
namespace {

class softmax final : public rows::pipeline_workload<rows::softmax_choices> {
 public:
  softmax()
      : pipeline_workload({
            "softmax",
            "softmax over the rows of x: y = exp(x - rowmax) / rowsum",
            rows::knobs_with("rows", "cols",
                             {
                                 knob::symbol("max_engine", {"vector", "gpsimd"}, "vector",
                                              "row max: a tensor_reduce, which runs on VectorE "
                                              "only (gpsimd is a compile error)"),
                                 knob::symbol("scale_engine", {"vector", "scalar", "gpsimd"},
                                              "vector", "multiplies by 1/sum"),
                             }),
            "rows",
        }) {}

 private:
  [[nodiscard]] std::vector<std::string> own_suggestions(const bottleneck& b,
                                                         const knob_reader& v) const override {
    std::vector<std::string> out;
    if (b.tag == "normalize" && v.symbol("scale_engine") == "scalar")
      out.emplace_back("scale_engine = vector: ScalarE already computes every exp");
    return out;
  }

  [[nodiscard]] std::unique_ptr<functional_kernel> executor_of(
      const rows::pipeline_spec& spec, const rows::softmax_choices& choice) const override {
    (void)choice;
    return rows::softmax_functional(spec);
  }

  [[nodiscard]] std::string nki_of(const rows::pipeline_spec& spec,
                                   const rows::softmax_choices& choice, const nki::context& ctx,
                                   std::string& out) const override {
    return rows::softmax_nki(spec, choice, ctx, out);
  }

  [[nodiscard]] std::string build(const knob_reader& v, rows::pipeline_spec& spec,
                                  rows::softmax_choices& choice) const override {
    if (auto e = rows::read_common(v, "softmax", "rows", "cols", spec); !e.empty()) return e;
    spec.flops_per_element = 4;
    choice.max = emit::read_engine(v, "max_engine");
    choice.scale = emit::read_engine(v, "scale_engine");
    if (choice.max != vector_engine)
      return "softmax: max_engine = gpsimd: the row max is a tensor_reduce, which runs on "
             "VectorE only";
    using rows::op_on;
    rows::row_step maxima;  // per chunk and row group
    maxima.ops.push_back(op_on(vector_engine, op::reduce, "row max"));
    rows::row_step combine;  // per tile: -max over the chunks
    combine.per_chunk = false;
    combine.ops.push_back(op_on(vector_engine, op::reduce, "row max"));
    rows::row_step exps;  // exp(x - max) in place, accumulating the row sum
    exps.ops.push_back(op_on(scalar_engine, op::activation, "exp"));
    rows::row_step inverse;  // per tile: the chunks' sums, then 1/sum
    inverse.per_chunk = false;
    inverse.ops.push_back(op_on(vector_engine, op::reduce, "1/sum"));
    inverse.ops.push_back(op_on(vector_engine, op::reciprocal, "1/sum"));
    spec.reduce =
        rows::steps_of(std::move(maxima), std::move(combine), std::move(exps), std::move(inverse));

    rows::row_step apply;
    rows::row_op normalize = choice.scale == scalar_engine
                                 ? op_on(scalar_engine, op::activation, "normalize")
                                 : op_on(choice.scale, op::tensor_scalar, "normalize");
    normalize.perf_mode = choice.scale != scalar_engine;
    normalize.to_staging = true;
    apply.ops.push_back(normalize);
    apply.ops.push_back(rows::store_op("store y"));
    spec.scale = rows::steps_of(std::move(apply));
    return "";
  }
};

}  // namespace

const workload& softmax_workload() {
  static const softmax instance;
  return instance;
}

}  // namespace tessel::sim
