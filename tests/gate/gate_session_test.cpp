// gate_session_test.cpp: the gate's session mechanics on small elementwise
// specs and candidates (elementwise.hpp): the number and order of calls,
// default probes, hidden inputs per secret, config key and check (copies a
// candidate cannot change), sessions judging arrays computed elsewhere
// (judged_on, timed sets, spot checks), the verdict cache and its re-checks
// (also under threads), apply, and option validation. The verdict rules are
// in gate_test.cpp.
#include "elementwise.hpp"

#include <tessel/error.hpp>
#include <tessel/gate.hpp>
#include <tessel/loop_rule.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <set>
#include <string>
#include <thread>
#include <vector>

using namespace tessel;
using namespace tessel::testing;

namespace {

std::string options_message(const tessel::gate_options& o) {
  try {
    o.validate();
  } catch (const tessel::options_error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

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
    CHECK(ok.suites == 16);
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
    CHECK(checked < 200 / 8 * 3);  // and every timed padded, shared_prefix, late_terms one
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

namespace {

/// y = x on one int32 input of `n` labels in [0, range): little variety.
elementwise_spec labels(std::int64_t n, std::int64_t range) {
  elementwise_spec spec({n}, element_type::int32);
  spec.input_type = element_type::int32;
  spec.label = range;
  return spec;
}

std::string prepare_error(const tessel::gate_spec& spec) {
  try {
    tessel::gate g(seeded());
    (void)g.session(spec, 1);
  } catch (const tessel::error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("labels of little variety: every set a session deals is new, the same per secret") {
  // Before: an int32 `structured` set is flat mod label_range whatever its
  // seed, so every timed set of that kind repeated the check's (and 6
  // labels of 2 values repeated others by chance): a kernel that memoises
  // its outputs by the inputs' content answered those timed calls from its cache.
  const auto spec = labels(6, 2);
  for (std::uint64_t secret = 1; secret <= 4; ++secret) {
    tessel::gate_options o = seeded();
    o.secret = secret;
    tessel::gate g(o), again(o);
    const auto session = g.session(spec, 7), twin = again.session(spec, 7);
    std::vector<std::size_t> sets(session.sets());
    std::iota(sets.begin(), sets.end(), std::size_t{0});
    for (std::size_t i = 0; i < 24; ++i) sets.push_back(session.timed_set(i));
    std::set<std::vector<double>> seen;
    for (std::size_t i = 0; i < sets.size(); ++i) {
      const auto values = session.inputs(sets[i])[0].values();
      INFO("secret ", secret, ", set ", sets[i]);
      CHECK(seen.insert(values).second);  // no set like an earlier one
      const std::size_t same = i < session.sets() ? sets[i] : twin.timed_set(i - session.sets());
      CHECK(twin.inputs(same)[0].values() == values);  // reproducible from the secret
    }
  }
}

TEST_CASE("labels too few for distinct sets: the gate says so before the first call") {
  // 2 labels of 2 values are 4 sets; a check alone deals one per suite.
  const auto message = prepare_error(labels(2, 2));
  CHECK(message.find("have too little variety for the gate, which gives a candidate no input set "
                     "twice") != std::string::npos);
  CHECK(message.find("x (int32, 2 elements in [0, 2)), at most 4 distinct sets") !=
        std::string::npos);
  CHECK(message.find("declare more elements or a wider label range") != std::string::npos);
  tessel::gate g(seeded());
  const auto spec = labels(2, 2);
  elementwise candidate(spec, same);
  const auto v = g.check(spec, candidate, 1);
  CHECK(v.status == status::runtime_error);
  CHECK(v.message.find("too little variety") != std::string::npos);
  CHECK(candidate.runs == 0);
  CHECK(prepare_error(labels(16, 2)).empty());  // 2^16 sets: enough
}

TEST_CASE("a timing loop whose calls come back to earlier inputs is named, not judged as new") {
  // 8 labels of 2 values: an exchange loop has at most C(8, 4) = 70
  // arrangements, so 200 calls repeat some; before, perturbed_set() judged
  // the last call as if its inputs were new.
  tessel::gate g(seeded());
  const auto spec = labels(8, 2);
  auto session = g.session(spec, 3);
  std::size_t s = session.timed_set(0);
  for (std::size_t i = 1; !session.perturbable(s); ++i) s = session.timed_set(i);
  std::string message;
  try {
    (void)session.perturbed_set(s, 200);
  } catch (const tessel::error& e) {
    message = e.what();
  }
  CHECK(message.find("the timing loop on the '") != std::string::npos);
  CHECK(message.find(" the inputs of call ") != std::string::npos);
  CHECK(message.find("have too little variety to keep a loop's calls apart") != std::string::npos);
  // 64 fp32 values allow 64! arrangements, but the rule once drew the pair
  // it had just exchanged (about 1 step in 2,000 here), undoing it: before,
  // call 1412 of this loop had the inputs of call 1410. Now no call of the
  // loop repeats an earlier one, and the session finds none.
  const elementwise_spec wide({64}, element_type::fp32);
  auto other = g.session(wide, 3);
  std::size_t w = other.timed_set(0);
  for (std::size_t i = 1; !other.perturbable(w); ++i) w = other.timed_set(i);
  std::vector<double> v = other.inputs(w)[0].values();
  std::set<std::vector<double>> states{v};
  tessel::loop_rule::walk walk(other.loop_seed(w), 1);
  for (int call = 2; call <= 2000; ++call) {
    REQUIRE(walk.call(
                0, other.inputs(w)[0].spec().shape,
                [&v](std::uint64_t x, std::uint64_t y) { return v[x] != v[y]; },
                [&v](std::uint64_t a, std::uint64_t b) { std::swap(v[a], v[b]); }) > 0);
    INFO("call ", call);
    CHECK(states.insert(v).second);
  }
  const std::size_t last = other.perturbed_set(w, 2000);
  CHECK(last != w);
  walk.turn_values(1999, 0, other.inputs(w)[0].spec().shape, v);  // the last call's turn
  CHECK(other.inputs(last)[0].values() == v);
}
