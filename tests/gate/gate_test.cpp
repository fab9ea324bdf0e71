// gate_test.cpp: the gate's verdict rules on small elementwise specs and
// candidates (elementwise.hpp): what is ok, incorrect, suspicious or a
// runtime_error and why - the tolerance and the per-element bound (its
// scale and spread), overflow, NaN and Inf, exact int32, flushed
// subnormals, a spec or candidate that answers badly, check_time and the
// time bound. The session's mechanics are in gate_session_test.cpp.
#include "elementwise.hpp"

#include <tessel/error.hpp>
#include <tessel/gate.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>
#include <vector>

using namespace tessel;
using namespace tessel::testing;

TEST_CASE("an exact kernel passes every suite with zero error") {
  tessel::gate g(seeded());
  const elementwise_spec spec({40, 25}, element_type::fp32);
  const elementwise k(spec, same);
  const tessel::verdict v = g.check(spec, k, 1);
  CHECK(v.ok());
  CHECK(v.message.empty());
  CHECK(v.max_error == 0);
  CHECK(v.suites == 16);
  CHECK(!v.cached);
  CHECK(k.runs == v.calls);  // every call judged
  CHECK(v.calls >= 15 + 2);  // every suite, then 2 to 6 repeats
  CHECK(v.calls <= 15 + 6);
}

TEST_CASE("relative error: inside the tolerance passes, outside fails, tolerance_scale widens it") {
  const double tol = tessel::default_tolerance(element_type::fp32);
  // A relative error e on every element gives error e |r| / (tol (|r| + scale)) < e / tol.
  const elementwise_spec spec({1000}, element_type::fp32);
  const elementwise small(spec, [&](double r, std::int64_t) { return r * (1 + 0.9 * tol); });
  const elementwise large(spec, [&](double r, std::int64_t) { return r * (1 + 4 * tol); });
  tessel::gate g(seeded());
  CHECK(g.check(spec, small, 1).ok());
  const tessel::verdict v = g.check(spec, large, 2);
  CHECK(v.status == status::incorrect);
  CHECK(v.max_error > 1);
  CHECK(v.max_error < 4);
  tessel::gate_options wide = seeded();
  wide.tolerance_scale = 4;
  tessel::gate lenient(wide);
  CHECK(lenient.check(spec, large, 2).ok());
}

TEST_CASE("the per-element bound: near-zero elements are judged against the median magnitude") {
  // The reference's element 0 is 1e-9; the candidate is off there by 1e-4 x
  // the scale (the median nonzero |reference|), a relative error of ~1e5 but
  // ~0.4 of its bound: it passes.
  // built whole, not assigned over the default suite: GCC 12 at -O3 misreads
  // that assignment (-Wfree-nonheap-object)
  const tessel::gate_options o{.suite = {tessel::distribution::normal}, .secret = 42};
  const elementwise_spec spec({1000}, element_type::fp32,
                              [](double x, std::int64_t flat) { return flat == 0 ? 1e-9 : x; });
  double scale = 0;
  {
    // the inputs the first check of key 1 draws: a session of a gate with the same secret
    tessel::gate twin(o);
    const auto in = twin.session(spec, 1).inputs(0)[0];
    std::vector<double> magnitudes{1e-9};
    for (std::int64_t i = 1; i < 1000; ++i) magnitudes.push_back(std::abs(in.at(i)));
    std::nth_element(magnitudes.begin(), magnitudes.begin() + 500, magnitudes.end());
    scale = magnitudes[500];
  }
  const elementwise k(
      spec, [&](double r, std::int64_t flat) { return flat == 0 ? r + 1e-4 * scale : r; });
  tessel::gate g(o);
  const tessel::verdict v = g.check(spec, k, 1);
  CHECK(v.ok());
  CHECK(v.max_error == doctest::Approx(1e-4 / 0x1p-12).epsilon(0.01));
  // An absolute error of 1e-3 x the scale is about 4 bounds near zero: it fails.
  const elementwise shifted(spec, [&](double r, std::int64_t) { return r + 1e-3 * scale; });
  tessel::gate same_inputs(o);
  const tessel::verdict w = same_inputs.check(spec, shifted, 1);
  CHECK(w.status == status::incorrect);
  CHECK(w.message.find("its bound (0.000244 x (|reference| + scale ") != std::string::npos);
}

