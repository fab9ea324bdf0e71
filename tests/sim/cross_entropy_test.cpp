// The fused cross-entropy workload: the vocabulary projection with an online
// log-sum-exp, chunked over the vocabulary.
#include "helpers.hpp"

#include <tessel/dsl.hpp>
#include <tessel/sim.hpp>

#include <doctest/doctest.h>

#include <algorithm>

using namespace tessel;
using namespace tessel::sim;
using namespace tessel::sim::testing;

namespace {

constexpr std::int64_t tokens = 1024, d_model = 1024, vocab = 8192;

outcome run(const std::map<std::string, std::int64_t>& ints,
            const std::map<std::string, std::string>& syms = {},
            std::vector<std::string> order = {"t", "v"}) {
  fixed_values v;
  v.integers = {{"tokens", tokens},  {"d_model", d_model},  {"vocab", vocab},
                {"token_tile", 512}, {"vocab_chunk", 1024}, {"dma_queues", 2}};
  for (const auto& [k, x] : ints) v.integers[k] = x;
  v.symbols = {{"workload", "cross_entropy"}};
  for (const auto& [k, x] : syms) v.symbols[k] = x;
  v.order = std::move(order);
  return lower_and_time(cross_entropy_workload(), "cross_entropy", builtin("trn2"), std::move(v));
}

}  // namespace

TEST_CASE(
    "cross_entropy: the projection does 2 T D V FLOPs; the roofline counts x, W, labels, loss") {
  const auto o = run({});
  REQUIRE(o.error.empty());
  const double flops = 2.0 * tokens * d_model * vocab;
  CHECK(matmul_flops(o.p) == doctest::Approx(flops));
  CHECK(o.p.totals.flops == doctest::Approx(flops));
  CHECK(o.p.totals.min_hbm_bytes ==
        doctest::Approx((tokens + vocab) * d_model * 2.0 + 8.0 * tokens));
  CHECK(o.t.latency_ns >= o.roofline_ns);
}

TEST_CASE("cross_entropy: the logits never reach HBM; only 4 bytes of loss per token are stored") {
  for (const auto& order : {std::vector<std::string>{"t", "v"}, {"v", "t"}}) {
    INFO(order[0]);
    const auto o = run({}, {}, order);
    REQUIRE(o.error.empty());
    CHECK(o.t.hbm_write_bytes == doctest::Approx(4.0 * tokens));
  }
  // (t, v): W is read once per token tile, x once; (v, t): x once per chunk, W once
  const double x = tokens * d_model * 2.0, w = d_model * vocab * 2.0, labels = 4.0 * tokens;
  CHECK(run({}).t.hbm_read_bytes == doctest::Approx(x + w * (tokens / 512.0) + labels));
  CHECK(run({}, {}, {"v", "t"}).t.hbm_read_bytes ==
        doctest::Approx(w + x * (vocab / 1024.0) + labels));
}

TEST_CASE("cross_entropy: partial tiles and chunks cover the shape exactly") {
  const auto o = run({{"tokens", 1000}, {"vocab", 5000}, {"token_tile", 384}});
  REQUIRE(o.error.empty());
  CHECK(matmul_flops(o.p) == doctest::Approx(2.0 * 1000 * d_model * 5000));
  CHECK(o.t.hbm_write_bytes == doctest::Approx(4.0 * 1000));
}

TEST_CASE("cross_entropy: token tiles under 128 rows and odd instruction tiles lower") {
  // more row tiles than tokens / 128: the running state is per (token tile, row tile)
  for (const auto& order : {std::vector<std::string>{"t", "v"}, {"v", "t"}}) {
    const auto o = run(
        {{"tokens", 1000}, {"token_tile", 100}, {"vocab_chunk", 700}, {"mm_k", 100}, {"mm_n", 200}},
        {}, order);
    REQUIRE(o.error.empty());
    CHECK(matmul_flops(o.p) == doctest::Approx(2.0 * 1000 * d_model * vocab));
    CHECK(o.t.hbm_write_bytes == doctest::Approx(4.0 * 1000));
  }
}

TEST_CASE("cross_entropy: larger token tiles read W less often and run faster when W-bound") {
  const auto small = run({{"token_tile", 128}, {"vocab_chunk", 512}});
  const auto large = run({{"token_tile", 512}, {"vocab_chunk", 512}});
  REQUIRE(small.error.empty());
  REQUIRE(large.error.empty());
  CHECK(small.t.hbm_read_bytes > 3 * large.t.hbm_read_bytes);
  CHECK(large.t.latency_ns < small.t.latency_ns);
  // a good config of a compute-bound shape comes near the compute roofline
  CHECK(large.t.latency_ns < 1.25 * large.roofline_ns);
  // latency scales with the work: twice the tokens, about twice the time
  const auto twice = run({{"tokens", 2 * tokens}, {"token_tile", 512}, {"vocab_chunk", 512}});
  CHECK(twice.t.latency_ns / large.t.latency_ns == doctest::Approx(2.0).epsilon(0.15));
}

