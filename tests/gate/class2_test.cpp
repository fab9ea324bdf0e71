// class2_test.cpp: issue 25, class 2: call-count and repetition tricks. A
// check used to make ten calls in a fixed order (one suite repeated once)
// and cache its verdict for good, so a kernel right for its first calls, or
// one that skipped work on a repeated call, passed. Now a check's calls vary
// in number and order with the secret, every call is judged, a repeat comes
// back to back with its set's first call, a cached verdict is re-checked on
// fresh inputs now and then, and a timing loop's calls are spot-checked.
#include <tessel/backends.hpp>
#include <tessel/dsl.hpp>
#include <tessel/gate.hpp>

#include "matmul_kernel.hpp"

#include <doctest/doctest.h>

#include <atomic>
#include <mutex>

namespace {

using namespace tessel;
using namespace tessel::testing;

/// 96 x 80 x 72 with a tail tile in every dimension.
const matmul_shape shape{96, 80, 72, 40, 48, 32};

output_values zeros() {
  return {std::vector<double>(static_cast<std::size_t>(shape.m * shape.n), 0.0)};
}

/// Right for its first `honest_calls` calls, zeros afterwards.
struct right_at_first : gated_kernel {
  explicit right_at_first(int n) : honest_calls(n) {}
  int honest_calls;
  mutable std::atomic<int> calls{0};
  output_values run(std::span<const hidden_input> in) const override {
    if (++calls > honest_calls) return zeros();
    return tiled_matmul(shape).run(in);
  }
};

/// Skips the work when its inputs are the same as its previous call's.
struct skips_back_to_back : gated_kernel {
  mutable std::mutex mutex;
  mutable std::vector<double> last;
  output_values run(std::span<const hidden_input> in) const override {
    const std::lock_guard lock(mutex);
    std::vector<double> now = in[0].values();
    const bool again = now == last;
    last = std::move(now);
    return again ? zeros() : tiled_matmul(shape).run(in);
  }
};

/// Skips the work on an input set it has seen before, whenever.
struct skips_seen : gated_kernel {
  mutable std::mutex mutex;
  mutable std::vector<std::vector<double>> seen;
  output_values run(std::span<const hidden_input> in) const override {
    const std::lock_guard lock(mutex);
    std::vector<double> now = in[0].values();
    if (std::find(seen.begin(), seen.end(), now) != seen.end()) return zeros();
    seen.push_back(std::move(now));
    return tiled_matmul(shape).run(in);
  }
};

tessel::gate_options options(std::uint64_t secret) {
  tessel::gate_options o;
  o.secret = secret;
  return o;
}

}  // namespace

TEST_CASE("class 2: honest controls pass every check and every re-check") {
  for (const auto& c : tessel::testing::honest_controls(shape)) {
    CAPTURE(c.name);
    tessel::gate_options o = options(1);
    o.recheck_rate = 1;  // every lookup checks again
    tessel::gate g(o);
    const matmul_spec spec(c.shape);
    const tiled_matmul k(c.shape, c.f);
    for (int lookup = 0; lookup < 3; ++lookup) {
      const tessel::verdict v = g.check(spec, k, 7);
      CAPTURE(v.message);
      CHECK(v.ok());
      CHECK(!v.cached);
    }
  }
}

TEST_CASE("class 2: a kernel right for as many calls as the gate used to make is caught") {
  for (std::uint64_t secret = 1; secret <= 4; ++secret) {
    tessel::gate g(options(secret));
    const right_at_first k(10);
    const tessel::verdict v = g.check(matmul_spec(shape), k, 1);
    CAPTURE(v.message);
    CHECK(!v.ok());
  }
}

TEST_CASE("class 2: a kernel right for the fewest calls a check makes is caught by the rest") {
  // 15 suites and at least 2 repeats: 17 calls. Checks of more calls catch it
  // at once; a re-check of a cached verdict catches it on the next lookup.
  int caught_at_once = 0;
  for (std::uint64_t secret = 1; secret <= 10; ++secret) {
    tessel::gate_options o = options(secret);
    o.recheck_rate = 0.5;
    tessel::gate g(o);
    const right_at_first k(17);
    const matmul_spec spec(shape);
    tessel::verdict v = g.check(spec, k, 1);
    caught_at_once += v.ok() ? 0 : 1;
    for (int lookup = 0; v.ok() && lookup < 20; ++lookup) v = g.check(spec, k, 1);
    CAPTURE(secret);
    CHECK(!v.ok());
  }
  CHECK(caught_at_once >= 5);
}

TEST_CASE("class 2: skipping the work on a repeated call is caught, back to back or later") {
  for (std::uint64_t secret = 1; secret <= 4; ++secret) {
    tessel::gate g(options(secret));
    const skips_back_to_back again;
    const tessel::verdict v = g.check(matmul_spec(shape), again, 1);
    CAPTURE(v.message);
    CHECK(v.status == status::suspicious);
    CHECK(v.message.find("not deterministic") != std::string::npos);
    const skips_seen seen;
    const tessel::verdict w = g.check(matmul_spec(shape), seen, 2);
    CAPTURE(w.message);
    CHECK(!w.ok());
  }
}

TEST_CASE("class 2: a kernel that goes wrong once its verdict is cached is caught by a re-check") {
  // Honest for its first check (at most 21 calls), wrong afterwards: a
  // backend that gates each evaluation through the cache meets it again.
  tessel::gate g(options(3));  // the default re-check rate, 1 in 8
  const right_at_first k(21);
  const matmul_spec spec(shape);
  tessel::measurement m;
  int evaluations = 0;
  for (; evaluations < 60; ++evaluations) {
    m = tessel::measurement::success(1.0);
    g.apply(m, spec, k, 9);
    if (!m.ok()) break;
  }
  CAPTURE(evaluations);
  CHECK(!m.ok());
  CHECK(evaluations >= 1);
}

TEST_CASE("class 2: a kernel that goes wrong inside a timing loop is caught by spot checks") {
  const auto s = tessel::parse_space("space t { param tile : {1, 2} }");
  std::atomic<int> calls{0};
  const auto kernel = [&](const tessel::space&, const tessel::config&,
                          std::span<const hidden_input> in) -> output_values {
    // right through the check's calls and the first half of the loop
    if (++calls > 40) return zeros();
    return tiled_matmul(shape).run(in);
  };
  tessel::callback_gate g;
  g.inputs = "A:96x72:bf16,B:72x80:bf16";
  g.outputs = "C:96x80";
  g.reference = [](const std::vector<std::vector<double>>& in) {
    return tessel::testing::reference_product(in, shape);
  };
  g.timed_calls = 40;
  g.gate.secret = 5;
  tessel::callback_backend b(kernel, g);
  b.prepare(s);
  const tessel::measurement m = b.evaluate(s, s.from_json(R"({"tile": 1})"));
  INFO(m.message);
  CHECK(!m.ok());
  CHECK(calls > 40);
}
