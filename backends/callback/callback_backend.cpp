// callback_backend.cpp: a user's function as a backend, or, gated, a user's
// kernel that tessel times and checks call by call.
#include "gated/file_gate.hpp"

#include <tessel/backends.hpp>
#include <tessel/error.hpp>

#include <fmt/format.h>

#include <chrono>
#include <utility>

namespace tessel {
namespace {

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

/// Runs `f` and returns its value as an ok measurement timed by a steady clock.
template <class F>
measurement timed(F&& f) {
  const auto start = std::chrono::steady_clock::now();
  const double objective = std::forward<F>(f)();
  cost paid;
  paid.run_s = seconds_since(start);
  return measurement::success(objective, paid);
}

/// `f` itself; throws options_error when it is empty (before it is wrapped).
template <class F>
F checked(F f) {
  if (!f) throw options_error("callback_backend", "the function is empty");
  return f;
}

/// A gated callback's spec: the declared tensors and the user's reference,
/// run on the gate's own copy of each input set.
class callback_spec final : public gate_spec {
 public:
  callback_spec(const std::vector<tensor_spec>& inputs, const std::vector<tensor_spec>& outputs,
                const callback_gate& g, double flops, double min_bytes)
      : inputs_(inputs), outputs_(outputs), gate_(g), flops_(flops), min_bytes_(min_bytes) {}
  [[nodiscard]] std::vector<tensor_spec> inputs() const override { return inputs_; }
  [[nodiscard]] std::vector<tensor_spec> outputs() const override { return outputs_; }
  [[nodiscard]] double flops() const override { return flops_; }
  [[nodiscard]] double min_bytes() const override {
    return min_bytes_ > 0 ? min_bytes_ : gate_spec::min_bytes();
  }
  [[nodiscard]] probe_values reference(std::span<const input_tensor> in,
                                       const probe_points& where) const override {
    std::vector<std::vector<double>> values;
    for (const auto& t : in) values.push_back(t.values());
    const output_values whole = gate_.reference(values);
    if (whole.size() != outputs_.size())
      throw error(
          fmt::format("the reference gave {} outputs, expected {}", whole.size(), outputs_.size()));
    probe_values picked(where.size());
    for (std::size_t o = 0; o < where.size(); ++o) {
      if (whole[o].size() != static_cast<std::size_t>(outputs_[o].elements()))
        throw error(fmt::format("the reference gave {} values for output {}, expected {}",
                                whole[o].size(), outputs_[o].name, outputs_[o].elements()));
      for (const std::int64_t flat : where[o])
        picked[o].push_back(whole[o][static_cast<std::size_t>(flat)]);
    }
    return picked;
  }

