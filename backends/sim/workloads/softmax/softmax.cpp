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
    out.push_back({"max_engine", "vector | gpsimd", "vector", "row max (tensor_reduce)"});
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
    const engine_id max_engine = engine_named(v.symbol("max_engine", "vector"));
    const std::string scale = v.symbol("scale_engine", "vector");

    rows::row_step maxima;
    maxima.ops.push_back({max_engine, op::reduce, 1, false, false, 0, false, false, "row max"});
    rows::row_step combine;
    combine.per_chunk = false;
    combine.ops.push_back({max_engine, op::reduce, 1, false, false, 0, false, false, "row max"});
    rows::row_step exps;  // exp(x - max) in place, accumulating the row sum
    exps.ops.push_back({scalar_engine, op::activation, 1, false, false, 0, false, false, "exp"});
    rows::row_step inverse;
    inverse.per_chunk = false;
    inverse.ops.push_back(
        {vector_engine, op::reciprocal, 1, false, false, 0, false, false, "1/sum"});
    spec.reduce = {maxima, combine, exps, inverse};

    rows::row_step apply;
    if (scale == "scalar")
      apply.ops.push_back(
          {scalar_engine, op::activation, 1, false, false, 0, true, false, "normalize"});
    else
      apply.ops.push_back(
          {engine_named(scale), op::tensor_scalar, 1, true, false, 0, true, false, "normalize"});
    apply.ops.push_back({vector_engine, op::dma, 1, false, true, 0, false, false, "store y"});
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
