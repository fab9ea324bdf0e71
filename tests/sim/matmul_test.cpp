// The matmul workload: what it reads, how it lowers, the compiler's errors.
#include "helpers.hpp"

#include <tessel/error.hpp>

#include <doctest/doctest.h>

#include <string>

using namespace tessel;
using namespace tessel::sim;
using namespace tessel::sim::testing;

namespace {

struct outcome {
  std::string error;
  program p;
  timing_result t;
};

outcome lower_and_time(const fixed_values& v, const std::string& target_name = "trn2") {
  const target t = builtin(target_name);
  const machine m = resolve_machine(t);
  auto [s, c] = fixed_space("matmul", t, v);
  outcome o;
  o.error = matmul_workload().lower(s, c, m, o.p);
  if (o.error.empty()) o.t = time_program(o.p, m);
  return o;
}

fixed_values with(fixed_values v, std::map<std::string, std::int64_t> ints,
                  std::map<std::string, std::string> syms = {}) {
  for (auto& [k, x] : ints) v.integers[k] = x;
  for (auto& [k, x] : syms) v.symbols[k] = x;
  return v;
}

}  // namespace

TEST_CASE("matmul: FLOPs, minimal bytes and the bytes a blocking moves") {
  // blocks 512 x 1024 x 1024 in order (m, n, k): A re-read once per n block,
  // B once per m block, C written once.
  const auto v =
      with(matmul_values(2048, 2048, 2048), {{"tile_m", 512}, {"tile_n", 1024}, {"tile_k", 1024}});
  const auto o = lower_and_time(v);
  REQUIRE(o.error.empty());
  CHECK(o.p.totals.flops == 2.0 * 2048 * 2048 * 2048);
  CHECK(o.p.totals.min_hbm_bytes == 3.0 * 2048 * 2048 * 2);
  CHECK(o.t.hbm_read_bytes == 2048.0 * 2048 * 2 * (2048 / 1024) + 2048.0 * 2048 * 2 * (2048 / 512));
  CHECK(o.t.hbm_write_bytes == 2048.0 * 2048 * 2);
}

TEST_CASE("matmul: a_home = sbuf keeps A resident across the n loop") {
  auto v =
      with(matmul_values(1024, 4096, 1024), {{"tile_m", 256}, {"tile_n", 512}, {"tile_k", 256}});
  const auto streamed = lower_and_time(with(v, {}, {{"a_home", "hbm"}}));
  const auto cached = lower_and_time(with(v, {}, {{"a_home", "sbuf"}}));
  REQUIRE(streamed.error.empty());
  REQUIRE(cached.error.empty());
  const double a_bytes = 1024.0 * 1024 * 2, b_bytes = 1024.0 * 4096 * 2;
  CHECK(streamed.t.hbm_read_bytes == a_bytes * (4096 / 512) + b_bytes * (1024 / 256));
  CHECK(cached.t.hbm_read_bytes == a_bytes + b_bytes * (1024 / 256));
  CHECK(cached.t.latency_ns < streamed.t.latency_ns);
}

TEST_CASE(
    "matmul: PSUM accumulation across k blocks when k is innermost, SBUF partial sums otherwise") {
  const auto base =
      with(matmul_values(1024, 1024, 2048), {{"tile_m", 256}, {"tile_n", 1024}, {"tile_k", 512}});
  auto inner = base;
  inner.order = {"m", "n", "k"};
  auto outer = base;
  outer.order = {"k", "m", "n"};
  const auto a = lower_and_time(inner), b = lower_and_time(outer);
  REQUIRE(a.error.empty());
  REQUIRE(b.error.empty());
  int adds_a = 0, adds_b = 0;
  for (const auto& in : a.p.instructions()) adds_a += in.kind == op::tensor_tensor;
  for (const auto& in : b.p.instructions()) adds_b += in.kind == op::tensor_tensor;
  CHECK(adds_a == 0);
  CHECK(adds_b == (2048 / 512 - 1) * (1024 / 128) * (1024 / 512));
  // every C tile is evicted once in PSUM mode
  int evicts_a = 0;
  for (const auto& in : a.p.instructions()) evicts_a += in.engine == vector_engine;
  CHECK(evicts_a == (1024 / 128) * (1024 / 512));
}

