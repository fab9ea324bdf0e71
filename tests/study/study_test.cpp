// The study's contracts with in-test strategies and backends, so these tests
// depend on the core alone: ask/tell, dedupe, baseline, errors, parallel
// merge order, exceptions, and resume from the study file.
#include "core/space_fixtures.hpp"
#include "study/in_order.hpp"
#include "temp_folder.hpp"

#include <tessel/error.hpp>
#include <tessel/storage.hpp>
#include <tessel/study.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <thread>

using namespace tessel;
using namespace tessel::testing;

namespace {

space small_space() {
  space::definition def;
  def.name = "small";
  def.parameters.push_back(param("a", integers({1, 2, 3, 4})));
  def.parameters.push_back(param("b", integers({1, 2, 3, 4})));
  def.parameters.back().default_index = 1;
  require(def, op(expr_op::less_equal, ref(def, "a"), ref(def, "b")), "a <= b");
  return space(def);
}

/// in_order that records the evaluation budget each propose() saw.
class budget_spy final : public strategy {
 public:
  std::string name() const override { return "budget_spy"; }
  void start(const space& s, std::uint64_t seed) override { inner.start(s, seed); }
  std::vector<config> propose(std::size_t n, const search_context& ctx) override {
    seen.push_back(ctx.evaluation_budget());
    return inner.propose(n, ctx);
  }
  void observe(const trial& t) override { inner.observe(t); }
  in_order inner;
  std::vector<std::optional<std::size_t>> seen;
};

/// objective = (a - 3)^2 + (b - 3)^2 + 1; sleeps a varying time when asked,
/// so parallel completion order differs from proposal order.
class bowl final : public backend {
 public:
  std::string name() const override { return "bowl"; }
  measurement evaluate(const space& s, const config& c) override {
    ++calls;
    const auto a = s.integer(c, "a"), b = s.integer(c, "b");
    if (jitter) std::this_thread::sleep_for(std::chrono::milliseconds((a * 7 + b * 3) % 5));
    if (throw_on && a == *throw_on) throw std::runtime_error("boom at a = " + std::to_string(a));
    auto m = measurement::success(static_cast<double>((a - 3) * (a - 3) + (b - 3) * (b - 3) + 1));
    m.cost.run_s = 0.5;
    return m;
  }
  std::size_t concurrency() const override { return 4; }
  std::atomic<int> calls{0};
  bool jitter = false;
  std::optional<std::int64_t> throw_on;
};

}  // namespace

TEST_CASE("run evaluates the baseline first, then the strategy, and stops on budget") {
  auto b = std::make_shared<bowl>();
  study st(small_space(), b, std::make_unique<in_order>());
  const auto sum = st.run(stop::evaluations(5));
  CHECK(sum.reason == termination::evaluations);
  CHECK(sum.evaluations == 5);
  CHECK(st.trials().front().provenance.source == "baseline");
  CHECK(st.space().to_json(st.trials().front().config) == R"({"a":1,"b":2})");
  CHECK(b->calls == 5);
  CHECK(sum.cost_s == doctest::Approx(2.5));
  CHECK(sum.brief_report().find("5 evaluations") != std::string::npos);
}

TEST_CASE("observers see the wall seconds since run() began") {
  // Issue 15: the progress line always said "0.0 s": wall_s was never set.
  struct clock_watch final : observer {
    void on_trial(const trial&, const progress& p) override { seen.push_back(p.wall_s); }
    std::vector<double> seen;
  };
  auto b = std::make_shared<bowl>();
  b->jitter = true;  // 0-4 ms an evaluation
  study st(small_space(), b, std::make_unique<in_order>());
  auto watch = std::make_shared<clock_watch>();
  st.add_observer(watch);
  st.run(stop::evaluations(6));
  REQUIRE(watch->seen.size() == 6);
  CHECK(watch->seen.back() > 0);
  CHECK(std::is_sorted(watch->seen.begin(), watch->seen.end()));
  CHECK(watch->seen.back() <= st.current_summary().wall_s);
}

TEST_CASE("run stops when the space is exhausted and finds the optimum") {
  study st(small_space(), std::make_shared<bowl>(), std::make_unique<in_order>());
  const auto sum = st.run(stop::never());
  CHECK(sum.reason == termination::space_exhausted);
  CHECK(sum.evaluations == 10);
  REQUIRE(sum.best);
  CHECK(sum.best->result.objective == 1.0);
  CHECK(sum.best_config_text == "a = 3, b = 3");
  CHECK(sum.full_report().find("best config             a = 3, b = 3") != std::string::npos);
}

