// The timing model's cost rules (docs/simulator.md), instruction by instruction.
#include "helpers.hpp"

#include <doctest/doctest.h>

#include <numeric>

using namespace tessel::sim;
using namespace tessel::sim::testing;

namespace {
double path_total(const timing_result& r) {
  return std::accumulate(r.critical_path.begin(), r.critical_path.end(), 0.0,
                         [](double a, const path_share& s) { return a + s.ns; });
}
}  // namespace

TEST_CASE("matmul: back-to-back full tiles issue every 512 cycles at the full-tile efficiency") {
  const machine m = machine_for("trn1");  // no warm-up throttle on trn1
  bench_program b;
  auto in = b.matmul(128, 128, 512);
  in.count = 100;
  b.p.add(in);
  const auto r = time_program(b.p, m);
  // the first stationary load is exposed (engine idle before), the others hide behind multiplies
  const double expected = (128.0 / 4 + 100 * 512 / 0.98) / 2.8;
  CHECK(r.latency_ns == doctest::Approx(expected).epsilon(1e-9));
  CHECK(r.busy_ns[tensor_engine] == doctest::Approx(expected));
  CHECK(path_total(r) == doctest::Approx(r.latency_ns));
}

TEST_CASE("matmul: fp32 costs 4x, small tiles pay the penalty, the issue floor is 64 cycles") {
  const machine m = machine_for("trn1");
  const auto one = [&](std::uint32_t k, std::uint32_t mm, std::uint32_t n, dtype t) {
    bench_program b;
    auto in = b.matmul(k, mm, n, t);
    in.flags = 0;  // no stationary load
    b.p.add(in);
    return time_program(b.p, m).latency_ns * 2.8;  // cycles
  };
  const double full = one(128, 128, 512, dtype::bf16);
  CHECK(full == doctest::Approx(512 / 0.98));
  CHECK(one(128, 128, 512, dtype::fp32) == doctest::Approx(4 * full));
  CHECK(one(128, 128, 512, dtype::fp8) == doctest::Approx(full));  // same speed on trn1
  CHECK(one(128, 128, 256, dtype::bf16) == doctest::Approx(full / 2));
  const double penalty = 1 + m.small_tile_penalty;
  CHECK(one(128, 128, 64, dtype::bf16) == doctest::Approx(64 * penalty / 0.98));
  CHECK(one(128, 128, 16, dtype::bf16) == doctest::Approx(64 * penalty / 0.98));  // max(N, 64)
  CHECK(one(32, 128, 512, dtype::bf16) == doctest::Approx(512 * penalty / 0.98));
  CHECK(one(128, 32, 512, dtype::bf16) == doctest::Approx(512 * penalty / 0.98));
}

TEST_CASE("trn2 warm-up: TensorE starts at half speed and ramps to full over ~3 us") {
  const machine m = machine_for("trn2");
  REQUIRE(m.warmup_ns == 3000);
  bench_program b;
  auto in = b.matmul(128, 128, 512);
  in.flags = 0;
  in.count = 200;  // ~44 us of work
  b.p.add(in);
  const auto r = time_program(b.p, m);
  const double full = 200 * 512 / 0.98 / 2.4;
  // a linear ramp from 50% to 100% over 3 us does 2.25 us of work: 0.75 us lost
  CHECK(r.latency_ns == doctest::Approx(full + 750).epsilon(1e-6));
  CHECK(r.tensor_warmup_ns == doctest::Approx(750).epsilon(1e-6));
}

