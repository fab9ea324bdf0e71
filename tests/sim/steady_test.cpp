// The steady-state analytic model (sim_options::model = sim_model::analytic,
// workloads/matmul/matmul_steady.cpp): it is used when selected, falls back
// to the event model for workloads without one, counts what the lowering
// issues exactly, and ranks configs as the event-driven model does.
#include "helpers.hpp"
#include "sim/workloads/matmul/matmul_plan.hpp"
#include "sim/workloads/matmul/matmul_steady.hpp"

#include <tessel/backends.hpp>
#include <tessel/dsl.hpp>
#include <tessel/error.hpp>
#include <tessel/fidelity.hpp>
#include <tessel/sim.hpp>

#include <doctest/doctest.h>

#include <string>
#include <utility>
#include <vector>

using namespace tessel;
using namespace tessel::sim;
using namespace tessel::sim::testing;

namespace {

std::string example(const std::string& name) {
  return std::string(TESSEL_SOURCE_DIR) + "/examples/" + name;
}

space example_space(const std::string& name) {
  parse_options options;
  options.target = "trn2";
  return load_space(example(name), options);
}

sim_options model(const std::string& name) {
  sim_options o;
  o.gate = false;
  o.model = name == "analytic" ? sim_model::analytic : sim_model::event;
  return o;
}

/// (analytic, event) objectives of the configs that compile, and how many
/// configs compile in one model only.
struct paired {
  std::vector<std::pair<double, double>> pairs;
  int compile_mismatch = 0;
};

paired pair_up(const space& s, std::uint64_t seed, int n) {
  sim_backend event(model("event")), analytic(model("analytic"));
  event.prepare(s);
  analytic.prepare(s);
  rng random(seed);
  paired out;
  for (int i = 0; i < n; ++i) {
    const config c = s.sample(random);
    const measurement e = event.evaluate(s, c), a = analytic.evaluate(s, c);
    if (e.ok() != a.ok() || e.status != a.status) ++out.compile_mismatch;
    if (e.ok() && a.ok()) out.pairs.emplace_back(a.objective, e.objective);
  }
  return out;
}

}  // namespace

TEST_CASE("analytic model: used when selected, by option and by registry setting") {
  const space s = example_space("sim_matmul.tsl");
  rng random(5);
  config c = s.sample(random);
  sim_backend event(model("event")), analytic(model("analytic"));
  event.prepare(s);
  analytic.prepare(s);
  for (int i = 0; i < 20 && !event.evaluate(s, c).ok(); ++i) c = s.sample(random);
  const measurement e = event.evaluate(s, c), a = analytic.evaluate(s, c);
  REQUIRE(e.ok());
  REQUIRE(a.ok());
  CHECK(a.metrics.at("analytic") == 1.0);
  CHECK(e.metrics.count("analytic") == 0);
  CHECK(a.message.rfind("analytic estimate: ", 0) == 0);
  CHECK(a.objective >= a.metrics.at("roofline_s"));
  // the closed-form counts are the lowering's exactly
  CHECK(a.metrics.at("instructions") == doctest::Approx(e.metrics.at("instructions")));
  CHECK(a.metrics.at("hbm_read_bytes") == doctest::Approx(e.metrics.at("hbm_read_bytes")));
  CHECK(a.metrics.at("hbm_write_bytes") == doctest::Approx(e.metrics.at("hbm_write_bytes")));
  CHECK(a.cost.compile_s == doctest::Approx(e.cost.compile_s));

  auto b = make_backend("sim", {{"model", "analytic"}, {"gate", "false"}});
  b->prepare(s);
  CHECK(b->evaluate(s, c).metrics.at("analytic") == 1.0);
  CHECK_THROWS_AS(make_backend("sim", {{"model", "fast"}}), tessel::error);
  // the gate: only its time check, so the estimate costs no functional run
  sim_options gated = model("analytic");
  gated.gate = true;
  sim_backend g(gated);
  g.prepare(s);
  const measurement m = g.evaluate(s, c);
  CHECK(m.ok());
  CHECK(m.metrics.count("gate_wall_s") == 0);
}

TEST_CASE(
    "analytic model: a plan its workload's model does not cover falls back to the event model") {
  // attention's replay covers no plan that overflows PSUM (a 128 x 4096
  // score tile in fp32 is 16 KiB a partition, more than PSUM with the other
  // banks): the event model reports the overflow for both models
  fixed_values v;
  v.integers = {{"seq", 8192}, {"head_dim", 128}, {"q_tile", 128}, {"kv_tile", 4096}};
  v.symbols = {{"workload", "attention"}};
  v.order = {"q", "k", "v"};
  auto [s, c] = fixed_space("attention", builtin("trn2"), v);
  sim_backend event(model("event")), analytic(model("analytic"));
  event.prepare(s);
  analytic.prepare(s);
  const measurement e = event.evaluate(s, c), a = analytic.evaluate(s, c);
  CHECK_FALSE(e.ok());
  CHECK(a.status == e.status);
  CHECK(a.message == e.message);
  CHECK(a.metrics.count("analytic") == 0);
  v.integers["kv_tile"] = 512;  // within it: the model's own
  auto [s512, c512] = fixed_space("attention", builtin("trn2"), v);
  analytic.prepare(s512);
  CHECK(analytic.evaluate(s512, c512).metrics.count("analytic") == 1);
}

