// sharded_moe: the MoE layer split by experts over the ranks of a topology
// target (docs/topology.md). The latency is the straggler rank's moe compute
// plus the all-to-all dispatch and combine; the gate checks the combined y
// against the unsharded moe reference and catches a dropped expert; explain
// names the all-to-all when it is the bottleneck; NKI emits moe's kernel for
// ep = 1 and a kernel per rank joined by all-to-alls for ep > 1.
#include "sharded_helpers.hpp"

#include "sim/collectives.hpp"
#include "sim/workloads/moe/moe.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <string>
#include <vector>

using namespace tessel;
using namespace tessel::sim;
using namespace tessel::sim::testing;

namespace {

space example(const std::string& target, overrides sets) {
  return sharded_example("sharded_moe.tsl", target, std::move(sets));
}

/// 256 tokens, each to 4 of 16 experts of [512, 384] (Zipf-skewed).
const overrides small{{"tokens", "256"}, {"d_in", "512"}, {"d_out", "384"},
                      {"experts", "16"}, {"top_k", "4"},  {"route_skew", "100"}};
const std::string tiles = R"("token_tile": 128, "out_tile": 384)";

/// The routed rows of each expert of `small`.
std::vector<std::int64_t> group_sizes() {
  moe_detail::params p;
  p.tokens = 256;
  p.experts = 16;
  p.top_k = 4;
  p.route_skew = 100;
  std::vector<std::int64_t> out(16, 0);
  for (const auto e : moe_detail::route_tokens(p)) ++out[static_cast<std::size_t>(e)];
  return out;
}

/// The rows of an all-to-all block of `small` over 4 ranks: the most rows one
/// rank's 64 tokens route to another rank's 4 experts (with `by_expert`, to
/// one of them), so that every block is padded to it.
std::int64_t block_rows(bool by_expert) {
  moe_detail::params p;
  p.tokens = 256;
  p.experts = 16;
  p.top_k = 4;
  p.route_skew = 100;
  const auto expert_of = moe_detail::route_tokens(p);
  std::vector<std::int64_t> n(4 * 16, 0);
  std::int64_t most = 0;
  for (std::size_t i = 0; i < expert_of.size(); ++i) {
    const auto from = static_cast<std::int64_t>(i / 4 / 64);
    const std::int64_t e = expert_of[i];
    const auto to = by_expert ? e : e / 4 * 4;
    most = std::max(most, ++n[static_cast<std::size_t>(from * 16 + to)]);
  }
  return most;
}

}  // namespace

TEST_CASE(
    "sharded_moe: latency = the straggler rank's experts + the all-to-all dispatch and "
    "combine") {
  const space s = example("trn2_chip", small);
  const measurement m = evaluate(s, with(s, R"({"ep": 4, "collective": "ring", )" + tiles + "}"));
  INFO(m.message);
  REQUIRE(m.ok());
  // the straggler: the rank with the most 128-row group tiles, then the most rows
  const auto size = group_sizes();
  std::int64_t most_tiles = -1, rows = 0;
  for (int q = 0; q < 4; ++q) {
    std::int64_t t = 0, n = 0;
    for (int e = 4 * q; e < 4 * q + 4; ++e) {
      t += (size[static_cast<std::size_t>(e)] + 127) / 128;
      n += size[static_cast<std::size_t>(e)];
    }
    if (t > most_tiles || (t == most_tiles && n > rows)) {
      most_tiles = t;
      rows = n;
    }
  }
  CHECK(rows > 256 * 4 / 4);  // the skew loads the first experts' rank beyond its share
  CHECK(m.metrics.at("flops") == doctest::Approx(2.0 * static_cast<double>(rows) * 512 * 384));
  // x rows (bf16) there, scaled fp32 rows back: 4 blocks of CAP rows each way,
  // every (source, destination) block padded to the largest
  const topology topo = machine_for("trn2_chip").topo;
  const auto a2a = [&](double bytes) {
    return time_collective(collective::all_to_all, collective_algorithm::ring, bytes, 4, topo).ns;
  };
  const auto cap = static_cast<double>(block_rows(false));
  CHECK(cap * 4 >= static_cast<double>(rows));  // the straggler receives at most 4 blocks
  const double expected = a2a(4 * cap * 512 * 2) + a2a(4 * cap * 384 * 4);
  CHECK(m.metrics.at("collective_s") == doctest::Approx(expected * 1e-9));
  CHECK(m.objective == doctest::Approx(m.metrics.at("compute_s") + expected * 1e-9));
  CHECK(m.message.find("all-to-all dispatch and combine (ring, 4 ranks") != std::string::npos);
  // ep = 1 is the moe workload's kernel of the whole layer, and slower
  const measurement one = evaluate(s, with(s, R"({"ep": 1, )" + tiles + "}"));
  REQUIRE(one.ok());
  CHECK(one.metrics.count("collective_s") == 0);
  CHECK(one.metrics.at("flops") == doctest::Approx(2.0 * 256 * 4 * 512 * 384));
  CHECK(m.metrics.at("compute_s") < one.objective);
  // the analytic model: moe's of the same rank, plus the same all-to-alls
  const measurement a = evaluate(s, with(s, R"({"ep": 4, "collective": "ring", )" + tiles + "}"),
                                 sim_model::analytic);
  REQUIRE(a.ok());
  CHECK(a.metrics.count("analytic") == 1);
  CHECK(a.metrics.at("instructions") == m.metrics.at("instructions"));
  CHECK(a.metrics.at("collective_s") == doctest::Approx(expected * 1e-9));
}

