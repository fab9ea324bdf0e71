// class8_test.cpp: issue 25, class 8: the callback backend had no gate
// option. A gated callback (callback_gate) hands the user's kernel the
// hidden inputs of a gate session, times every call itself and judges every
// call's outputs against the user's reference, as a gated command is judged.
// (The Python form, tessel.gated, is tested in tests/python.)
#include <tessel/backends.hpp>
#include <tessel/dsl.hpp>
#include <tessel/error.hpp>

#include "matmul_kernel.hpp"

#include <doctest/doctest.h>

#include <atomic>
#include <thread>

namespace {

using namespace tessel;
using namespace tessel::testing;

const matmul_shape shape{96, 80, 72, 40, 48, 32};

tessel::space matmul_space() {
  return tessel::parse_space(
      "space t { const M = 96  const N = 80  const K = 72  param tile : {1, 2} }");
}

output_values reference(const std::vector<std::vector<double>>& in) {
  return tessel::testing::reference_product(in, shape);
}

tessel::callback_gate settings(const std::string& output_type = "fp32") {
  tessel::callback_gate g;
  g.inputs = "A:MxK:bf16,B:KxN:bf16";
  g.outputs = "C:MxN:" + output_type;
  g.reference = reference;
  g.gate.secret = 88;
  return g;
}

tessel::measurement evaluate(const tessel::callback_backend::kernel_function& f,
                             tessel::callback_gate g = settings()) {
  const auto s = matmul_space();
  tessel::callback_backend b(f, std::move(g));
  b.prepare(s);
  return b.evaluate(s, s.from_json(R"({"tile": 2})"));
}

}  // namespace

TEST_CASE("class 8: honest gated callbacks pass and are timed by tessel, call by call") {
  for (const auto& c : tessel::testing::honest_controls(shape)) {
    CAPTURE(c.name);
    std::atomic<int> calls{0};
    tessel::callback_gate g = settings(std::string(to_string(c.shape.out)));
    g.timed_calls = 12;
    const tiled_matmul k(c.shape, c.f);
    const tessel::measurement m = evaluate(
        [&](const tessel::space&, const tessel::config&, std::span<const hidden_input> in) {
          ++calls;
          return k.run(in);
        },
        g);
    INFO(m.message);
    CHECK(m.ok());
    // a sample per call on inputs the kernel had not been given: every set's
    // first call and every timed call (each on a set of its own)
    CHECK(m.samples.size() == 16 + 12);
    CHECK(calls >= 16 + 2 + 12);
    CHECK(m.metrics.at("gate_calls") == calls.load());
    CHECK(m.objective > 0);
    CHECK(m.cost.run_s >= m.objective);
  }
}

TEST_CASE("class 8: a gated callback that computes wrong, or zeros, never records a time") {
  for (const flaw f : {flaw::k_tile_skipped, flaw::zeros, flaw::output_as_bf16}) {
    CAPTURE(tessel::testing::to_string(f));
    const tiled_matmul k(shape, f);
    const tessel::measurement m =
        evaluate([&](const tessel::space&, const tessel::config&,
                     std::span<const hidden_input> in) { return k.run(in); });
    INFO(m.message);
    CHECK((m.status == status::incorrect || m.status == status::suspicious));
    CHECK(m.samples.empty());
  }
}

TEST_CASE("class 8: a gated callback cannot lie about its time: tessel's clock times each call") {
  // it sleeps when it recognises nothing, and is judged and timed all the same
  const tiled_matmul k(shape);
  const tessel::measurement m =
      evaluate([&](const tessel::space&, const tessel::config&, std::span<const hidden_input> in) {
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
        return k.run(in);
      });
  INFO(m.message);
  CHECK(m.ok());
  CHECK(m.objective >= 2e-3);
  for (const double t : m.samples) CHECK(t >= 2e-3);
}

TEST_CASE("class 8: a gated callback's settings are checked") {
  const auto kernel = [](const tessel::space&, const tessel::config&,
                         std::span<const hidden_input>) -> output_values { return {}; };
  tessel::callback_gate no_reference = settings();
  no_reference.reference = nullptr;
  CHECK_THROWS_WITH_AS(tessel::callback_backend(kernel, no_reference),
                       "callback_gate::reference: a gated callback needs one",
                       tessel::options_error);
  tessel::callback_gate bad_dims = settings();
  bad_dims.inputs = "A:MxQ";
  tessel::callback_backend b(kernel, bad_dims);
  const auto s = matmul_space();
  CHECK_THROWS_WITH_AS(b.prepare(s), doctest::Contains("dimension 'Q'"), tessel::error);
  tessel::callback_gate bad_flops = settings();
  bad_flops.flops = "flopz";
  tessel::callback_backend c(kernel, bad_flops);
  CHECK_THROWS_WITH_AS(c.prepare(s), doctest::Contains("'flopz' is neither"), tessel::error);
  // a kernel that answers the wrong shape is a runtime_error
  const tessel::measurement m = evaluate(kernel);
  CHECK(m.status == status::runtime_error);
  CHECK(m.message.find("run() gave 0 outputs, expected 1") != std::string::npos);
}
