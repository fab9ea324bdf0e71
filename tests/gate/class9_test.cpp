// class9_test.cpp: round four, cheats of kinds the earlier classes did not
// have, each tried against the gate as it stands: computing only what the
// gate always compares, a cache keyed on a coarse hash of the inputs,
// another shape's result, narrow accumulation only for long reductions,
// skipping the ragged last tile, NaN only where the inputs are large, and
// right on a set's first call but wrong on the timed repetitions. Each is
// caught; the honest controls pass (docs/gate.md, "Round four").
#include <tessel/gate.hpp>

#include "elementwise.hpp"
#include "matmul_kernel.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace {

using namespace tessel;
using namespace tessel::testing;

/// 96 x 80 x 72 with a tail tile in every dimension (K = 2 x 32 + 8).
const matmul_shape shape{96, 80, 72, 40, 48, 32};

tessel::gate_options options(std::uint64_t secret) { return {.secret = secret}; }

/// y = x + 1 on 2048 x 2080 fp32 (above whole_output_limit: compared on tiles).
constexpr std::int64_t big_rows = 2048, big_cols = 2080;
elementwise_spec big_copy_spec() {
  return {{big_rows, big_cols}, element_type::fp32, [](double x, std::int64_t) { return x + 1; }};
}

/// Does the work only where the default probes always look: the first and
/// the last 64 x 64 tile, the last column and the last element; elsewhere
/// it returns the input (the +1 skipped).
struct only_always_probed : gated_kernel {
  output_values run(std::span<const hidden_input> in) const override {
    std::vector<double> y = in[0].values();
    const std::int64_t rows = big_rows, cols = big_cols;
    for (std::int64_t i = 0; i < rows * cols; ++i) {
      const std::int64_t r = i / cols, c = i % cols;
      const bool first = r < 64 && c < 64, last = r >= rows - 64 && c >= cols - 64;
      if (first || last || c == cols - 1) y[static_cast<std::size_t>(i)] += 1;
    }
    return {y};
  }
};

/// Caches its outputs across calls keyed on a cheap hash: the signs of the
/// first 16 elements of A (a "have I seen this input" check that reads
/// almost nothing).
struct cache_by_signs : gated_kernel {
  mutable std::mutex mutex;
  mutable std::map<unsigned, output_values> cache;
  output_values run(std::span<const hidden_input> in) const override {
    unsigned key = 0;
    for (std::int64_t i = 0; i < 16; ++i) key = key << 1 | (in[0].at(i) < 0 ? 1U : 0U);
    const std::lock_guard lock(mutex);
    if (const auto hit = cache.find(key); hit != cache.end()) return hit->second;
    return cache[key] = tiled_matmul(shape).run(in);
  }
};

/// Returns the result of another shape's call: C over the K of the last
/// config it was tuned on (64, the whole tiles), zero-padded.
struct other_shape : gated_kernel {
  output_values run(std::span<const hidden_input> in) const override {
    matmul_shape seen = shape;
    seen.k = 64;
    const std::vector<float> a = floats_of(in[0]), b = floats_of(in[1]);
    std::vector<float> a64, b64(b.begin(), b.begin() + 64 * shape.n);
    for (std::int64_t i = 0; i < shape.m; ++i)
      a64.insert(a64.end(), a.begin() + i * shape.k, a.begin() + i * shape.k + 64);
    return {tiled_matmul(seen).compute(a64, b64)};
  }
};

/// Accumulates in bf16 (the declared accumulator is fp32) when K >= 512,
/// where a short-K test would not look.
struct narrow_for_long_k : gated_kernel {
  explicit narrow_for_long_k(matmul_shape shape_of) : s(shape_of) {}
  matmul_shape s;
  output_values run(std::span<const hidden_input> in) const override {
    if (s.k < 512) return tiled_matmul(s).run(in);
    const std::vector<float> a = floats_of(in[0]), b = floats_of(in[1]);
    std::vector<double> c(static_cast<std::size_t>(s.m * s.n));
    for (std::int64_t i = 0; i < s.m; ++i)
      for (std::int64_t j = 0; j < s.n; ++j) {
        double acc = 0;
        for (std::int64_t t = 0; t < s.k; ++t)
          acc = tessel::round_to(element_type::bf16, acc + a[i * s.k + t] * b[t * s.n + j]);
        c[static_cast<std::size_t>(i * s.n + j)] = tessel::round_to(s.out, acc);
      }
    return {c};
  }
};

/// Skips the last K tile only when K is not a multiple of the tile (a
/// remainder loop left out).
struct skips_ragged_tail : gated_kernel {
  output_values run(std::span<const hidden_input> in) const override {
    if (shape.k % shape.tile_k == 0) return tiled_matmul(shape).run(in);
    matmul_shape whole = shape;
    whole.k = shape.k / shape.tile_k * shape.tile_k;  // the remainder's terms never added
    const std::vector<float> a = floats_of(in[0]), b = floats_of(in[1]);
    std::vector<float> a_whole, b_whole(b.begin(), b.begin() + whole.k * shape.n);
    for (std::int64_t i = 0; i < shape.m; ++i)
      a_whole.insert(a_whole.end(), a.begin() + i * shape.k, a.begin() + i * shape.k + whole.k);
    return {tiled_matmul(whole).compute(a_whole, b_whole)};
  }
};

