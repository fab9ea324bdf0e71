// gate_test.cpp: the gate's rules on small elementwise specs and
// candidates: the tolerance and the scale rule, default probes, hidden
// inputs per config key, arrays judged by check_outputs, the verdict cache
// (also under threads), check_time, apply, and option validation.
#include <tessel/error.hpp>
#include <tessel/gate.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <functional>
#include <string>
#include <thread>

using tessel::element_type;
using tessel::probe_points;
using tessel::probe_values;
using tessel::round_to;
using tessel::status;
using tessel::tensor_spec;

namespace {

/// The spec of y = f(x) elementwise on one input of `shape` (f: `ref`, the
/// identity by default): what the backend owns.
class elementwise_spec : public tessel::gate_spec {
 public:
  using function = std::function<double(double x, std::int64_t flat)>;
  elementwise_spec(std::vector<std::int64_t> shape, element_type t, function f = nullptr)
      : shape_(std::move(shape)), type_(t), f_(std::move(f)) {}

  std::vector<tensor_spec> inputs() const override { return {{"x", shape_, input_type, label}}; }
  std::vector<tensor_spec> outputs() const override { return {{"y", shape_, type_, 0}}; }
  probe_values reference(std::span<const tessel::input_tensor> in,
                         const probe_points& where) const override {
    probe_values out(1);
    for (const std::int64_t flat : where[0]) out[0].push_back(value(in[0].at(flat), flat));
    return out;
  }
  [[nodiscard]] double value(double x, std::int64_t flat) const { return f_ ? f_(x, flat) : x; }

  element_type input_type = element_type::fp32;
  std::int64_t label = 0;

 private:
  std::vector<std::int64_t> shape_;
  element_type type_;
  function f_;
};

/// The candidate: the spec's function at every element, then `perturb`
/// turns each value (and its flat index) into the candidate's.
class elementwise : public tessel::gated_kernel {
 public:
  using perturbation = std::function<double(double ref, std::int64_t flat)>;
  elementwise(const elementwise_spec& spec, perturbation perturb)
      : spec_(spec), perturb_(std::move(perturb)) {}

  tessel::output_values run(std::span<const tessel::hidden_input> in) const override {
    ++runs;
    std::vector<double> y(static_cast<std::size_t>(in[0].spec().elements()));
    for (std::size_t i = 0; i < y.size(); ++i) {
      const auto flat = static_cast<std::int64_t>(i);
      y[i] = perturb_(spec_.value(in[0].at(flat), flat), flat);
    }
    return {y};
  }
  mutable std::atomic<int> runs{0};

