// Cost-aware scheduling with in-test models: ask() ranks by expected gain
// per cost^alpha, reports the numbers, cools alpha, and stops early when the
// gain left is negligible.
#include "core/space_fixtures.hpp"
#include "temp_folder.hpp"

#include <tessel/storage.hpp>
#include <tessel/study.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <optional>

using namespace tessel;
using namespace tessel::testing;

namespace {

space line_space() {
  space::definition def;
  def.name = "line";
  std::vector<std::int64_t> xs;
  for (int i = 1; i <= 20; ++i) xs.push_back(i);
  def.parameters.push_back(param("x", integers(xs)));
  return space(def);
}

/// Proposes in rank order, skipping known configs.
class in_order final : public strategy {
 public:
  std::string name() const override { return "in_order"; }
  void start(const space&, std::uint64_t) override {}
  std::vector<config> propose(std::size_t n, const search_context& ctx) override {
    std::vector<config> out;
    for (std::uint64_t r = 0; r < ctx.space().count() && out.size() < n; ++r)
      if (auto c = ctx.space().at(r); !ctx.known(ctx.space().key(c))) out.push_back(c);
    return out;
  }
  void observe(const trial&) override {}
};

/// Believes larger x gains more: gain = x; ready after `warmup` observations.
class believes_large final : public surrogate {
 public:
  explicit believes_large(const space& s, std::size_t warmup = 1) : space_(s), warmup_(warmup) {}
  void observe(const trial&) override { ++seen_; }
  bool ready() const override { return seen_ >= warmup_; }
  candidate_score score(const config& c, std::optional<double>) const override {
    const double x = static_cast<double>(space_.integer(c, "x"));
    return {100.0 - x, 1.0, p_feasible, gain_scale * x};
  }
  double gain_scale = 1.0;
  double p_feasible = 1.0;

 private:
  const space& space_;
  std::size_t warmup_, seen_ = 0;
};

/// Cost grows as x^2; a failure costs failed_s when set (else the same).
class quadratic_cost final : public cost_model {
 public:
  explicit quadratic_cost(const space& s) : space_(s) {}
  void observe(const trial&) override {}
  double predict(const config& c, const cost_query&) const override {
    const double x = static_cast<double>(space_.integer(c, "x"));
    return x * x;
  }
  double predict_failure(const config& c, const cost_query& q) const override {
    return failed_s ? *failed_s : predict(c, q);
  }
  std::optional<double> failed_s;

 private:
  const space& space_;
};

class flat final : public backend {
 public:
  std::string name() const override { return "flat"; }
  measurement evaluate(const space& s, const config& c) override {
    return measurement::success(100.0 - static_cast<double>(s.integer(c, "x")));
  }
};

/// A study's options with the in-test models: gain = x, cost = x^2.
study::options weighing_cost(const space& s, std::size_t pool_factor) {
  study::options o;
  o.evaluate_baseline = false;
  o.surrogate = std::make_shared<believes_large>(s, 0);
  o.costs = std::make_shared<quadratic_cost>(s);
  o.pool_factor = pool_factor;
  return o;
}

}  // namespace

TEST_CASE("ask ranks the pool by expected gain and reports the prediction") {
  const auto s = line_space();
  study::options o;
  o.evaluate_baseline = false;
  o.surrogate = std::make_shared<believes_large>(s, 0);
  o.pool_factor = 5;
  study st(s, std::make_shared<flat>(), std::make_unique<in_order>(), o);
  const auto batch = st.ask(2);  // pool: x = 1..10; the most gain is x = 10, then 9
  REQUIRE(batch.size() == 2);
  CHECK(st.space().integer(batch[0].config, "x") == 10);
  CHECK(st.space().integer(batch[1].config, "x") == 9);
  REQUIRE(batch[0].prediction);
  CHECK(batch[0].prediction->expected_gain == 10.0);
  CHECK(batch[0].prediction->mean == 90.0);
  CHECK(batch[0].prediction->cost_s == 1.0);  // the backend's default estimate
  // The unchosen part of the pool stays known: the strategy does not re-propose it.
  const auto next = st.ask(1);
  CHECK(st.space().integer(next[0].config, "x") == 8);
}

TEST_CASE("expected gain per cost^alpha: cheap first at alpha 1, gain first at alpha 0") {
  const auto s = line_space();
  auto first_pick = [&](double alpha) {
    auto o = weighing_cost(s, 10);
    o.cost_alpha_start = alpha;
    o.cost_alpha_end = alpha;
    study st(s, std::make_shared<flat>(), std::make_unique<in_order>(), o);
    return st.space().integer(st.ask(1)[0].config, "x");
  };
  CHECK(first_pick(1.0) == 1);   // gain x / cost x^2: the cheapest wins
  CHECK(first_pick(0.0) == 10);  // gain alone: the largest of the pool wins
}