TEST_CASE("analytic model: counts partial blocks, transposes and uncoalesced loads exactly") {
  const machine m = machine_for("trn2");
  for (const bool mk : {false, true})
    for (const bool coalesce : {false, true}) {
      auto v = matmul_values(1000, 1300, 700);
      v.integers.insert({{"tile_m", 384}, {"tile_n", 1024}, {"tile_k", 256}, {"bufs", 2}});
      v.integers.insert({{"coalesce", coalesce ? 1 : 0}});
      if (mk) v.symbols.insert({{"a_layout", "mk"}});
      auto [s, c] = fixed_space("matmul", builtin("trn2"), v);
      mm::plan pl;
      REQUIRE(mm::plan_for(s, c, m, pl).empty());
      program prog;
      REQUIRE(matmul_workload().lower(s, c, m, prog).empty());
      const timing_result t = time_program(prog, m);
      const steady_estimate e = mm::estimate_steady(pl, m);
      CHECK(e.instructions == doctest::Approx(static_cast<double>(prog.issued_count())));
      CHECK(e.hbm_read_bytes == doctest::Approx(t.hbm_read_bytes));
      CHECK(e.hbm_write_bytes == doctest::Approx(t.hbm_write_bytes));
      CHECK(e.latency_ns == doctest::Approx(t.latency_ns).epsilon(0.35));
    }
}

TEST_CASE("analytic model: reuse, per-operand buffers, PSUM rotation and block order") {
  const machine m = machine_for("trn2");
  struct knobs {
    std::int64_t a_reuse, b_reuse, a_bufs, b_bufs, psum_bufs;
    std::vector<std::string> order, block_order;
  };
  const std::vector<knobs> cases{
      {3, 1, 2, 2, 0, {"m", "n", "k"}, {"m", "n", "k"}},
      {1, 2, 1, 3, 2, {"n", "k", "m"}, {"n", "m", "k"}},
      {4, 4, 2, 1, 4, {"k", "m", "n"}, {"k", "m", "n"}},
      {2, 1, 3, 2, 2, {"m", "k", "n"}, {"m", "k", "n"}},
  };
  for (const auto& k : cases) {
    auto v = matmul_values(2048, 2048, 2048);
    v.integers.insert({{"tile_m", 256},
                       {"tile_n", 512},
                       {"tile_k", 512},
                       {"a_reuse", k.a_reuse},
                       {"b_reuse", k.b_reuse},
                       {"a_bufs", k.a_bufs},
                       {"b_bufs", k.b_bufs},
                       {"psum_bufs", k.psum_bufs}});
    v.order = k.order;
    auto [s, c] = fixed_space("matmul", builtin("trn2"), v);
    mm::plan pl;
    REQUIRE(mm::plan_for(s, c, m, pl).empty());
    mm::params p = pl.p;  // block_order: a permutation fixed_space cannot hold
    for (int i = 0; i < 3; ++i) {
      const auto d = std::string("mnk").find(k.block_order[static_cast<std::size_t>(i)][0]);
      p.block_order[static_cast<std::size_t>(i)] = static_cast<int>(d);
      p.block_pos[d] = i;
    }
    REQUIRE(mm::make_plan(p, m, pl).empty());
    program prog;
    REQUIRE(matmul_workload().lower_plan(plan_of<mm::plan>(pl), m, prog).empty());
    const timing_result t = time_program(prog, m);
    const steady_estimate e = mm::estimate_steady(pl, m);
    CHECK(e.instructions == doctest::Approx(static_cast<double>(prog.issued_count())));
    CHECK(e.hbm_read_bytes == doctest::Approx(t.hbm_read_bytes));
    CHECK(e.latency_ns == doctest::Approx(t.latency_ns).epsilon(0.25));
  }
}

TEST_CASE("analytic model: ranks examples/sim_matmul.tsl configs as the event model does") {
  const space s = example_space("sim_matmul.tsl");
  const paired p = pair_up(s, 11, 320);
  CHECK(p.compile_mismatch == 0);
  REQUIRE(p.pairs.size() >= 40);
  const rank_agreement r = measure_agreement(p.pairs);
  MESSAGE(r.text());
  CHECK(r.spearman_rho.value_or(0) >= 0.95);
  CHECK(r.kendall_tau.value_or(0) >= 0.8);
}

TEST_CASE("analytic model: on a logical core it estimates each core's share, the slowest counts") {
  // Before: trn2_lnc2 fell back to the event model for every config.
  parse_options options;
  options.target = "trn2_lnc2";
  const space two = load_space(example("sim_matmul.tsl"), options);
  const space one = example_space("sim_matmul.tsl");
  sim_backend event(model("event")), analytic(model("analytic")), single(model("analytic"));
  event.prepare(two);
  analytic.prepare(two);
  single.prepare(one);
  const config c = *two.default_config();
  const measurement e = event.evaluate(two, c), a = analytic.evaluate(two, c);
  REQUIRE(e.ok());
  REQUIRE(a.ok());
  CHECK(a.metrics.at("analytic") == 1.0);
  CHECK(a.metrics.at("core_balance") ==
        doctest::Approx(e.metrics.at("core_balance")).epsilon(0.05));
  CHECK(a.objective == doctest::Approx(e.objective).epsilon(0.15));
  const double ratio = a.objective / single.evaluate(one, c).objective;
  CHECK(ratio > 0.45);  // M split in two: about half of one core's time
  CHECK(ratio < 0.6);
}
