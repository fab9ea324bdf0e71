// The newton_schulz workload (backends/sim/workloads/newton_schulz/,
// docs/simulator.md): its schedules pass the gate in both dtypes and both
// ways of forming X^T, the gate's faults are caught, its compile errors name
// the problem, the roofline counts the iteration's FLOPs, and its steady
// model replays the event model exactly.
#include "helpers.hpp"

#include <tessel/gate.hpp>
#include <tessel/sim.hpp>

#include <doctest/doctest.h>

#include <cmath>
#include <string>

using namespace tessel;
using namespace tessel::sim;
using namespace tessel::sim::testing;

namespace {

sim_options gated(std::string fault = "") {
  sim_options o;
  o.gate_options.secret = 0x5eed'2323;
  o.fault = std::move(fault);
  o.concurrency = 1;
  return o;
}

/// rows and cols with a partial last tile and column group.
fixed_values ns_values(const std::string& dtype, const std::string& transpose,
                       std::int64_t rows = 200, std::int64_t cols = 600) {
  fixed_values v;
  v.integers = {{"rows", rows}, {"cols", cols}, {"iterations", 5}, {"mm_n", 256}, {"psum_bufs", 2}};
  v.symbols = {{"workload", "newton_schulz"},
               {"dtype", dtype},
               {"transpose", transpose},
               {"evict", transpose == "tensor" ? "vector" : "scalar"}};
  return v;
}

measurement evaluate(const fixed_values& v, const sim_options& o) {
  auto [s, c] = fixed_space("newton_schulz", builtin("trn2"), v);
  sim_backend b(o);
  b.prepare(s);
  return b.evaluate(s, c);
}

}  // namespace

TEST_CASE("newton_schulz: both dtypes and both transposes pass the gate") {
  for (const std::string dtype : {"bf16", "fp32"})
    for (const std::string transpose : {"tensor", "recompute"}) {
      INFO(dtype, " ", transpose);
      const measurement m = evaluate(ns_values(dtype, transpose), gated());
      INFO(m.message);
      CHECK(m.ok());
      CHECK(m.metrics.at("gate_wall_s") > 0);
    }
}

TEST_CASE("newton_schulz: the gate catches every fault of the corpus") {
  for (const std::string f :
       {"drop_tail", "skip_accumulation", "truncate_output", "constant_output", "ignore_input"})
    for (const std::string dtype : {"bf16", "fp32"}) {
      INFO(f, " ", dtype);
      const measurement m = evaluate(ns_values(dtype, "tensor"), gated(f));
      INFO(m.message);
      CHECK((m.status == status::incorrect || m.status == status::suspicious));
    }
}

TEST_CASE("newton_schulz: compile errors name the problem") {
  sim_options off;
  off.gate = false;
  const measurement tall = evaluate(ns_values("bf16", "tensor", 600, 200), off);
  CHECK(tall.status == status::compile_error);
  CHECK(tall.message.find("rows = 600 > cols = 200: give the wide orientation") !=
        std::string::npos);
  auto v = ns_values("bf16", "tensor");
  v.integers["psum_bufs"] = 9;
  const measurement banks = evaluate(v, off);
  CHECK(banks.status == status::compile_error);
  CHECK(banks.message.find("PSUM overflow: psum_bufs = 9 banks in rotation; the target has 8") !=
        std::string::npos);
  const measurement big = evaluate(ns_values("fp32", "tensor", 8192, 65536), off);
  CHECK(big.status == status::compile_error);
  CHECK(big.message.find("SBUF overflow") != std::string::npos);
}

TEST_CASE("newton_schulz: the roofline counts the steps' FLOPs; recomputing X^T costs TensorE") {
  sim_options off;
  off.gate = false;
  const double r = 512, c = 1536;
  const measurement t = evaluate(ns_values("bf16", "tensor", 512, 1536), off);
  const measurement p = evaluate(ns_values("bf16", "recompute", 512, 1536), off);
  REQUIRE(t.ok());
  REQUIRE(p.ok());
  CHECK(t.metrics.at("flops") == doctest::Approx(5 * (4 * r * r * c + 2 * r * r * r)));
  CHECK(p.metrics.at("flops") == t.metrics.at("flops"));  // the second product is not useful work
  CHECK(p.metrics.at("latency_s") > t.metrics.at("latency_s"));
  CHECK(t.metrics.at("hbm_read_bytes") == doctest::Approx(r * c * 2));
}

TEST_CASE("newton_schulz: the closed-form steady model counts exactly and times the chains") {
  // newton_schulz_steady.cpp: equal counts, with partial tiles and column
  // groups, both dtypes and transposes, trn2's throttle and pipelined queues
  // and trn1's serial ones; the latency within 13% on this small shape (two
  // row tiles: the chains are a few groups long, and the boundaries between
  // them, which the model overlaps by one contraction tile, weigh most; it
  // is 12% low at worst, with fp32 and one PSUM bank)
  for (const std::string target : {"trn2", "trn1"})
    for (const std::string dtype : {"bf16", "fp32"})
      for (const std::string transpose : {"tensor", "recompute"})
        for (const std::int64_t psum_bufs : {1, 3}) {
          auto v = ns_values(dtype, transpose);
          v.integers["psum_bufs"] = psum_bufs;
          auto [s, c] = fixed_space("newton_schulz", builtin(target), v);
          const measurement e = evaluate(s, c), a = evaluate(s, c, sim_model::analytic);
          INFO(target, " ", dtype, " ", transpose, " psum_bufs = ", psum_bufs);
          REQUIRE(e.ok());
          REQUIRE(a.ok());
          CHECK(a.metrics.at("analytic") == 1.0);
          CHECK(a.metrics.at("instructions") == e.metrics.at("instructions"));
          CHECK(a.metrics.at("hbm_read_bytes") == e.metrics.at("hbm_read_bytes"));
          CHECK(a.objective == doctest::Approx(e.objective).epsilon(0.13));
        }
}
