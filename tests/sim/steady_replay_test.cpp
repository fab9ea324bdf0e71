// The closed-form steady-state models of attention (attention_steady.cpp)
// and cross_entropy (cross_entropy_steady.cpp) count what the lowering
// issues exactly and time the plan within a few percent of the event model.
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

/// Both models on the one config of `name` built from `v` on trn2.
compared compare_on(const workload& w, const std::string& name, const fixed_values& v) {
  const machine m = machine_for("trn2");
  auto [s, c] = fixed_space(name, builtin("trn2"), v);
  const auto plan = w.plan_config(s, c, m);
  REQUIRE(plan->error.empty());
  program prog;
  REQUIRE(w.lower_plan(*plan, m, prog).empty());
  const timing_result t = time_program(prog, m);
  const auto e = w.steady_plan(*plan, m);
  REQUIRE(e.has_value());
  return {t.latency_ns,      e->latency_ns,     static_cast<double>(t.instructions),
          e->instructions,   t.hbm_read_bytes,  e->hbm_read_bytes,
          t.hbm_write_bytes, e->hbm_write_bytes};
}

compared compare(std::map<std::string, std::int64_t> ints,
                 std::map<std::string, std::string> syms = {},
                 std::vector<std::string> order = {"q", "k", "v"}) {
  fixed_values v;
  v.integers = {{"seq", 4096}, {"head_dim", 128}, {"q_tile", 128}, {"kv_tile", 128}};
  for (auto& [k, x] : ints) v.integers[k] = x;
  v.symbols = {{"workload", "attention"}};
  for (auto& [k, x] : syms) v.symbols[k] = x;
  v.order = std::move(order);
  return compare_on(attention_workload(), "attention", v);
}

/// cross_entropy with 8 token tiles of 128 and 17 chunks of 512 (the last partial).
compared compare_ce(std::map<std::string, std::int64_t> ints, std::vector<std::string> order,
                    std::map<std::string, std::string> syms = {}) {
  fixed_values v;
  v.integers = {{"tokens", 1024},    {"d_model", 1024},    {"vocab", 8192 + 300},
                {"token_tile", 128}, {"vocab_chunk", 512}, {"dma_queues", 1}};
  for (auto& [k, x] : ints) v.integers[k] = x;
  v.symbols = {{"workload", "cross_entropy"}};
  for (auto& [k, x] : syms) v.symbols[k] = x;
  v.order = std::move(order);
  return compare_on(cross_entropy_workload(), "cross_entropy", v);
}

void check(const compared& c, double tolerance) {
  CHECK(c.steady_instructions == c.event_instructions);
  CHECK(c.steady_read == c.event_read);
  CHECK(c.steady_write == c.event_write);
  CHECK(c.steady_ns == doctest::Approx(c.event_ns).epsilon(tolerance));
}

}  // namespace

/// attention's closed form: a sum of unit periods and load stalls, where
/// the event model (and the replay it replaced, within 0.5-3%) runs the
/// schedule; within 5% on these.
constexpr double attention_tolerance = 0.05;

TEST_CASE("attention steady model: causal with skipping, kv slots and loop orders") {
  // 528 units; with one or two K/V slots each tile's loads wait for the
  // readers of the tile before, with three they are a unit ahead
  for (const std::int64_t bufs : {1, 2, 3}) {
    INFO("kv_bufs ", bufs);
    check(compare({{"causal", 1}, {"kv_bufs", bufs}}), attention_tolerance);
  }
  check(compare({{"causal", 1}, {"q_tile", 256}, {"kv_tile", 256}}, {}, {"k", "v", "q"}),
        attention_tolerance);
}

TEST_CASE("attention steady model: without skipping, the masked kv iterations") {
  check(compare({{"causal", 1}, {"skip_masked", 0}, {"q_tile", 512}}), attention_tolerance);
  check(compare({{"causal", 1}, {"skip_masked", 0}}, {{"rescale", "lazy"}}), attention_tolerance);
}

TEST_CASE("attention steady model: non-causal, lazy corrections, queues, kv tiles over q tiles") {
  check(compare({{"q_tile", 256}, {"kv_tile", 512}}), attention_tolerance);
  check(compare({{"causal", 1}, {"rescale_every", 4}}, {{"rescale", "lazy"}}), attention_tolerance);
  check(compare({{"causal", 1}, {"dma_queues", 3}, {"kv_bufs", 3}}), attention_tolerance);
  check(compare({{"causal", 1}, {"q_tile", 128}, {"kv_tile", 512}}, {}, {"v", "k", "q"}),
        attention_tolerance);
  // partial tiles: neither tile divides seq
  check(compare({{"seq", 3000}, {"q_tile", 256}, {"kv_tile", 384}, {"causal", 1}}),
        attention_tolerance);
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

TEST_CASE("cross_entropy steady model: both loop orders, slots, queues and partial chunks") {
  // the closed form: each unit bound by its busiest resource; with one slot
  // the next block's loads wait for the unit's last matmul and the first
  // contraction for them, which it counts from the last slab's issue (the
  // event model overlaps the slabs' completion latencies: up to 8% low)
  for (const auto& order : {std::vector<std::string>{"t", "v"}, std::vector<std::string>{"v", "t"}})
    for (const std::int64_t bufs : {1, 2, 3}) {
      INFO("order ", order[0], order[1], ", bufs ", bufs);
      check(compare_ce({{"bufs", bufs}}, order), bufs == 1 ? 0.08 : 0.03);
    }
  check(compare_ce({{"token_tile", 256}, {"vocab_chunk", 1024}}, {"t", "v"},
                   {{"pick_engine", "gpsimd"}}),
        0.03);
  check(compare_ce({{"dma_queues", 2}, {"token_tile", 512}}, {"v", "t"}), 0.03);
  // more contraction slabs than the replay held (64), a partial one
  check(compare_ce({{"d_model", 65 * 128 + 64}, {"vocab", 2048 + 300}}, {"t", "v"}), 0.03);
}
