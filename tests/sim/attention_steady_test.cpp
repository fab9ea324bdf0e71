// The attention workload's steady-state model (attention_steady.cpp): it
// counts what the lowering issues exactly and times the plan as the event
// model does, through the jumps over repeating kv iterations and q tiles.
#include "helpers.hpp"
#include "sim/workloads/attention/attention_plan.hpp"

#include <tessel/dsl.hpp>
#include <tessel/sim.hpp>

#include <doctest/doctest.h>

#include <map>
#include <string>

using namespace tessel;
using namespace tessel::sim;
using namespace tessel::sim::testing;

namespace {

struct compared {
  double event_ns = 0, steady_ns = 0, event_instructions = 0, steady_instructions = 0;
  double event_read = 0, steady_read = 0, event_write = 0, steady_write = 0;
};

compared compare(std::map<std::string, std::int64_t> ints,
                 std::map<std::string, std::string> syms = {},
                 std::vector<std::string> order = {"q", "k", "v"}) {
  fixed_values v;
  v.integers = {{"seq", 4096}, {"head_dim", 128}, {"q_tile", 128}, {"kv_tile", 128}};
  for (auto& [k, x] : ints) v.integers[k] = x;
  v.symbols = {{"workload", "attention"}};
  for (auto& [k, x] : syms) v.symbols[k] = x;
  v.order = std::move(order);
  const machine m = machine_for("trn2");
  auto [s, c] = fixed_space("attention", builtin("trn2"), v);
  const auto plan = attention_workload().plan_config(s, c, m);
  REQUIRE(plan->error.empty());
  program prog;
  REQUIRE(attention_workload().lower_plan(*plan, m, prog).empty());
  const timing_result t = time_program(prog, m);
  const auto e = attention_workload().steady_plan(*plan, m);
  REQUIRE(e.has_value());
  return {t.latency_ns,      e->latency_ns,     static_cast<double>(t.instructions),
          e->instructions,   t.hbm_read_bytes,  e->hbm_read_bytes,
          t.hbm_write_bytes, e->hbm_write_bytes};
}

void check(const compared& c, double tolerance) {
  CHECK(c.steady_instructions == c.event_instructions);
  CHECK(c.steady_read == c.event_read);
  CHECK(c.steady_write == c.event_write);
  CHECK(c.steady_ns == doctest::Approx(c.event_ns).epsilon(tolerance));
}

}  // namespace

TEST_CASE("attention steady model: causal with skipping, q tiles extrapolated along the diagonal") {
  // 528 units; the q tiles past the first few lie on a line in their key
  for (const std::int64_t bufs : {1, 2, 3}) {
    INFO("kv_bufs ", bufs);
    check(compare({{"causal", 1}, {"kv_bufs", bufs}}), 0.005);
  }
  check(compare({{"causal", 1}, {"q_tile", 256}, {"kv_tile", 256}}, {}, {"k", "v", "q"}), 0.005);
}

TEST_CASE("attention steady model: without skipping, the masked kv iterations repeat too") {
  check(compare({{"causal", 1}, {"skip_masked", 0}, {"q_tile", 512}}), 0.005);
  check(compare({{"causal", 1}, {"skip_masked", 0}}, {{"rescale", "lazy"}}), 0.005);
}

TEST_CASE("attention steady model: non-causal, lazy corrections, queues, kv tiles over q tiles") {
  check(compare({{"q_tile", 256}, {"kv_tile", 512}}), 0.005);
  check(compare({{"causal", 1}, {"rescale_every", 4}}, {{"rescale", "lazy"}}), 0.01);
  // several queues: the replay moves their data phases one after the other
  // (the same bytes in the same time, not the event model's fair share)
  check(compare({{"causal", 1}, {"dma_queues", 3}, {"kv_bufs", 3}}), 0.05);
  check(compare({{"causal", 1}, {"q_tile", 128}, {"kv_tile", 512}}, {}, {"v", "k", "q"}), 0.01);
  // partial tiles: neither tile divides seq
  check(compare({{"seq", 3000}, {"q_tile", 256}, {"kv_tile", 384}, {"causal", 1}}), 0.02);
}

TEST_CASE("attention steady model: a plan that overflows PSUM or SBUF has no estimate") {
  fixed_values v;
  v.integers = {{"seq", 8192}, {"head_dim", 128}, {"q_tile", 128}, {"kv_tile", 4096}};
  v.symbols = {{"workload", "attention"}};
  v.order = {"q", "k", "v"};
  const machine m = machine_for("trn2");
  auto [s, c] = fixed_space("attention", builtin("trn2"), v);
  const auto plan = attention_workload().plan_config(s, c, m);
  REQUIRE(plan->error.empty());
  program prog;
  CHECK(attention_workload().lower_plan(*plan, m, prog).rfind("PSUM overflow", 0) == 0);
  CHECK_FALSE(attention_workload().steady_plan(*plan, m).has_value());
}
