// elementwise.hpp: y = f(x) elementwise on one input, the small spec and
// candidate the gate's own tests judge (gate_test.cpp, the verdict rules;
// gate_session_test.cpp, the session's mechanics): the spec as a backend
// would own it, the candidate as the spec's function with a perturbation,
// and a gate of a fixed secret.
#pragma once

#include <tessel/gate.hpp>

#include <atomic>
#include <cstdint>
#include <functional>
#include <span>
#include <utility>
#include <vector>

namespace tessel::testing {

/// The spec of y = f(x) elementwise on one input of `shape` (f: `ref`, the
/// identity by default): what the backend owns.
class elementwise_spec : public tessel::gate_spec {
 public:
  using function = std::function<double(double x, std::int64_t flat)>;
  elementwise_spec(std::vector<std::int64_t> shape, element_type t, function f = nullptr)
      : shape_(std::move(shape)), type_(t), f_(std::move(f)) {}

  std::vector<tensor_spec> inputs() const override { return {{"x", shape_, input_type, label}}; }
  std::vector<tensor_spec> outputs() const override { return {{"y", shape_, type_, 0}}; }
  probe_values reference(std::span<const tessel::input_tensor> in,
                         const probe_points& where) const override {
    probe_values out(1);
    for (const std::int64_t flat : where[0]) out[0].push_back(value(in[0].at(flat), flat));
    return out;
  }
  [[nodiscard]] double value(double x, std::int64_t flat) const { return f_ ? f_(x, flat) : x; }

  element_type input_type = element_type::fp32;
  std::int64_t label = 0;

 private:
  std::vector<std::int64_t> shape_;
  element_type type_;
  function f_;
};

/// The candidate: the spec's function at every element, then `perturb`
/// turns each value (and its flat index) into the candidate's.
class elementwise : public tessel::gated_kernel {
 public:
  using perturbation = std::function<double(double ref, std::int64_t flat)>;
  elementwise(const elementwise_spec& spec, perturbation perturb)
      : spec_(spec), perturb_(std::move(perturb)) {}

  tessel::output_values run(std::span<const tessel::hidden_input> in) const override {
    ++runs;
    std::vector<double> y(static_cast<std::size_t>(in[0].spec().elements()));
    for (std::size_t i = 0; i < y.size(); ++i) {
      const auto flat = static_cast<std::int64_t>(i);
      y[i] = perturb_(spec_.value(in[0].at(flat), flat), flat);
    }
    return {y};
  }
  mutable std::atomic<int> runs{0};

 private:
  const elementwise_spec& spec_;
  perturbation perturb_;
};

inline double same(double r, std::int64_t) { return r; }

inline tessel::gate_options seeded() {
  tessel::gate_options o;
  o.secret = 42;
  o.recheck_rate = 0;  // cached verdicts stay cached (the re-check has its own cases)
  return o;
}

/// How many suites (input distributions) a default session draws.
inline const std::size_t suites = tessel::all_distributions().size();

}  // namespace tessel::testing