namespace {

/// The identity with element 0 the sum of terms that cancel: its reference
/// is 1e-9, the root sum of squares of its terms `spread` (every other
/// element has none).
class spread_spec : public elementwise_spec {
 public:
  explicit spread_spec(double spread)
      : elementwise_spec({1000}, element_type::fp32,
                         [](double x, std::int64_t flat) { return flat == 0 ? 1e-9 : x; }),
        spread_(spread) {}
  probe_values reference_with_spread(std::span<const tessel::input_tensor> in,
                                     const probe_points& where,
                                     probe_values& spread) const override {
    spread = probe_values(1);
    for (const std::int64_t flat : where[0]) spread[0].push_back(flat == 0 ? spread_ : 0.0);
    return reference(in, where);
  }

 private:
  double spread_;
};

}  // namespace

TEST_CASE("the spread: an element whose terms are large is judged against them") {
  const tessel::gate_options o{.suite = {tessel::distribution::normal}, .secret = 42};
  // Off by 1 where the terms' root sum of squares is 1e6: 1 / (2^-12 x 1e6)
  // = 0.004 of the bound, where without the spread it is thousands.
  const spread_spec spec(1e6);
  const auto off_at_0 = [](double by) {
    return [by](double r, std::int64_t flat) { return flat == 0 ? r + by : r; };
  };
  const elementwise near(spec, off_at_0(1));
  tessel::gate g(o);
  const tessel::verdict v = g.check(spec, near, 1);
  INFO(v.message);
  CHECK(v.ok());
  CHECK(v.max_error < 0.005);
  const spread_spec plain(0);
  tessel::gate without(o);
  CHECK(without.check(plain, elementwise(plain, off_at_0(1)), 1).status == status::incorrect);
  // Off by 1e3: about 4 bounds; the message shows the spread.
  tessel::gate far_gate(o);
  const tessel::verdict far = far_gate.check(spec, elementwise(spec, off_at_0(1e3)), 1);
  CHECK(far.status == status::incorrect);
  CHECK(far.message.find(" + spread 1e+06))") != std::string::npos);
  // A negative spread is the spec answering badly.
  const spread_spec bad(-1);
  tessel::gate bad_gate(o);
  const tessel::verdict b = bad_gate.check(bad, elementwise(bad, same), 1);
  CHECK(b.status == status::runtime_error);
  CHECK(b.message.find("reference() gave a spread of -1") != std::string::npos);
}

TEST_CASE("overflow: saturation or an infinity of the reference's sign is honest") {
  // y = 1e6 x in fp16: most references exceed 65504.
  const auto fp16 = element_type::fp16;
  elementwise_spec spec({200}, fp16, [](double x, std::int64_t) { return 1e6 * x; });
  spec.input_type = fp16;
  const elementwise saturating(spec, [&](double r, std::int64_t) { return round_to(fp16, r); });
  const elementwise overflowing(spec, [&](double r, std::int64_t) {
    return std::abs(r) > 65504 ? std::copysign(INFINITY, r) : round_to(fp16, r);
  });
  const elementwise flipped(spec, [&](double r, std::int64_t) {
    return std::abs(r) > 65504 ? std::copysign(INFINITY, -r) : round_to(fp16, r);
  });
  tessel::gate g(seeded());
  CHECK(g.check(spec, saturating, 1).ok());
  CHECK(g.check(spec, overflowing, 2).ok());
  const tessel::verdict v = g.check(spec, flipped, 3);
  CHECK(v.status == status::suspicious);
  CHECK(v.message.find("where the reference is finite") != std::string::npos);
}