TEST_CASE("engines run in order and wait for their dependencies") {
  const machine m = machine_for("trn2");
  bench_program b;
  auto mm = b.matmul(128, 128, 512);
  mm.count = 10;
  const auto a = b.p.add(mm);
  const auto e = b.p.add(b.elementwise(vector_engine, op::copy, 512, flag_reads_psum), {a});
  const auto r = time_program(b.p, m, timing_options{.record = true});
  CHECK(r.start_ns[e] == doctest::Approx(r.end_ns[a]));
  // one-input: N cycles + 60 static overhead at 0.96 GHz
  CHECK(r.end_ns[e] - r.start_ns[e] == doctest::Approx((512 + 60) / 0.96));
  CHECK(r.latency_ns == doctest::Approx(r.end_ns[e]));
  CHECK(path_total(r) == doctest::Approx(r.latency_ns));
  REQUIRE(r.critical_path.size() == 2);
  CHECK(r.critical_path[0].phase == "tensor");
}

TEST_CASE("elementwise cost rules: two inputs 2N, the 64-cycle floor, GpSimd's start") {
  const machine m = machine_for("trn1");
  const auto one = [&](engine_id e, op kind, std::uint32_t n) {
    bench_program b;
    b.p.add(b.elementwise(e, kind, n));
    const double ghz = e == vector_engine ? 1.12 : e == scalar_engine ? 1.4 : 1.4;
    return time_program(b.p, m).latency_ns * ghz;
  };
  CHECK(one(vector_engine, op::copy, 512) == doctest::Approx(512 + 60));
  CHECK(one(vector_engine, op::tensor_tensor, 512) == doctest::Approx(1024 + 60));
  CHECK(one(vector_engine, op::copy, 8) == doctest::Approx(64 + 60));
  CHECK(one(vector_engine, op::reduce, 512) == doctest::Approx(256 + 60));
  CHECK(one(vector_engine, op::reciprocal, 512) == doctest::Approx(8 * 512 + 60));
  CHECK(one(scalar_engine, op::activation, 512) == doctest::Approx(512 + 60));
  CHECK(one(gpsimd_engine, op::copy, 512) == doctest::Approx(512 + 60 + 150));
}

TEST_CASE("DMA: a lone transfer takes the fixed latency plus its data phase") {
  const machine m = machine_for("trn2");
  bench_program b;
  const auto id = b.p.add(b.load(0, 128, 2048));
  const auto r = time_program(b.p, m, timing_options{.record = true});
  const double data = 8 * (m.dma_descriptor_ns + 2048 / m.dma_stream_bytes_per_ns);
  CHECK(r.data_start_ns[id] == doctest::Approx(m.dma_issue_ns));
  CHECK(r.end_ns[id] - r.data_start_ns[id] == doctest::Approx(data));
  CHECK(r.latency_ns == doctest::Approx(m.dma_fixed_latency_ns + data));
  CHECK(r.hbm_read_bytes == 128 * 2048);
  CHECK(path_total(r) == doctest::Approx(r.latency_ns));
}

