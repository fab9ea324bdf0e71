// inputs_test.cpp: the hidden suite's inputs are reproducible from a seed,
// exactly representable in their type, and have the moments and ranges
// docs/gate.md states; the default probes and tolerances.
#include <tessel/error.hpp>
#include <tessel/gate.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <set>

using namespace tessel;

namespace {

constexpr element_type float_types[] = {element_type::fp32, element_type::bf16, element_type::fp16,
                                        element_type::fp8_e4m3};

struct moments {
  double mean = 0, variance = 0, max_abs = 0, min_abs = 1e300;
};

moments moments_of(const input_tensor& t, std::int64_t n) {
  moments m;
  double sum = 0, sum_squares = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    const double v = t.at(i);
    sum += v;
    sum_squares += v * v;
    m.max_abs = std::max(m.max_abs, std::abs(v));
    m.min_abs = std::min(m.min_abs, std::abs(v));
  }
  m.mean = sum / static_cast<double>(n);
  m.variance = sum_squares / static_cast<double>(n) - m.mean * m.mean;
  return m;
}

}  // namespace

TEST_CASE("every distribution is named and in the default suite") {
  CHECK(tessel::all_distributions().size() == 16);
  std::set<std::string_view> names;
  for (const distribution d : tessel::all_distributions()) names.insert(tessel::to_string(d));
  CHECK(names.size() == 16);
  CHECK(!names.contains("unknown"));
  CHECK(tessel::gate_options{}.suite.size() == 16);
}

TEST_CASE("inputs are reproducible from the seed and differ across seeds") {
  const tensor_spec spec{"x", {64, 32}, element_type::bf16, 0};
  for (const distribution d : tessel::all_distributions()) {
    const input_tensor a(spec, d, 11), b(spec, d, 11), c(spec, d, 12);
    int same = 0;
    for (std::int64_t i = 0; i < spec.elements(); ++i) {
      REQUIRE(a.at(i) == b.at(i));
      same += a.at(i) == c.at(i) ? 1 : 0;
    }
    CAPTURE(tessel::to_string(d));
    // the kinds made of zeros (and ones) share those between seeds
    const bool zeros = d == distribution::padded || d == distribution::mask;
    CHECK(same < spec.elements() / (zeros ? 4 / 3.0 : 4));
    CHECK(a.at(3, 5) == a.at(3 * 32 + 5));
    CHECK(a.seed() == 11);
  }
}

TEST_CASE("every drawn value is finite and exactly representable in its type") {
  for (const element_type t : float_types) {
    const tensor_spec spec{"x", {100, 50}, t, 0};
    for (const distribution d : tessel::all_distributions()) {
      const input_tensor x(spec, d, 5);
      CAPTURE(tessel::to_string(t));
      CAPTURE(tessel::to_string(d));
      for (std::int64_t i = 0; i < spec.elements(); ++i) {
        const double v = x.at(i);
        REQUIRE(std::isfinite(v));
        REQUIRE(tessel::round_to(t, v) == v);
        REQUIRE(std::abs(v) < tessel::max_finite(t));  // large and outliers never saturate
      }
    }
  }
}

TEST_CASE("normal and uniform have the right moments") {
  const tensor_spec spec{"x", {20000}, element_type::fp32, 0};
  const moments n = moments_of(input_tensor(spec, distribution::normal, 1), 20000);
  CHECK(std::abs(n.mean) < 0.03);
  CHECK(n.variance == doctest::Approx(1.0).epsilon(0.05));
  CHECK(n.max_abs > 3);
  CHECK(n.max_abs < 6.7);
  const moments u = moments_of(input_tensor(spec, distribution::uniform, 1), 20000);
  CHECK(std::abs(u.mean) < 0.02);
  CHECK(u.variance == doctest::Approx(1.0 / 3).epsilon(0.05));
  CHECK(u.max_abs <= 1);
}

TEST_CASE("large and tiny are scaled to the type and never zero") {
  struct expected {
    element_type type;
    double large, tiny;
  };
  const expected scales[] = {{element_type::fp32, 0x1p12, 0x1p-12},
                             {element_type::bf16, 0x1p12, 0x1p-12},
                             {element_type::fp16, 16, 0x1p-11},
                             {element_type::fp8_e4m3, 16, 0x1p-3}};
  for (const expected& e : scales) {
    const tensor_spec spec{"x", {5000}, e.type, 0};
    CAPTURE(tessel::to_string(e.type));
    const moments large = moments_of(input_tensor(spec, distribution::large, 2), 5000);
    CHECK(std::sqrt(large.variance) == doctest::Approx(e.large).epsilon(0.1));
    CHECK(large.min_abs >= e.large / 8 * (1 - 0x1p-3));
    const moments tiny = moments_of(input_tensor(spec, distribution::tiny, 2), 5000);
    CHECK(std::sqrt(tiny.variance) == doctest::Approx(e.tiny).epsilon(0.1));
    CHECK(tiny.min_abs >= tessel::min_normal(e.type));
  }
}

