// The flash-attention forward workload.
#include "helpers.hpp"

#include <tessel/dsl.hpp>
#include <tessel/sim.hpp>

#include <doctest/doctest.h>

using namespace tessel;
using namespace tessel::sim;
using namespace tessel::sim::testing;

namespace {

outcome run(std::map<std::string, std::int64_t> ints,
            std::map<std::string, std::string> syms = {}) {
  fixed_values v;
  v.integers = {{"seq", 2048}, {"head_dim", 128}, {"q_tile", 256}, {"kv_tile", 512}};
  for (auto& [k, x] : ints) v.integers[k] = x;
  v.symbols = {{"workload", "attention"}};
  for (auto& [k, x] : syms) v.symbols[k] = x;
  v.order = {"q", "k", "v"};
  return lower_and_time(attention_workload(), "attention", builtin("trn2"), std::move(v));
}

}  // namespace

TEST_CASE("attention: the matmuls do 4 seq^2 d FLOPs; causal with skipping does about half") {
  const auto full = run({});
  REQUIRE(full.error.empty());
  CHECK(matmul_flops(full.p) == doctest::Approx(4.0 * 2048 * 2048 * 128));
  CHECK(full.p.totals.flops == doctest::Approx(4.0 * 2048 * 2048 * 128));
  const auto causal = run({{"causal", 1}});
  REQUIRE(causal.error.empty());
  CHECK(causal.p.totals.flops == doctest::Approx(2.0 * 2048 * 2049 * 128));
  // whole kv tiles above the diagonal are skipped; the diagonal ones are computed and masked
  CHECK(matmul_flops(causal.p) < 0.7 * matmul_flops(full.p));
  CHECK(causal.t.latency_ns < full.t.latency_ns);
  const auto unskipped = run({{"causal", 1}, {"skip_masked", 0}});
  CHECK(matmul_flops(unskipped.p) == doctest::Approx(matmul_flops(full.p)));
  CHECK(unskipped.t.busy_ns[gpsimd_engine] > causal.t.busy_ns[gpsimd_engine]);  // masks every tile
}

TEST_CASE("attention: lazy rescaling costs VectorE steps in NKI; the row max stays on VectorE") {
  // without a data-dependent branch the correction runs every tile; lazy adds the guard that
  // moves the reference max (docs/nki.md)
  const auto eager = run({});
  const auto lazy = run({{"rescale_every", 4}}, {{"rescale", "lazy"}});
  REQUIRE(lazy.error.empty());
  CHECK(lazy.t.busy_ns[vector_engine] > eager.t.busy_ns[vector_engine]);
  CHECK(run({}, {{"track_max_on", "gpsimd"}}).error.find("VectorE only") != std::string::npos);
  CHECK(run({}, {{"exp_engine", "vector"}}).error.find("ScalarE") != std::string::npos);
}

TEST_CASE("attention: K and V are read once per q tile, Q and O once") {
  const auto o = run({{"q_tile", 512}});
  REQUIRE(o.error.empty());
  const double tensor = 2048.0 * 128 * 2;
  CHECK(o.t.hbm_read_bytes == doctest::Approx(tensor + 2 * tensor * (2048 / 512)));
  CHECK(o.t.hbm_write_bytes == doctest::Approx(tensor));
}

TEST_CASE("attention: compile errors") {
  CHECK(run({{"head_dim", 256}}).error.rfind("partition dim 256 > 128:", 0) == 0);
  CHECK(run({{"kv_tile", 4096}, {"seq", 4096}})
            .error.rfind("PSUM overflow: a 4096-wide score tile needs 8 banks", 0) == 0);
}

TEST_CASE(
    "attention: examples/sim_attention.tsl and the DSL engineer's attention.tsl run on the "
    "backend") {
  for (const char* file : {"sim_attention.tsl", "attention.tsl"}) {
    INFO(file);
    check_example_samples(file, {}, 11, {.samples = 8, .compile_errors = true});
  }
}