TEST_CASE("sharded_moe: overlap dispatches and combines expert by expert behind the compute") {
  const space s = example("trn2_chip", small);
  const measurement after = evaluate(s, with(s, R"({"ep": 4, "overlap": false, )" + tiles + "}"));
  const measurement overlapped =
      evaluate(s, with(s, R"({"ep": 4, "overlap": true, )" + tiles + "}"));
  REQUIRE(after.ok());
  REQUIRE(overlapped.ok());
  CHECK(overlapped.metrics.at("compute_s") == after.metrics.at("compute_s"));
  CHECK(overlapped.metrics.at("time_collective_s") < after.metrics.at("time_collective_s"));
  CHECK(overlapped.message.find("4 experts overlapped") != std::string::npos);
}

TEST_CASE("sharded_moe: a split the topology, the experts or the tokens cannot take says why") {
  check_compile_error(example("trn2_chip", small), R"({"ep": 16})",
                      "ep = 16 exceeds the 8 ranks of target 'trn2_chip'");
  // ep = 8 of `tokens` tokens routed to `experts` experts: the compile error's message
  const auto eight = [](int tokens, int experts) {
    parse_options options;
    options.target = "trn2_chip";
    const space odd = parse_space(
        "space sharded_moe { const tokens = " + std::to_string(tokens) +
            "  const experts = " + std::to_string(experts) +
            "  const d_in = 256  const d_out = 256  const top_k = 2  param ep : {1, 8} }",
        options);
    const measurement o = evaluate(odd, with(odd, R"({"ep": 8})"));
    CHECK(o.status == status::compile_error);
    return o.message;
  };
  CHECK(eight(64, 12) == "experts = 12 is not a multiple of ep = 8");
  CHECK(eight(60, 16) == "tokens = 60 is not a multiple of ep = 8");
}

TEST_CASE("sharded_moe: the gate checks the combined y against the unsharded moe") {
  const space s = example("trn2_chip", {{"tokens", "64"},
                                        {"d_in", "256"},
                                        {"d_out", "384"},
                                        {"experts", "8"},
                                        {"top_k", "2"},
                                        {"route_skew", "100"}});
  const machine m = machine_for("trn2_chip");
  for (const char* ep : {"1", "4"}) {
    INFO("ep = ", ep);
    const config c = with(s, std::string(R"({"ep": )") + ep + ", " + tiles + "}");
    // each rank's loop over its experts stops before its last expert: caught
    const auto kernel = check_gate_catches(s, c, m, fault::drop_tail);
    CHECK(kernel->outputs().at(0).shape == std::vector<std::int64_t>{64, 384});
    CHECK(kernel->inputs().at(1).shape == std::vector<std::int64_t>{8, 256, 384});
  }
}

TEST_CASE("sharded_moe: explain names the all-to-all when it is the bottleneck") {
  const space s = example("trn2_server", small);
  // 16 ranks of one expert each over two chips: the all-to-alls take longer than an expert
  check_explain_names(s, with(s, R"({"ep": 16, "collective": "ring", )" + tiles + "}"),
                      "all-to-all dispatch and combine (ring, 16 ranks", with(s, R"({"ep": 1})"));
}

TEST_CASE("sharded_moe: with ep > 1 the partials cannot wait in SBUF") {
  const space s = example("trn2_chip", small);
  tessel::config c = with(s, R"({"ep": 4, "partials": "sbuf", )" + tiles + "}");
  const measurement m = evaluate(s, c);
  CHECK(m.status == status::compile_error);
  CHECK(m.message.find("partials = sbuf with ep = 4") != std::string::npos);
  CHECK_FALSE(s.is_valid(c));  // examples/sharded_moe.tsl requires it
}

TEST_CASE("sharded_moe: NKI emission emits moe's kernel for ep = 1, a kernel per rank for ep > 1") {
  const overrides shape{
      {"tokens", "48"}, {"d_in", "256"}, {"d_out", "768"}, {"experts", "8"}, {"top_k", "2"}};
  const space s = example("trn2", shape);
  parse_options options;
  options.target = "trn2";
  options.overrides = shape;
  const space moe = load_space(std::string(TESSEL_SOURCE_DIR) + "/examples/moe.tsl", options);
  const std::string json = R"({"token_tile": 128, "out_tile": 768})";
  // the same kernel; only the header's space and config lines differ
  const auto body = [&](const space& on) {
    const std::string text = emit_nki(on, with(on, json), nki_options{});
    return text.substr(text.find("\n\n"));
  };
  CHECK(body(s) == body(moe));
  const space chip = example("trn2_chip", shape);
  for (const char* split : {R"({"ep": 8})", R"({"ep": 4, "overlap": true})"}) {
    CAPTURE(split);
    const std::string text = emit_nki(chip, with(chip, split), nki_options{});
    const bool overlap = std::string(split).find("overlap") != std::string::npos;
    CHECK(text.find(overlap ? "\nRANKS = 4 " : "\nRANKS = 8 ") != std::string::npos);
    CHECK(text.find(overlap ? "\nCHUNKS = 2 " : "\nCHUNKS = 1 ") != std::string::npos);
    CHECK(text.find("\nRANK_KERNELS = [sharded_moe_kernel_0, ") != std::string::npos);
    CHECK(text.find("ncc.all_to_all(") != std::string::npos);
    CHECK(text.find("\"all_to_all\": (") != std::string::npos);  // STRUCTURE counts them
  }
}
