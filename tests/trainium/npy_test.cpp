// The .npy codec and base64 of backends/gated/npy.hpp.
#include "gated/npy.hpp"

#include <tessel/error.hpp>

#include <doctest/doctest.h>

#include <vector>

using namespace tessel;

TEST_CASE("npy: float32 and int32 round trips, header padded to 64 bytes") {
  const std::vector<std::int64_t> shape{2, 3};
  const std::vector<double> values{1.5, -2, 0.25, 1e-3, 7, -8};
  const auto bytes = detail::npy_encode(shape, element_type::fp32, values);
  CHECK((bytes.size() - 6 * 4) % 64 == 0);
  const auto a = detail::npy_decode(bytes, 100);
  CHECK(a.shape == shape);
  CHECK(a.descr == "<f4");
  CHECK(a.values[0] == 1.5);
  CHECK(a.values[3] == doctest::Approx(1e-3));
  const auto i = detail::npy_decode(detail::npy_encode(shape, element_type::int32, values), 100);
  CHECK(i.descr == "<i4");
  CHECK(i.values[5] == -8);
  const std::vector<std::int64_t> vector_shape{3};
  const auto v = detail::npy_decode(
      detail::npy_encode(vector_shape, element_type::fp32, std::vector<double>{1, 2, 3}), 10);
  CHECK(v.shape == vector_shape);
}

TEST_CASE("npy: what is refused, with a reason") {
  const std::vector<std::int64_t> shape{4, 4};
  const auto bytes = detail::npy_encode(shape, element_type::fp32, std::vector<double>(16, 1.0));
  CHECK_THROWS_WITH_AS((void)detail::npy_decode("hello", 10), doctest::Contains("magic"), error);
  CHECK_THROWS_WITH_AS((void)detail::npy_decode(bytes, 15), doctest::Contains("more than 15"),
                       error);
  CHECK_THROWS_WITH_AS((void)detail::npy_decode(bytes.substr(0, bytes.size() - 1), 16),
                       doctest::Contains("cut short"), error);
}

TEST_CASE("base64: round trip of every byte value") {
  std::string all;
  for (int c = 0; c < 256; ++c) all += static_cast<char>(c);
  for (std::size_t n = 0; n < 5; ++n) {
    const auto part = all.substr(0, all.size() - n);
    CHECK(detail::base64_decode(detail::base64_encode(part)) == part);
  }
  CHECK(detail::base64_encode("Man") == "TWFu");
  CHECK(detail::base64_encode("Ma") == "TWE=");
}
