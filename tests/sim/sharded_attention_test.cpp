// sharded_attention: multi-head attention split by heads over the ranks of
// a topology target (docs/topology.md). The latency is one rank's heads,
// run back to back, plus the all-gather of O; the gate checks the gathered
// O against the unsharded attention and catches a dropped head; explain
// names the collective when it is the bottleneck.
#include "sharded_helpers.hpp"

#include "sim/collectives.hpp"

#include <tessel/dsl.hpp>
#include <tessel/error.hpp>
#include <tessel/gate.hpp>
#include <tessel/sim.hpp>

#include <doctest/doctest.h>

#include <set>
#include <string>

using namespace tessel;
using namespace tessel::sim;
using namespace tessel::sim::testing;

namespace {

space example(const std::string& target, overrides sets) {
  return sharded_example("sharded_attention.tsl", target, std::move(sets));
}

const overrides small{{"seq", "512"}, {"heads", "16"}};

/// The attention kernel of examples/sharded_attention.tsl's fixed tiles.
const std::string tiles =
    R"("q_tile": 128, "kv_tile": 512, "kv_bufs": 2, "rescale": "eager", "skip_masked": true)";

}  // namespace

TEST_CASE("sharded_attention: latency = one rank's heads back to back + the all-gather of O") {
  const space s = example("trn2_chip", small);
  const config c = with(s, R"({"tp": 8, "collective": "ring", )" + tiles + "}");
  const measurement m = evaluate(s, c);
  INFO(m.message);
  REQUIRE(m.ok());
  // an all-gather of every head's bf16 O (16 x 512 x 128) over 8 ranks of one chip
  const double expected = time_collective(collective::all_gather, collective_algorithm::ring,
                                          16.0 * 512 * 128 * 2, 8, machine_for("trn2_chip").topo)
                              .ns;
  CHECK(m.metrics.at("collective_s") == doctest::Approx(expected * 1e-9));
  CHECK(m.metrics.at("time_collective_s") == doctest::Approx(expected * 1e-9));
  CHECK(m.objective == doctest::Approx(m.metrics.at("compute_s") + expected * 1e-9));
  // one head per rank is exactly the attention workload's kernel of that head
  parse_options options;
  options.target = "trn2_chip";
  const space one_head = parse_space(
      "space attention { const seq = 512  const head_dim = 128  const bytes = 2  const causal = "
      "true }",
      options);
  const measurement head = evaluate(one_head, *one_head.default_config());
  REQUIRE(head.ok());
  const measurement sixteen = evaluate(s, with(s, R"({"tp": 16, )" + tiles + "}"));
  CHECK(sixteen.status == status::compile_error);  // 8 ranks on one chip
  const space server = example("trn2_server", small);
  const measurement per_head = evaluate(server, with(server, R"({"tp": 16, )" + tiles + "}"));
  REQUIRE(per_head.ok());
  CHECK(per_head.metrics.at("compute_s") == doctest::Approx(head.objective));
  // two heads per rank run back to back, the second one's first loads
  // waiting for the first one's last store: the heads barely overlap (the
  // first head's other stores drain while the second starts)
  CHECK(m.metrics.at("compute_s") <= 2 * head.objective);
  CHECK(m.metrics.at("compute_s") >= 1.95 * head.objective);
  // the analytic model adds the same collective to twice one head's estimate
  const measurement a = evaluate(s, c, sim_model::analytic);
  const measurement a_head = evaluate(one_head, *one_head.default_config(), sim_model::analytic);
  REQUIRE(a.ok());
  REQUIRE(a_head.ok());
  CHECK(a.metrics.count("analytic") == 1);
  CHECK(a.metrics.at("compute_s") == doctest::Approx(2 * a_head.objective));
  CHECK(a.metrics.at("collective_s") == doctest::Approx(expected * 1e-9));
}

TEST_CASE("sharded_attention: a sharded output needs no collective; overlap gathers head by head") {
  const space s = example("trn2_chip", {{"seq", "512"}, {"heads", "16"}, {"output", "sharded"}});
  const measurement sharded = evaluate(s, with(s, R"({"tp": 4})"));
  REQUIRE(sharded.ok());
  CHECK(sharded.metrics.at("time_collective_s") == 0);
  CHECK(sharded.metrics.count("collective_s") == 0);
  const space g = example("trn2_chip", {{"seq", "2048"}, {"heads", "16"}});
  const measurement after = evaluate(g, with(g, R"({"tp": 4, "overlap": false})"));
  const measurement overlapped = evaluate(g, with(g, R"({"tp": 4, "overlap": true})"));
  REQUIRE(after.ok());
  REQUIRE(overlapped.ok());
  CHECK(overlapped.metrics.at("compute_s") == after.metrics.at("compute_s"));
  CHECK(overlapped.metrics.at("time_collective_s") < after.metrics.at("time_collective_s"));
  CHECK(overlapped.objective < after.objective);
}