TEST_CASE("cross_entropy: engine choices move the per-chunk passes") {
  const auto base = run({{"token_tile", 128}, {"d_model", 256}});
  const auto moved = run({{"token_tile", 128}, {"d_model", 256}},
                         {{"pick_engine", "gpsimd"}, {"max_engine", "gpsimd"}});
  const auto vexp = run({{"token_tile", 128}, {"d_model", 256}}, {{"exp_engine", "vector"}});
  REQUIRE(base.error.empty());
  CHECK(moved.t.busy_ns[vector_engine] < base.t.busy_ns[vector_engine]);
  CHECK(moved.t.busy_ns[gpsimd_engine] > 0);
  CHECK(vexp.t.busy_ns[scalar_engine] < base.t.busy_ns[scalar_engine]);
  CHECK(vexp.t.latency_ns > base.t.latency_ns);  // no function unit on VectorE
}

TEST_CASE("cross_entropy: compile errors say what overflowed and by how much") {
  CHECK(run({{"token_tile", 1024}, {"vocab_chunk", 1024}, {"tokens", 2048}}).error ==
        "PSUM overflow: 16 accumulation groups outstanding (token_tile 1024 = 8 row tiles x "
        "vocab_chunk 1024 = 2 banks of fp32 logits each); the target has 8 banks (over by 8)");
  const auto sbuf =
      run({{"d_model", 16384}, {"vocab_chunk", 2048}, {"token_tile", 256}, {"bufs", 3}});
  CHECK(sbuf.error.rfind("SBUF overflow: x tiles (131072 B), W chunks (1572864 B)", 0) == 0);
  CHECK(sbuf.error.find("the target has 212984 (over by") != std::string::npos);
  CHECK(run({{"mm_k", 256}}).error.rfind("partition dim 256 > 128:", 0) == 0);
  CHECK(run({{"mm_n", 1024}}).error.rfind("moving free size 1024 > 512:", 0) == 0);
  CHECK(run({{"token_tile", 200}}).error ==
        "cross_entropy: token_tile = 200 is over 128 partitions and not a multiple of 128");
}

TEST_CASE("cross_entropy: examples/cross_entropy.tsl loads and a sample of its configs lowers") {
  check_example_samples("cross_entropy.tsl", {{"tokens", "1024"}, {"vocab", "32000"}}, 5);
}

// --- functional mode through the gate ---------------------------------------------------

namespace {

/// Tokens, d_model and vocabulary that no tile divides, order (t, v) or (v, t).
std::pair<space, config> tail_case(std::vector<std::string> order) {
  fixed_values v;
  v.integers = {{"tokens", 300},     {"d_model", 200},     {"vocab", 1300},
                {"token_tile", 256}, {"vocab_chunk", 512}, {"bufs", 2}};
  v.symbols = {{"workload", "cross_entropy"}, {"dtype", "bf16"}};
  v.order = std::move(order);
  return fixed_space("cross_entropy", builtin("trn2"), v);
}

sim_options gated(std::string fault = "") {
  sim_options o;
  o.gate_options.secret = 0xce11;
  o.fault = std::move(fault);
  o.concurrency = 1;
  return o;
}

}  // namespace

TEST_CASE("cross_entropy: correct schedules pass the gate and every fault is caught") {
  for (const auto& order : {std::vector<std::string>{"t", "v"}, {"v", "t"}}) {
    auto [s, c] = tail_case(order);
    sim_backend good(gated());
    const auto ok = good.evaluate(s, c);
    INFO(order[0], ": ", ok.message);
    CHECK(ok.ok());
    CHECK(ok.metrics.at("gate_wall_s") > 0);
    for (const char* f :
         {"drop_tail", "skip_accumulation", "truncate_output", "constant_output", "ignore_input"}) {
      sim_backend bad(gated(f));
      const auto m = bad.evaluate(s, c);
      INFO(f, ": ", m.message);
      CHECK((m.status == status::incorrect || m.status == status::suspicious));
    }
  }
}

TEST_CASE("cross_entropy: at long reductions the functional mode checks a shrunk vocabulary") {
  parse_options options;
  options.target = "trn2";
  const space s =
      load_space(std::string(TESSEL_SOURCE_DIR) + "/examples/cross_entropy.tsl", options);
  rng random(9);
  const auto c = s.sample(random);
  const machine m = machine_for("trn2");
  const auto k = cross_entropy_workload().functional(s, c, m);
  REQUIRE(k);
  const auto in = k->inputs();
  const auto chunk = s.value_of(c, "vocab_chunk").integer;
  CHECK(in.at(1).shape.at(1) == 2 * chunk + 128256 % chunk);  // first, interior, tail chunks
  CHECK(in.at(1).shape.at(0) == 3 * 128);                     // three d_model slabs
  CHECK(k->outputs().at(0).shape.at(0) == 8192);              // every token stays
  sim_backend b(gated());
  CHECK(b.evaluate(s, c).ok());
}
