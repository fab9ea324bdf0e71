// trn2_lnc2: a space re-targeted from one physical core to a logical core of
// two. The DSL sees the doubled totals; the simulator times each core's
// share (machine::cores, workload::plan_cores) and takes the slowest.
#include "helpers.hpp"

#include <tessel/dsl.hpp>
#include <tessel/sim.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

using namespace tessel;
using namespace tessel::sim;
using namespace tessel::sim::testing;

namespace {

space example(const std::string& file, const std::string& target,
              std::map<std::string, std::string, std::less<>> sets = {}) {
  parse_options options;
  options.target = target;
  options.overrides = std::move(sets);
  return load_space(std::string(TESSEL_SOURCE_DIR) + "/examples/" + file, options);
}

/// evaluate(s, c) by the event model, required to succeed.
measurement evaluate_ok(const space& s, const config& c) {
  auto m = evaluate(s, c);
  INFO(m.message);
  REQUIRE(m.ok());
  return m;
}

double latency(const space& s, const config& c) { return evaluate_ok(s, c).objective; }

/// moe at a shape whose expert split reaches the core barrier unevenly: three experts,
/// top-1, over 192 tokens, whole experts per core (the combine is split in even halves).
std::map<std::string, std::string, std::less<>> moe_uneven() {
  return {{"tokens", "192"}, {"experts", "3"}, {"top_k", "1"}};
}

}  // namespace

TEST_CASE("lnc: the machine of trn2_lnc2 is two trn2 cores") {
  const machine one = machine_for("trn2"), two = machine_for("trn2_lnc2");
  CHECK(one.cores == 1);
  CHECK(two.cores == 2);
  CHECK(two.bf16_peak_flops_per_ns == doctest::Approx(one.bf16_peak_flops_per_ns));  // per core
  CHECK(two.sbuf_bytes_per_partition == one.sbuf_bytes_per_partition);
  CHECK(two.dma_engines == one.dma_engines);
}

TEST_CASE("lnc: the DSL sees the doubled totals, so feasibility changes with the topology") {
  const char* text = R"(
    space s {
      param blocks : 1 .. 4
      require blocks * 20000000 <= target.sbuf_total_bytes "the blocks must fit in all SBUF"
      when target.lnc == 2 { param split : {rows, cols} }
    })";
  parse_options one, two;
  one.target = "trn2";
  two.target = "trn2_lnc2";
  const space a = parse_space(text, one), b = parse_space(text, two);
  CHECK(a.count() == 1);      // 27 MB: one block
  CHECK(b.count() == 2 * 2);  // 54 MB: two blocks, and the split is active
}

TEST_CASE("lnc: a matmul re-targeted to two cores splits M and takes about half the time") {
  const auto one = example("sim_matmul.tsl", "trn2"), two = example("sim_matmul.tsl", "trn2_lnc2");
  const auto c = *one.default_config();
  const double ratio = latency(two, c) / latency(one, c);
  CHECK(ratio > 0.45);
  CHECK(ratio < 0.6);
}

TEST_CASE("lnc: an odd split is as slow as its larger share") {
  // M = 384: the cores get 256 and 128 rows
  const auto one = example("sim_matmul.tsl", "trn2", {{"M", "384"}});
  const auto two = example("sim_matmul.tsl", "trn2_lnc2", {{"M", "384"}});
  const auto share = example("sim_matmul.tsl", "trn2", {{"M", "256"}});
  const auto c = *one.default_config();
  const auto split = evaluate_ok(two, c);
  CHECK(split.objective < latency(one, c));
  CHECK(split.objective == doctest::Approx(latency(share, c)));
  // the 128-row core finishes well before the 256-row one
  CHECK(split.metrics.at("core_balance") < 0.75);
  CHECK(evaluate_ok(one, c).metrics.count("core_balance") == 0);
}