TEST_CASE("parallel results merge in proposal order: the same trial sequence whatever the timing") {
  auto sequence = [](std::size_t jobs) {
    auto b = std::make_shared<bowl>();
    b->jitter = true;
    study::options o;
    o.jobs = jobs;
    auto strat = std::make_unique<in_order>();
    auto* raw = strat.get();
    study st(small_space(), b, std::move(strat), o);
    st.run(stop::never());
    std::vector<std::string> out;
    for (const auto& t : st.trials())
      out.push_back(st.space().to_json(t.config) + std::to_string(t.result.objective));
    CHECK(raw->observed.size() == st.trials().size());
    for (std::size_t i = 0; i < raw->observed.size(); ++i) CHECK(raw->observed[i] == i + 1);
    return out;
  };
  const auto first = sequence(4);
  CHECK(first == sequence(4));
  CHECK(first.size() == 10);
}

TEST_CASE("the proposal window, not --jobs, decides what each proposal knows") {
  // What the strategy knew at each proposal: with a fixed window the same
  // at 1, 2 or 8 threads, though the jittery backend finishes out of order.
  auto known = [](std::size_t jobs, std::size_t window) {
    auto b = std::make_shared<bowl>();
    b->jitter = true;
    study::options o;
    o.jobs = jobs;
    o.window = window;
    o.evaluate_baseline = false;
    auto strat = std::make_unique<in_order>();
    auto* raw = strat.get();
    study st(small_space(), b, std::move(strat), o);
    const auto sum = st.run(stop::evaluations(8));
    CHECK(sum.evaluations == 8);
    CHECK(sum.jobs_used == std::min(jobs, window ? window : jobs));
    return raw->told_when_proposed;
  };
  const auto four = known(1, 4);
  REQUIRE(four.size() == 8);  // never past the budget
  for (std::size_t k = 0; k < four.size(); ++k) CHECK(four[k] == (k < 4 ? 0 : k - 3));
  CHECK(known(2, 4) == four);
  CHECK(known(8, 4) == four);
  const auto one = known(2, 1);
  for (std::size_t k = 0; k < one.size(); ++k) CHECK(one[k] == k);
  CHECK(known(1, 0) == one);  // window 0: as many as jobs
  CHECK(known(3, 0) != one);
}

TEST_CASE("ask/tell, enqueue dedupe and errors") {
  study st(small_space(), std::make_shared<bowl>(), std::make_unique<in_order>());
  const auto& s = st.space();
  const auto id = st.enqueue(s.from_json(R"({"a": 3, "b": 3})"), {"agent", 120, "looks central"});
  REQUIRE(id);
  CHECK_FALSE(st.enqueue(s.from_json(R"({"a": 3, "b": 3})"), {"agent", 50, ""}).has_value());
  CHECK_THROWS_WITH_AS(st.enqueue(s.from_json(R"({"a": 4, "b": 1})"), {"agent", 0, ""}),
                       "enqueue: config is not valid: violates 'a <= b'", error);
  const auto batch = st.ask(3);
  REQUIRE(batch.size() == 3);
  CHECK(batch[0].provenance.source == "baseline");
  CHECK(batch[1].trial_id == *id);
  CHECK(batch[1].provenance.tokens == 120);
  CHECK(batch[2].provenance.source == "in_order");
  CHECK_THROWS_AS(st.tell(99, measurement::success(1)), error);
  st.tell(batch[1].trial_id, measurement::success(1.0));
  CHECK_THROWS_WITH_AS(st.tell(batch[1].trial_id, measurement::success(1.0)),
                       doctest::Contains("already finished"), error);
  st.tell(batch[0].trial_id, measurement::failure(status::compile_error, "too big"));
  REQUIRE(st.best());
  CHECK(st.best()->id == *id);
  CHECK(st.current_summary().by_status.at(status::compile_error) == 1);
  // Never proposes what is known: the next ask skips all three.
  for (const auto& sug : st.ask(10)) CHECK(sug.trial_id > 3);
}

TEST_CASE("strategies see the evaluation budget: budget_hint, else run()'s stop condition") {
  const auto seen = [](std::size_t hint, const std::function<void(study&)>& drive) {
    auto spy = std::make_unique<budget_spy>();
    auto* watch = spy.get();
    study::options o;
    o.evaluate_baseline = false;
    o.budget_hint = hint;
    study st(small_space(), std::make_shared<bowl>(), std::move(spy), o);
    drive(st);
    return watch->seen;
  };
  using seen_t = std::vector<std::optional<std::size_t>>;
  const auto run = [](auto until) { return [until](study& st) { st.run(until); }; };
  CHECK(seen(0, run(stop::evaluations(3))) == seen_t{3, 3, 3});
  // Finished trials count: a second run() of 2 more is a budget of 5.
  CHECK(seen(0, [](study& st) {
          st.run(stop::evaluations(3));
          st.run(stop::evaluations(5));
        }) == seen_t{3, 3, 3, 5, 5});
  CHECK(seen(0, run(stop::evaluations(4) || stop::wall_seconds(60))) == seen_t{4, 4, 4, 4});
  CHECK(seen(0, run(stop::wall_seconds(60) && stop::evaluations(2))).front() == std::nullopt);
  CHECK(seen(7, run(stop::evaluations(2))) == seen_t{7, 7});
  const auto ask_tell = [](study& st) {
    for (const auto& s : st.ask(2)) st.tell(s.trial_id, measurement::success(1.0));
  };
  CHECK(seen(0, ask_tell) == seen_t{std::nullopt});
  CHECK(seen(9, ask_tell) == seen_t{9});
}