TEST_CASE("matmul: resource overflows are compile errors with the compiler's kind of message") {
  const auto base = matmul_values(4096, 4096, 4096);
  SUBCASE("SBUF") {
    const auto o = lower_and_time(
        with(base, {{"tile_m", 128}, {"tile_n", 4096}, {"tile_k", 4096}, {"bufs", 2}}));
    CHECK(o.error ==
          "SBUF overflow: B blocks need 524288 B per partition with bufs=2; the target has 212984 "
          "(over by 311304 B)");
  }
  SUBCASE("SBUF, several parts") {
    auto v = with(base, {{"tile_m", 1024}, {"tile_n", 2048}, {"tile_k", 1024}, {"bufs", 3}});
    v.order = {"m", "k", "n"};  // partial sums of a 1024 x 4096 band stay in SBUF across k
    const auto o = lower_and_time(v);
    CHECK(o.error ==
          "SBUF overflow: A blocks (49152 B), B blocks (98304 B), C partial sums (65536 B), output "
          "staging (8192 B) "
          "need 221184 B per partition with bufs=3; the target has 212984 (over by 8200 B)");
  }
  SUBCASE("partition dim") {
    const auto o = lower_and_time(with(base, {{"mm_k", 256}}));
    CHECK(o.error.rfind("partition dim 256 > 128:", 0) == 0);
  }
  SUBCASE("fp8 on trn2 contracts 256 partitions-deep (double row)") {
    CHECK(lower_and_time(with(base, {{"mm_k", 256}}, {{"dtype", "fp8"}})).error.empty());
    CHECK(lower_and_time(with(base, {{"mm_k", 256}}, {{"dtype", "fp8"}}), "trn1")
              .error.rfind("partition dim 256 > 128", 0) == 0);
  }
  SUBCASE("a contraction tile lies within one 128-row slab (docs/nki.md)") {
    CHECK(lower_and_time(with(base, {{"mm_k", 64}})).error.empty());
    CHECK(lower_and_time(with(base, {{"mm_k", 96}})).error ==
          "mm_k = 96 must divide the 128 partitions: a contraction tile lies within one 128-row "
          "slab of a block");
  }
  SUBCASE("fp8 double_row pairs two full slabs: no tile of 129 to 255 rows (docs/nki.md)") {
    // k blocks of 384 rows: 256 + 128, each an instruction NKI has
    CHECK(lower_and_time(
              with(base, {{"mm_k", 256}, {"tile_k", 384}, {"K", 3840}}, {{"dtype", "fp8"}}))
              .error.empty());
    CHECK(lower_and_time(with(base, {{"mm_k", 256}, {"tile_k", 448}}, {{"dtype", "fp8"}})).error ==
          "mm_k = 256 (fp8 double_row): a k block of 448 rows ends in a contraction tile of 192 "
          "rows, which is neither two full 128-row slabs (double_row) nor one (an ordinary "
          "matmul): NKI cannot issue it; use tile_k and K multiples of 256 (or ending in at most "
          "128 rows)");
    // K's last block too: 4000 = 15 x 256 + 160
    CHECK(lower_and_time(
              with(base, {{"mm_k", 256}, {"tile_k", 256}, {"K", 4000}}, {{"dtype", "fp8"}}))
              .error.find("a k block of 160 rows ends in a contraction tile of 160 rows") !=
          std::string::npos);
    CHECK(lower_and_time(with(base, {{"mm_k", 192}}, {{"dtype", "fp8"}})).error ==
          "mm_k = 192: a contraction tile deeper than the 128 partitions is an fp8 double_row "
          "matmul, which pairs two full slabs; mm_k must be 256 or divide 128");
  }
  SUBCASE("moving free size") {
    const auto o = lower_and_time(with(base, {{"mm_n", 1024}}));
    CHECK(o.error.rfind("moving free size 1024 > 512:", 0) == 0);
  }
  SUBCASE("PSUM accumulation groups") {
    auto v = with(base, {{"tile_m", 1024}, {"tile_n", 1024}, {"tile_k", 512}});
    const auto o = lower_and_time(v);
    CHECK(o.error.rfind("PSUM overflow: 16 accumulation groups outstanding", 0) == 0);
    CHECK(o.error.find("the target has 8 banks") != std::string::npos);
  }
}

