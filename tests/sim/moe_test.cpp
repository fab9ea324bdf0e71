// The MoE expert-matmul workload: deterministic uneven routing, the grouped
// GEMM's FLOPs and traffic, its gate (a kernel that drops a small group or a
// tail is caught), and the trn2_lnc2 target that splits it over two cores.
#include "sim/workloads/moe/moe.hpp"
#include "helpers.hpp"
#include "sim/functional.hpp"

#include <tessel/dsl.hpp>
#include <tessel/error.hpp>
#include <tessel/gate.hpp>
#include <tessel/sim.hpp>

#include <doctest/doctest.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <map>
#include <string>
#include <utility>
#include <vector>

using namespace tessel;
using namespace tessel::sim;
using namespace tessel::sim::testing;

namespace {

constexpr std::int64_t tokens = 256, d_in = 512, d_out = 384, experts = 16, top_k = 4;

fixed_values moe_values(const std::map<std::string, std::int64_t>& ints = {},
                        const std::map<std::string, std::string>& syms = {}) {
  fixed_values v;
  v.integers = {{"tokens", tokens},   {"d_in", d_in},    {"d_out", d_out},
                {"experts", experts}, {"top_k", top_k},  {"token_tile", 128},
                {"out_tile", 384},    {"dma_queues", 2}, {"route_skew", 100}};
  for (const auto& [k, x] : ints) v.integers[k] = x;
  v.symbols = {{"workload", "moe"}, {"dtype", "bf16"}};
  for (const auto& [k, x] : syms) v.symbols[k] = x;
  return v;
}

outcome run(const std::map<std::string, std::int64_t>& ints = {},
            const std::map<std::string, std::string>& syms = {},
            const std::string& target = "trn2") {
  return lower_and_time(*find_workload("moe"), "moe", builtin(target), moe_values(ints, syms));
}

sim_options gated(std::string fault = "") {
  sim_options o;
  o.gate_options.secret = 0x3035;
  o.fault = std::move(fault);
  o.concurrency = 1;
  return o;
}

}  // namespace

TEST_CASE("moe: 2 rows x d_in x d_out FLOPs per routed row; each used expert read once") {
  const auto o = run({{"token_tile", 256}});
  REQUIRE(o.error.empty());
  const double rows = tokens * top_k;
  CHECK(matmul_flops(o.p) == doctest::Approx(2.0 * rows * d_in * d_out));
  CHECK(o.p.totals.flops == doctest::Approx(2.0 * rows * d_in * d_out));
  // reads: each routed row's indices and router weight (8 + 4 bytes), the
  // gathered x rows, each expert's weights once (every expert is used and no
  // group exceeds 256 rows), the fp32 partials once
  const double reads =
      rows * 12 + rows * d_in * 2 + experts * d_in * d_out * 2.0 + rows * d_out * 4;
  CHECK(o.t.hbm_read_bytes == doctest::Approx(reads));
  // writes: the partials and y
  CHECK(o.t.hbm_write_bytes == doctest::Approx(rows * d_out * 4 + tokens * d_out * 2.0));
  CHECK(o.t.latency_ns >= o.roofline_ns);
}

TEST_CASE("moe: groups larger than token_tile read their expert's weights again") {
  const auto big = run({{"token_tile", 256}}), small = run({{"token_tile", 128}});
  REQUIRE(big.error.empty());
  REQUIRE(small.error.empty());
  // route_skew 100 sends more than 128 of the 1024 rows to expert 0
  CHECK(small.t.hbm_read_bytes > big.t.hbm_read_bytes);
}

TEST_CASE("moe: the routing is deterministic, seeded, and skewed by route_skew") {
  const auto a = run(), b = run();
  CHECK(a.t.latency_ns == b.t.latency_ns);
  // a uniform router spreads the rows: no group exceeds a tile, so the
  // weights are read once; the skewed one reads its hottest experts twice
  const auto uniform = run({{"route_skew", 0}});
  REQUIRE(uniform.error.empty());
  CHECK(uniform.t.hbm_read_bytes < a.t.hbm_read_bytes);
  // another seed routes differently (a different count of matmul rows per tile)
  const auto other = run({{"route_seed", 7}});
  CHECK(other.t.latency_ns != a.t.latency_ns);
}