TEST_CASE("backend exceptions are recorded as runtime_error, or rethrown on request") {
  auto b = std::make_shared<bowl>();
  b->throw_on = 2;
  study st(small_space(), b, std::make_unique<in_order>());
  const auto sum = st.run(stop::never());
  CHECK(sum.evaluations == 10);
  CHECK(sum.by_status.at(status::runtime_error) == 3);  // a = 2: b in {2, 3, 4}
  bool found = false;
  for (const auto& t : st.trials())
    if (t.result.status == status::runtime_error)
      found |= t.result.message == "backend threw: boom at a = 2";
  CHECK(found);

  auto b2 = std::make_shared<bowl>();
  b2->throw_on = 1;
  study::options o;
  o.rethrow_exceptions = true;
  study st2(small_space(), b2, std::make_unique<in_order>(), o);
  CHECK_THROWS_WITH(st2.run(stop::never()), "boom at a = 1");
  CHECK(st2.trials().front().state == trial_state::finished);
}

TEST_CASE("options are validated") {
  study::options o;
  o.jobs = 100000;
  CHECK_THROWS_WITH_AS(o.validate(), doctest::Contains("jobs"), options_error);
  o.jobs = 0;
  o.window = 100000;
  CHECK_THROWS_WITH_AS(o.validate(), doctest::Contains("window"), options_error);
}

namespace {

/// A study file at `path` with 4 finished trials and 2 asked but never told
/// (as if the process died).
void write_interrupted(const std::filesystem::path& path) {
  auto db = std::make_shared<sqlite_store>(path);
  study st(small_space(), std::make_shared<bowl>(), std::make_unique<in_order>(), {}, db);
  st.run(stop::evaluations(4));
  CHECK(st.ask(2).size() == 2);
}

}  // namespace

TEST_CASE("a study resumes from its file: finished trials kept, pending ones queued again") {
  const temp_folder folder;
  const auto path = folder.file("tessel_study_resume_test.tessel.db");
  write_interrupted(path);
  auto db = std::make_shared<sqlite_store>(path);
  // The stored identity of the space: FNV-1a of "small;a;b" (no source: the
  // name, then each parameter). A new value would refuse every existing file.
  CHECK(db->study()->space_hash == "4d4dfcf2b7b42825");
  auto strat = std::make_unique<in_order>();
  auto* raw = strat.get();
  CHECK_THROWS_WITH_AS(
      study(small_space(), std::make_shared<bowl>(), std::make_unique<in_order>(), {}, db),
      doctest::Contains("already holds 6 trials of space 'small': resume it"), error);
  study::options o;
  o.resume = true;
  study st(small_space(), std::make_shared<bowl>(), std::move(strat), o, db);
  CHECK(st.trials().size() == 6);
  // Told to the strategy when the study is first used: run() replays them
  // in their places (src/study/replay.cpp), ask() in id order.
  CHECK(raw->observed.empty());
  CHECK(st.current_summary().evaluations == 4);
  const auto sum = st.run(stop::never());
  CHECK(sum.reason == termination::space_exhausted);
  CHECK(st.trials().size() == 10);
  CHECK(sum.evaluations == 10);
  CHECK(raw->observed.size() == 10);
  for (std::size_t i = 0; i < 10; ++i) CHECK(st.trials()[i].id == i + 1);
}

TEST_CASE("a resumed study asked first tells the strategy every finished trial, then the pending") {
  const temp_folder folder;
  const auto path = folder.file("tessel_study_resume_ask.tessel.db");
  write_interrupted(path);
  auto strat = std::make_unique<in_order>();
  auto* raw = strat.get();
  study::options o;
  o.resume = true;
  study st(small_space(), std::make_shared<bowl>(), std::move(strat), o,
           std::make_shared<sqlite_store>(path));
  const auto asked = st.ask(3);
  CHECK(raw->observed.size() == 4);
  REQUIRE(asked.size() == 3);
  CHECK(asked[0].trial_id == 5);  // the interrupted ones first
  CHECK(asked[1].trial_id == 6);
  CHECK(asked[2].trial_id == 7);
}