TEST_CASE("matmul: dtypes: fp8 doubles TensorE throughput on trn2, fp32 costs 4x") {
  // a TensorE-bound shape: big blocks, k innermost
  const auto v =
      with(matmul_values(2048, 2048, 2048), {{"tile_m", 512}, {"tile_n", 1024}, {"tile_k", 1024}});
  const auto bf16 = lower_and_time(v);
  const auto fp8 = lower_and_time(with(v, {}, {{"dtype", "fp8"}}));
  const auto fp32 = lower_and_time(with(v, {{"bufs", 1}}, {{"dtype", "fp32"}}));
  REQUIRE(bf16.error.empty());
  REQUIRE(fp8.error.empty());
  REQUIRE(fp32.error.empty());
  // the issue-rate rule exactly (fp8: contraction 256 per instruction); busy
  // times also carry warm-up and exposed stationary loads
  CHECK(fp8.t.tensor_ideal_ns == doctest::Approx(bf16.t.tensor_ideal_ns / 2));
  CHECK(fp32.t.tensor_ideal_ns == doctest::Approx(bf16.t.tensor_ideal_ns * 4));
  CHECK(fp8.t.latency_ns < bf16.t.latency_ns);
  CHECK(fp32.t.latency_ns > 3 * bf16.t.latency_ns);
}

TEST_CASE("matmul: fp8_e4m3 and fp8_e5m2 time alike; the executor reads each format") {
  const auto v =
      with(matmul_values(1024, 1024, 1024), {{"tile_m", 512}, {"tile_n", 1024}, {"tile_k", 512}});
  const auto e4m3 = lower_and_time(with(v, {}, {{"dtype", "fp8_e4m3"}}));
  const auto e5m2 = lower_and_time(with(v, {}, {{"dtype", "fp8_e5m2"}}));
  const auto alias = lower_and_time(with(v, {}, {{"dtype", "fp8"}}));
  REQUIRE(e4m3.error.empty());
  REQUIRE(e5m2.error.empty());
  CHECK(e5m2.t.latency_ns == e4m3.t.latency_ns);
  CHECK(alias.t.latency_ns == e4m3.t.latency_ns);
  // one byte an element: A read once (one n block), B once per m block (two), C in bf16
  CHECK(e5m2.t.hbm_read_bytes == 3.0 * 1024 * 1024);
  CHECK(e5m2.t.hbm_write_bytes == 2.0 * 1024 * 1024);
  // scale = row: each of the 8 stationary tiles' 128 scales loaded once (fp32), and
  // every evict a VectorE tensor_scalar (copy) or scalar_tensor_tensor (add) as before
  const auto scaled = lower_and_time(with(v, {}, {{"dtype", "fp8_e5m2"}, {"scale", "row"}}));
  REQUIRE(scaled.error.empty());
  CHECK(scaled.t.hbm_read_bytes == 3.0 * 1024 * 1024 + 1024 * 4);
  CHECK(scaled.p.size() == e5m2.p.size() + 8);
  CHECK(scaled.t.latency_ns > e5m2.t.latency_ns);
  const machine m = resolve_machine(builtin("trn2"));
  for (const char* type : {"fp8", "fp8_e4m3", "fp8_e5m2"}) {
    CAPTURE(std::string(type));
    auto [s, c] = fixed_space("matmul", builtin("trn2"), with(v, {}, {{"dtype", type}}));
    const auto kernel = matmul_workload().functional(s, c, m);
    REQUIRE(kernel);
    const auto want =
        std::string(type) == "fp8_e5m2" ? element_type::fp8_e5m2 : element_type::fp8_e4m3;
    for (const auto& spec : kernel->inputs()) CHECK(spec.type == want);
    CHECK(kernel->outputs().at(0).type == element_type::bf16);
  }
}

TEST_CASE("matmul: A given as [M, K] costs TensorE transposes") {
  const auto v =
      with(matmul_values(1024, 1024, 1024), {{"tile_m", 512}, {"tile_n", 1024}, {"tile_k", 1024}});
  const auto km = lower_and_time(v);
  const auto mk = lower_and_time(with(v, {}, {{"a_layout", "mk"}}));
  REQUIRE(km.error.empty());
  REQUIRE(mk.error.empty());
  int transposes = 0;
  for (const auto& in : mk.p.instructions())
    transposes += in.kind == op::transpose ? static_cast<int>(in.count) : 0;
  CHECK(transposes == (1024 / 128) * (1024 / 128));  // A read once (n has one block)
  CHECK(mk.t.latency_ns > km.t.latency_ns);
  CHECK(mk.t.hbm_read_bytes == km.t.hbm_read_bytes);
}