/// Writes NaN into a row only where A's first element of that row is large
/// (|a| > 8: the rows a fast path mishandles).
struct nan_where_large : gated_kernel {
  output_values run(std::span<const hidden_input> in) const override {
    output_values out = tiled_matmul(shape).run(in);
    for (std::int64_t i = 0; i < shape.m; ++i)
      if (std::abs(in[0].at(i, 0)) > 8)
        out[0][static_cast<std::size_t>(i * shape.n)] = std::numeric_limits<double>::quiet_NaN();
    return out;
  }
};

/// Right on the first call of each input set; every later call on a set it
/// has seen (a timed repetition) is 1% off at one element.
struct wrong_when_repeated : gated_kernel {
  mutable std::mutex mutex;
  mutable std::vector<std::vector<double>> seen;
  output_values run(std::span<const hidden_input> in) const override {
    output_values out = tiled_matmul(shape).run(in);
    const std::lock_guard lock(mutex);
    std::vector<double> a = in[0].values();
    if (std::find(seen.begin(), seen.end(), a) != seen.end())
      out[0][0] = out[0][0] * 1.01 + 1;
    else
      seen.push_back(std::move(a));
    return out;
  }
};

/// Right for the calls of a check, then wrong (zeros) in the timing loop.
struct wrong_after_check : gated_kernel {
  explicit wrong_after_check(std::size_t n) : honest(n) {}
  std::size_t honest;
  mutable std::atomic<std::size_t> calls{0};
  output_values run(std::span<const hidden_input> in) const override {
    if (calls++ < honest) return tiled_matmul(shape).run(in);
    return {std::vector<double>(static_cast<std::size_t>(shape.m * shape.n), 0.0)};
  }
};

}  // namespace

TEST_CASE("class 9: computing only the elements the probes always include is caught") {
  for (std::uint64_t secret = 1; secret <= 2; ++secret) {
    tessel::gate g(
        {.suite = {tessel::distribution::normal, tessel::distribution::uniform}, .secret = secret});
    const verdict v = g.check(big_copy_spec(), only_always_probed{}, 1);
    CAPTURE(v.message);
    CHECK(v.status == status::incorrect);
  }
}

TEST_CASE("class 9: a cache keyed on a coarse hash of the inputs is caught") {
  for (std::uint64_t secret = 1; secret <= 4; ++secret) {
    tessel::gate g(options(secret));
    const cache_by_signs k;
    const verdict v = g.check(matmul_spec(shape), k, 1);
    CAPTURE(v.message);
    CHECK(!v.ok());
  }
}

TEST_CASE("class 9: another shape's result, a skipped ragged tail, narrow long sums are caught") {
  const matmul_shape long_k{64, 48, 1024, 32, 48, 128};
  for (std::uint64_t secret = 1; secret <= 2; ++secret) {
    tessel::gate g(options(secret));
    const verdict other = g.check(matmul_spec(shape), other_shape{}, 1);
    CAPTURE(other.message);
    CHECK(other.status == status::incorrect);
    const verdict ragged = g.check(matmul_spec(shape), skips_ragged_tail{}, 2);
    CAPTURE(ragged.message);
    CHECK(ragged.status == status::incorrect);
    const verdict narrow = g.check(matmul_spec(long_k), narrow_for_long_k(long_k), 3);
    CAPTURE(narrow.message);
    CHECK(narrow.status == status::incorrect);
  }
}

TEST_CASE("class 9: NaN only where the inputs are large is caught") {
  for (std::uint64_t secret = 1; secret <= 4; ++secret) {
    tessel::gate g(options(secret));
    const verdict v = g.check(matmul_spec(shape), nan_where_large{}, 1);
    CAPTURE(v.message);
    CHECK(v.status == status::suspicious);
    CHECK(v.message.find("is nan") != std::string::npos);
  }
}

TEST_CASE("class 9: right on a set's first call, wrong on its repetitions, is caught") {
  for (std::uint64_t secret = 1; secret <= 4; ++secret) {
    tessel::gate g(options(secret));
    const wrong_when_repeated k;
    const verdict v = g.check(matmul_spec(shape), k, 1);
    CAPTURE(v.message);
    CHECK(v.status == status::suspicious);
    CHECK(v.message.find("not deterministic") != std::string::npos);
  }
}

TEST_CASE("class 9: right for a check's calls, wrong in the timing loop, is caught") {
  const matmul_spec spec(shape);
  for (std::uint64_t secret = 1; secret <= 4; ++secret) {
    tessel::gate g(options(secret));
    tessel::gate_session session = g.session(spec, 1);
    const wrong_after_check k(session.calls().size());
    std::optional<verdict> failed;
    for (const std::size_t set : session.calls())
      if (!failed) failed = session.judge(set, k.run(session.inputs(set)));
    REQUIRE(!failed);
    constexpr std::size_t timed = 24;
    for (std::size_t i = 0; i < timed && !failed; ++i) {
      const std::size_t set = session.timed_set(i);
      const output_values out = k.run(session.inputs(set));
      if (session.spot_check(i, timed)) failed = session.judge(set, out);
    }
    const verdict v = failed ? *failed : session.finish();
    CAPTURE(v.message);
    CHECK(!v.ok());
  }
}

TEST_CASE("class 9: honest controls pass") {
  std::uint64_t key = 1;
  for (const auto& c : tessel::testing::honest_controls(shape)) {
    tessel::gate g(options(3));
    const verdict v = g.check(matmul_spec(c.shape), tiled_matmul(c.shape, c.f), key++);
    CAPTURE(c.name);
    CAPTURE(v.message);
    CHECK(v.ok());
  }
  const matmul_shape long_k{64, 48, 1024, 32, 48, 128};
  tessel::gate g(options(3));
  CHECK(g.check(matmul_spec(long_k), tiled_matmul(long_k), key).ok());
}
