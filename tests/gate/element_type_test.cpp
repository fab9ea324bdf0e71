// element_type_test.cpp: round_to against known bf16, fp16, fp8 e4m3 and int32
// values (ties to even, saturation, subnormals), and the types' constants.
#include <tessel/gate.hpp>

#include <doctest/doctest.h>

#include <cmath>
#include <limits>

using tessel::element_type;
using tessel::round_to;

TEST_CASE("element type names round-trip, fp8 is an alias") {
  for (const element_type t : {element_type::fp32, element_type::bf16, element_type::fp16,
                               element_type::fp8_e4m3, element_type::fp8_e5m2, element_type::int32})
    CHECK(tessel::parse_element_type(tessel::to_string(t)) == t);
  CHECK(tessel::parse_element_type("fp8") == element_type::fp8_e4m3);
  CHECK(!tessel::parse_element_type("fp64"));
}

TEST_CASE("bf16: nearest, ties to even, saturation, subnormals") {
  const element_type t = element_type::bf16;
  CHECK(round_to(t, 1.0) == 1.0);
  CHECK(round_to(t, 1 + 0x1p-8) == 1.0);                   // tie, 1 is even
  CHECK(round_to(t, 1 + 3 * 0x1p-8) == 1 + 0x1p-6);        // tie, rounds up to the even one
  CHECK(round_to(t, 1 + 0x1p-8 + 0x1p-20) == 1 + 0x1p-7);  // above the tie
  CHECK(round_to(t, 3.14159265) == 3.140625);
  CHECK(round_to(t, -3.14159265) == -3.140625);
  CHECK(round_to(t, 1e39) == 0x1.fep127);  // saturates at the largest finite bf16
  CHECK(round_to(t, -1e39) == -0x1.fep127);
  CHECK(round_to(t, 0x1p-133) == 0x1p-133);        // the smallest subnormal
  CHECK(round_to(t, 0x1p-134) == 0.0);             // tie with 0, which is even
  CHECK(round_to(t, 1.5 * 0x1p-133) == 0x1p-132);  // tie between odd and even subnormals
  CHECK(round_to(t, 1.25 * 0x1p-126) == 1.25 * 0x1p-126);
}

TEST_CASE("fp8 e4m3: 3 mantissa bits, bias 7, max 448, subnormals down to 2^-9") {
  const element_type t = element_type::fp8_e4m3;
  CHECK(round_to(t, 1.0625) == 1.0);   // tie between 1 and 1.125
  CHECK(round_to(t, 1.1875) == 1.25);  // tie between 1.125 (odd) and 1.25 (even)
  CHECK(round_to(t, 250.0) == 256.0);
  CHECK(round_to(t, 240.0) == 240.0);
  CHECK(round_to(t, 448.0) == 448.0);
  CHECK(round_to(t, 464.0) == 448.0);  // tie between 448 (even) and 480
  CHECK(round_to(t, 470.0) == 448.0);  // rounds to 480, past the max: saturates
  CHECK(round_to(t, 1e6) == 448.0);
  CHECK(round_to(t, -1000.0) == -448.0);
  CHECK(round_to(t, 0x1p-6) == 0x1p-6);          // the smallest normal
  CHECK(round_to(t, 7 * 0x1p-9) == 7 * 0x1p-9);  // the largest subnormal
  CHECK(round_to(t, 0x1p-9) == 0x1p-9);          // the smallest subnormal
  CHECK(round_to(t, 0x1p-10) == 0.0);            // tie with 0
  CHECK(round_to(t, 3 * 0x1p-10) == 0x1p-8);     // tie: 2^-9 (odd) vs 2^-8 (even)
  CHECK(round_to(t, 0.3) == 0.3125);
}

