// class5_test.cpp: issue 25, class 5: a tolerance inflated by outliers. The
// bound used to scale with the root mean square of the reference, so an
// output with a few large values let its ordinary elements be far off. Each
// element is now held to tol x (|its reference| + the median nonzero
// |reference| of its output): the kernels below pass the old rule (checked
// here against it, on the same inputs) and fail the new one.
#include <tessel/gate.hpp>

#include "elementwise.hpp"
#include "matmul_kernel.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>

namespace {

using namespace tessel;
using namespace tessel::testing;

/// Whether `y` has outliers: an element above 100 x the median magnitude.
bool has_outliers(const std::vector<double>& y) {
  std::vector<double> m(y.size());
  std::transform(y.begin(), y.end(), m.begin(), [](double v) { return std::abs(v); });
  std::nth_element(m.begin(), m.begin() + static_cast<std::ptrdiff_t>(m.size() / 2), m.end());
  const double median = m[m.size() / 2];
  return std::any_of(y.begin(), y.end(), [&](double v) { return std::abs(v) > 100 * median; });
}

/// Stores `y` on a grid 2^-12 x its root mean square apart (a cheap,
/// coarse format): no element moves by more than the old bound allowed.
void coarse(std::vector<double>& y, const std::vector<bool>& which) {
  double squares = 0;
  for (const double v : y) squares += v * v;
  const double grid = 0x1p-12 * std::sqrt(squares / static_cast<double>(y.size()));
  for (std::size_t i = 0; i < y.size(); ++i)
    if (which[i]) y[i] = grid * std::round(y[i] / grid);
}

/// Exact, except that when the output has outliers its ordinary elements
/// go through the coarse format.
struct sloppy_beside_outliers : gated_kernel {
  output_values run(std::span<const hidden_input> in) const override {
    std::vector<double> y = in[0].values();
    for (double& v : y) v *= 3;
    if (has_outliers(y)) coarse(y, std::vector<bool>(y.size(), true));
    return {y};
  }
};

const matmul_shape shape{96, 80, 72, 40, 48, 32, element_type::fp32, element_type::fp32};

/// A matmul whose rows without an outlier in A go through the coarse
/// format when some row has one.
struct sloppy_rows : gated_kernel {
  output_values run(std::span<const hidden_input> in) const override {
    output_values c = tiled_matmul(shape).run(in);
    const std::vector<double> a = in[0].values();
    if (!has_outliers(a)) return c;
    std::vector<double> magnitudes(a.size());
    std::transform(a.begin(), a.end(), magnitudes.begin(), [](double v) { return std::abs(v); });
    std::nth_element(magnitudes.begin(),
                     magnitudes.begin() + static_cast<std::ptrdiff_t>(a.size() / 2),
                     magnitudes.end());
    const double median = magnitudes[a.size() / 2];
    std::vector<bool> ordinary(c[0].size(), false);
    for (std::int64_t i = 0; i < shape.m; ++i) {
      bool outlier = false;
      for (std::int64_t t = 0; t < shape.k; ++t)
        outlier = outlier || std::abs(a[static_cast<std::size_t>(i * shape.k + t)]) > 100 * median;
      for (std::int64_t j = 0; j < shape.n; ++j)
        ordinary[static_cast<std::size_t>(i * shape.n + j)] = !outlier;
    }
    coarse(c[0], ordinary);
    return c;
  }
};

/// The old rule's worst error on one set: |c - r| / (tol (|r| + rms(r))).
double old_rule_error(const std::vector<double>& c, const std::vector<double>& r, double tol) {
  double squares = 0;
  for (const double v : r) squares += v * v;
  const double rms = std::sqrt(squares / static_cast<double>(r.size()));
  double worst = 0;
  for (std::size_t i = 0; i < r.size(); ++i)
    worst = std::max(worst, std::abs(c[i] - r[i]) / (tol * (std::abs(r[i]) + rms)));
  return worst;
}

tessel::gate_options outlier_suites() {
  return {.suite = {distribution::outliers, distribution::heavy_tailed}, .secret = 55};
}

}  // namespace

TEST_CASE("class 5: ordinary elements beside outliers are held to their own bound (elementwise)") {
  tessel::gate g(outlier_suites());
  const elementwise_spec spec({64, 64}, element_type::fp32,  // y = 3 x
                              [](double x, std::int64_t) { return 3 * x; });
  const sloppy_beside_outliers k;
  // the old rule lets it through on the same inputs
  tessel::gate twin(outlier_suites());
  const auto session = twin.session(spec, 1);
  for (std::size_t s = 0; s < session.sets(); ++s) {
    const auto& in = session.inputs(s);
    std::vector<double> r = in[0].values();
    for (double& v : r) v *= 3;
    CHECK(has_outliers(r));
    CHECK(old_rule_error(k.run(in)[0], r, 0x1p-12) <= 1);
  }
  const tessel::verdict v = g.check(spec, k, 1);
  CAPTURE(v.message);
  CHECK(v.status == tessel::status::incorrect);
  CHECK(v.max_error > 4);
}

TEST_CASE("class 5: rows without outliers are held to their own bound (matmul)") {
  tessel::gate g(outlier_suites());
  const tessel::testing::matmul_spec spec(shape);
  const sloppy_rows k;
  tessel::gate twin(outlier_suites());
  const auto session = twin.session(spec, 1);
  for (std::size_t s = 0; s < session.sets(); ++s) {
    const auto& in = session.inputs(s);
    const std::vector<double> c = k.run(in)[0];
    std::vector<double> r(c.size(), 0.0);
    for (std::int64_t i = 0; i < shape.m; ++i)
      for (std::int64_t t = 0; t < shape.k; ++t)
        for (std::int64_t j = 0; j < shape.n; ++j)
          r[static_cast<std::size_t>(i * shape.n + j)] += in[0].at(i, t) * in[1].at(t, j);
    CHECK(old_rule_error(c, r, 0x1p-12) <= 1);
  }
  const tessel::verdict v = g.check(spec, k, 1);
  CAPTURE(v.message);
  CHECK(v.status == tessel::status::incorrect);
}

TEST_CASE("class 5: honest controls pass on outlier-heavy inputs, near-zero elements included") {
  for (const auto& c : tessel::testing::honest_controls(shape)) {
    CAPTURE(c.name);
    tessel::gate g(outlier_suites());
    const tessel::verdict v =
        g.check(tessel::testing::matmul_spec(c.shape), tiled_matmul(c.shape, c.f), 1);
    CAPTURE(v.message);
    CHECK(v.ok());
  }
}
