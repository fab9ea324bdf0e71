// gate_test.cpp: the gate's rules on small elementwise kernels: the
// tolerance and the scale rule, default probes, the verdict cache (also
// under threads), check_time, apply, and option validation.
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

/// out = f(x, ref) elementwise on one input: `perturb` turns the reference
/// value (and its flat index) into the candidate's.
class elementwise : public tessel::gated_kernel {
 public:
  using perturbation = std::function<double(double ref, std::int64_t flat)>;
  elementwise(std::vector<std::int64_t> shape, element_type t, perturbation perturb)
      : shape_(std::move(shape)), type_(t), perturb_(std::move(perturb)) {}

  std::vector<tensor_spec> inputs() const override { return {{"x", shape_, type_, 0}}; }
  std::vector<tensor_spec> outputs() const override { return {{"y", shape_, type_, 0}}; }
  probe_values run(std::span<const tessel::input_tensor> in,
                   const probe_points& where) const override {
    ++runs;
    probe_values out = reference(in, where);
    for (std::size_t p = 0; p < out[0].size(); ++p) out[0][p] = perturb_(out[0][p], where[0][p]);
    return out;
  }
  probe_values reference(std::span<const tessel::input_tensor> in,
                         const probe_points& where) const override {
    probe_values out(1);
    for (const std::int64_t flat : where[0]) out[0].push_back(in[0].at(flat));
    return out;
  }
  mutable std::atomic<int> runs{0};

 private:
  std::vector<std::int64_t> shape_;
  element_type type_;
  perturbation perturb_;
};

tessel::gate_options seeded() {
  tessel::gate_options o;
  o.secret = 42;
  return o;
}

elementwise identity(element_type t = element_type::fp32) {
  return elementwise({40, 25}, t, [](double r, std::int64_t) { return r; });
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
  const elementwise k = identity();
  const tessel::verdict v = g.check(k, 1);
  CHECK(v.ok());
  CHECK(v.message.empty());
  CHECK(v.max_error == 0);
  CHECK(v.suites == 7);
  CHECK(!v.cached);
  CHECK(k.runs == 8);  // seven suites, the first run twice
}

TEST_CASE("relative error: inside the tolerance passes, outside fails, tolerance_scale widens it") {
  const double tol = tessel::default_tolerance(element_type::fp32);
  // A relative error e on every element gives error e |r| / (tol (|r| + rms)) < e / tol.
  const elementwise small({1000}, element_type::fp32,
                          [&](double r, std::int64_t) { return r * (1 + 0.9 * tol); });
  const elementwise large({1000}, element_type::fp32,
                          [&](double r, std::int64_t) { return r * (1 + 4 * tol); });
  tessel::gate g(seeded());
  CHECK(g.check(small, 1).ok());
  const tessel::verdict v = g.check(large, 2);
  CHECK(v.status == status::incorrect);
  CHECK(v.max_error > 1);
  CHECK(v.max_error < 4);
  tessel::gate_options wide = seeded();
  wide.tolerance_scale = 4;
  tessel::gate lenient(wide);
  CHECK(lenient.check(large, 2).ok());
}

TEST_CASE("the scale rule: near-zero elements are judged against the output's rms") {
  // The reference's element 0 is 1e-9; the candidate is off there by 1e-4, a
  // relative error of 1e5 but 1e-4 / (2^-12 (1e-9 + rms)) ~ 0.4 tolerances
  // of an N(0, 1) output (rms ~ 1): it passes.
  struct near_zero : elementwise {
    using elementwise::elementwise;
    probe_values reference(std::span<const tessel::input_tensor> in,
                           const probe_points& where) const override {
      probe_values out = elementwise::reference(in, where);
      out[0][0] = 1e-9;
      return out;
    }
  };
  const near_zero k({1000}, element_type::fp32,
                    [](double r, std::int64_t flat) { return flat == 0 ? r + 1e-4 : r; });
  tessel::gate_options o = seeded();
  o.suite = {tessel::distribution::normal};
  tessel::gate g(o);
  const tessel::verdict v = g.check(k, 1);
  CHECK(v.ok());
  CHECK(v.max_error == doctest::Approx(1e-4 / 0x1p-12).epsilon(0.1));
  // An absolute error of 1e-3 is about 4 tolerances near zero: it fails.
  const elementwise shifted({1000}, element_type::fp32,
                            [](double r, std::int64_t) { return r + 1e-3; });
  const tessel::verdict w = g.check(shifted, 2);
  CHECK(w.status == status::incorrect);
  CHECK(w.message.find("the tolerance (0.000244 x (|reference| + rms ") != std::string::npos);
}