TEST_CASE("constant is one nonzero value; structured is smooth; outliers are rare and large") {
  const tensor_spec spec{"x", {128, 256}, element_type::bf16, 0};
  const input_tensor c(spec, distribution::constant, 3);
  CHECK(c.at(0) != 0);
  for (std::int64_t i = 0; i < spec.elements(); i += 97) REQUIRE(c.at(i) == c.at(0));

  const input_tensor s(spec, distribution::structured, 3);
  double largest_step = 0, spread = 0;
  for (std::int64_t col = 1; col < 256; ++col) {
    largest_step = std::max(largest_step, std::abs(s.at(7, col) - s.at(7, col - 1)));
    spread = std::max(spread, std::abs(s.at(7, col) - s.at(7, 0)));
  }
  CHECK(largest_step < 1.1);  // a period of at least 5 columns
  CHECK(spread > 0.5);

  const tensor_spec long_spec{"x", {200000}, element_type::fp32, 0};
  const input_tensor o(long_spec, distribution::outliers, 3);
  int outliers = 0;
  for (std::int64_t i = 0; i < long_spec.elements(); ++i) outliers += std::abs(o.at(i)) > 50;
  CHECK(outliers > 100);  // about 1 in 1024, most of them above 50
  CHECK(outliers < 300);
}

TEST_CASE("shifted is far from zero-mean; positive is all positive") {
  const tensor_spec spec{"x", {20000}, element_type::fp32, 0};
  for (const std::uint64_t seed : {1, 2, 3, 4}) {
    const moments s = moments_of(input_tensor(spec, distribution::shifted, seed), 20000);
    CHECK(std::abs(s.mean) > 0.95);
    CHECK(std::abs(s.mean) < 3.05);
    CHECK(s.variance == doctest::Approx(1.0).epsilon(0.05));
    const input_tensor p(spec, distribution::positive, seed, true);
    for (std::int64_t i = 0; i < 20000; ++i) REQUIRE(p.at(i) > 0);
  }
}

TEST_CASE("disguised inputs have no fixed mean or spread, and stay in range") {
  const tensor_spec spec{"x", {20000}, element_type::fp32, 0};
  std::set<double> means, spreads;
  for (std::uint64_t seed = 1; seed <= 8; ++seed) {
    const moments plain = moments_of(input_tensor(spec, distribution::normal, seed), 20000);
    const moments m = moments_of(input_tensor(spec, distribution::normal, seed, true), 20000);
    const double sd = std::sqrt(m.variance);
    CHECK(sd >= 0.5 * 0.95);
    CHECK(sd <= 2 * 1.05);
    CHECK(std::abs(m.mean) <= 0.5 * sd + 0.05);
    CHECK(sd / std::sqrt(plain.variance) != doctest::Approx(1.0).epsilon(0.001));
    means.insert(std::round(m.mean * 100));
    spreads.insert(std::round(sd * 100));
  }
  CHECK(means.size() >= 6);
  CHECK(spreads.size() >= 6);
  // every float type, every distribution: finite, exact, never saturated; tiny stays normal
  for (const element_type t : float_types) {
    const tensor_spec small{"x", {4000}, t, 0};
    for (const distribution d : tessel::all_distributions())
      for (std::uint64_t seed = 1; seed <= 4; ++seed) {
        const input_tensor x(small, d, seed, true);
        CAPTURE(tessel::to_string(t));
        CAPTURE(tessel::to_string(d));
        for (std::int64_t i = 0; i < small.elements(); ++i) {
          const double v = x.at(i);
          REQUIRE(std::isfinite(v));
          REQUIRE(tessel::round_to(t, v) == v);
          REQUIRE(std::abs(v) < tessel::max_finite(t));
          if (d == distribution::tiny) REQUIRE(std::abs(v) >= tessel::min_normal(t));
        }
      }
  }
}

TEST_CASE("sparse, padded and mask have exact zeros, also disguised") {
  const tensor_spec spec{"x", {64, 128}, element_type::fp32, 0};
  for (const bool disguised : {false, true}) {
    CAPTURE(disguised);
    const input_tensor relu(spec, distribution::sparse, 7, disguised);
    int zeros = 0;
    for (std::int64_t i = 0; i < spec.elements(); ++i) {
      REQUIRE(relu.at(i) >= 0);
      zeros += relu.at(i) == 0;
    }
    CHECK(zeros > spec.elements() * 4 / 10);
    CHECK(zeros < spec.elements() * 6 / 10);

    const input_tensor mask(spec, distribution::mask, 7, disguised);
    std::set<double> values;
    for (std::int64_t i = 0; i < spec.elements(); ++i) values.insert(mask.at(i));
    CHECK(values.size() == 2);
    CHECK(*values.begin() == 0);

    // padded: trailing rows are zero; every other row has zero runs of its
    // own lengths at both ends (1/16 to 1/4 of the columns on the left, 1/8
    // to 1/2 on the right), data between
    const input_tensor pad(spec, distribution::padded, 7, disguised);
    std::int64_t first_zero_row = 64;
    while (first_zero_row > 0 && pad.at(first_zero_row - 1, 64) == 0) --first_zero_row;
    CHECK(first_zero_row <= 64 - 4);
    CHECK(first_zero_row >= 64 - 8);
    for (std::int64_t r = first_zero_row; r < 64; ++r)
      for (std::int64_t c = 0; c < 128; ++c) REQUIRE(pad.at(r, c) == 0);
    std::set<std::int64_t> lefts, rights;
    for (std::int64_t r = 0; r < first_zero_row; ++r) {
      std::int64_t left = 0, right = 0;
      while (pad.at(r, left) == 0) ++left;
      while (pad.at(r, 127 - right) == 0) ++right;
      REQUIRE(left >= 8);
      REQUIRE(left <= 32);
      REQUIRE(right >= 16);
      REQUIRE(right <= 64);
      for (std::int64_t c = left; c < 128 - right; ++c) REQUIRE(pad.at(r, c) != 0);
      lefts.insert(left);
      rights.insert(right);
    }
    CHECK(lefts.size() > 8);  // ragged: rows have lengths of their own
    CHECK(rights.size() > 8);
  }
}