TEST_CASE("moe: the plans of one routing share it; another routing is its own") {
  const machine m = machine_for("trn2_lnc2");
  moe_detail::params p;
  p.tokens = tokens;
  p.d_in = d_in;
  p.d_out = d_out;
  p.experts = experts;
  p.top_k = top_k;
  p.route_skew = 100;
  moe_detail::plan a, b, other;
  REQUIRE(moe_detail::make_plan(p, m, a).empty());
  p.token_tile = 256;  // another config of the same space
  REQUIRE(moe_detail::make_plan(p, m, b).empty());
  REQUIRE(a.expert_of.size() == static_cast<std::size_t>(tokens * top_k));
  CHECK(&a.expert_of[0] == &b.expert_of[0]);  // a view of one routing, not a copy
  CHECK(&a.group_size[0] == &b.group_size[0]);
  std::int64_t rows = 0;
  for (const auto n : a.group_size) rows += n;
  CHECK(rows == tokens * top_k);
  p.route_seed = 7;
  REQUIRE(moe_detail::make_plan(p, m, other).empty());
  CHECK(&other.expert_of[0] != &a.expert_of[0]);
  CHECK(std::vector<std::int32_t>(other.expert_of.begin(), other.expert_of.end()) !=
        std::vector<std::int32_t>(a.expert_of.begin(), a.expert_of.end()));
  // the first plan keeps its routing when the thread's cache moves on
  CHECK(std::vector<std::int32_t>(a.expert_of.begin(), a.expert_of.end()) ==
        moe_detail::route_tokens(a.p));
}

TEST_CASE("moe: partials kept in SBUF skip their HBM round trip") {
  const auto hbm = run({{"token_tile", 256}}),
             sbuf = run({{"token_tile", 256}}, {{"partials", "sbuf"}});
  REQUIRE(sbuf.error.empty());
  const double partials = tokens * top_k * d_out * 4.0;
  CHECK(sbuf.t.hbm_read_bytes == doctest::Approx(hbm.t.hbm_read_bytes - partials));
  CHECK(sbuf.t.hbm_write_bytes == doctest::Approx(hbm.t.hbm_write_bytes - partials));
  // all of them must fit: 8192 tokens' partials do not
  CHECK(run({{"tokens", 8192}}, {{"partials", "sbuf"}}).error.find("SBUF overflow") == 0);
}

TEST_CASE("moe: per-token grouping reads an expert's weights for every routed row") {
  const auto o = run({{"tokens", 32}}, {{"grouping", "token"}});
  REQUIRE(o.error.empty());
  const double rows = 32 * top_k;
  CHECK(matmul_flops(o.p) == doctest::Approx(2.0 * rows * d_in * d_out));
  CHECK(o.t.hbm_read_bytes == doctest::Approx(rows * 12 + rows * d_in * 2 +
                                              rows * d_in * d_out * 2.0 + rows * d_out * 4));
  const auto sorted = run({{"tokens", 32}});
  CHECK(sorted.t.latency_ns < o.t.latency_ns);
}

TEST_CASE("moe: x given transposed moves a column per transfer, with no transposes") {
  const auto rows = run(), cols = run({}, {{"x_layout", "transposed"}});
  REQUIRE(cols.error.empty());
  const auto transposes = [](const program& p) {
    return std::count_if(p.instructions().begin(), p.instructions().end(),
                         [](const instruction& in) { return in.kind == op::transpose; });
  };
  CHECK(transposes(rows.p) > 0);
  CHECK(transposes(cols.p) == 0);
  CHECK(cols.t.latency_ns > rows.t.latency_ns);
}

TEST_CASE("moe: the closed-form steady model counts the lowering's work on every schedule") {
  // tails of d_in, d_out and the instruction tiles, one and many experts per
  // token, each layout, grouping and partials choice: the counts and bytes
  // are the lowering's exactly, the latency within 40% of the event model's
  // (the contract test ranks them)
  const std::vector<
      std::pair<std::map<std::string, std::int64_t>, std::map<std::string, std::string>>>
      cases{{{}, {}},
            {{{"d_in", 500}, {"d_out", 400}, {"out_tile", 256}, {"mm_n", 256}}, {}},
            {{{"top_k", 1}, {"token_tile", 256}, {"bufs", 1}, {"x_bufs", 1}},
             {{"evict", "scalar"}, {"combine_engine", "gpsimd"}}},
            {{{"d_out", 300}, {"out_tile", 128}}, {{"grouping", "token"}, {"partials", "sbuf"}}},
            {{{"x_bufs", 1}}, {{"x_layout", "transposed"}}}};
  const machine m = resolve_machine(builtin("trn2"));
  for (const auto& [ints, syms] : cases) {
    const fixed_values v = moe_values(ints, syms);
    auto [s, c] = fixed_space("moe", builtin("trn2"), v);
    INFO(fmt::format("{} {}", fmt::join(ints, ", "), fmt::join(syms, ", ")));
    const auto o = run(ints, syms);
    REQUIRE(o.error.empty());
    const auto& w = *find_workload("moe");
    const auto e = w.steady_plan(*w.plan_config(s, c, m), m);
    REQUIRE(e.has_value());
    CHECK(e->instructions == static_cast<double>(o.t.instructions));
    CHECK(e->hbm_read_bytes == o.t.hbm_read_bytes);
    CHECK(e->hbm_write_bytes == o.t.hbm_write_bytes);
    CHECK(e->latency_ns == doctest::Approx(o.t.latency_ns).epsilon(0.4));
  }
}