TEST_CASE("overflow: saturation or an infinity of the reference's sign is honest") {
  // y = 1e6 x in fp16: most references exceed 65504.
  struct amplifier : elementwise {
    using elementwise::elementwise;
    probe_values reference(std::span<const tessel::input_tensor> in,
                           const probe_points& where) const override {
      probe_values out = elementwise::reference(in, where);
      for (double& v : out[0]) v *= 1e6;
      return out;
    }
  };
  const auto fp16 = element_type::fp16;
  const amplifier saturating({200}, fp16, [](double r, std::int64_t) { return round_to(fp16, r); });
  const amplifier overflowing({200}, fp16, [](double r, std::int64_t) {
    return std::abs(r) > 65504 ? std::copysign(INFINITY, r) : round_to(fp16, r);
  });
  const amplifier flipped({200}, fp16, [](double r, std::int64_t) {
    return std::abs(r) > 65504 ? std::copysign(INFINITY, -r) : round_to(fp16, r);
  });
  tessel::gate g(seeded());
  CHECK(g.check(saturating, 1).ok());
  CHECK(g.check(overflowing, 2).ok());
  const tessel::verdict v = g.check(flipped, 3);
  CHECK(v.status == status::suspicious);
  CHECK(v.message.find("where the reference is finite") != std::string::npos);
}

TEST_CASE("a NaN reference needs a NaN candidate") {
  struct undefined_at_zero : elementwise {
    using elementwise::elementwise;
    probe_values reference(std::span<const tessel::input_tensor> in,
                           const probe_points& where) const override {
      probe_values out = elementwise::reference(in, where);
      out[0][0] = std::nan("");
      return out;
    }
  };
  const undefined_at_zero nan_too({50}, element_type::fp32,
                                  [](double r, std::int64_t) { return r; });
  const undefined_at_zero finite({50}, element_type::fp32,
                                 [](double r, std::int64_t flat) { return flat == 0 ? 0.0 : r; });
  tessel::gate g(seeded());
  CHECK(g.check(nan_too, 1).ok());
  const tessel::verdict v = g.check(finite, 2);
  CHECK(v.status == status::incorrect);
  CHECK(v.message ==
        "incorrect: output y[0] is 0 on the 'normal' suite where the reference is nan");
}

TEST_CASE("int32 outputs are compared exactly") {
  const elementwise exact({100}, element_type::int32, [](double r, std::int64_t) { return r; });
  const elementwise off_by_one({100}, element_type::int32,
                               [](double r, std::int64_t flat) { return flat == 17 ? r + 1 : r; });
  struct labels : elementwise {
    using elementwise::elementwise;
    std::vector<tensor_spec> inputs() const override {
      return {{"x", {100}, element_type::int32, 1000}};
    }
  };
  const labels good({100}, element_type::int32, [](double r, std::int64_t) { return r; });
  const labels bad({100}, element_type::int32,
                   [](double r, std::int64_t flat) { return flat == 17 ? r + 1 : r; });
  tessel::gate g(seeded());
  CHECK(g.check(good, 1).ok());
  const tessel::verdict v = g.check(bad, 2);
  CHECK(v.status == status::incorrect);
  CHECK(v.message.find("output y[17]") != std::string::npos);
  CHECK(v.message.find("an exact match") != std::string::npos);
  // An int32 input without a label range cannot be drawn: a runtime_error verdict.
  const tessel::verdict no_range = g.check(exact, 3);
  CHECK(no_range.status == status::runtime_error);
  CHECK(no_range.message.find("label_range") != std::string::npos);
}

TEST_CASE("default probes: the whole of a small output, a grid sample with edges of a large one") {
  struct shaped : tessel::gated_kernel {
    std::vector<std::vector<std::int64_t>> shapes;
    std::vector<tensor_spec> inputs() const override { return {}; }
    std::vector<tensor_spec> outputs() const override {
      std::vector<tensor_spec> out;
      for (const auto& s : shapes) out.push_back({"y", s, element_type::fp32, 0});
      return out;
    }
    probe_values run(std::span<const tessel::input_tensor>, const probe_points&) const override {
      return {};
    }
    probe_values reference(std::span<const tessel::input_tensor>,
                           const probe_points&) const override {
      return {};
    }
  } k;
  k.shapes = {{256, 256}, {1000, 1000}, {20, 300, 400}};
  tessel::rng r(9);
  const probe_points p = k.probes(r);
  REQUIRE(p.size() == 3);
  CHECK(p[0].size() == 65536);
  CHECK(p[1].size() == 64 * 64);
  CHECK(p[2].size() == 16 * 16 * 16);
  for (const auto& list : p) CHECK(std::is_sorted(list.begin(), list.end()));
  for (const std::int64_t corner : {0LL, 999LL, 999000LL, 999999LL})
    CHECK(std::binary_search(p[1].begin(), p[1].end(), corner));
  CHECK(std::binary_search(p[2].begin(), p[2].end(), 20LL * 300 * 400 - 1));
  CHECK(tessel::index_of(k.outputs()[2], 20LL * 300 * 400 - 1) ==
        std::vector<std::int64_t>{19, 299, 399});
  tessel::rng again(9);
  CHECK(k.probes(again) == p);
  CHECK(k.tolerances() == std::vector<double>(3, 0x1p-12));
}

