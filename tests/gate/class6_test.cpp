// class6_test.cpp: issue 25, class 6: sparse coverage of large outputs. An
// output above 2^16 elements used to be compared on a few columns of every
// row and a few whole rows, so a wrong interior tile, or one element, passed
// on most secrets. Outputs up to 2^22 elements (every shipped workload's)
// are now compared whole; larger ones on random tiles drawn from the secret.
#include <tessel/gate.hpp>

#include "elementwise.hpp"
#include "matmul_kernel.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <set>

namespace {

using namespace tessel;
using namespace tessel::testing;

/// y = x + 1 on a 1024 x 1024 fp32 tensor: 2^20 elements.
elementwise_spec copy_spec() {
  return {{1024, 1024}, element_type::fp32, [](double x, std::int64_t) { return x + 1; }};
}

/// Right, except on one 8 x 8 interior tile (left as the input: the +1 skipped).
struct skips_a_tile : gated_kernel {
  output_values run(std::span<const hidden_input> in) const override {
    std::vector<double> y = in[0].values();
    for (std::size_t i = 0; i < y.size(); ++i) {
      const std::size_t row = i / 1024, col = i % 1024;
      if (!(row >= 600 && row < 608 && col >= 300 && col < 308)) y[i] += 1;
    }
    return {y};
  }
};

/// Right, except at one interior element.
struct skips_an_element : gated_kernel {
  output_values run(std::span<const hidden_input> in) const override {
    std::vector<double> y = in[0].values();
    for (std::size_t i = 0; i < y.size(); ++i)
      if (i != 777 * 1024 + 333) y[i] += 1;
    return {y};
  }
};

struct exact : gated_kernel {
  output_values run(std::span<const hidden_input> in) const override {
    std::vector<double> y = in[0].values();
    for (double& v : y) v += 1;
    return {y};
  }
};

tessel::gate_options two_suites(std::uint64_t secret) {
  return {.suite = {tessel::distribution::normal, tessel::distribution::sparse}, .secret = secret};
}

}  // namespace

TEST_CASE("class 6: one wrong interior tile of a 2^20-element output is caught on every secret") {
  for (std::uint64_t secret = 1; secret <= 3; ++secret) {
    tessel::gate g(two_suites(secret));
    const tessel::verdict v = g.check(copy_spec(), skips_a_tile{}, secret);
    CAPTURE(v.message);
    CHECK(v.status == tessel::status::incorrect);
    CHECK(v.message.find("64 of 1048576 compared elements of y are off") != std::string::npos);
  }
}

TEST_CASE("class 6: one wrong interior element is caught on every secret") {
  for (std::uint64_t secret = 1; secret <= 3; ++secret) {
    tessel::gate g(two_suites(secret));
    const tessel::verdict v = g.check(copy_spec(), skips_an_element{}, secret);
    CAPTURE(v.message);
    CHECK(v.status == tessel::status::incorrect);
    CHECK(v.message.find("output y[777, 333]") != std::string::npos);
  }
}

TEST_CASE("class 6: beyond 2^22 elements, the compared tiles are drawn from the secret") {
  struct large : tessel::gate_spec {
    std::vector<tensor_spec> inputs() const override { return {}; }
    std::vector<tensor_spec> outputs() const override {
      return {{"y", {4096, 4096}, element_type::fp32, 0}};
    }
    probe_values reference(std::span<const tessel::input_tensor>,
                           const probe_points&) const override {
      return {};
    }
  } spec;
  // which 64 x 64 tiles are compared whole, per secret
  std::set<std::vector<std::int64_t>> tilings;
  std::vector<int> hits(64 * 64, 0);
  for (std::uint64_t secret = 1; secret <= 8; ++secret) {
    tessel::rng r(secret);
    const auto where = spec.probes(r)[0];
    std::vector<int> per_tile(64 * 64, 0);
    for (const std::int64_t flat : where)
      ++per_tile[static_cast<std::size_t>((flat / 4096 / 64) * 64 + flat % 4096 / 64)];
    std::vector<std::int64_t> whole;
    for (std::size_t t = 0; t < per_tile.size(); ++t)
      if (per_tile[t] == 64 * 64) {
        whole.push_back(static_cast<std::int64_t>(t));
        ++hits[t];
      }
    CHECK(whole.size() >= 200);
    CHECK(per_tile.front() == 64 * 64);  // the first tile and the last, always
    CHECK(per_tile.back() == 64 * 64);
    tilings.insert(whole);
  }
  CHECK(tilings.size() == 8);
  // every tile's chance is about the same: no tile (but the corners) is always compared
  CHECK(std::count(hits.begin() + 1, hits.end() - 1, 8) == 0);
}

TEST_CASE("class 6: honest controls pass, compared whole") {
  tessel::gate g(two_suites(4));
  const tessel::verdict v = g.check(copy_spec(), exact{}, 1);
  CAPTURE(v.message);
  CHECK(v.ok());
  const tessel::testing::matmul_shape shape{160, 144, 72, 64, 64, 32};
  std::uint64_t key = 2;
  for (const auto& c : tessel::testing::honest_controls(shape)) {
    CAPTURE(c.name);
    const tessel::verdict w = g.check(tessel::testing::matmul_spec(c.shape),
                                      tessel::testing::tiled_matmul(c.shape, c.f), key++);
    CAPTURE(w.message);
    CHECK(w.ok());
  }
}