TEST_CASE("matmul: edge tiles when the shape is not a multiple of the blocks") {
  const auto v =
      with(matmul_values(1000, 700, 300), {{"tile_m", 256}, {"tile_n", 512}, {"tile_k", 256}});
  const auto o = lower_and_time(v);
  REQUIRE(o.error.empty());
  double flops = 0;
  for (const auto& in : o.p.instructions())
    if (in.kind == op::matmul) flops += 2.0 * in.count * in.partitions * in.aux * in.free;
  CHECK(flops == 2.0 * 1000 * 700 * 300);
  CHECK(o.t.hbm_write_bytes == 1000.0 * 700 * 2);
}

TEST_CASE("matmul: deterministic, and more buffering never hurts a streamed loop") {
  const auto v = with(matmul_values(2048, 2048, 2048),
                      {{"tile_m", 128}, {"tile_n", 512}, {"tile_k", 512}, {"coalesce", 0}},
                      {{"a_home", "hbm"}});
  const auto a = lower_and_time(with(v, {{"bufs", 1}}));
  const auto b = lower_and_time(with(v, {{"bufs", 1}}));
  const auto c = lower_and_time(with(v, {{"bufs", 3}}));
  CHECK(a.t.latency_ns == b.t.latency_ns);
  CHECK(c.t.latency_ns <= a.t.latency_ns);
}

TEST_CASE("matmul: the tutorial's stages on trn1 order as published") {
  // the same configs as data/calibration/ (calibration.cpp), checked in calibration_test
  const auto tiled =
      lower_and_time(with(matmul_values(4096, 8192, 8192),
                          {{"tile_m", 128}, {"tile_n", 512}, {"tile_k", 128}, {"coalesce", 0}}),
                     "trn1");
  const auto hoisted =
      lower_and_time(with(matmul_values(4096, 8192, 8192),
                          {{"tile_m", 128}, {"tile_n", 512}, {"tile_k", 8192}, {"coalesce", 0}}),
                     "trn1");
  REQUIRE(tiled.error.empty());
  REQUIRE(hoisted.error.empty());
  CHECK(tiled.t.latency_ns > 1.1 * hoisted.t.latency_ns);
}

// --- the issue-16 knobs and structures ------------------------------------------------------

TEST_CASE("matmul: a_reuse reloads A ceil(n blocks / a_reuse) times") {
  // 1024^3, blocks 128 x 256 x 1024, order (m, n, k): 4 n blocks
  // (two k blocks, so the A block changes every iteration unless kept)
  const auto base =
      with(matmul_values(1024, 1024, 1024), {{"tile_m", 128}, {"tile_n", 256}, {"tile_k", 512}});
  const double a_bytes = 1024.0 * 1024 * 2, b_bytes = a_bytes * 8;  // B read once per m block
  for (const auto& reuse_loads : {std::pair{1, 4}, {2, 2}, {3, 2}, {4, 1}, {64, 1}}) {
    const int reuse = reuse_loads.first, loads = reuse_loads.second;  // clang 14: INFO
    INFO("a_reuse = " << reuse);
    const auto o = lower_and_time(with(base, {{"a_reuse", reuse}}));
    REQUIRE(o.error.empty());
    CHECK(o.t.hbm_read_bytes == doctest::Approx(loads * a_bytes + b_bytes));
  }
  // a_home = sbuf is a_reuse = every block
  const auto home = lower_and_time(with(base, {}, {{"a_home", "sbuf"}}));
  CHECK(home.t.hbm_read_bytes == doctest::Approx(a_bytes + b_bytes));
  CHECK(lower_and_time(with(base, {{"a_reuse", 0}})).error.find("a_reuse") != std::string::npos);
}

TEST_CASE("matmul: a_bufs and b_bufs size each operand's slots; bufs is the default of both") {
  const auto base = with(matmul_values(1024, 1024, 1024),
                         {{"tile_m", 256}, {"tile_n", 512}, {"tile_k", 512}, {"bufs", 2}});
  const auto slots = [](const program& p, const char* name) -> std::int64_t {
    for (const auto& b : p.buffers())
      if (b.name == name) return b.slots;
    return -1;
  };
  const auto plain = lower_and_time(base);
  CHECK(slots(plain.p, "A blocks") == 2);
  CHECK(slots(plain.p, "B blocks") == 2);
  const auto deep = lower_and_time(with(base, {{"a_bufs", 4}, {"b_bufs", 1}}));
  CHECK(slots(deep.p, "A blocks") == 4);
  CHECK(slots(deep.p, "B blocks") == 1);
  // one A slot: the next A block cannot load while this one is used
  const auto single = lower_and_time(with(base, {{"a_bufs", 1}}));
  CHECK(single.t.latency_ns > plain.t.latency_ns);
}

