// softmax.cpp: softmax over the rows of x: y = exp(x - max) / sum(exp(x - max)).
// Reduce stage: row max per chunk, their max, exp with a running sum
// (ScalarE activation with accumulation), the reciprocal; scale stage: the
// multiply by 1/sum and the store.
#include "../functional.hpp"
#include "rows.hpp"

#include <tessel/gate.hpp>

#include <fmt/format.h>

namespace tessel::sim {
namespace {

engine_id engine_named(const std::string& name) {
  return name == "scalar" ? scalar_engine : name == "gpsimd" ? gpsimd_engine : vector_engine;
}

class softmax final : public workload {
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

  [[nodiscard]] std::string lower(const space& s, const config& c, const machine& m,
                                  program& out) const override {
    out.clear();
    const value_reader v(s, c);
    rows::pipeline_spec spec;
    if (auto e = build(v, spec); !e.empty()) return e;
    return rows::lower(spec, m, out);
  }

  [[nodiscard]] std::unique_ptr<gated_kernel> functional(const space& s, const config& c,
                                                         const machine& m) const override {
    (void)m;
    const value_reader v(s, c);
    rows::pipeline_spec spec;
    if (!build(v, spec).empty() || spec.rows <= 0 || spec.cols <= 0 || spec.rows_per_tile <= 0)
      return nullptr;
    return rows::softmax_functional(spec);
  }

  [[nodiscard]] std::vector<std::string> suggest(const bottleneck& b, const space& s,
                                                 const config& c) const override {
    const value_reader v(s, c);
    std::vector<std::string> out;
    if (b.tag == "normalize" && v.symbol("scale_engine", "vector") == "scalar")
      out.emplace_back("scale_engine = vector: ScalarE already computes every exp");
    for (auto& x : rows::suggest(b, v)) out.push_back(std::move(x));
    return out;
  }

 private:
  static std::string build(const value_reader& v, rows::pipeline_spec& spec) {
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