TEST_CASE("predict gives what ask attached: one scheduler scores both, P(feasible) included") {
  const auto s = line_space();
  auto o = weighing_cost(s, 4);
  std::static_pointer_cast<believes_large>(o.surrogate)->p_feasible = 0.5;
  study st(s, std::make_shared<flat>(), std::make_unique<in_order>(), o);
  const auto batch = st.ask(1);
  REQUIRE(batch.size() == 1);
  REQUIRE(batch[0].prediction);
  const auto p = st.predict(batch[0].config, batch[0].provenance);
  CHECK(p.from == prediction::basis::model);
  CHECK(p.cost_s == batch[0].prediction->cost_s);
  CHECK(p.utility == batch[0].prediction->utility);
  // gain x over the cost of a success, x^2 / P(feasible), at alpha 2
  const auto x = static_cast<double>(st.space().integer(batch[0].config, "x"));
  CHECK(p.utility == doctest::Approx(x / std::pow(x * x / 0.5, 2.0)));
}

TEST_CASE("a success is priced with what failures cost: (p cost + (1 - p) failed) / p") {
  const auto s = line_space();
  for (const double failed : {0.0, 50.0}) {
    auto o = weighing_cost(s, 4);
    std::static_pointer_cast<believes_large>(o.surrogate)->p_feasible = 0.5;
    std::static_pointer_cast<quadratic_cost>(o.costs)->failed_s = failed;
    study st(s, std::make_shared<flat>(), std::make_unique<in_order>(), o);
    const auto batch = st.ask(1);
    REQUIRE(batch.size() == 1);
    REQUIRE(batch[0].prediction);
    const auto x = static_cast<double>(st.space().integer(batch[0].config, "x"));
    CHECK(batch[0].prediction->cost_s == x * x);  // what it costs when it runs
    const double price = (0.5 * x * x + 0.5 * failed) / 0.5;
    CHECK(batch[0].prediction->utility == doctest::Approx(x / std::pow(price, 2.0)));
  }
}

TEST_CASE("without a surrogate the study schedules first in, first out, priced by the prior") {
  const auto s = line_space();
  study::options o;
  o.evaluate_baseline = false;
  o.costs = std::make_shared<quadratic_cost>(s);
  study st(s, std::make_shared<flat>(), std::make_unique<in_order>(), o);
  const auto batch = st.ask(3);  // the strategy's order, whatever each costs
  REQUIRE(batch.size() == 3);
  for (std::size_t i = 0; i < 3; ++i) {
    CHECK(st.space().integer(batch[i].config, "x") == static_cast<std::int64_t>(i + 1));
    REQUIRE(batch[i].prediction);
    CHECK(batch[i].prediction->from == prediction::basis::prior);
  }
  CHECK(st.predict(s.at(5), {"agent", 0, ""}).from == prediction::basis::prior);
}

TEST_CASE("alpha cools from start to end over the evaluation budget") {
  const auto s = line_space();
  auto o = weighing_cost(s, 20);
  o.budget_hint = 10;
  study st(s, std::make_shared<flat>(), std::make_unique<in_order>(), o);
  std::vector<std::int64_t> picks;
  for (int i = 0; i < 10; ++i) {
    const auto b = st.ask(1);
    picks.push_back(st.space().integer(b[0].config, "x"));
    st.tell(b[0].trial_id, measurement::success(1.0));
  }
  // alpha = 1 - spent: x / x^(2 alpha) favours cheap x while alpha > 1/2, large x after.
  CHECK(picks.front() == 1);
  CHECK(picks[1] == 2);
  CHECK(std::find(picks.begin(), picks.end(), 20) != picks.end());
  CHECK(picks.back() > 10);
}

TEST_CASE("cost_explore_every: every k-th evaluation is ranked and proposed at alpha 0") {
  const auto s = line_space();
  /// in_order, recording the alpha its context reports at each proposal.
  class recording final : public strategy {
   public:
    explicit recording(std::vector<double>& alphas) : alphas_(alphas) {}
    std::string name() const override { return "recording"; }
    void start(const space&, std::uint64_t) override {}
    std::vector<config> propose(std::size_t n, const search_context& ctx) override {
      alphas_.push_back(ctx.cost_alpha());
      return inner_.propose(n, ctx);
    }
    void observe(const trial&) override {}

   private:
    std::vector<double>& alphas_;
    in_order inner_;
  };
  auto picks_with = [&](std::size_t every, std::vector<double>& alphas) {
    auto o = weighing_cost(s, 20);
    o.cost_alpha_start = o.cost_alpha_end = 1.0;
    o.cost_explore_every = every;
    study st(s, std::make_shared<flat>(), std::make_unique<recording>(alphas), o);
    std::vector<std::int64_t> picks;
    for (int i = 0; i < 6; ++i) {
      const auto b = st.ask(1);
      picks.push_back(st.space().integer(b[0].config, "x"));
      st.tell(b[0].trial_id, measurement::success(1.0));
    }
    return picks;
  };
  // Gain x over cost x^2: the cheapest first; at alpha 0 the largest gain.
  std::vector<double> never, every3;
  CHECK(picks_with(0, never) == std::vector<std::int64_t>{1, 2, 3, 4, 5, 6});
  CHECK(picks_with(3, every3) == std::vector<std::int64_t>{1, 2, 20, 3, 4, 19});
  REQUIRE(!never.empty());
  CHECK(std::all_of(never.begin(), never.end(), [](double a) { return a == 1.0; }));
  CHECK(std::find(every3.begin(), every3.end(), 0.0) != every3.end());
  CHECK(std::find(every3.begin(), every3.end(), 1.0) != every3.end());
}