 private:
  const elementwise_spec& spec_;
  perturbation perturb_;
};

double same(double r, std::int64_t) { return r; }

tessel::gate_options seeded() {
  tessel::gate_options o;
  o.secret = 42;
  return o;
}

std::string options_message(const tessel::gate_options& o) {
  try {
    o.validate();
  } catch (const tessel::options_error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("an exact kernel passes every suite with zero error") {
  tessel::gate g(seeded());
  const elementwise_spec spec({40, 25}, element_type::fp32);
  const elementwise k(spec, same);
  const tessel::verdict v = g.check(spec, k, 1);
  CHECK(v.ok());
  CHECK(v.message.empty());
  CHECK(v.max_error == 0);
  CHECK(v.suites == 9);
  CHECK(!v.cached);
  CHECK(k.runs == 10);  // nine suites, the first run twice
}

TEST_CASE("relative error: inside the tolerance passes, outside fails, tolerance_scale widens it") {
  const double tol = tessel::default_tolerance(element_type::fp32);
  // A relative error e on every element gives error e |r| / (tol (|r| + rms)) < e / tol.
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

TEST_CASE("the scale rule: near-zero elements are judged against the output's rms") {
  // The reference's element 0 is 1e-9; the candidate is off there by 1e-4 x
  // the rms, a relative error of ~1e5 but ~0.4 tolerances: it passes.
  // built whole, not assigned over the default suite: GCC 12 at -O3 misreads
  // that assignment (-Wfree-nonheap-object)
  const tessel::gate_options o{.suite = {tessel::distribution::normal}, .secret = 42};
  tessel::gate g(o);
  double rms = 0;
  const elementwise_spec spec({1000}, element_type::fp32,
                              [](double x, std::int64_t flat) { return flat == 0 ? 1e-9 : x; });
  {
    // the rms of the disguised normal input this check draws
    const auto in = g.hidden_inputs(spec, 1);
    for (std::int64_t i = 1; i < 1000; ++i) rms += in[0][0].at(i) * in[0][0].at(i);
    rms = std::sqrt((rms + 1e-18) / 1000);
  }
  const elementwise k(spec,
                      [&](double r, std::int64_t flat) { return flat == 0 ? r + 1e-4 * rms : r; });
  const tessel::verdict v = g.check(spec, k, 1);
  CHECK(v.ok());
  CHECK(v.max_error == doctest::Approx(1e-4 / 0x1p-12).epsilon(0.1));
  // An absolute error of 1e-3 x the rms is about 4 tolerances near zero: it fails.
  const elementwise shifted(spec, [&](double r, std::int64_t) { return r + 1e-3 * rms; });
  tessel::gate same_inputs(o);
  const tessel::verdict w = same_inputs.check(spec, shifted, 1);
  CHECK(w.status == status::incorrect);
  CHECK(w.message.find("the tolerance (0.000244 x (|reference| + rms ") != std::string::npos);
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
  CHECK(v.message ==
        "incorrect: output y[0] is 0 on the 'normal' suite where the reference is nan");
}

TEST_CASE("a NaN off the probes is found in the whole output") {
  // 300 x 300 is sampled; element (150, 151) is probed only by chance.
  const elementwise_spec spec({300, 300}, element_type::fp32);
  const elementwise k(
      spec, [](double r, std::int64_t flat) { return flat == 150 * 300 + 151 ? std::nan("") : r; });
  tessel::gate g(seeded());
  const tessel::verdict v = g.check(spec, k, 1);
  CHECK(v.status == status::suspicious);
  CHECK(v.message.find("output y[150, 151] is nan on the 'normal' suite") != std::string::npos);
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

TEST_CASE(
    "default probes: the whole of a small output; every row and a few whole rows of a large one") {
  struct shaped : tessel::gate_spec {
    std::vector<std::vector<std::int64_t>> shapes;
    std::vector<tensor_spec> inputs() const override { return {}; }
    std::vector<tensor_spec> outputs() const override {
      std::vector<tensor_spec> out;
      for (const auto& s : shapes) out.push_back({"y", s, element_type::fp32, 0});
      return out;
    }
    probe_values reference(std::span<const tessel::input_tensor>,
                           const probe_points&) const override {
      return {};
    }
  } k;
  k.shapes = {{256, 256}, {1000, 1000}, {20, 300, 400}, {100000}};
  tessel::rng r(9);
  const probe_points p = k.probes(r);
  REQUIRE(p.size() == 4);
  CHECK(p[0].size() == 65536);
  for (const auto& list : p) {
    CHECK(std::is_sorted(list.begin(), list.end()));
    CHECK(std::adjacent_find(list.begin(), list.end()) == list.end());
  }
  // 1000 x 1000: every row at 4 columns (first, last, 2 random), 4 whole rows
  CHECK(p[1].size() <= 1000 * 4 + 4 * 1000);
  CHECK(p[1].size() >= 1000 * 4 + 4 * 1000 - 8 * 4);
  std::vector<int> per_row(1000, 0);
  for (const std::int64_t flat : p[1]) ++per_row[static_cast<std::size_t>(flat / 1000)];
  CHECK(*std::min_element(per_row.begin(), per_row.end()) >= 4);
  CHECK(std::count(per_row.begin(), per_row.end(), 1000) >= 4);
  CHECK(per_row.front() == 1000);
  CHECK(per_row.back() == 1000);
  for (const std::int64_t corner : {0LL, 999LL, 999000LL, 999999LL})
    CHECK(std::binary_search(p[1].begin(), p[1].end(), corner));
  // 20 x 300 x 400: 6000 rows of 400
  std::vector<int> rows3(6000, 0);
  for (const std::int64_t flat : p[2]) ++rows3[static_cast<std::size_t>(flat / 400)];
  CHECK(*std::min_element(rows3.begin(), rows3.end()) >= 2);
  CHECK(std::binary_search(p[2].begin(), p[2].end(), 20LL * 300 * 400 - 1));
  CHECK(tessel::index_of(k.outputs()[2], 20LL * 300 * 400 - 1) ==
        std::vector<std::int64_t>{19, 299, 399});
  // a vector is seen as rows of about its square root
  CHECK(p[3].size() > 1000);
  tessel::rng again(9);
  CHECK(k.probes(again) == p);
  CHECK(k.tolerances() == std::vector<double>(4, 0x1p-12));
}

TEST_CASE("the hidden inputs depend on the secret and on the config key") {
  const elementwise_spec spec({10}, element_type::bf16);
  tessel::gate g(seeded());
  const auto a = g.hidden_inputs(spec, 1), b = g.hidden_inputs(spec, 2),
             a_again = g.hidden_inputs(spec, 1);
  REQUIRE(a.size() == 9);
  CHECK(a[0][0].values() == a_again[0][0].values());
  CHECK(a[0][0].values() != b[0][0].values());
  tessel::gate_options other = seeded();
  other.secret = 43;
  tessel::gate h(other);
  CHECK(h.hidden_inputs(spec, 1)[0][0].values() != a[0][0].values());
  tessel::gate drawn{tessel::gate_options{}};
  CHECK(drawn.options().secret != 0);
}

TEST_CASE("check_outputs judges arrays computed elsewhere by the same rules") {
  const elementwise_spec spec({30, 20}, element_type::fp32);
  tessel::gate g(seeded());
  const auto inputs = g.hidden_inputs(spec, 5);
  std::vector<tessel::output_values> right, wrong;
  for (const auto& set : inputs) {
    right.push_back({set[0].values()});
    wrong.push_back({set[0].values()});
    wrong.back()[0][7] += 1;
  }
  const tessel::verdict ok = g.check_outputs(spec, 5, right, &right[0]);
  CHECK(ok.ok());
  CHECK(ok.suites == 9);
  const tessel::verdict bad = g.check_outputs(spec, 6, wrong);
  CHECK(bad.status == status::incorrect);  // key 6 draws other inputs than key 5
  CHECK(g.check_outputs(spec, 5, wrong).cached);
  const tessel::verdict few = g.check_outputs(spec, 7, std::span(right).first(2));
  CHECK(few.status == status::runtime_error);
  CHECK(few.message.find("2 output sets for 9 suites") != std::string::npos);
}

TEST_CASE("verdicts are cached per config key, also across threads") {
  tessel::gate g(seeded());
  const elementwise_spec spec({40, 25}, element_type::fp32);
  const elementwise k(spec, same);
  const tessel::verdict first = g.check(spec, k, 5);
  const tessel::verdict again = g.check(spec, k, 5);
  CHECK(again.cached);
  CHECK(again.seconds == 0);
  CHECK(again.status == first.status);
  CHECK(k.runs == 10);  // not run again
  CHECK(g.cached() == 1);

  std::vector<std::thread> threads;
  threads.reserve(4);
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&g, &k, &spec, t] {
      for (std::uint64_t key = 100; key < 108; ++key) {
        const tessel::verdict v = g.check(spec, k, key + static_cast<std::uint64_t>(t % 2));
        REQUIRE(v.ok());
      }
    });
  for (std::thread& t : threads) t.join();
  CHECK(g.cached() == 1 + 9);
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

TEST_CASE("apply: gates an ok measurement, records the gate's time, then checks the time") {
  tessel::gate g(seeded());
  const elementwise_spec spec({100}, element_type::fp32);
  const elementwise wrong(spec, [](double r, std::int64_t) { return 2 * r + 1; });
  tessel::measurement m = tessel::measurement::success(1e-3, {.compile_s = 1, .gate_s = 0.5});
  g.apply(m, spec, wrong, 1);
  CHECK(m.status == status::incorrect);
  CHECK(m.message.find("incorrect: output y[") != std::string::npos);
  CHECK(m.cost.gate_s == 0.5);  // measured seconds are a metric, not a cost, by default
  CHECK(m.metrics.at("gate_wall_s") > 0);
  CHECK(m.metrics.count("gate_max_error") == 1);
  auto charging = seeded();
  charging.charge_wall_time = true;
  tessel::gate charged(charging);
  tessel::measurement paid = tessel::measurement::success(1e-3, {.compile_s = 1, .gate_s = 0.5});
  charged.apply(paid, spec, wrong, 1);
  CHECK(paid.cost.gate_s > 0.5);

  const elementwise right(spec, same);
  tessel::measurement fast = tessel::measurement::success(1e-3);
  fast.metrics["roofline_s"] = 4e-3;
  g.apply(fast, spec, right, 2);
  CHECK(fast.status == status::suspicious);
  CHECK(fast.message.find("roofline bound 0.004 s") != std::string::npos);

  tessel::measurement honest = tessel::measurement::success(5e-3);
  honest.metrics["roofline_s"] = 4e-3;
  g.apply_time(honest);
  CHECK(honest.ok());

  tessel::measurement failed = tessel::measurement::failure(status::compile_error, "SBUF overflow");
  g.apply(failed, spec, wrong, 4);
  CHECK(failed.status == status::compile_error);
  CHECK(failed.message == "SBUF overflow");
  CHECK(g.cached() == 2);  // keys 1 and 2; the failed measurement was not gated
}

TEST_CASE("time_bound: the spec's roofline or the data-movement floor, the larger") {
  struct bounded : elementwise_spec {
    using elementwise_spec::elementwise_spec;
    double roofline_s() const override { return bound; }
    double bound = 0;
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
}

TEST_CASE("gate_options::validate names the bad field") {
  tessel::gate_options o;
  CHECK(options_message(o).empty());
  o.suite.clear();
  CHECK(options_message(o).starts_with("gate_options::suite:"));
  o = {};
  o.tolerance_scale = 0;
  CHECK(options_message(o).starts_with("gate_options::tolerance_scale:"));
  o.tolerance_scale = std::nan("");
  CHECK(options_message(o).starts_with("gate_options::tolerance_scale:"));
  o = {};
  o.roofline_slack = 1;
  CHECK(options_message(o).starts_with("gate_options::roofline_slack:"));
  o.roofline_slack = -0.1;
  CHECK(options_message(o).starts_with("gate_options::roofline_slack:"));
  o = {};
  o.max_bytes_per_s = -1;
  CHECK(options_message(o).starts_with("gate_options::max_bytes_per_s:"));
  CHECK_THROWS_AS(tessel::gate{o}, tessel::options_error);
}
