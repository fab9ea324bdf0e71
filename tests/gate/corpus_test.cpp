// corpus_test.cpp: deliberately wrong variants of a tiled matmul (200x300x260,
// tiles 64/128/128, so every dimension has a tail tile) must each be caught
// with the right status and a message that says what failed where; the
// correct kernel must pass for several tilings and element types.
#include <tessel/gate.hpp>

#include "matmul_kernel.hpp"

#include <doctest/doctest.h>

#include <cstdio>
#include <string>

namespace {

using namespace tessel;
using namespace tessel::testing;

tessel::gate_options test_options() {
  tessel::gate_options o;
  o.secret = 0x7e55e1;
  return o;
}

tessel::verdict check(const matmul_shape& s, flaw f) {
  tessel::gate g(test_options());
  const tessel::testing::matmul_spec spec(s);
  const tiled_matmul k(s, f);
  return g.check(spec, k, 1);
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

/// The (row, col) of the first "C[row, col]" in a message.
std::pair<long, long> element_of(const std::string& message) {
  const auto at = message.find("C[");
  long row = -1, col = -1;
  if (at != std::string::npos) std::sscanf(message.c_str() + at, "C[%ld, %ld]", &row, &col);
  return {row, col};
}

}  // namespace

TEST_CASE("the correct tiled matmul passes for several tilings and element types") {
  struct setup {
    std::int64_t m, n, k, tile_m, tile_n, tile_k;
    element_type in, out;
  };
  // The other input types on a 100x150x130 product (still a tail in every
  // dimension) to keep the test quick: each new type draws new inputs.
  const setup setups[] = {
      {200, 300, 260, 64, 128, 128, element_type::bf16, element_type::fp32},
      {200, 300, 260, 64, 128, 128, element_type::bf16, element_type::bf16},
      {200, 300, 260, 32, 64, 32, element_type::bf16, element_type::fp32},
      {200, 300, 260, 200, 300, 260, element_type::bf16, element_type::fp32},  // one tile
      {200, 300, 260, 48, 100, 100, element_type::bf16, element_type::bf16},
      {100, 150, 130, 64, 128, 128, element_type::fp32, element_type::fp32},
      {100, 150, 130, 64, 128, 128, element_type::fp8_e4m3, element_type::bf16},
      {100, 150, 130, 32, 32, 64, element_type::fp8_e4m3, element_type::fp32},
      {100, 150, 130, 64, 128, 128, element_type::fp16, element_type::fp16},
  };
  for (const setup& s : setups) {
    const matmul_shape shape{s.m, s.n, s.k, s.tile_m, s.tile_n, s.tile_k, s.in, s.out};
    CAPTURE(s.m);
    CAPTURE(s.tile_m);
    CAPTURE(s.tile_n);
    CAPTURE(s.tile_k);
    CAPTURE(tessel::to_string(s.in));
    CAPTURE(tessel::to_string(s.out));
    const tessel::verdict v = check(shape, flaw::none);
    CAPTURE(v.message);
    CHECK(v.ok());
    CHECK(v.suites == 16);
    CHECK(v.max_error > 0);
    CHECK(v.max_error < 0.5);
  }
}

TEST_CASE("dropped tail tiles are incorrect, and the worst element lies in a tail") {
  const tessel::verdict v = check({}, flaw::tail_tiles_dropped);
  CHECK(v.status == status::incorrect);
  CHECK(contains(v.message, "incorrect: output C["));
  CHECK(contains(v.message, "where the reference is"));
  const auto [row, col] = element_of(v.message);
  CHECK((row >= 192 || col >= 256));
  // 200x300 minus the 192x256 that whole tiles cover; on 'padded' inputs the
  // tails may be zero anyway.
  CAPTURE(v.message);
  CHECK(contains(v.message, "10847 of 60000 compared elements of C are off; "));
  CHECK(contains(v.message, " of 16 suites fail (the worst: "));
}

TEST_CASE("a skipped K tile is incorrect") {
  const tessel::verdict v = check({}, flaw::k_tile_skipped);
  CHECK(v.status == status::incorrect);
  CHECK(contains(v.message, "output C["));
  CHECK(v.max_error > 10);
}

TEST_CASE("an fp32 output rounded through bf16 is incorrect") {
  const tessel::verdict v = check({}, flaw::output_as_bf16);
  CAPTURE(v.message);
  CHECK(v.status == status::incorrect);
  CHECK(contains(v.message, "off by"));
  CHECK(contains(v.message, "its bound (0.000244"));
}

TEST_CASE("a bf16 output rounded through fp8 is incorrect") {
  matmul_shape s;
  s.out = element_type::bf16;
  const tessel::verdict v = check(s, flaw::output_as_fp8);
  CAPTURE(v.message);
  CHECK(v.status == status::incorrect);
  CHECK(contains(v.message, "its bound (0.0156"));
}

TEST_CASE("constant and all-zero outputs are suspicious: they do not follow the inputs") {
  for (const flaw f : {flaw::constant, flaw::zeros}) {
    const tessel::verdict v = check({}, f);
    CAPTURE(v.message);
    CHECK(v.status == status::suspicious);
    CHECK(contains(v.message, "output C does not change when the inputs change"));
    CHECK(contains(v.message,
                   f == flaw::zeros ? "every probed element is 0" : "every probed element is 1"));
    CHECK(contains(v.message, "'normal' and 'uniform' suites"));
  }
}

TEST_CASE("an output that ignores one input is incorrect") {
  const tessel::verdict v = check({}, flaw::ignores_b);
  CAPTURE(v.message);
  CHECK(v.status == status::incorrect);
  CHECK(contains(v.message, "output C["));
  CHECK(v.max_error > 10);
}

TEST_CASE("runs that differ in the last bits pass (split-K); beyond the tolerance, suspicious") {
  const tessel::verdict ulp = check({}, flaw::nondeterministic);
  CAPTURE(ulp.message);
  CHECK(ulp.ok());
  const tessel::verdict v = check({}, flaw::unstable);
  CAPTURE(v.message);
  CHECK(v.status == status::suspicious);
  CHECK(contains(v.message, "not deterministic"));
  CHECK(contains(v.message, "by more than the tolerance"));
  CHECK(contains(v.message, "output C[0, "));
  // bit for bit on request
  tessel::gate_options o = test_options();
  o.bitwise_determinism = true;
  tessel::gate g(o);
  const matmul_shape s;
  const tessel::verdict strict =
      g.check(tessel::testing::matmul_spec(s), tiled_matmul(s, flaw::nondeterministic), 1);
  CHECK(strict.status == status::suspicious);
  CHECK(contains(strict.message, "output C[0, 5]"));
}

TEST_CASE("NaN or Inf where the reference is finite is suspicious, at that element") {
  tessel::verdict v = check({}, flaw::nan_element);
  CAPTURE(v.message);
  CHECK(v.status == status::suspicious);
  CHECK(contains(v.message, "output C[123, 45] is nan on the '"));
  CHECK(contains(v.message, "reference is finite"));
  v = check({}, flaw::inf_element);
  CHECK(v.status == status::suspicious);
  CHECK(contains(v.message, "output C[7, 299] is inf"));
}

TEST_CASE("outputs memorised from one suite and replayed are suspicious") {
  const tessel::verdict v = check({}, flaw::hard_coded);
  CAPTURE(v.message);
  CHECK(v.status == status::suspicious);
  CHECK(contains(v.message, "does not change when the inputs change"));
  CHECK(!contains(v.message, "every probed element"));
}

TEST_CASE("a kernel that throws is a runtime_error naming the call") {
  const tessel::verdict v = check({}, flaw::throws);
  CHECK(v.status == status::runtime_error);
  CHECK(v.message.starts_with("the kernel failed in run() on the '"));
  CHECK(v.message.ends_with(" suite: PSUM bank 9 does not exist"));
}

TEST_CASE("each flaw is caught on every seed tried, not by luck") {
  for (const std::uint64_t secret : {2ULL, 3ULL}) {
    for (const flaw f : {flaw::tail_tiles_dropped, flaw::k_tile_skipped, flaw::output_as_bf16,
                         flaw::ignores_b, flaw::hard_coded}) {
      tessel::gate_options o;
      o.secret = secret;
      o.suite = {tessel::distribution::normal, tessel::distribution::uniform,
                 tessel::distribution::structured};  // three suites keep it quick
      tessel::gate g(o);
      const tiled_matmul k({}, f);
      const tessel::verdict v = g.check(tessel::testing::matmul_spec({}), k, 7);
      CAPTURE(tessel::testing::to_string(f));
      CAPTURE(v.message);
      CHECK(!v.ok());
    }
  }
}