TEST_CASE("lnc: moe splits by experts or by tokens; whole experts read each weight once") {
  const std::map<std::string, std::string, std::less<>> sets{{"tokens", "256"}};
  const auto one = example("moe.tsl", "trn2", sets), two = example("moe.tsl", "trn2_lnc2", sets);
  auto c1 = *one.default_config();
  CHECK(c1[*one.parameter_index("core_split")] == config::inactive);  // no second core
  auto c2 = *two.default_config();
  const double single = latency(one, c1);
  const auto expert_split = evaluate_ok(two, c2);
  const double by_expert = expert_split.objective;
  CHECK(expert_split.metrics.at("core_balance") > 0.8);  // experts balanced by sub-tiles
  c2[*two.parameter_index("core_split")] = 1;            // token
  const double by_token = latency(two, c2);
  CHECK(by_expert < 0.65 * single);
  // weight-bound: each core of the token split reads most experts' weights
  CHECK(by_token > by_expert);
  sim_options quiet;
  quiet.gate = false;
  const auto e = sim_backend(quiet).analyse(two, c2);
  const bool named = std::any_of(e.suggestions.begin(), e.suggestions.end(), [](const auto& x) {
    return x.find("core_split = expert") != std::string::npos;
  });
  CHECK(named);
}

TEST_CASE("lnc: a workload without a split dimension runs on one core of the two") {
  const auto one = example("sim_attention.tsl", "trn2", {{"seq", "512"}});
  const auto two = example("sim_attention.tsl", "trn2_lnc2", {{"seq", "512"}});
  const auto c = *one.default_config();
  CHECK(latency(two, c) == doctest::Approx(latency(one, c)));
}

TEST_CASE(
    "lnc: an even split marks its second share as the first's, so one steady estimate serves") {
  const machine m = machine_for("trn2_lnc2");
  const auto even = example("sim_matmul.tsl", "trn2_lnc2");  // M = 4096: 2048 rows each
  const auto odd = example("sim_matmul.tsl", "trn2_lnc2", {{"M", "384"}});
  const auto c = *even.default_config();
  const auto halves = workload_for_space(even, "")->plan_cores(even, c, m);
  REQUIRE(halves.size() == 2);
  CHECK_FALSE(halves[0]->same_as_previous);
  CHECK(halves[1]->same_as_previous);
  const auto uneven = workload_for_space(odd, "")->plan_cores(odd, c, m);
  REQUIRE(uneven.size() == 2);
  CHECK_FALSE(uneven[1]->same_as_previous);
  // the analytic model reports both cores (the estimate reused) as balanced
  const auto a = evaluate(even, c, sim_model::analytic);
  REQUIRE(a.ok());
  CHECK(a.metrics.at("analytic") == 1.0);
  CHECK(a.metrics.at("core_balance") == 1.0);
}

TEST_CASE("lnc: moe's expert split waits at one core barrier per core; the token split at none") {
  const machine m = machine_for("trn2_lnc2");
  const auto two = example("moe.tsl", "trn2_lnc2", {{"tokens", "256"}});
  auto c = *two.default_config();
  const auto* w = workload_for_space(two, "");
  const auto barriers = [&](const config& x) {
    std::vector<int> out;
    for (const auto& share : w->plan_cores(two, x, m)) {
      program p;
      REQUIRE(w->lower_plan(*share, m, p).empty());
      int n = 0;
      for (const auto& in : p.instructions())
        n += p.tags().at(in.tag) == "core barrier" && in.engine == gpsimd_engine;
      out.push_back(n);
    }
    return out;
  };
  CHECK(barriers(c) == std::vector<int>{1, 1});
  c[*two.parameter_index("core_split")] = 1;  // token: each core combines its own tokens
  CHECK(barriers(c) == std::vector<int>{0, 0});
  // whole experts per core with the partials in SBUF: a core cannot read the other's
  c[*two.parameter_index("core_split")] = 0;
  c[*two.parameter_index("partials")] = 1;
  CHECK_FALSE(two.is_valid(c));  // the example excludes it
  const auto plans = w->plan_cores(two, c, m);
  REQUIRE(!plans.empty());
  CHECK(plans[0]->error.find("partials = sbuf with core_split = expert") != std::string::npos);
}