TEST_CASE("the hidden inputs depend on the secret, not on the config key") {
  struct recorder : elementwise {
    using elementwise::elementwise;
    mutable std::vector<double> first;
    probe_values reference(std::span<const tessel::input_tensor> in,
                           const probe_points& where) const override {
      first.push_back(in[0].at(0));
      return elementwise::reference(in, where);
    }
  };
  const auto same = [](double r, std::int64_t) { return r; };
  recorder a({10}, element_type::bf16, same), b({10}, element_type::bf16, same),
      c({10}, element_type::bf16, same);
  tessel::gate g(seeded());
  CHECK(g.check(a, 1).ok());
  CHECK(g.check(b, 2).ok());
  CHECK(a.first == b.first);
  tessel::gate_options other = seeded();
  other.secret = 43;
  tessel::gate h(other);
  CHECK(h.check(c, 1).ok());
  CHECK(a.first != c.first);
  tessel::gate drawn{tessel::gate_options{}};
  CHECK(drawn.options().secret != 0);
}

TEST_CASE("verdicts are cached per config key, also across threads") {
  tessel::gate g(seeded());
  const elementwise k = identity();
  const tessel::verdict first = g.check(k, 5);
  const tessel::verdict again = g.check(k, 5);
  CHECK(again.cached);
  CHECK(again.seconds == 0);
  CHECK(again.status == first.status);
  CHECK(k.runs == 8);  // not run again
  CHECK(g.cached() == 1);

  std::vector<std::thread> threads;
  threads.reserve(4);
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&g, &k, t] {
      for (std::uint64_t key = 100; key < 108; ++key) {
        const tessel::verdict v = g.check(k, key + static_cast<std::uint64_t>(t % 2));
        REQUIRE(v.ok());
      }
    });
  for (std::thread& t : threads) t.join();
  CHECK(g.cached() == 1 + 9);
}

TEST_CASE("a kernel that throws or answers the wrong shape is a runtime_error") {
  struct bad_probes : elementwise {
    using elementwise::elementwise;
    probe_points probes(tessel::rng&) const override { return {{0, 1000}}; }
  };
  const bad_probes k({10, 10}, element_type::fp32, [](double r, std::int64_t) { return r; });
  tessel::gate g(seeded());
  tessel::verdict v = g.check(k, 1);
  CHECK(v.status == status::runtime_error);
  CHECK(v.message ==
        "the kernel failed in probes(): probes() gave index 1000 for output y of 100 elements");
  struct short_run : elementwise {
    using elementwise::elementwise;
    probe_values run(std::span<const tessel::input_tensor>, const probe_points&) const override {
      return {{1.0}};
    }
  };
  const short_run s({10}, element_type::fp32, [](double r, std::int64_t) { return r; });
  v = g.check(s, 2);
  CHECK(v.status == status::runtime_error);
  CHECK(v.message.find("run() gave 1 values for output y, expected 10") != std::string::npos);
  CHECK(g.cached() == 2);
}

TEST_CASE("check_time: faster than the roofline by more than the slack is suspicious") {
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
}

TEST_CASE("apply: gates an ok measurement, records the gate's time, then checks the roofline") {
  tessel::gate g(seeded());
  const elementwise wrong({100}, element_type::fp32, [](double r, std::int64_t) { return 2 * r; });
  tessel::measurement m = tessel::measurement::success(1e-3, {.compile_s = 1, .gate_s = 0.5});
  g.apply(m, &wrong, 1);
  CHECK(m.status == status::incorrect);
  CHECK(m.message.find("incorrect: output y[") != std::string::npos);
  CHECK(m.cost.gate_s == 0.5);  // measured seconds are a metric, not a cost, by default
  CHECK(m.metrics.at("gate_wall_s") > 0);
  CHECK(m.metrics.count("gate_max_error") == 1);
  auto charging = seeded();
  charging.charge_wall_time = true;
  tessel::gate charged(charging);
  tessel::measurement paid = tessel::measurement::success(1e-3, {.compile_s = 1, .gate_s = 0.5});
  charged.apply(paid, &wrong, 1);
  CHECK(paid.cost.gate_s > 0.5);

  const elementwise right = identity();
  tessel::measurement fast = tessel::measurement::success(1e-3);
  fast.metrics["roofline_s"] = 4e-3;
  g.apply(fast, &right, 2);
  CHECK(fast.status == status::suspicious);
  CHECK(fast.message.find("roofline bound 0.004 s") != std::string::npos);

  tessel::measurement honest = tessel::measurement::success(5e-3);
  honest.metrics["roofline_s"] = 4e-3;
  g.apply(honest, nullptr, 3);
  CHECK(honest.ok());

  tessel::measurement failed = tessel::measurement::failure(status::compile_error, "SBUF overflow");
  g.apply(failed, &wrong, 4);
  CHECK(failed.status == status::compile_error);
  CHECK(failed.message == "SBUF overflow");
  CHECK(g.cached() == 2);  // keys 1 and 2; the failed measurement was not gated
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
  CHECK_THROWS_AS(tessel::gate{o}, tessel::options_error);
}
