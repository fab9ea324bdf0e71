// class7_test.cpp: issue 25, class 7: no physical floor without a spec's
// bound. Without a roofline_s, the only floor was the spec's bytes at
// 1e14 B/s, which let through times no machine can reach. A gate now knows
// its machine (gate_options::machine): a NeuronCore target's peaks from its
// constants, or the host's, measured once (roofline.hpp); with a spec's
// flops() and min_bytes() they bound every time.
#include <tessel/backends.hpp>
#include <tessel/dsl.hpp>
#include <tessel/gate.hpp>
#include <tessel/roofline.hpp>

#include "matmul_kernel.hpp"

#include <doctest/doctest.h>

#include <chrono>
#include <cmath>

namespace {

using namespace tessel;
using namespace tessel::testing;

const matmul_shape shape{96, 80, 72, 40, 48, 32};

/// The matmul spec, with its FLOPs declared and no roofline of its own.
struct counted_spec : tessel::testing::matmul_spec {
  explicit counted_spec(matmul_shape s) : matmul_spec(s), s_(s) {}
  double flops() const override { return 2.0 * static_cast<double>(s_.m * s_.n * s_.k); }
  matmul_shape s_;
};

tessel::gate_options on(const tessel::machine_peaks& m) {
  tessel::gate_options o;
  o.secret = 7;
  o.suite = {tessel::distribution::normal, tessel::distribution::uniform};
  o.machine = m;
  return o;
}

/// The measured seconds of one run of `k` on `spec`'s first hidden input set.
double measured_s(tessel::gate& g, const tessel::gate_spec& spec, const tessel::gated_kernel& k) {
  const auto session = g.session(spec, 99);
  double best = 1e300;
  for (int i = 0; i < 5; ++i) {
    const auto start = std::chrono::steady_clock::now();
    (void)k.run(session.inputs(0));
    best = std::min(
        best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  return best;
}

}  // namespace

TEST_CASE("class 7: the host's peaks are measured, finite and generous") {
  const tessel::machine_peaks& host = tessel::host_peaks();
  CAPTURE(host.source);
  CHECK(host.known());
  CHECK(host.flops_per_s > 1e9);   // more than a GFLOP/s...
  CHECK(host.flops_per_s < 1e16);  // ...and less than any machine on earth
  CHECK(host.memory_bytes_per_s > 1e8);
  CHECK(host.cache_bytes_per_s >= host.memory_bytes_per_s);
  CHECK(host.cache_bytes > 0);
  CHECK(&tessel::host_peaks() == &host);  // measured once
  const auto cpu = tessel::peaks_of(tessel::builtin_target("cpu").value());
  REQUIRE(cpu);
  CHECK(cpu->flops_per_s == host.flops_per_s);
}

TEST_CASE("class 7: a NeuronCore target's peaks come from its constants") {
  const auto trn2 = tessel::peaks_of(tessel::builtin_target("trn2").value());
  REQUIRE(trn2);
  // 128 x 128 MACs x 2 FLOP x 2.4 GHz, doubled for FP8; 2.9 TB/s of HBM
  CHECK(trn2->flops_per_s == doctest::Approx(128.0 * 128 * 2 * 2400e6 * 2));
  CHECK(trn2->memory_bytes_per_s == doctest::Approx(2.9e12));
  CHECK(trn2->cache_bytes == 0);
  CHECK(trn2->floor_s(1e12, 0) == doctest::Approx(1e12 / trn2->flops_per_s));
  // a server's floor is all its ranks' and chips' (128 cores, 16 chips' HBM)
  const auto server = tessel::peaks_of(tessel::builtin_target("trn2_server").value());
  REQUIRE(server);
  CHECK(server->flops_per_s == doctest::Approx(128 * trn2->flops_per_s));
  CHECK(server->memory_bytes_per_s == doctest::Approx(16 * 2.9e12));
  tessel::target custom{.name = "mine", .base = "", .constants = {}};
  CHECK(!tessel::peaks_of(custom));
}

TEST_CASE(
    "class 7: a time below the host's floor is suspicious without any roofline of the spec's") {
  tessel::gate g(on(tessel::host_peaks()));
  const counted_spec spec(shape);
  const tiled_matmul k(shape);
  const double floor = g.time_bound(spec);
  CHECK(floor > spec.flops() / 1e16);
  // an honest time, measured here, is above it: no false flag
  const double honest = measured_s(g, spec, k);
  CAPTURE(honest);
  CAPTURE(floor);
  CHECK(honest > floor);
  tessel::measurement m = tessel::measurement::success(honest);
  g.apply(m, spec, k, 1);
  CHECK(m.ok());
  // a tenth of the floor is not
  tessel::measurement fast = tessel::measurement::success(floor / 10);
  g.apply(fast, spec, k, 1);
  CHECK(fast.status == status::suspicious);
  CHECK(fast.message.find("faster than the roofline bound") != std::string::npos);
}

TEST_CASE("class 7: honest controls' measured times are above the host's floor") {
  tessel::gate g(on(tessel::host_peaks()));
  for (const auto& c : tessel::testing::honest_controls(shape)) {
    CAPTURE(c.name);
    const counted_spec spec(c.shape);
    const tiled_matmul k(c.shape, c.f);
    tessel::measurement m = tessel::measurement::success(measured_s(g, spec, k));
    CAPTURE(m.objective);
    CAPTURE(g.time_bound(spec));
    g.apply(m, spec, k, 2);
    CHECK(m.ok());
  }
}

TEST_CASE("class 7: on a NeuronCore target, FLOPs at TensorE's peak bound the time") {
  const auto trn1 = tessel::peaks_of(tessel::builtin_target("trn1").value()).value();
  tessel::gate g(on(trn1));
  const counted_spec spec(shape);
  const double flops_floor = spec.flops() / trn1.flops_per_s;
  CHECK(g.time_bound(spec) >= flops_floor);
  tessel::measurement m = tessel::measurement::success(0.5 * g.time_bound(spec));
  g.apply_time(m, spec);
  CHECK(m.status == status::suspicious);
  tessel::measurement honest = tessel::measurement::success(2 * g.time_bound(spec));
  g.apply_time(honest, spec);
  CHECK(honest.ok());
}

TEST_CASE("class 7: a gated callback on the host target gets the host's floor") {
  tessel::parse_options on_host;
  on_host.target = "cpu";
  const auto s = tessel::parse_space(
      "space t { const M = 96  const N = 80  const K = 72 "
      "param tile : {1, 2}  let flops = 2 * M * N * K }",
      on_host);
  tessel::callback_gate cg;
  cg.inputs = "A:MxK:bf16,B:KxN:bf16";
  cg.outputs = "C:MxN";
  cg.flops = "flops";
  cg.gate.secret = 8;
  cg.gate.suite = {tessel::distribution::normal, tessel::distribution::sparse};
  cg.reference = [](const std::vector<std::vector<double>>& in) {
    return tessel::testing::reference_product(in, shape);
  };
  tessel::callback_backend b(
      [](const tessel::space&, const tessel::config&, std::span<const tessel::hidden_input> in) {
        return tiled_matmul(shape).run(in);
      },
      cg);
  b.prepare(s);
  const tessel::measurement m = b.evaluate(s, s.from_json(R"({"tile": 1})"));
  INFO(m.message);
  CHECK(m.ok());  // tessel times the calls: an honest kernel's time is above the host's floor
}