TEST_CASE("moe: compile errors name the resource") {
  const auto psum = run({{"token_tile", 512}, {"d_out", 768}, {"out_tile", 768}});
  CHECK(psum.error.find("PSUM overflow") == 0);
  const auto sbuf = run({{"bufs", 4}, {"d_in", 8192}, {"out_tile", 384}, {"x_bufs", 2}});
  CHECK(sbuf.error.find("SBUF overflow") == 0);
  CHECK(run({{"top_k", 17}}).error.find("top_k = 17 is more than the 16 experts") !=
        std::string::npos);
  CHECK(run({}, {{"evict", "gpsimd"}}).error ==
        "moe: evict = gpsimd cannot drain PSUM (GpSimdE cannot access PSUM)");
  CHECK_THROWS_WITH_AS(run({}, {{"grouping", "padded"}}),
                       "sim workload 'moe': 'grouping' = padded is not one of sorted | token",
                       tessel::error);
}

TEST_CASE("moe: the gate passes the schedule and catches a dropped small group or tail") {
  // no structured binding: clang 14 cannot capture one in doctest's INFO
  const auto fixed = fixed_space("moe", builtin("trn2"), moe_values());
  const auto& s = fixed.first;
  const auto& c = fixed.second;
  {
    sim_backend b(gated());
    b.prepare(s);
    const auto m = b.evaluate(s, c);
    INFO(m.message);
    CHECK(m.ok());
  }
  for (const char* f :
       {"drop_tail", "skip_accumulation", "truncate_output", "constant_output", "ignore_input"}) {
    INFO(f);
    sim_backend b(gated(f));
    b.prepare(s);
    const auto m = b.evaluate(s, c);
    INFO(m.message);
    CHECK((m.status == status::incorrect || m.status == status::suspicious));
  }
}

TEST_CASE("moe: the gate catches a dropped tail with per-token grouping and fp32") {
  const auto fixed =
      fixed_space("moe", builtin("trn2"),
                  moe_values({{"tokens", 40}}, {{"grouping", "token"}, {"dtype", "fp32"}}));
  const auto& s = fixed.first;
  const auto& c = fixed.second;
  sim_backend ok(gated()), bad(gated("drop_tail"));
  CHECK(ok.evaluate(s, c).ok());
  const auto m = bad.evaluate(s, c);
  CHECK((m.status == status::incorrect || m.status == status::suspicious));
}

TEST_CASE("moe: sampled configs of examples/moe.tsl compile and respect the roofline") {
  check_example_samples("moe.tsl", {{"tokens", "128"}}, 5);
}

TEST_CASE("moe: explain names the knobs of the bottleneck") {
  parse_options options;
  options.target = "trn2";
  const space s = load_space(std::string(TESSEL_SOURCE_DIR) + "/examples/moe.tsl", options);
  sim_options quiet;
  quiet.gate = false;
  sim_backend b(quiet);
  auto c = *s.default_config();
  c[*s.parameter_index("x_layout")] = 1;  // transposed: the gather dominates
  const auto e = b.analyse(s, c);
  REQUIRE(!e.suggestions.empty());
  CHECK(e.suggestions[0].find("x_layout = rows") != std::string::npos);
  c[*s.parameter_index("x_layout")] = 0;
  c[*s.parameter_index("grouping")] = 1;  // per token: the weights dominate
  const auto t = b.analyse(s, c);
  REQUIRE(!t.suggestions.empty());
  CHECK(t.suggestions[0].find("grouping = sorted") != std::string::npos);
  // weight-bound with bufs at the space's maximum: no "raise" of it, and none of dma_queues,
  // which the space does not have (NKI assigns DMA queues)
  c[*s.parameter_index("grouping")] = 0;
  c[*s.parameter_index("bufs")] = 2;  // 3
  for (const auto& line : b.analyse(s, c).suggestions) {
    INFO(line);
    CHECK(line.find("raise bufs") == std::string::npos);
    CHECK(line.find("raise dma_queues") == std::string::npos);
  }
}