TEST_CASE("fp8 e5m2: 2 mantissa bits, bias 15, max 57344, subnormals down to 2^-16") {
  const element_type t = element_type::fp8_e5m2;
  CHECK(tessel::parse_element_type("fp8_e5m2") == t);
  CHECK(tessel::to_string(t) == "fp8_e5m2");
  CHECK(round_to(t, 1.125) == 1.0);  // tie between 1 (even) and 1.25
  CHECK(round_to(t, 1.375) == 1.5);  // tie between 1.25 (odd) and 1.5 (even)
  CHECK(round_to(t, 1.2) == 1.25);
  CHECK(round_to(t, 0.3) == 0.3125);   // 1.25 x 2^-2
  CHECK(round_to(t, 448.0) == 448.0);  // 1.75 x 2^8: e4m3's max is exact here too
  CHECK(round_to(t, 480.0) == 512.0);  // tie between 448 (odd) and 512 (even)
  CHECK(round_to(t, 57344.0) == 57344.0);
  CHECK(round_to(t, 61440.0) == 57344.0);  // tie toward 65536: saturates
  CHECK(round_to(t, -1e9) == -57344.0);
  CHECK(round_to(t, 0x1p-14) == 0x1p-14);          // the smallest normal
  CHECK(round_to(t, 3 * 0x1p-16) == 3 * 0x1p-16);  // the largest subnormal
  CHECK(round_to(t, 0x1p-16) == 0x1p-16);          // the smallest subnormal
  CHECK(round_to(t, 0x1p-17) == 0.0);              // tie with 0
  CHECK(round_to(t, 3 * 0x1p-17) == 0x1p-15);      // tie: 2^-16 (odd) vs 2^-15 (even)
  CHECK(tessel::unit_roundoff(t) == 0x1p-3);
  CHECK(tessel::max_finite(t) == 57344);
  CHECK(tessel::min_normal(t) == 0x1p-14);
  CHECK(tessel::default_tolerance(t) == 0.5);
}

TEST_CASE("fp16 and fp32: the same rule at their precisions") {
  CHECK(round_to(element_type::fp16, 65504.0) == 65504.0);
  CHECK(round_to(element_type::fp16, 65520.0) == 65504.0);  // tie toward 65536: saturates
  CHECK(round_to(element_type::fp16, 0x1p-24) == 0x1p-24);
  CHECK(round_to(element_type::fp16, 0x1p-25) == 0.0);
  CHECK(round_to(element_type::fp16, 1 + 0x1p-11) == 1.0);
  CHECK(round_to(element_type::fp32, 1 + 0x1p-24) == 1.0);
  CHECK(round_to(element_type::fp32, 1 + 3 * 0x1p-24) == 1 + 0x1p-22);
  CHECK(round_to(element_type::fp32, 0.1) == static_cast<double>(0.1f));
  CHECK(round_to(element_type::fp32, 1e300) ==
        static_cast<double>(std::numeric_limits<float>::max()));
  CHECK(round_to(element_type::fp32, 0x1p-149) == 0x1p-149);
  CHECK(round_to(element_type::fp32, 0x1p-150) == 0.0);
}

TEST_CASE("int32 rounds half to even and saturates; NaN and inf pass through floats") {
  const element_type t = element_type::int32;
  CHECK(round_to(t, 2.5) == 2.0);
  CHECK(round_to(t, 3.5) == 4.0);
  CHECK(round_to(t, -2.5) == -2.0);
  CHECK(round_to(t, 1e12) == 2147483647.0);
  CHECK(round_to(t, -1e12) == -2147483648.0);
  const double inf = std::numeric_limits<double>::infinity();
  CHECK(std::isnan(round_to(element_type::bf16, std::nan(""))));
  CHECK(round_to(element_type::fp8_e4m3, inf) == inf);
  CHECK(round_to(element_type::fp16, -inf) == -inf);
  CHECK(std::signbit(round_to(element_type::bf16, -0.0)));
}

TEST_CASE("unit roundoff, range and default tolerances per type") {
  CHECK(tessel::unit_roundoff(element_type::fp32) == 0x1p-24);
  CHECK(tessel::unit_roundoff(element_type::bf16) == 0x1p-8);
  CHECK(tessel::unit_roundoff(element_type::fp16) == 0x1p-11);
  CHECK(tessel::unit_roundoff(element_type::fp8_e4m3) == 0x1p-4);
  CHECK(tessel::unit_roundoff(element_type::int32) == 0);
  CHECK(tessel::max_finite(element_type::fp8_e4m3) == 448);
  CHECK(tessel::max_finite(element_type::fp16) == 65504);
  CHECK(tessel::min_normal(element_type::fp8_e4m3) == 0x1p-6);
  CHECK(tessel::min_normal(element_type::bf16) == 0x1p-126);
  CHECK(tessel::default_tolerance(element_type::fp32) == 0x1p-12);
  CHECK(tessel::default_tolerance(element_type::bf16) == 0x1p-6);
  CHECK(tessel::default_tolerance(element_type::fp16) == 0x1p-9);
  CHECK(tessel::default_tolerance(element_type::fp8_e4m3) == 0.25);
  CHECK(tessel::default_tolerance(element_type::int32) == 0);
}
