// Cost-aware scheduling with in-test models: ask() ranks by expected gain
// per cost^alpha, reports the numbers, cools alpha, and stops early when the
// gain left is negligible; with cost_rule gittins, by the Pandora's-box
// Gittins index, whose solver is tested here too.
#include "core/space_fixtures.hpp"
#include "study/in_order.hpp"
#include "temp_folder.hpp"

#include <tessel/storage.hpp>
#include <tessel/study.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <functional>
#include <limits>
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

/// in_order, recording what its context reports (`read`: cost_alpha,
/// gittins_rate) at each proposal.
class recording final : public strategy {
 public:
  recording(std::vector<double>& seen, double (search_context::*read)() const)
      : seen_(seen), read_(read) {}
  std::string name() const override { return "recording"; }
  void start(const space&, std::uint64_t) override {}
  std::vector<config> propose(std::size_t n, const search_context& ctx) override {
    seen_.push_back((ctx.*read_)());
    return inner_.propose(n, ctx);
  }
  void observe(const trial&) override {}

 private:
  std::vector<double>& seen_;
  double (search_context::*read_)() const;
  in_order inner_;
};

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
  auto picks_with = [&](std::size_t every, std::vector<double>& alphas) {
    auto o = weighing_cost(s, 20);
    o.cost_alpha_start = o.cost_alpha_end = 1.0;
    o.cost_explore_every = every;
    study st(s, std::make_shared<flat>(),
             std::make_unique<recording>(alphas, &search_context::cost_alpha), o);
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

// --- the Pandora's-box Gittins index (study_options::cost_rule gittins) -------

namespace {

/// sigma h((g - mean) / sigma), h(z) = z Phi(z) + phi(z), in long double:
/// E[(g - f)^+] for f ~ N(mean, sigma^2), independently of the solver.
long double expected_shortfall(double mean, double sigma, double g) {
  const long double z = (static_cast<long double>(g) - mean) / sigma;
  const long double cdf = 0.5L * std::erfc(-z / std::sqrt(2.0L));
  const long double pdf = std::exp(-0.5L * z * z) / std::sqrt(2.0L * 3.14159265358979323846L);
  return sigma * (z * cdf + pdf);
}

}  // namespace

TEST_CASE("the gittins index solves E[(g - f)^+] = price to 1e-9") {
  for (double mean : {-3.0, 0.0, 2.5})
    for (double sigma : {1e-3, 0.2, 1.0, 7.0})
      for (double ratio : {1e-120, 1e-30, 1e-6, 1e-3, 0.1, 0.39, 1.0, 10.0, 1e4}) {
        const double price = ratio * sigma;  // z from about -23 to 1e4
        const double g = gittins_index(mean, sigma, price);
        INFO("mean " << mean << " sigma " << sigma << " price " << price << " g " << g);
        REQUIRE(std::isfinite(g));
        const long double got = expected_shortfall(mean, sigma, g);
        CHECK(std::abs(got / price - 1.0L) < 1e-9L);
      }
  // Deeper in the tail the equation is checked on its log (long double's
  // erfc still resolves it at z = -35).
  const double g = gittins_index(0.0, 1.0, 1e-270);
  CHECK(g < -34);
  CHECK(std::abs(std::log(expected_shortfall(0.0, 1.0, g)) - std::log(1e-270L)) < 1e-8L);
  // No spread: f is the mean, so g - mean = price; a free box comes first.
  CHECK(gittins_index(2.0, 0.0, 0.5) == 2.5);
  CHECK(gittins_index(2.0, 1.0, 0.0) == -std::numeric_limits<double>::infinity());
}

TEST_CASE("the gittins index rises with the mean and the price and falls as sigma grows") {
  double last = -std::numeric_limits<double>::infinity();
  for (double mean = -2; mean <= 2; mean += 0.25) {
    const double g = gittins_index(mean, 0.5, 0.01);
    CHECK(g > last);
    CHECK(g - mean == doctest::Approx(gittins_index(0.0, 0.5, 0.01)).epsilon(1e-12));
    last = g;
  }
  last = -std::numeric_limits<double>::infinity();
  for (double price : {1e-12, 1e-8, 1e-4, 1e-2, 0.1, 1.0, 10.0, 100.0}) {
    const double g = gittins_index(1.0, 0.5, price);
    CHECK(g > last);
    last = g;
  }
  last = std::numeric_limits<double>::infinity();
  for (double sigma : {0.004, 0.01, 0.1, 0.5, 1.0, 4.0, 16.0}) {
    const double g = gittins_index(1.0, sigma, 0.01);
    CHECK(g < last);
    last = g;
  }
  // A large price: the index is the mean plus the price (h(z) ~ z).
  CHECK(gittins_index(1.0, 0.1, 50.0) == doctest::Approx(51.0).epsilon(1e-9));
}

namespace {

/// mean(x) and sigma(x) of the objective as set by the test.
class posterior_table final : public surrogate {
 public:
  explicit posterior_table(const space& s) : space_(s) {}
  void observe(const trial&) override {}
  bool ready() const override { return true; }
  candidate_score score(const config& c, std::optional<double>) const override {
    const double x = static_cast<double>(space_.integer(c, "x"));
    return {mean(x), sigma(x), 1.0, 0.0};
  }
  std::function<double(double)> mean = [](double) { return 50.0; };
  std::function<double(double)> sigma = [](double) { return 5.0; };

 private:
  const space& space_;
};

/// Costs `seconds(x)`; a failure the same.
class cost_table final : public cost_model {
 public:
  cost_table(const space& s, std::function<double(double)> seconds)
      : space_(s), seconds_(std::move(seconds)) {}
  void observe(const trial&) override {}
  double predict(const config& c, const cost_query&) const override {
    return seconds_(static_cast<double>(space_.integer(c, "x")));
  }

 private:
  const space& space_;
  std::function<double(double)> seconds_;
};

/// A study with the gittins rule whose first evaluation (x = 20, off the
/// pool) cost 2 s and measured `first`; then the next pick's x.
std::int64_t gittins_pick(const space& s, const std::shared_ptr<posterior_table>& model,
                          std::function<double(double)> seconds, double first = 60.0) {
  study::options o;
  o.evaluate_baseline = false;
  o.surrogate = model;
  o.costs = std::make_shared<cost_table>(s, std::move(seconds));
  o.pool_factor = 10;
  o.cost_rule = study::options::cost_rule_kind::gittins;
  study st(s, std::make_shared<flat>(), std::make_unique<in_order>(), o);
  // Every utility is 0 before the first evaluation (no mean cost, no gain):
  // the queued x = 20 goes first, and the pool x = 1..10 stays.
  REQUIRE(st.enqueue(s.at(19), {"test", 0, {}}));
  const auto head = st.ask(1);
  REQUIRE(st.space().integer(head[0].config, "x") == 20);
  st.tell(head[0].trial_id, measurement::success(first, {2.0, 0, 0}));
  return st.space().integer(st.ask(1)[0].config, "x");
}

}  // namespace

TEST_CASE("gittins: of equal posteriors the cheapest first, of equal costs the better one") {
  const auto s = line_space();
  auto model = std::make_shared<posterior_table>(s);
  // Equal posteriors, cost grows with x: the pool x = 1..10 gives x = 1.
  CHECK(gittins_pick(s, model, [](double x) { return 1.0 + x; }) == 1);
  // Cost falling with x: x = 10.
  CHECK(gittins_pick(s, model, [](double x) { return 20.0 - x; }) == 10);
  // Equal costs, the mean falls with x: the lowest mean, x = 10 ...
  model->mean = [](double x) { return 60.0 - x; };
  CHECK(gittins_pick(s, model, [](double) { return 3.0; }) == 10);
  // ... and of equal means the wider posterior (a lower index).
  model->mean = [](double) { return 50.0; };
  model->sigma = [](double x) { return x == 4 ? 9.0 : 3.0; };
  CHECK(gittins_pick(s, model, [](double) { return 3.0; }) == 4);
  // A better mean is worth a higher cost only up to a point: x = 9 is 1%
  // better than the rest (0.01 in ln) for twice the cost (0.005 more in ln
  // at lambda 0.01 per 2 s).
  model->sigma = [](double) { return 1e-3; };
  model->mean = [](double x) { return x == 9 ? 49.5 : 50.0; };
  CHECK(gittins_pick(s, model, [](double x) { return x == 9 ? 2.0 : 1.0; }) == 9);
  CHECK(gittins_pick(s, model, [](double x) { return x == 9 ? 300.0 : 1.0; }) != 9);
}

TEST_CASE("gittins: the rate is lambda per mean evaluation cost, 0 when cost is not weighed") {
  const auto s = line_space();
  auto rates_with = [&](double alpha, bool decay, double objective) {
    std::vector<double> rates;
    study::options o;
    o.evaluate_baseline = false;
    o.surrogate = std::make_shared<posterior_table>(s);
    o.costs = std::make_shared<cost_table>(s, [](double) { return 1.0; });
    o.pool_factor = 1;
    o.cost_alpha_start = o.cost_alpha_end = alpha;
    o.cost_rule = study::options::cost_rule_kind::gittins;
    o.gittins_lambda = 0.02;
    o.gittins_decay = decay;
    study st(s, std::make_shared<flat>(),
             std::make_unique<recording>(rates, &search_context::gittins_rate), o);
    for (int i = 0; i < 3; ++i) {
      const auto b = st.ask(1);
      st.tell(b[0].trial_id, measurement::success(objective, {4.0, 0, 0}));
    }
    return rates;
  };
  // Before any evaluation there is no mean cost: 0; then 0.02 / 4 s.
  CHECK(rates_with(1.0, false, 60.0) == std::vector<double>{0.0, 0.005, 0.005});
  CHECK(rates_with(0.0, false, 60.0) == std::vector<double>{0.0, 0.0, 0.0});
  // PBGI-D: every index (about ln 50) is above ln 1, the incumbent: halved
  // at each choice; below ln 60 it is not.
  CHECK(rates_with(1.0, true, 1.0) == std::vector<double>{0.0, 0.005, 0.0025});
  CHECK(rates_with(1.0, true, 60.0) == std::vector<double>{0.0, 0.005, 0.005});
}
