// sharded_matmul: a matmul split over the ranks of a topology target
// (docs/topology.md). The latency is one rank's matmul plus its collective;
// the gate checks the gathered C against the unsharded product; explain
// names the collective when it is the bottleneck.
#include "sharded_helpers.hpp"

#include "sim/collectives.hpp"

#include <tessel/dsl.hpp>
#include <tessel/error.hpp>
#include <tessel/gate.hpp>
#include <tessel/sim.hpp>

#include <doctest/doctest.h>

#include <string>

using namespace tessel;
using namespace tessel::sim;
using namespace tessel::sim::testing;

namespace {

space example(const std::string& target, overrides sets) {
  return sharded_example("sharded_matmul.tsl", target, std::move(sets));
}

const overrides small{{"M", "1024"}, {"N", "1024"}, {"K", "1024"}};

}  // namespace

TEST_CASE("sharded_matmul: latency = one rank's matmul + the collective of the topology") {
  const space s = example("trn2_chip", small);
  const config c = with(s, R"({"tp": 8, "shard": "m", "collective": "ring"})");
  const measurement m = evaluate(s, c);
  INFO(m.message);
  REQUIRE(m.ok());
  // an all-gather of the whole bf16 C over 8 ranks of one chip
  const double expected = time_collective(collective::all_gather, collective_algorithm::ring,
                                          1024.0 * 1024 * 2, 8, machine_for("trn2_chip").topo)
                              .ns;
  CHECK(m.metrics.at("collective_s") == doctest::Approx(expected * 1e-9));
  CHECK(m.metrics.at("time_collective_s") == doctest::Approx(expected * 1e-9));
  CHECK(m.objective == doctest::Approx(m.metrics.at("compute_s") + expected * 1e-9));
  // one rank's compute is the matmul of M / 8 rows: faster than the whole
  const measurement one = evaluate(s, with(s, R"({"tp": 1})"));
  REQUIRE(one.ok());
  CHECK(m.metrics.at("compute_s") < one.objective / 4);
  CHECK(one.metrics.at("time_collective_s") == 0);
  // the analytic model adds the same collective
  const measurement a = evaluate(s, c, sim_model::analytic);
  REQUIRE(a.ok());
  CHECK(a.metrics.count("analytic") == 1);
  CHECK(a.metrics.at("collective_s") == doctest::Approx(expected * 1e-9));
}

TEST_CASE("sharded_matmul: the split and the topology change the collective") {
  const space s = example("trn2_server", small);
  const auto time_of = [&](const std::string& json) {
    const measurement m = evaluate(s, with(s, json));
    INFO(json, ": ", m.message);
    REQUIRE(m.ok());
    return m.metrics.at("collective_s");
  };
  // k all-reduces the whole C: more than m's all-gather
  CHECK(time_of(R"({"tp": 8, "shard": "k"})") > time_of(R"({"tp": 8, "shard": "m"})"));
  // across 16 chips the flat ring pays 127 link hops; hierarchical crosses them once per chip
  CHECK(time_of(R"({"tp": 128, "shard": "n", "collective": "hierarchical"})") <
        time_of(R"({"tp": 128, "shard": "n", "collective": "ring"})"));
}

TEST_CASE("sharded_matmul: overlap hides the collective behind the compute, block by block") {
  const space s = example("trn2_chip", {{"M", "4096"}, {"N", "4096"}, {"K", "8192"}});
  const std::string base = R"({"tp": 2, "shard": "m", "tile_m": 256, "tile_n": 512)";
  const measurement after = evaluate(s, with(s, base + R"(, "overlap": false})"));
  const measurement overlapped = evaluate(s, with(s, base + R"(, "overlap": true})"));
  REQUIRE(after.ok());
  REQUIRE(overlapped.ok());
  CHECK(overlapped.metrics.at("compute_s") == doctest::Approx(after.metrics.at("compute_s")));
  CHECK(overlapped.metrics.at("time_collective_s") < after.metrics.at("time_collective_s"));
  CHECK(overlapped.objective < after.objective);
}

TEST_CASE("sharded_matmul: a config the topology cannot run is a compile error that says why") {
  check_compile_error(example("trn2_chip", small), R"({"tp": 16})",
                      "tp = 16 exceeds the 8 ranks of target 'trn2_chip'");
  parse_options options;
  options.target = "trn2_chip";
  const space odd = parse_space(
      "space sharded_matmul { const M = 1004  const N = 1024  const K = 1024  param tp : {1, 8} "
      "}",
      options);
  // shard = m by default
  check_compile_error(odd, R"({"tp": 8})", "M = 1004 is not a multiple of tp = 8");
}

TEST_CASE("sharded_matmul: the gate checks the gathered C against the unsharded product") {
  const space s = example("trn2_chip", {{"M", "512"}, {"N", "1024"}, {"K", "2048"}});
  const machine m = machine_for("trn2_chip");
  for (const char* shard : {"m", "n", "k"}) {
    INFO("shard = ", shard);
    const config c = with(s, std::string(R"({"tp": 4, "tile_k": 256, "shard": ")") + shard + "\"}");
    // a rank that loses its last accumulation is caught
    const auto kernel = check_gate_catches(s, c, m, fault::skip_accumulation);
    CHECK(kernel->outputs().at(0).shape == std::vector<std::int64_t>{512, 1024});
  }
}

TEST_CASE("sharded_matmul: explain names the collective when it is the bottleneck") {
  const space s = example("trn2_server", small);
  // 16 ranks over two chips all-reduce 2 MiB; each computes a 1024 x 1024 x 64 slice; a
  // compute-bound config names the matmul's bottleneck, then the collective
  check_explain_names(s, with(s, R"({"tp": 16, "shard": "k", "collective": "ring"})"),
                      "all-reduce of C (ring, 16 ranks", with(s, R"({"tp": 1})"));
}

TEST_CASE("sharded_matmul: NKI emission of tp = 1 and of ranks joined by collectives") {
  const space s = example("trn2", small);
  std::string text;
  CHECK_NOTHROW(text = emit_nki(s, with(s, R"({"tp": 1})"), nki_options{}));
  CHECK(text.find("nc_matmul") != std::string::npos);
  CHECK(text.find("RANKS") == std::string::npos);
  // tp = 8 (docs/nki.md, "Ranks and collectives"): one rank's kernel, then its collective
  const space chip = example("trn2_chip", small);
  const std::string gather = emit_nki(chip, with(chip, R"({"tp": 8})"), nki_options{});
  CHECK(gather.find("\nRANKS = 8 ") != std::string::npos);
  CHECK(gather.find("def matmul_rank(A, B, C):") != std::string::npos);
  CHECK(gather.find("ncc.all_gather(srcs=[C_rank], dsts=[C.reshape((RANKS, ") != std::string::npos);
  CHECK(gather.find("\"collectives\": {\"all_gather\": (1, ") != std::string::npos);
  // shard = k with overlap: an all-reduce per C block of the rank
  const std::string reduce =
      emit_nki(chip, with(chip, R"({"tp": 4, "shard": "k", "overlap": true})"), nki_options{});
  CHECK(reduce.find("ncc.all_reduce(srcs=[C_rank[r0:r1, c0:c1]], dsts=[C[r0:r1, c0:c1]]") !=
        std::string::npos);
}
