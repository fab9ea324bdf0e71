// gate_test.cpp: the gate's rules on small elementwise specs and
// candidates: the tolerance and the per-element bound, default probes,
// hidden inputs per config key and per check, sessions judging arrays, the
// verdict cache and its re-checks (also under threads), check_time, apply,
// the time floor, and option validation.
#include <tessel/error.hpp>
#include <tessel/gate.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <functional>
#include <numeric>
#include <set>
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
  o.recheck_rate = 0;  // cached verdicts stay cached (the re-check has its own cases)
  return o;
}

const std::size_t suites = tessel::all_distributions().size();

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
  CHECK(v.suites == 15);
  CHECK(!v.cached);
  CHECK(k.runs == v.calls);  // every call judged
  CHECK(v.calls >= 15 + 2);  // every suite, then 2 to 6 repeats
  CHECK(v.calls <= 15 + 6);
}

TEST_CASE("the number and order of calls vary per check and per secret") {
  const elementwise_spec spec({8}, element_type::fp32);
  std::set<std::vector<std::size_t>> plans;
  std::set<std::size_t> lengths;
  for (std::uint64_t secret = 1; secret <= 12; ++secret) {
    tessel::gate_options o = seeded();
    o.secret = secret;
    tessel::gate g(o);
    for (std::uint64_t key = 1; key <= 2; ++key) {
      const auto session = g.session(spec, key);
      const auto& calls = session.calls();
      plans.insert(calls);
      lengths.insert(calls.size());
      // every set once, a repeat back to back with its set's first call
      std::set<std::size_t> sets(calls.begin(), calls.end());
      CHECK(sets.size() == suites);
      bool back_to_back = false;
      for (std::size_t i = 1; i < calls.size(); ++i) back_to_back |= calls[i] == calls[i - 1];
      CHECK(back_to_back);
    }
  }
  CHECK(plans.size() == 24);
  CHECK(lengths.size() >= 3);
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

TEST_CASE("default probes: whole outputs up to 2^22 elements; random tiles and every row beyond") {
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
  k.shapes = {{2048, 2048}, {4096, 2048}, {6000000}};
  tessel::rng r(9);
  const probe_points p = k.probes(r);
  REQUIRE(p.size() == 3);
  CHECK(p[0].size() == 2048 * 2048);
  for (const auto& list : p) {
    CHECK(std::is_sorted(list.begin(), list.end()));
    CHECK(std::adjacent_find(list.begin(), list.end()) == list.end());
  }
  // 4096 x 2048: 256 tiles of 64 x 64 (the first and the last among them),
  // and two elements of every row (a random one and the last)
  CHECK(p[1].size() >= 200 * 4096);  // random tiles may overlap
  CHECK(p[1].size() <= 256 * 4096 + 2 * 4096);
  std::vector<int> per_row(4096, 0);
  for (const std::int64_t flat : p[1]) ++per_row[static_cast<std::size_t>(flat / 2048)];
  CHECK(*std::min_element(per_row.begin(), per_row.end()) >= 1);
  for (std::int64_t i = 0; i < 64; ++i)
    for (const std::int64_t j : {0LL, 63LL, 1984LL, 2047LL}) {
      CHECK(std::binary_search(p[1].begin(), p[1].end(), i * 2048 + j % 64));
      CHECK(std::binary_search(p[1].begin(), p[1].end(), (4095 - i) * 2048 + 2047 - j % 64));
    }
  for (std::int64_t row = 0; row < 4096; row += 97)
    CHECK(std::binary_search(p[1].begin(), p[1].end(), row * 2048 + 2047));
  // a vector is seen as rows of about its square root
  CHECK(p[2].size() > 200 * 4096);
  CHECK(std::binary_search(p[2].begin(), p[2].end(), 6000000LL - 1));
  tessel::rng again(9);
  CHECK(k.probes(again) == p);
  CHECK(k.tolerances() == std::vector<double>(3, 0x1p-12));
}

TEST_CASE("the default tolerance grows with very long reductions") {
  CHECK(tessel::default_tolerance(element_type::fp32, 1 << 20) == 0x1p-12);
  CHECK(tessel::default_tolerance(element_type::fp32, 1 << 22) == doctest::Approx(0x1p-11));
  CHECK(tessel::default_tolerance(element_type::bf16, 1 << 22) == 0x1p-6);
  CHECK(tessel::default_tolerance(element_type::int32, 1 << 22) == 0);
}

TEST_CASE("the hidden inputs depend on the secret, the config key and the check") {
  const elementwise_spec spec({10}, element_type::bf16);
  tessel::gate g(seeded()), twin(seeded());
  const auto values = [&](tessel::gate& of, std::uint64_t key) {
    return of.session(spec, key).inputs(0)[0].values();
  };
  const auto a = values(g, 1), b = values(g, 2), a_again = values(g, 1);
  CHECK(a != b);
  CHECK(a != a_again);          // a second check of a key draws fresh inputs
  CHECK(values(twin, 1) == a);  // the same secret, the same first check
  tessel::gate_options other = seeded();
  other.secret = 43;
  tessel::gate h(other);
  CHECK(values(h, 1) != a);
  // A drawn secret is never shown, and two gates draw two.
  tessel::gate drawn{tessel::gate_options{}}, drawn_too{tessel::gate_options{}};
  CHECK(drawn.options().secret == 0);
  CHECK(values(drawn, 1) != values(drawn_too, 1));
}

TEST_CASE("a candidate's inputs are copies: writing through them changes nothing the gate reads") {
  // y = sum of x's row (a reduction over the last dimension); the candidate
  // shrinks the shape its hidden input reports before computing.
  const elementwise_spec spec({20, 10}, element_type::fp32);
  struct shrinks : tessel::gated_kernel {
    tessel::output_values run(std::span<const tessel::hidden_input> in) const override {
      auto& shape = const_cast<tensor_spec&>(in[0].spec()).shape;  // NOLINT: the attack
      shape = {2, 10};
      return {std::vector<double>(200, 0.0)};
    }
  };
  tessel::gate g(seeded());
  const tessel::verdict v = g.check(spec, shrinks{}, 1);
  CHECK(!v.ok());
  CHECK(spec.inputs()[0].shape == std::vector<std::int64_t>{20, 10});
}

TEST_CASE("sessions judge arrays computed elsewhere by the same rules") {
  const elementwise_spec spec({30, 20}, element_type::fp32);
  tessel::gate g(seeded());
  {
    auto session = g.session(spec, 5);
    CHECK(session.sets() == suites);
    std::size_t first_calls = 0;  // what a backend counts as time (judged_on)
    for (const std::size_t s : session.calls()) {
      first_calls += session.judged_on(s) ? 0 : 1;
      CHECK(!session.judge(s, {session.inputs(s)[0].values()}));
      CHECK(session.judged_on(s));
    }
    CHECK(session.calls().size() > suites);  // repeats, each judged on a set judged before
    CHECK(first_calls == suites);
    CHECK(!session.judged_on(session.sets()));  // a set not drawn yet
    const tessel::verdict ok = session.finish();
    CHECK(ok.ok());
    CHECK(ok.suites == 15);
    CHECK(ok.calls == static_cast<int>(session.calls().size()));
  }
  {
    auto session = g.session(spec, 5);
    for (const std::size_t s : session.calls()) {
      auto wrong = session.inputs(s)[0].values();
      wrong[7] += 1;
      CHECK(!session.judge(s, {wrong}));  // kept for finish()
    }
    const tessel::verdict bad = session.finish();
    CHECK(bad.status == status::incorrect);
    CHECK(bad.message.find("output y[0, 7]") != std::string::npos);
  }
  {
    auto session = g.session(spec, 6);
    const auto failed = session.judge(0, {{1.0, 2.0}});
    REQUIRE(failed);
    CHECK(failed->status == status::runtime_error);
    CHECK(failed->message.find("gave 2 values for output y, expected 600 (the whole output)") !=
          std::string::npos);
    CHECK(session.finish().status == status::runtime_error);
  }
  {
    auto session = g.session(spec, 7);
    const tessel::verdict none = session.finish();
    CHECK(none.status == status::runtime_error);
    CHECK(none.message == "no call of the candidate was judged");
  }
  {
    // a timing loop: every timed call has a set of its own, never a check's
    // (round six: nothing a memoising kernel saw), and its spot checks are
    // unpredictable but sure of the ends
    auto session = g.session(spec, 8);
    std::set<std::size_t> sets;
    std::set<std::vector<double>> seen;
    for (std::size_t s = 0; s < session.sets(); ++s) seen.insert(session.inputs(s)[0].values());
    int checked = 0;
    for (std::size_t i = 0; i < 200; ++i) {
      const std::size_t set = session.timed_set(i);
      CHECK(set >= session.sets());
      CHECK(session.timed_set(i) == set);                          // the same call, the same set
      CHECK(seen.insert(session.inputs(set)[0].values()).second);  // inputs never given before
      sets.insert(set);
      checked += session.spot_check(i, 200) ? 1 : 0;
    }
    CHECK(sets.size() == 200);
    CHECK(session.sets() == suites);
    CHECK(session.spot_check(0, 200));
    CHECK(session.spot_check(199, 200));
    CHECK(checked > 200 / 8 / 2);
    CHECK(checked < 200 / 8 * 2);
  }
  CHECK(g.cached() == 0);  // sessions are never cached
}

TEST_CASE("verdicts are cached per config key, also across threads") {
  tessel::gate g(seeded());
  const elementwise_spec spec({40, 25}, element_type::fp32);
  const elementwise k(spec, same);
  const tessel::verdict first = g.check(spec, k, 5);
  const int runs = k.runs;
  const tessel::verdict again = g.check(spec, k, 5);
  CHECK(again.cached);
  CHECK(again.seconds == 0);
  CHECK(again.status == first.status);
  CHECK(k.runs == runs);  // not run again
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

TEST_CASE("a cached verdict is re-checked on fresh inputs now and then") {
  const elementwise_spec spec({40, 25}, element_type::fp32);
  const elementwise k(spec, same);
  tessel::gate_options o = seeded();
  o.recheck_rate = 0.25;
  tessel::gate g(o);
  CHECK(g.check(spec, k, 5).ok());
  int rechecked = 0;
  for (int i = 0; i < 64; ++i) rechecked += g.check(spec, k, 5).cached ? 0 : 1;
  CHECK(rechecked > 4);
  CHECK(rechecked < 32);
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

TEST_CASE("apply: gates an ok measurement, records the gate's time, then checks every time") {
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
  // a sample below the bound (or not positive) fails the measurement too
  tessel::measurement one_fast = tessel::measurement::success(5e-3);
  one_fast.samples = {5e-3, 6e-3, -1.0};
  g.apply_time(one_fast, 4e-3);
  CHECK(one_fast.status == status::suspicious);
  CHECK(one_fast.message.ends_with("(sample 3 of 3)"));

  tessel::measurement failed = tessel::measurement::failure(status::compile_error, "SBUF overflow");
  g.apply(failed, spec, wrong, 4);
  CHECK(failed.status == status::compile_error);
  CHECK(failed.message == "SBUF overflow");
  CHECK(g.cached() == 2);  // keys 1 and 2; the failed measurement was not gated
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
  o = {};
  o.extra_calls = 1;
  CHECK(options_message(o).starts_with("gate_options::extra_calls:"));
  o = {};
  o.recheck_rate = 1.5;
  CHECK(options_message(o).starts_with("gate_options::recheck_rate:"));
  o = {};
  o.spot_check_every = 0;
  CHECK(options_message(o).starts_with("gate_options::spot_check_every:"));
  o = {};
  o.machine.flops_per_s = -1;
  CHECK(options_message(o).starts_with("gate_options::machine:"));
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