TEST_CASE("sharded_attention: a split the topology or the heads cannot take says why") {
  check_compile_error(example("trn2_chip", small), R"({"tp": 16})",
                      "tp = 16 exceeds the 8 ranks of target 'trn2_chip'");
  parse_options options;
  options.target = "trn2_chip";
  const space odd = parse_space(
      "space sharded_attention { const heads = 12  const seq = 512  param tp : {1, 8} }", options);
  check_compile_error(odd, R"({"tp": 8})", "heads = 12 is not a multiple of tp = 8");
}

TEST_CASE("sharded_attention: the gate checks the gathered O against the unsharded attention") {
  const space s = example("trn2_chip", {{"seq", "256"}, {"heads", "8"}});
  const machine m = machine_for("trn2_chip");
  for (const char* tp : {"1", "4"}) {
    INFO("tp = ", tp);
    const config c = with(s, std::string(R"({"tp": )") + tp + ", " + tiles + "}");
    // each rank's loop over its heads stops before its last head: caught
    const auto kernel = check_gate_catches(s, c, m, fault::drop_tail);
    CHECK(kernel->outputs().at(0).shape == std::vector<std::int64_t>{8 * 256, 128});
    CHECK(kernel->inputs().at(0).shape == std::vector<std::int64_t>{8 * 128, 256});
  }
}

namespace {

/// The executor of `k` with every element of head `head` (of `seq` rows of
/// `d`) off by one: a kernel that gets one middle head wrong.
class wrong_head final : public sampled_kernel {
 public:
  wrong_head(const functional_kernel& k, std::int64_t head, std::int64_t seq, std::int64_t d)
      : k_(k), head_(head), seq_(seq), d_(d) {}
  [[nodiscard]] probe_values run(std::span<const input_tensor> in,
                                 const probe_points& where) const override {
    probe_values out = k_.run(in, where);
    for (std::size_t i = 0; i < where.at(0).size(); ++i)
      if (where[0][i] / d_ / seq_ == head_) out[0][i] += 1.0;
    return out;
  }

 private:
  const functional_kernel& k_;
  std::int64_t head_, seq_, d_;
};

}  // namespace

TEST_CASE("sharded_attention: the gate probes every head, so one wrong middle head is caught") {
  // 16 heads of 1024 rows: the budget alone probes two rows of O (the first head's first and
  // the last head's last); every other head gets a row of its own
  const space s = example("trn2_chip", {{"seq", "1024"}, {"heads", "16"}});
  const config c = with(s, R"({"tp": 4, )" + tiles + "}");
  const auto kernel = workload_for_space(s, "")->functional(s, c, machine_for("trn2_chip"));
  REQUIRE(kernel);
  rng r(5);
  std::set<std::int64_t> heads;
  const probe_points probes = kernel->probes(r);
  for (const auto flat : probes.at(0)) heads.insert(flat / 128 / 1024);
  CHECK(heads.size() == 16);
  for (const std::int64_t head : {1, 6, 9}) {
    INFO("head ", head);
    gate g(gate_options{.secret = 3});
    CHECK_FALSE(g.check(*kernel, wrong_head(*kernel, head, 1024, 128), 1).ok());
  }
  gate right(gate_options{.secret = 3});
  CHECK(right.check(*kernel, *kernel, 1).ok());
}

TEST_CASE("sharded_attention: explain names the all-gather when it is the bottleneck") {
  const space s = example("trn2_server", small);
  // 16 ranks over two chips gather 2 MiB; each computes one 512-long head
  check_explain_names(s, with(s, R"({"tp": 16, "collective": "ring", )" + tiles + "}"),
                      "all-gather of O (ring, 16 ranks, 2.00 MiB)", with(s, R"({"tp": 1})"));
}

TEST_CASE("sharded_attention: NKI emission of tp = 1 and of ranks joined by an all-gather") {
  const space s = example("trn2", {{"seq", "512"}, {"heads", "1"}});
  std::string text;
  CHECK_NOTHROW(text = emit_nki(s, with(s, R"({"tp": 1})"), nki_options{}));
  CHECK(text.find("nc_matmul") != std::string::npos);
  const space chip = example("trn2_chip", small);
  const std::string ranks = emit_nki(chip, with(chip, R"({"tp": 8})"), nki_options{});
  CHECK(ranks.find("\nRANKS = 8 ") != std::string::npos);
  CHECK(ranks.find("ncc.all_gather(srcs=[O_rank], dsts=[O], replica_group=group, "
                   "collective_dim=0)") != std::string::npos);
  // one rank's 16 heads: attention's kernel in a loop over the stacked heads
  const space many = example("trn2", small);
  CHECK(nki_refusal(many, R"({"tp": 1})").empty());
  const std::string heads = emit_nki(many, with(many, R"({"tp": 1})"), nki_options{});
  CHECK(heads.find("HEADS = 16") != std::string::npos);
  CHECK(heads.find("for h in nl.sequential_range(HEADS):") != std::string::npos);
  CHECK(text.find("HEADS") == std::string::npos);  // one head: attention's kernel as it is
}