TEST_CASE(
    "bf16_valued inputs of any type are exactly bf16 values; heavy_tailed has heavy outliers") {
  const tensor_spec spec{"x", {50000}, element_type::fp32, 0};
  const input_tensor b(spec, distribution::bf16_valued, 8, true);
  int narrower = 0;
  for (std::int64_t i = 0; i < spec.elements(); ++i) {
    REQUIRE(tessel::round_to(element_type::bf16, b.at(i)) == b.at(i));
    narrower += b.at(i) != 0;
  }
  CHECK(narrower > 49000);
  const input_tensor h(spec, distribution::heavy_tailed, 8);
  int heavy = 0;
  double largest = 0;
  for (std::int64_t i = 0; i < spec.elements(); ++i) {
    heavy += std::abs(h.at(i)) > 20;
    largest = std::max(largest, std::abs(h.at(i)));
  }
  CHECK(heavy > 50000 / 64 / 2);  // one in 64 scaled by 2^4 .. 2^16
  CHECK(heavy < 50000 / 64 * 2);
  CHECK(largest > 1e4);
}

TEST_CASE("shared_prefix equals its base on a long prefix, then differs") {
  const tensor_spec spec{"x", {100, 40}, element_type::bf16, 0};
  const input_tensor base(spec, distribution::uniform, 9, true);
  for (std::uint64_t seed = 1; seed <= 20; ++seed) {
    const input_tensor p(spec, distribution::shared_prefix, seed, true, &base);
    std::int64_t prefix = 0;
    while (prefix < spec.elements() && p.at(prefix) == base.at(prefix)) ++prefix;
    CAPTURE(prefix);
    CHECK(prefix >= spec.elements() * 3 / 4);
    CHECK(prefix < spec.elements());
    int differ = 0;
    for (std::int64_t i = prefix; i < spec.elements(); ++i) differ += p.at(i) != base.at(i);
    CHECK(differ >= (spec.elements() - prefix) * 9 / 10);
  }
  // without a base: its own disguised normal draw
  const input_tensor alone(spec, distribution::shared_prefix, 3);
  CHECK(alone.at(0) != alone.at(1));
}

TEST_CASE("int32 inputs are labels in [0, label_range)") {
  const tensor_spec spec{"labels", {10000}, element_type::int32, 10};
  std::vector<int> counts(10, 0);
  const input_tensor labels(spec, distribution::normal, 4);
  for (std::int64_t i = 0; i < spec.elements(); ++i) {
    const double v = labels.at(i);
    REQUIRE(v >= 0);
    REQUIRE(v < 10);
    REQUIRE(v == std::floor(v));
    ++counts[static_cast<std::size_t>(v)];
  }
  for (const int count : counts) CHECK(count > 850);
  const input_tensor same(spec, distribution::constant, 4);
  CHECK(same.at(0) == same.at(9999));
  const input_tensor ramp(spec, distribution::structured, 4);
  CHECK(ramp.at(13) == 3);

  const tensor_spec bad{"labels", {10}, element_type::int32, 0};
  CHECK_THROWS_AS(input_tensor(bad, distribution::normal, 1), tessel::options_error);
}

TEST_CASE("an input's scale multiplies every draw but tiny's, disguised or not") {
  const tensor_spec plain{"W", {64, 64}, element_type::fp32};
  tensor_spec scaled = plain;
  scaled.scale = 0.125;  // a power of two: the scaled fp32 draws are exact
  for (const distribution d : tessel::all_distributions()) {
    CAPTURE(tessel::to_string(d));
    for (const bool disguised : {false, true}) {
      const input_tensor a(plain, d, 42, disguised), b(scaled, d, 42, disguised);
      const double factor = d == distribution::tiny ? 1.0 : 0.125;
      for (std::int64_t i = 0; i < 64 * 64; i += 97) CHECK(b.at(i) == a.at(i) * factor);
    }
  }
}