 private:
  const std::vector<tensor_spec>& inputs_;
  const std::vector<tensor_spec>& outputs_;
  const callback_gate& gate_;
  double flops_, min_bytes_;
};

}  // namespace

struct callback_backend::gated {
  kernel_function kernel;
  callback_gate settings;
  std::vector<tensor_spec> inputs, outputs;
  std::unique_ptr<tessel::gate> checker;
};

callback_backend::callback_backend(measure_function f, options opts)
    : function_(checked(std::move(f))), options_(std::move(opts)) {
  if (options_.concurrency == 0)
    throw options_error("callback_options::concurrency", "must be at least 1");
  if (options_.racing) {
    tessel::validate(*options_.racing, "callback_options::racing");
    racer_ = std::make_shared<racer>(*options_.racing);
  }
}

callback_backend::callback_backend(std::function<measurement(const config&)> f, options opts)
    : callback_backend(measure_function([f = checked(std::move(f))](const space&, const config& c) {
                         return f(c);
                       }),
                       std::move(opts)) {}

callback_backend::callback_backend(std::function<double(const config&)> f, options opts)
    : callback_backend(measure_function([f = checked(std::move(f))](const space&, const config& c) {
                         return timed([&] { return f(c); });
                       }),
                       std::move(opts)) {}

callback_backend::callback_backend(std::function<double(const space&, const config&)> f,
                                   options opts)
    : callback_backend(
          measure_function([f = checked(std::move(f))](const space& s, const config& c) {
            return timed([&] { return f(s, c); });
          }),
          std::move(opts)) {}

callback_backend::callback_backend(kernel_function f, callback_gate gate, options opts)
    : options_(std::move(opts)), gated_(std::make_shared<gated>()) {
  if (!f) throw options_error("callback_backend", "the kernel function is empty");
  if (!gate.reference)
    throw options_error("callback_gate::reference", "a gated callback needs one");
  if (gate.inputs.empty() || gate.outputs.empty())
    throw options_error("callback_gate", "declare the inputs and the outputs (\"A:MxK,B:KxN\")");
  if (options_.concurrency == 0)
    throw options_error("callback_options::concurrency", "must be at least 1");
  if (options_.racing)
    throw options_error("callback_options::racing",
                        "a gated callback is timed by its gate calls (and "
                        "callback_gate::timed_calls); racing is for ungated callbacks");
  gate.gate.validate();
  gated_->kernel = std::move(f);
  gated_->settings = std::move(gate);
}

callback_backend::~callback_backend() = default;

void callback_backend::prepare(const space& s) {
  if (!gated_) return;
  auto& g = *gated_;
  g.inputs = detail::parse_tensor_specs(g.settings.inputs, "callback_gate::inputs", s);
  g.outputs = detail::parse_tensor_specs(g.settings.outputs, "callback_gate::outputs", s);
  detail::check_count_setting(g.settings.flops, "callback_gate::flops", s);
  detail::check_count_setting(g.settings.min_bytes, "callback_gate::min_bytes", s);
  g.checker = std::make_unique<tessel::gate>(detail::on_target(g.settings.gate, s));
}

std::optional<measurement> callback_backend::remeasure(const space& s, const config& c) {
  if (!racer_) return std::nullopt;
  return race_measurements(
      *racer_, [&] { return function_(s, c); }, true);
}

measurement callback_backend::evaluate(const space& s, const config& c) {
  if (racer_) return race_measurements(*racer_, [&] { return function_(s, c); });
  if (!gated_) return function_(s, c);
  auto& g = *gated_;
  if (!g.checker) prepare(s);
  const callback_spec spec(
      g.inputs, g.outputs, g.settings,
      detail::count_setting(g.settings.flops, "callback_gate::flops", s, c),
      detail::count_setting(g.settings.min_bytes, "callback_gate::min_bytes", s, c));
  gate_session session = g.checker->session(spec, s.key(c));
  measurement m;
  // A time counts only when the kernel had never been given its inputs: a
  // check's repeats (for the determinism rule) could be answered from a
  // cache of outputs keyed by the inputs' content, and the timed calls each
  // get a set of their own (timed_set), so no counted call can. Every call
  // on a check's set is judged, so a set judged on has been given.
  int calls = 0;
  const auto call = [&](std::size_t set, bool judge) -> std::optional<verdict> {
    const auto start = std::chrono::steady_clock::now();
    const output_values out = g.kernel(s, c, session.inputs(set));
    const double seconds = seconds_since(start);
    ++calls;
    if (!session.judged_on(set)) m.samples.push_back(seconds);
    m.cost.run_s += seconds;
    if (!judge) return std::nullopt;
    const auto judged_at = std::chrono::steady_clock::now();
    auto failed = session.judge(set, out);
    m.cost.gate_s += seconds_since(judged_at);
    return failed;
  };
  std::optional<verdict> failed;
  for (std::size_t i = 0; i < session.calls().size() && !failed; ++i)
    failed = call(session.calls()[i], true);
  const std::size_t timed_calls = g.settings.timed_calls;
  for (std::size_t i = 0; i < timed_calls && !failed; ++i)
    failed = call(session.timed_set(i), session.spot_check(i, timed_calls));
  const verdict v = failed ? *failed : session.finish();
  if (!v.ok()) return detail::failed_verdict(v, m.cost);
  m.objective = median_with_interval(m.samples).median;
  m.metrics["gate_calls"] = calls;
  m.metrics["gate_max_error"] = v.max_error;
  g.checker->apply_time(m, spec);
  return m;
}

double callback_backend::estimated_cost(const space& s, const config& c) const {
  return options_.cost_estimate ? options_.cost_estimate(s, c) : 1.0;
}

}  // namespace tessel