TEST_CASE("DMA: queues run in parallel but share the 16 engines; a queue runs in order") {
  const machine m = machine_for("trn2");
  const double data = 8 * (m.dma_descriptor_ns + 4096 / m.dma_stream_bytes_per_ns);
  SUBCASE("two queues: both data phases at half rate") {
    bench_program b;
    const auto a = b.p.add(b.load(0, 128, 4096));
    const auto c = b.p.add(b.load(1, 128, 4096));
    const auto r = time_program(b.p, m, timing_options{.record = true});
    CHECK(r.end_ns[a] == doctest::Approx(m.dma_issue_ns + 2 * data));
    CHECK(r.end_ns[c] == doctest::Approx(m.dma_issue_ns + 2 * data));
  }
  SUBCASE("one queue: issue and data are pipelined, each in order") {
    // (issue 16: a queue generates the next descriptors while the data of
    // the previous transfer moves; it used to hold the queue for both)
    bench_program b;
    const auto a = b.p.add(b.load(0, 128, 4096));
    const auto c = b.p.add(b.load(0, 128, 4096));
    const auto r = time_program(b.p, m, timing_options{.record = true});
    CHECK(r.end_ns[a] == doctest::Approx(m.dma_issue_ns + data));
    CHECK(r.start_ns[c] == doctest::Approx(m.dma_issue_ns));
    CHECK(r.data_start_ns[c] ==
          doctest::Approx(std::max(2 * m.dma_issue_ns, m.dma_issue_ns + data)));
    CHECK(r.end_ns[c] == doctest::Approx(r.data_start_ns[c] + data));
  }
  SUBCASE("a dependent transfer's issue overlaps the wait: the chain pays no issue per step") {
    bench_program b;
    const auto a = b.p.add(b.load(0, 128, 4096));
    const auto c = b.p.add(b.load(1, 128, 4096), {a});
    const auto r = time_program(b.p, m, timing_options{.record = true});
    const double completion = m.dma_fixed_latency_ns - m.dma_issue_ns;
    CHECK(r.data_start_ns[c] == doctest::Approx(r.end_ns[a] + completion));
    CHECK(r.latency_ns == doctest::Approx(m.dma_fixed_latency_ns + 2 * data + completion));
    CHECK(path_total(r) == doctest::Approx(r.latency_ns));
  }
  SUBCASE("the core's share of HBM caps the transfers together") {
    machine capped = m;
    capped.hbm_bytes_per_ns = 0.5 * m.dma_stream_bytes_per_ns * m.dma_engines;
    bench_program b;
    const auto a = b.p.add(b.load(0, 128, 4096));
    const auto r = time_program(b.p, capped, timing_options{.record = true});
    CHECK(r.end_ns[a] - r.data_start_ns[a] ==
          doctest::Approx(128.0 * 4096 / capped.hbm_bytes_per_ns));
  }
  SUBCASE("disjoint partitions use disjoint engines and do not slow each other") {
    bench_program b;
    auto x = b.load(0, 8, 4096);
    auto y = b.load(1, 8, 4096);
    y.partition_offset = 8;
    const auto a = b.p.add(x);
    const auto c = b.p.add(y);
    const auto r = time_program(b.p, m, timing_options{.record = true});
    CHECK(r.end_ns[a] == doctest::Approx(m.dma_issue_ns + data));
    CHECK(r.end_ns[c] == doctest::Approx(m.dma_issue_ns + data));
    CHECK(dma_engine_mask(x, m) == 1u);
    CHECK(dma_engine_mask(y, m) == 2u);
  }
}

TEST_CASE("trn1: VectorE and ScalarE cannot read PSUM at once; trn2 lifts it") {
  const auto run = [](const std::string& t) {
    const machine m = machine_for(t);
    bench_program b;
    b.p.add(b.elementwise(vector_engine, op::copy, 2048, flag_reads_psum));
    b.p.add(b.elementwise(scalar_engine, op::activation, 2048, flag_reads_psum));
    const auto r = time_program(b.p, m);
    return std::pair{r.latency_ns, (2048 + 60) / m.vector_ghz + (2048 + 60) / m.scalar_ghz};
  };
  const auto [trn1, trn1_serial] = run("trn1");
  CHECK(trn1 == doctest::Approx(trn1_serial));
  const auto [trn2, trn2_serial] = run("trn2");
  CHECK(trn2 < 0.7 * trn2_serial);
}

TEST_CASE("trn1: VectorE and GpSimdE share the SBUF port") {
  const machine m = machine_for("trn1");
  bench_program b;
  b.p.add(b.elementwise(vector_engine, op::copy, 1024));
  b.p.add(b.elementwise(gpsimd_engine, op::copy, 1024));
  const auto r = time_program(b.p, m);
  CHECK(r.latency_ns == doctest::Approx((1024 + 60) / 1.12 + (1024 + 60 + 150) / 1.4));
  // the critical path names the port holder
  CHECK(path_total(r) == doctest::Approx(r.latency_ns));
}

TEST_CASE("a dependency on an earlier instruction only") {
  bench_program b;
  b.p.add(b.load(0, 128, 1024));
  CHECK_THROWS_AS(b.p.add(b.load(1, 128, 1024), {5}), std::logic_error);
}