TEST_CASE("a NaN reference needs a NaN candidate") {
  const elementwise_spec spec({50}, element_type::fp32, [](double x, std::int64_t flat) {
    return flat == 0 ? std::nan("") : x;
  });
  const elementwise nan_too(spec, same);
  const elementwise finite(spec, [](double r, std::int64_t flat) { return flat == 0 ? 0.0 : r; });
  tessel::gate g(seeded());
  CHECK(g.check(spec, nan_too, 1).ok());
  const tessel::verdict v = g.check(spec, finite, 2);
  CHECK(v.status == status::incorrect);
  CHECK(v.message.starts_with("incorrect: output y[0] is 0 on the '"));
  CHECK(v.message.ends_with(" suite where the reference is nan"));
}

TEST_CASE("a NaN anywhere in the output is found, also off a spec's own probes") {
  const elementwise_spec spec({300, 300}, element_type::fp32);
  const elementwise k(
      spec, [](double r, std::int64_t flat) { return flat == 150 * 300 + 151 ? std::nan("") : r; });
  tessel::gate g(seeded());
  const tessel::verdict v = g.check(spec, k, 1);
  CHECK(v.status == status::suspicious);
  CHECK(v.message.find("output y[150, 151] is nan on the '") != std::string::npos);
  // A spec that compares its first row only still sees the NaN (off its probes).
  struct first_row : elementwise_spec {
    using elementwise_spec::elementwise_spec;
    probe_points probes(tessel::rng&) const override {
      std::vector<std::int64_t> row(300);
      std::iota(row.begin(), row.end(), std::int64_t{0});
      return {row};
    }
  };
  const first_row sparse({300, 300}, element_type::fp32);
  const tessel::verdict w = g.check(sparse,
                                    elementwise(sparse,
                                                [](double r, std::int64_t flat) {
                                                  return flat == 150 * 300 + 151 ? std::nan("") : r;
                                                }),
                                    2);
  CHECK(w.status == status::suspicious);
  CHECK(w.message.find("output y[150, 151] is nan") != std::string::npos);
}

TEST_CASE("int32 outputs are compared exactly") {
  elementwise_spec spec({100}, element_type::int32);
  spec.input_type = element_type::int32;
  spec.label = 1000;
  const elementwise good(spec, same);
  const elementwise bad(spec, [](double r, std::int64_t flat) { return flat == 17 ? r + 1 : r; });
  tessel::gate g(seeded());
  CHECK(g.check(spec, good, 1).ok());
  const tessel::verdict v = g.check(spec, bad, 2);
  CHECK(v.status == status::incorrect);
  CHECK(v.message.find("output y[17]") != std::string::npos);
  CHECK(v.message.find("an exact match") != std::string::npos);
  // An int32 input without a label range cannot be drawn: a runtime_error verdict.
  elementwise_spec no_range({100}, element_type::int32);
  no_range.input_type = element_type::int32;
  const tessel::verdict w = g.check(no_range, elementwise(no_range, same), 3);
  CHECK(w.status == status::runtime_error);
  CHECK(w.message.find("label_range") != std::string::npos);
}

TEST_CASE("the default tolerance grows with very long reductions") {
  CHECK(tessel::default_tolerance(element_type::fp32, 1 << 20) == 0x1p-12);
  CHECK(tessel::default_tolerance(element_type::fp32, 1 << 22) == doctest::Approx(0x1p-11));
  CHECK(tessel::default_tolerance(element_type::bf16, 1 << 22) == 0x1p-6);
  CHECK(tessel::default_tolerance(element_type::int32, 1 << 22) == 0);
}

TEST_CASE("a spec or candidate that throws or answers the wrong shape is a runtime_error") {
  struct bad_probes : elementwise_spec {
    using elementwise_spec::elementwise_spec;
    probe_points probes(tessel::rng&) const override { return {{0, 1000}}; }
  };
  const bad_probes spec({10, 10}, element_type::fp32);
  tessel::gate g(seeded());
  tessel::verdict v = g.check(spec, elementwise(spec, same), 1);
  CHECK(v.status == status::runtime_error);
  CHECK(v.message ==
        "the kernel failed in the spec's probes(): probes() gave index 1000 for output y of 100 "
        "elements");
  CHECK_THROWS_WITH_AS((void)g.session(spec, 1),
                       doctest::Contains("the gate could not read the spec: the spec's probes(): "),
                       tessel::error);
  struct short_run : tessel::gated_kernel {
    tessel::output_values run(std::span<const tessel::hidden_input>) const override {
      return {{1.0}};
    }
  };
  const elementwise_spec ten({10}, element_type::fp32);
  v = g.check(ten, short_run{}, 2);
  CHECK(v.status == status::runtime_error);
  CHECK(v.message.find("run() gave 1 values for output y, expected 10 (the whole output)") !=
        std::string::npos);
  CHECK(g.cached() == 2);
}