TEST_CASE("alpha cools over the cost spent, or over run()'s stop condition") {
  const auto s = line_space();
  // Costs x^2 seconds; the backend reports them, so progress::cost_s grows.
  class costly final : public backend {
   public:
    std::string name() const override { return "costly"; }
    measurement evaluate(const space& sp, const config& c) override {
      const double x = static_cast<double>(sp.integer(c, "x"));
      cost paid;
      paid.run_s = x * x;
      return measurement::success(100.0 - x, paid);
    }
  };
  const auto backend = std::make_shared<costly>();
  auto make = [&](double cost_budget_s) {
    auto o = weighing_cost(s, 20);
    o.cost_budget_hint_s = cost_budget_s;
    o.window = 1;  // run() then asks after every result, as the loop above does
    return study(s, backend, std::make_unique<in_order>(), o);
  };
  // A 31 s cost budget: x = 1, 2, 3, 4 cost 30 s together, so alpha is
  // 1/31 at the fifth ask and the largest gain (x = 20) is picked.
  auto st = make(31.0);
  std::vector<std::int64_t> picks;
  for (int i = 0; i < 5; ++i) {
    const auto b = st.ask(1);
    picks.push_back(st.space().integer(b[0].config, "x"));
    st.tell(b[0].trial_id, backend->evaluate(s, b[0].config));
  }
  CHECK(picks == std::vector<std::int64_t>{1, 2, 3, 4, 20});
  // Through run(): the same study with stop::cost_seconds(31) and no hint.
  auto by_run = make(0.0);
  const auto done = by_run.run(stop::cost_seconds(31));
  std::vector<std::int64_t> run_picks;
  for (const auto& t : by_run.trials()) run_picks.push_back(s.integer(t.config, "x"));
  CHECK(done.reason == termination::cost_budget);
  CHECK(run_picks == std::vector<std::int64_t>{1, 2, 3, 4, 20});
}

TEST_CASE("run stops early when the expected gain left is negligible") {
  const auto s = line_space();
  study::options o;
  o.surrogate = std::make_shared<believes_large>(s, 3);
  auto model = std::static_pointer_cast<believes_large>(o.surrogate);
  model->gain_scale = 1e-9;
  o.min_gain_fraction = 0.01;
  o.window = 1;  // one proposal in flight: the test fires as soon as the model is ready
  study st(s, std::make_shared<flat>(), std::make_unique<in_order>(), o);
  const auto sum = st.run(stop::evaluations(15));
  CHECK(sum.reason == termination::negligible_gain);
  CHECK(sum.evaluations == 3);
}

TEST_CASE("a resumed study runs the trials a killed run left unfinished before any ranked one") {
  // The trials left behind rank last here (small x: little gain), yet a
  // resumed study must complete them: they were chosen before the kill.
  const temp_folder folder;
  const auto path = folder.file("tessel_scheduler_resume.tessel.db");
  const auto s = line_space();
  std::vector<std::uint64_t> left;
  study::options first_run;
  first_run.evaluate_baseline = false;
  {
    auto db = std::make_shared<sqlite_store>(path);
    study st(s, std::make_shared<flat>(), std::make_unique<in_order>(), first_run, db);
    st.run(stop::evaluations(2));
    for (const auto& g : st.ask(2)) left.push_back(g.trial_id);  // asked, never told
  }
  study::options o;
  o.evaluate_baseline = false;
  o.resume = true;
  o.surrogate = std::make_shared<believes_large>(s);
  auto db = std::make_shared<sqlite_store>(path);
  study st(s, std::make_shared<flat>(), std::make_unique<in_order>(), o, db);
  const auto first = st.ask(2);
  REQUIRE(first.size() == 2);
  CHECK(first[0].trial_id == left[0]);
  CHECK(first[1].trial_id == left[1]);
}
