// class4_test.cpp: issue 25, class 4: input suites that missed real data's
// shapes. No suite had exact zeros (post-ReLU activations, padding, masks),
// fp32 values exactly representable in bf16, heavy outliers, or inputs that
// share a long prefix with another call's, so kernels that special-case
// those passed. Each kernel below passes the old nine suites and fails the
// default suite, which now has sparse, padded, mask, bf16_valued,
// heavy_tailed and shared_prefix sets, drawn from the secret like the others.
#include <tessel/gate.hpp>

#include "matmul_kernel.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <mutex>

namespace {

using namespace tessel;
using namespace tessel::testing;

const matmul_shape shape{96, 80, 72, 40, 48, 32};
const matmul_shape fp32_in{96, 80, 72, 40, 48, 32, element_type::fp32, element_type::fp32};

/// C = A B in fp32 on inputs the kernel has rewritten.
output_values product(const matmul_shape& s, const std::vector<float>& a,
                      const std::vector<float>& b) {
  return {tiled_matmul(s).compute(a, b)};
}

/// Reads a zero in A as a missing value and repeats the one before it (a
/// broken sparse format).
struct zero_as_missing : gated_kernel {
  output_values run(std::span<const hidden_input> in) const override {
    std::vector<float> a = floats_of(in[0]);
    for (std::size_t i = 1; i < a.size(); ++i)
      if (a[i] == 0) a[i] = a[i - 1];
    return product(shape, a, floats_of(in[1]));
  }
};

/// Normalises each row of C by its row of A's largest magnitude and back:
/// NaN for an all-zero (padding) row.
struct nan_on_padding : gated_kernel {
  output_values run(std::span<const hidden_input> in) const override {
    output_values c = tiled_matmul(shape).run(in);
    for (std::int64_t i = 0; i < shape.m; ++i) {
      double top = 0;
      for (std::int64_t t = 0; t < shape.k; ++t) top = std::max(top, std::abs(in[0].at(i, t)));
      for (std::int64_t j = 0; j < shape.n; ++j) {
        double& v = c[0][static_cast<std::size_t>(i * shape.n + j)];
        v = v / top * top;
      }
    }
    return c;
  }
};

/// Takes a "bf16 fast path" (bf16 products summed in bf16) when every fp32
/// input is a bf16 value.
struct bf16_fast_path : gated_kernel {
  output_values run(std::span<const hidden_input> in) const override {
    const std::vector<float> a = floats_of(in[0]), b = floats_of(in[1]);
    const auto is_bf16 = [](const std::vector<float>& x) {
      return std::all_of(x.begin(), x.end(),
                         [](float v) { return tessel::round_to(element_type::bf16, v) == v; });
    };
    if (!is_bf16(a) || !is_bf16(b)) return product(fp32_in, a, b);
    std::vector<double> c(static_cast<std::size_t>(fp32_in.m * fp32_in.n), 0.0);
    for (std::int64_t i = 0; i < fp32_in.m; ++i)
      for (std::int64_t j = 0; j < fp32_in.n; ++j) {
        double sum = 0;
        for (std::int64_t t = 0; t < fp32_in.k; ++t)
          sum = tessel::round_to(element_type::bf16,
                                 sum + a[static_cast<std::size_t>(i * fp32_in.k + t)] *
                                           b[static_cast<std::size_t>(t * fp32_in.n + j)]);
        c[static_cast<std::size_t>(i * fp32_in.n + j)] = sum;
      }
    return {c};
  }
};

/// Clips inputs beyond 2^14 times their median magnitude ("robust" outlier
/// clipping): the old outliers suite (x1000) stays below it.
struct clips_outliers : gated_kernel {
  static std::vector<float> clipped(std::vector<float> x) {
    std::vector<float> m(x.size());
    std::transform(x.begin(), x.end(), m.begin(), [](float v) { return std::abs(v); });
    std::nth_element(m.begin(), m.begin() + static_cast<std::ptrdiff_t>(m.size() / 2), m.end());
    const float limit = 0x1p14f * m[m.size() / 2];
    for (float& v : x) v = std::clamp(v, -limit, limit);
    return x;
  }
  output_values run(std::span<const hidden_input> in) const override {
    return product(fp32_in, clipped(floats_of(in[0])), clipped(floats_of(in[1])));
  }
};

/// Caches its outputs by the first 64 values of each input.
struct prefix_cache : gated_kernel {
  mutable std::mutex mutex;
  mutable std::map<std::vector<double>, output_values> cache;
  output_values run(std::span<const hidden_input> in) const override {
    std::vector<double> key;
    for (const auto& t : in)
      for (std::int64_t i = 0; i < 64; ++i) key.push_back(t.at(i));
    const std::lock_guard lock(mutex);
    if (auto it = cache.find(key); it != cache.end()) return it->second;
    return cache[key] = tiled_matmul(shape).run(in);
  }
};

/// The gate's first nine distributions: the suite before issue 25.
tessel::gate_options old_suite(std::uint64_t secret) {
  tessel::gate_options o;
  o.suite.assign(tessel::all_distributions().begin(), tessel::all_distributions().begin() + 9);
  o.secret = secret;
  return o;
}

tessel::gate_options new_suite(std::uint64_t secret) {
  tessel::gate_options o;
  o.secret = secret;
  return o;
}

/// Passes the old suite, fails the new one, on each secret tried.
void passes_old_fails_new(const gated_kernel& k, const matmul_shape& s) {
  for (std::uint64_t secret = 1; secret <= 2; ++secret) {
    CAPTURE(secret);
    tessel::gate before(old_suite(secret)), now(new_suite(secret));
    const matmul_spec spec(s);
    const tessel::verdict v = before.check(spec, k, 1);
    CAPTURE(v.message);
    CHECK(v.ok());
    const tessel::verdict w = now.check(spec, k, 1);
    CAPTURE(w.message);
    CHECK(!w.ok());
  }
}

}  // namespace

TEST_CASE("class 4: a kernel that mistakes zeros for missing values fails on sparse inputs") {
  passes_old_fails_new(zero_as_missing{}, shape);
}

TEST_CASE("class 4: a kernel that divides by a padding row's magnitude fails on padded inputs") {
  passes_old_fails_new(nan_on_padding{}, shape);
}

TEST_CASE("class 4: a bf16 fast path for bf16-valued fp32 inputs fails on bf16_valued inputs") {
  passes_old_fails_new(bf16_fast_path{}, fp32_in);
}

TEST_CASE("class 4: clipping heavy outliers fails on heavy_tailed inputs") {
  passes_old_fails_new(clips_outliers{}, fp32_in);
}

TEST_CASE("class 4: a cache keyed by a prefix of the inputs fails on shared_prefix inputs") {
  passes_old_fails_new(prefix_cache{}, shape);
}

TEST_CASE("class 4: honest controls pass every new suite, with bf16 and fp32 inputs") {
  for (const matmul_shape& s : {shape, fp32_in})
    for (const auto& c : tessel::testing::honest_controls(s)) {
      CAPTURE(c.name);
      CAPTURE(tessel::to_string(s.in));
      tessel::gate_options o = new_suite(3);
      o.suite = {distribution::sparse,      distribution::padded,       distribution::mask,
                 distribution::bf16_valued, distribution::heavy_tailed, distribution::shared_prefix,
                 distribution::normal};
      tessel::gate g(o);
      const tessel::verdict v = g.check(matmul_spec(c.shape), tiled_matmul(c.shape, c.f), 1);
      CAPTURE(v.message);
      CHECK(v.ok());
    }
}
