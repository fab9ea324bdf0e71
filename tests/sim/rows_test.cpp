// The row-wise workloads: RMSNorm with residual and softmax.
#include "helpers.hpp"

#include <tessel/dsl.hpp>
#include <tessel/error.hpp>
#include <tessel/sim.hpp>

#include <doctest/doctest.h>

using namespace tessel;
using namespace tessel::sim;
using namespace tessel::sim::testing;

namespace {

fixed_values rows_values(const std::string& workload, std::int64_t rows, std::int64_t cols) {
  fixed_values v;
  v.integers = {{"rows", rows}, {workload == "rmsnorm" ? "hidden" : "cols", cols}};
  v.symbols = {{"workload", workload}, {"dtype", "bf16"}};
  v.order = {};
  return v;
}

struct outcome {
  std::string error;
  program p;
  timing_result t;
};

outcome run(const std::string& workload, const fixed_values& v,
            const std::string& target_name = "trn2") {
  const target t = builtin(target_name);
  const machine m = resolve_machine(t);
  fixed_values with_order = v;
  with_order.order = {"load", "reduce", "scale"};
  auto [s, c] = fixed_space(workload, t, with_order);
  outcome o;
  o.error = find_workload(workload)->lower(s, c, m, o.p);
  if (o.error.empty()) o.t = time_program(o.p, m);
  return o;
}

}  // namespace

TEST_CASE("rmsnorm: moves x, r, y, h once and the weight once") {
  auto v = rows_values("rmsnorm", 1024, 2048);
  v.integers["cols_per_step"] = 512;
  const auto o = run("rmsnorm", v);
  REQUIRE(o.error.empty());
  CHECK(o.t.hbm_read_bytes == 2.0 * 1024 * 2048 * 2 + 2048 * 2);
  // the weight reaches the 128 partitions by doubling: 1 + 2 + ... + 64 rows copied on chip
  CHECK(o.t.sbuf_dma_bytes == 4.0 * 1024 * 2048 * 2 + 2048 * 2 * 128);
  CHECK(o.t.hbm_write_bytes == 2.0 * 1024 * 2048 * 2);
  CHECK(o.p.totals.min_hbm_bytes == 4.0 * 1024 * 2048 * 2 + 2048 * 2);
  CHECK(o.t.latency_ns > 0);
}

TEST_CASE("rmsnorm: engines follow the parameters; fusing saves a pass") {
  auto v = rows_values("rmsnorm", 2048, 4096);
  v.integers["cols_per_step"] = 1024;
  v.integers["bufs"] = 3;
  auto fused = v;
  fused.integers["fuse_weight"] = 1;
  const auto a = run("rmsnorm", v), b = run("rmsnorm", fused);
  REQUIRE(a.error.empty());
  REQUIRE(b.error.empty());
  CHECK(a.t.busy_ns[vector_engine] > b.t.busy_ns[vector_engine]);
  // fused, one VectorE pass applies rsqrt and w whatever scale_engine says
  fused.symbols["scale_engine"] = "scalar";
  CHECK(run("rmsnorm", fused).t.latency_ns == b.t.latency_ns);
  auto gp = v;
  gp.symbols["square_engine"] = "gpsimd";
  const auto g = run("rmsnorm", gp);
  REQUIRE(g.error.empty());
  CHECK(g.t.busy_ns[gpsimd_engine] > 0);
  CHECK(a.t.busy_ns[gpsimd_engine] == 0);
}

TEST_CASE("rmsnorm: SBUF overflow is a compile error") {
  auto v = rows_values("rmsnorm", 8192, 16384);
  v.integers["rows_per_tile"] = 512;
  v.integers["bufs"] = 2;
  const auto o = run("rmsnorm", v);
  CHECK(o.error ==
        "SBUF overflow: input tiles need 524288 B per partition with bufs=2; the target has 212984 "
        "(over by 311304 B)");
}

TEST_CASE("rows: more bufs let the stages of different tiles overlap") {
  auto v = rows_values("softmax", 4096, 2048);
  v.integers["cols_per_step"] = 2048;
  v.integers["bufs"] = 1;
  const auto one = run("softmax", v);
  v.integers["bufs"] = 3;
  const auto three = run("softmax", v);
  REQUIRE(one.error.empty());
  REQUIRE(three.error.empty());
  CHECK(three.t.latency_ns < 0.8 * one.t.latency_ns);
  CHECK(three.t.latency_ns * 1e-9 >=
        2.0 * 4096 * 2048 * 2 / (16 * 25.2e9) * 0.999);  // the memory roofline
}

TEST_CASE("softmax: bytes, reductions on the chosen engines, partial tiles") {
  auto v = rows_values("softmax", 1000, 3000);
  v.integers["cols_per_step"] = 1024;
  v.symbols["scale_engine"] = "gpsimd";
  const auto o = run("softmax", v);
  REQUIRE(o.error.empty());
  CHECK(o.t.hbm_read_bytes == 1000.0 * 3000 * 2);
  CHECK(o.t.hbm_write_bytes == 1000.0 * 3000 * 2);
  CHECK(o.t.busy_ns[gpsimd_engine] > 0);
  CHECK(o.t.busy_ns[scalar_engine] > 0);  // every exp
  int exps = 0;
  for (const auto& in : o.p.instructions()) exps += in.kind == op::activation;
  CHECK(exps == 8 * 3);  // 8 tiles (the last has 104 rows) x 3 chunks
  v.symbols["max_engine"] = "gpsimd";
  CHECK(run("softmax", v).error ==
        "softmax: max_engine = gpsimd: the row max is a tensor_reduce, which runs on VectorE only");
}

TEST_CASE(
    "rows: examples/sim_rmsnorm.tsl, sim_softmax.tsl and the DSL engineer's rmsnorm.tsl run on the "
    "backend") {
  for (const char* file : {"sim_rmsnorm.tsl", "sim_softmax.tsl", "rmsnorm.tsl"}) {
    INFO(file);
    check_example_samples(file, {}, 5, {.samples = 10, .compile_errors = true, .explained = true});
  }
}
