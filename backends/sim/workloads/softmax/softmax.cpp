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

/// The engine a symbol names; anything else is VectorE.
engine_id engine_named(const std::string& name) {
  return emit::engine_named(name).value_or(vector_engine);
}

class softmax final : public rows::pipeline_workload {
 public:
  [[nodiscard]] std::string_view name() const override { return "softmax"; }
  [[nodiscard]] std::string_view summary() const override {
    return "softmax over the rows of x: y = exp(x - rowmax) / rowsum";
  }

  [[nodiscard]] std::vector<name_doc> names() const override {
    auto out = rows::common_names("rows", "cols");
    out.push_back({"max_engine", "vector", "vector",
                   "row max: a tensor_reduce, which NKI runs on VectorE only"});
    out.push_back({"scale_engine", "vector | scalar | gpsimd", "vector", "multiplies by 1/sum"});
    return out;
  }

  [[nodiscard]] std::vector<std::string> own_suggestions(const bottleneck& b,
                                                         const value_reader& v) const override {
    std::vector<std::string> out;
    if (b.tag == "normalize" && v.symbol("scale_engine", "vector") == "scalar")
      out.emplace_back("scale_engine = vector: ScalarE already computes every exp");
    return out;
  }

 private:
  [[nodiscard]] std::unique_ptr<functional_kernel> executor(const rows::pipeline_spec& spec,
                                                            const value_reader& v) const override {
    (void)v;
    return rows::softmax_functional(spec);
  }

  [[nodiscard]] std::string write_nki(const rows::pipeline_spec& spec, const value_reader& v,
                                      const nki::context& ctx, std::string& out) const override {
    rows::softmax_choices choice;
    choice.max = engine_named(v.symbol("max_engine", "vector"));
    choice.scale = engine_named(v.symbol("scale_engine", "vector"));
    return rows::softmax_nki(spec, choice, ctx, out);
  }

  [[nodiscard]] std::string build(const value_reader& v, rows::pipeline_spec& spec) const override {
    spec.name = "softmax";
    spec.rows = v.integer("rows", 0);
    spec.cols = v.integer("cols", 0);
    if (auto e = rows::read_common(v, spec); !e.empty()) return e;
    spec.flops_per_element = 4;
    const std::string max = v.symbol("max_engine", "vector");
    if (max != "vector")
      return fmt::format(
          "softmax: max_engine = {}: the row max is a tensor_reduce, which runs on VectorE only",
          max);
    const std::string scale = v.symbol("scale_engine", "vector");
    if (scale != "vector" && scale != "scalar" && scale != "gpsimd")
      return fmt::format("softmax: scale_engine '{}' is not vector, scalar or gpsimd", scale);
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
    spec.reduce = {maxima, combine, exps, inverse};

    rows::row_step apply;
    rows::row_op normalize = scale == "scalar"
                                 ? op_on(scalar_engine, op::activation, "normalize")
                                 : op_on(engine_named(scale), op::tensor_scalar, "normalize");
    normalize.perf_mode = scale != "scalar";
    normalize.to_staging = true;
    apply.ops.push_back(normalize);
    rows::row_op store = op_on(vector_engine, op::dma, "store y");
    store.store = true;
    apply.ops.push_back(store);
    spec.scale = {apply};
    return "";
  }
};

}  // namespace

const workload& softmax_workload() {
  static const softmax instance;
  return instance;
}

}  // namespace tessel::sim