TEST_CASE("check_time: not finite, not positive, or faster than the roofline is suspicious") {
  tessel::gate g(seeded());
  CHECK(!g.check_time(1.0e-3, 1.0e-3));
  CHECK(!g.check_time(0.99e-3, 1.0e-3));  // within the 2% slack
  CHECK(!g.check_time(0.5e-3, 0));        // no bound known
  const auto v = g.check_time(0.5e-3, 1.0e-3);
  REQUIRE(v);
  CHECK(v->status == status::suspicious);
  CHECK(v->message ==
        "suspicious: 0.0005 s is faster than the roofline bound 0.001 s (50.0% below it; the "
        "gate allows 2.0%)");
  for (const double t : {std::nan(""), double{INFINITY}, 0.0, -1.0}) {
    const auto w = g.check_time(t, 0);
    REQUIRE(w);
    CHECK(w->message.find("is not a finite positive number") != std::string::npos);
  }
}

TEST_CASE("time_bound: the spec's roofline, the machine's floor, the last-resort floor") {
  struct bounded : elementwise_spec {
    using elementwise_spec::elementwise_spec;
    double roofline_s() const override { return bound; }
    double flops() const override { return work; }
    double bound = 0, work = 0;
  };
  bounded spec({1000, 1000}, element_type::fp32);  // 8 MB in and out
  tessel::gate g(seeded());
  CHECK(g.time_bound(spec) == doctest::Approx(8e6 / 1e14));
  spec.bound = 1e-3;
  CHECK(g.time_bound(spec) == 1e-3);
  tessel::gate_options off = seeded();
  off.max_bytes_per_s = 0;
  spec.bound = 0;
  CHECK(tessel::gate(off).time_bound(spec) == 0);
  // a machine: 1e12 FLOP/s, 1e11 B/s of memory behind 1 MB of cache at 1e12 B/s
  tessel::gate_options machine = off;
  machine.machine = {.flops_per_s = 1e12,
                     .memory_bytes_per_s = 1e11,
                     .cache_bytes = 1e6,
                     .cache_bytes_per_s = 1e12,
                     .source = "test"};
  tessel::gate m(machine);
  CHECK(m.time_bound(spec) == doctest::Approx(7e6 / 1e11));  // the bytes beyond the cache
  spec.work = 1e10;
  CHECK(m.time_bound(spec) == doctest::Approx(1e-2));  // the FLOPs at the peak
}

TEST_CASE("results below the output type's normal range may be flushed to zero") {
  // y = 1e-9 x in fp16: every reference is below fp16's smallest normal (6.1e-5)
  struct underflowing : tessel::gate_spec {
    std::vector<tensor_spec> inputs() const override {
      return {{"x", {32, 32}, element_type::fp32}};
    }
    std::vector<tensor_spec> outputs() const override {
      return {{"y", {32, 32}, element_type::fp16}};
    }
    probe_values reference(std::span<const tessel::input_tensor> in,
                           const probe_points& where) const override {
      probe_values y(1);
      for (const std::int64_t flat : where[0]) y[0].push_back(1e-9 * in[0].at(flat));
      return y;
    }
  };
  struct flushes : tessel::gated_kernel {  // an engine that flushes subnormal results
    tessel::output_values run(std::span<const tessel::hidden_input>) const override {
      return {std::vector<double>(32 * 32, 0.0)};
    }
  };
  tessel::gate g(tessel::gate_options{.secret = 9});
  const tessel::verdict v = g.check(underflowing{}, flushes{}, 1);
  INFO(v.message);
  CHECK(v.ok());  // neither an error nor "does not change when the inputs change"
}