TEST_CASE("lnc: sharded_attention splits whole heads over the two cores") {
  const machine m = machine_for("trn2_lnc2");
  const auto one = example("sharded_attention.tsl", "trn2", {{"seq", "256"}, {"heads", "3"}});
  const auto two = example("sharded_attention.tsl", "trn2_lnc2", {{"seq", "256"}, {"heads", "3"}});
  const auto c = *two.default_config();
  const auto* w = workload_for_space(two, "");
  CHECK(w->core_shares(two, m) == std::vector<std::int64_t>{1, 2});
  const auto a = evaluate_ok(two, c);
  CHECK(a.metrics.at("core_balance") == doctest::Approx(0.5).epsilon(0.05));  // 1 head of 2
  CHECK(a.objective < 0.75 * latency(one, c));  // the slower core runs 2 of the 3 heads
}

TEST_CASE("lnc: a core that reaches the core barrier first waits there for the other") {
  CHECK(wait_at_barrier({5.0, 3.0}) == std::vector<double>{0.0, 2.0});
  CHECK(wait_at_barrier({5.0, -1.0}) == std::vector<double>{0.0, 0.0});  // one without a barrier
  CHECK(wait_at_barrier({5.0}) == std::vector<double>{0.0});
  // moe's expert split with uneven experts: moe_uneven() makes the cores reach the barrier at
  // different times; the faster one waits, so its combine ends later than it would alone
  const machine m = machine_for("trn2_lnc2");
  const auto two = example("moe.tsl", "trn2_lnc2", moe_uneven());
  const auto c = *two.default_config();
  REQUIRE(two.to_json(c).find("\"core_split\":\"expert\"") != std::string::npos);
  const auto* w = workload_for_space(two, "");
  std::vector<double> alone, reach, steady_alone, steady_reach;
  for (const auto& share : w->plan_cores(two, c, m)) {
    program p;
    REQUIRE(w->lower_plan(*share, m, p).empty());
    REQUIRE(p.barriers().size() == 1);
    const auto t = time_program(p, m);
    alone.push_back(t.latency_ns);
    reach.push_back(t.barrier_ns);
    const auto e = w->steady_plan(*share, m);
    REQUIRE(e.has_value());
    steady_alone.push_back(e->latency_ns);
    steady_reach.push_back(e->barrier_ns);
  }
  REQUIRE(alone.size() == 2);
  INFO("alone ", alone[0], " ", alone[1], " ns; barrier reached at ", reach[0], " ", reach[1]);
  CHECK(std::abs(reach[0] - reach[1]) > 0.05 * std::max(reach[0], reach[1]));  // unbalanced
  const std::size_t slow = reach[0] > reach[1] ? 0 : 1, fast = 1 - slow;
  const double bound = reach[slow] + (alone[fast] - reach[fast]);
  const auto run = evaluate_ok(two, c);
  const double timed = run.objective * 1e9;
  CHECK(timed >= bound * (1 - 1e-9));
  CHECK(timed >= std::max(alone[0], alone[1]) * (1 - 1e-9));
  // the faster core's time includes its wait: it ends with the other (the combines are
  // even halves), not when it would alone
  const double waited = alone[fast] + reach[slow] - reach[fast];
  CHECK(run.metrics.at("core_balance") ==
        doctest::Approx(std::min(waited, timed) / std::max(waited, timed)));
  CHECK(run.metrics.at("core_balance") > alone[fast] / alone[slow] + 0.1);
  // the analytic model adds the same wait to its estimates
  const auto a = evaluate(two, c, sim_model::analytic);
  REQUIRE(a.ok());
  const std::size_t s_slow = steady_reach[0] > steady_reach[1] ? 0 : 1, s_fast = 1 - s_slow;
  CHECK(steady_reach[s_fast] >= 0);
  CHECK(a.objective * 1e9 >=
        (steady_reach[s_slow] + steady_alone[s_fast] - steady_reach[s_fast]) * (1 - 1e-9));
  CHECK(a.objective * 1e9 >= std::max(steady_alone[0], steady_alone[1]) * (1 - 1e-9));
  const double s_waited = steady_alone[s_fast] + steady_reach[s_slow] - steady_reach[s_fast];
  CHECK(a.metrics.at("core_balance") == doctest::Approx(std::min(s_waited, a.objective * 1e9) /
                                                        std::max(s_waited, a.objective * 1e9)));
}