TEST_CASE("matmul: psum_bufs rotates fewer banks; too many is a PSUM overflow") {
  // compute-bound: 16 contraction tiles per group, A resident
  const auto base =
      with(matmul_values(2048, 2048, 2048), {{"tile_m", 512}, {"tile_n", 1024}, {"tile_k", 2048}},
           {{"a_home", "sbuf"}});
  const auto eight = lower_and_time(base);
  const auto one = lower_and_time(with(base, {{"psum_bufs", 1}}));
  REQUIRE(one.error.empty());
  // one bank: every group waits for the previous group's evict
  CHECK(one.t.latency_ns > 1.1 * eight.t.latency_ns);
  CHECK(lower_and_time(with(base, {{"psum_bufs", 9}})).error.rfind("PSUM overflow", 0) == 0);
  // k outside the block's stationary/moving loops keeps all 8 groups open
  auto k_outer = with(base, {{"psum_bufs", 4}});
  k_outer.block_order = {"k", "m", "n"};
  CHECK(lower_and_time(k_outer).error.rfind("PSUM overflow: block_order with k outside", 0) == 0);
}

TEST_CASE("matmul: block_order with k outside reuses each stationary across the moving tiles") {
  auto base =
      with(matmul_values(512, 1024, 1024), {{"tile_m", 256}, {"tile_n", 1024}, {"tile_k", 1024}});
  const auto new_stationary = [](const program& p) {
    double n = 0;
    for (const auto& in : p.instructions())
      if (in.kind == op::matmul && (in.flags & flag_new_stationary)) n += in.count;
    return n;
  };
  const auto inner = lower_and_time(base);
  base.block_order = {"k", "m", "n"};
  const auto outer = lower_and_time(base);
  REQUIRE(outer.error.empty());
  // (m, n, k): a new stationary every matmul; (k, m, n): one per (k, m), shared by the 2 n tiles
  CHECK(new_stationary(outer.p) == doctest::Approx(new_stationary(inner.p) / 2));
  CHECK(outer.t.hbm_write_bytes == inner.t.hbm_write_bytes);
  base.block_order = {"n", "k", "m"};  // coalesced rows staged for every m tile at once
  CHECK(lower_and_time(base).error.empty());
}

TEST_CASE("matmul on trn2: coarse row loads gain, and more queues do not outweigh it") {
  // 2048^3 with B streamed per m block as [128 x 512] tiles, against whole
  // 128 x 1024 rows per transfer (issue 16: the chip gains 1.36x)
  const auto base = with(matmul_values(2048, 2048, 2048),
                         {{"tile_m", 128}, {"tile_n", 1024}, {"tile_k", 2048}, {"bufs", 2}},
                         {{"a_home", "sbuf"}});
  const auto tiles = lower_and_time(with(base, {{"coalesce", 0}}));
  const auto rows = lower_and_time(with(base, {{"coalesce", 1}}));
  const double gain = tiles.t.latency_ns / rows.t.latency_ns;
  CHECK(gain > 1.1);
  // spreading each stream over 4 queues changes the tiled loads less than the row loads do
  const auto queues = lower_and_time(with(base, {{"coalesce", 0}, {"dma_queues", 4}}));
  CHECK(std::abs(queues.t.latency_ns / tiles.t.latency_ns - 1) < gain - 1);
}

TEST_CASE("matmul: psum_zero = memset zeroes each group on VectorE before its first matmul") {
  const auto base =
      with(matmul_values(1024, 1024, 1024), {{"tile_m", 256}, {"tile_n", 512}, {"tile_k", 1024}});
  const auto plain = lower_and_time(base);
  const auto zeroed = lower_and_time(with(base, {}, {{"psum_zero", "memset"}}));
  REQUIRE(zeroed.error.empty());
  int memsets = 0;
  for (const auto& in : zeroed.p.instructions())
    if (in.engine == vector_engine && (in.flags & flag_writes_psum)) memsets += in.count;
  CHECK(memsets == 8 * 2);  // one per 128 x 512 group: 8 x 2 tiles of C
  CHECK(zeroed.t.busy_ns[vector_engine] > plain.t.busy_ns[vector_engine]);
  CHECK(zeroed.t.latency_ns >= plain.t.latency_ns);
  // a value the workload does not know is refused when the space is read
  CHECK_THROWS_WITH_AS(lower_and_time(with(base, {}, {{"psum_zero", "never"}})),
                       "sim workload 'matmul': 'psum_zero' = never is not one of matmul | memset",
                       tessel::error);
}
