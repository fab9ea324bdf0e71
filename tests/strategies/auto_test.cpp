// auto: the AUC bandit's incremental credit equals the brute-force area
// under the curve over its window, its state stays bounded whatever the
// history, and the strategy credits the arm whose proposal it was.
#include "strategies/auto.hpp"
#include "harness.hpp"
#include "strategies/auc_bandit.hpp"

#include "../core/space_fixtures.hpp"

#include <doctest/doctest.h>

#include <deque>
#include <utility>

using namespace tessel;
using namespace tessel::testing;

namespace {

/// OpenTuner's exploitation_term_slow: the AUC of `arm` over `window`.
double brute_force_credit(const std::deque<std::pair<std::size_t, bool>>& window, std::size_t arm) {
  double score = 0, uses = 0;
  for (const auto& [a, improved] : window) {
    if (a != arm) continue;
    uses += 1;
    if (improved) score += uses;
  }
  return uses > 0 ? score * 2.0 / (uses * (uses + 1.0)) : 0.0;
}

/// An arm that proposes the unknown configs of a one-parameter space from
/// `from` downward (or upward), one index at a time.
class scripted_arm final : public strategy {
 public:
  scripted_arm(std::string name, std::uint32_t from, bool down)
      : name_(std::move(name)), from_(from), down_(down) {}
  [[nodiscard]] std::string name() const override { return name_; }
  void start(const space&, std::uint64_t) override { next_ = from_; }
  std::vector<config> propose(std::size_t n, const search_context& context) override {
    std::vector<config> out;
    const auto size = static_cast<std::uint32_t>(context.space().parameters()[0].dom.size());
    while (out.size() < n && next_ < size) {
      const config c{next_};
      next_ = down_ ? next_ - 1 : next_ + 1;  // wraps past 0 to a huge index: stops
      if (!context.known(context.space().key(c))) out.push_back(c);
    }
    return out;
  }
  void observe(const trial&) override {}

 private:
  std::string name_;
  std::uint32_t from_;
  bool down_;
  std::uint32_t next_ = 0;
};

/// An arm that records, at each proposal, what its context says of cost
/// and budget, then proposes like scripted_arm from 0 upward.
class asking_arm final : public strategy {
 public:
  struct answers {
    double alpha = -1, gittins = -1, cost = -1, failed_cost = -1;
    std::optional<std::size_t> budget;
    std::size_t finished = 0;
  };
  explicit asking_arm(std::vector<answers>& seen) : seen_(seen) {}
  [[nodiscard]] std::string name() const override { return "asking"; }
  void start(const space& s, std::uint64_t seed) override { inner_.start(s, seed); }
  std::vector<config> propose(std::size_t n, const search_context& context) override {
    const auto forecast = context.predicted_costs(config{7});
    seen_.push_back({context.cost_alpha(), context.gittins_rate(),
                     context.predicted_cost(config{7}), forecast.failed_s,
                     context.evaluation_budget(), context.finished()});
    return inner_.propose(n, context);
  }
  void observe(const trial&) override {}

 private:
  std::vector<answers>& seen_;
  scripted_arm inner_{"inner", 0, false};
};

space line_space(std::int64_t n) {
  space::definition def;
  std::vector<std::int64_t> values;
  for (std::int64_t v = 0; v < n; ++v) values.push_back(v);
  def.parameters.push_back(param("v", integers(values)));
  return space(std::move(def));
}

}  // namespace

TEST_CASE("auc_bandit's O(1) credit equals the AUC recomputed over the window") {
  const std::size_t window = 37;
  detail::auc_bandit bandit(4, window, 0.05);
  std::deque<std::pair<std::size_t, bool>> reference;
  rng random(17);
  for (int step = 0; step < 5000; ++step) {
    const std::size_t arm = random.uniform(4);
    const bool improved = random.uniform(3) == 0;
    bandit.record(arm, improved);
    reference.emplace_back(arm, improved);
    if (reference.size() > window) reference.pop_front();
    for (std::size_t a = 0; a < 4; ++a) {
      REQUIRE(bandit.credit(a) == doctest::Approx(brute_force_credit(reference, a)));
    }
    // Bounded state: the window and nothing more, whatever the history.
    REQUIRE(bandit.history() == reference.size());
    REQUIRE(bandit.capacity() <= window);
  }
}

TEST_CASE("auc_bandit tries unused arms first, then prefers the arm that improves") {
  detail::auc_bandit bandit(3, 100, 0.05);
  rng random(1);
  std::vector<bool> seen(3, false);
  for (int i = 0; i < 3; ++i) {
    const auto arm = bandit.select(random, {}, {});
    REQUIRE(arm);
    CHECK_FALSE(seen[*arm]);
    seen[*arm] = true;
    bandit.record(*arm, *arm == 2);
  }
  for (int i = 0; i < 20; ++i)
    bandit.record(0, false), bandit.record(1, false), bandit.record(2, true);
  CHECK(bandit.select(random, {}, {}) == 2u);
  CHECK(bandit.select(random, {}, {false, false, true}) != 2u);
  CHECK_FALSE(bandit.select(random, {}, {true, true, true}).has_value());
  CHECK(bandit.credit(2) == doctest::Approx(1.0));
  CHECK(bandit.credit(0) == doctest::Approx(0.0));
}

TEST_CASE("auto credits the arm whose proposal became a new global best") {
  const auto s = line_space(400);
  std::vector<std::unique_ptr<strategy>> arms;
  arms.push_back(
      std::make_unique<scripted_arm>("improver", 200, true));  // 200, 199, ...: each a new best
  arms.push_back(std::make_unique<scripted_arm>("loser", 201, false));  // 201, 202, ...: fail
  auto st = make_auto_strategy({.window = 60}, std::move(arms));
  const auto* a = dynamic_cast<const detail::auto_search*>(st.get());
  REQUIRE(a != nullptr);
  // The loser's configs fail, so they are never a new best, not even the first result.
  const objective_fn f = [](const space&, const config& c) {
    return c[0] <= 200 ? std::optional<double>(c[0] + 1.0) : std::nullopt;
  };
  const auto run = drive(*st, s, f, 150, 1, 3);
  CHECK(run.problems.empty());
  std::size_t by_improver = 0, by_loser = 0;
  for (std::size_t i = 0; i < run.proposals.size(); ++i) {
    const bool down = run.proposals[i][0] <= 200;
    CHECK(run.sources[i] == (down ? "auto/improver" : "auto/loser"));
    ++(down ? by_improver : by_loser);
  }
  CHECK(by_improver > 4 * by_loser);
  CHECK(a->bandit().credit(0) > 0.9);
  CHECK(a->bandit().credit(1) < 0.1);
  CHECK(a->pending() == 0);
  CHECK(st->source_of(12345) == "auto");
}

TEST_CASE("auto's state stays bounded: window, pending proposals, no per-trial memory") {
  const auto s = bowl_space();
  auto st = make_auto_strategy({.window = 50});
  const auto* a = dynamic_cast<const detail::auto_search*>(st.get());
  REQUIRE(a != nullptr);
  fake_context context(s);
  st->start(s, 9);
  std::uint64_t id = 0;
  for (int round = 0; round < 150; ++round) {
    const auto batch = st->propose(4, context);
    REQUIRE(a->pending() <= 4);
    for (const auto& c : batch) {
      trial t;
      t.id = ++id;
      t.config = c;
      t.key = s.key(c);
      t.state = trial_state::finished;
      t.result.objective = *bowl(s, c);
      context.mark_known(t.key);
      context.finish(t);
      st->observe(t);
    }
    REQUIRE(a->pending() == 0);
    REQUIRE(a->bandit().history() <= 50);
    REQUIRE(a->bandit().capacity() <= 50);
    std::size_t uses = 0;
    for (std::size_t arm = 0; arm < a->bandit().arms(); ++arm) uses += a->bandit().uses(arm);
    REQUIRE(uses == a->bandit().history());
  }
  // Every default arm got proposals credited to it.
  CHECK(a->arm_names() == std::vector<std::string>{"bo", "ga", "local"});
}

TEST_CASE("auto labels each proposal with its arm") {
  const auto s = bowl_space();
  auto st = make_strategy("auto");
  const auto run = drive(*st, s, bowl, 200, 3, 2);
  CHECK(run.problems.empty());
  std::set<std::string> sources(run.sources.begin(), run.sources.end());
  CHECK(sources == std::set<std::string>{"auto/bo", "auto/ga", "auto/local"});
}

TEST_CASE("auto replays arm credit from provenance when it did not propose the trial itself") {
  const auto s = line_space(10);
  auto st = make_strategy("auto");
  const auto* a = dynamic_cast<const detail::auto_search*>(st.get());
  st->start(s, 1);
  trial t;
  t.config = config{3};
  t.key = s.key(t.config);
  t.provenance.source = "auto/ga";
  t.state = trial_state::finished;
  t.result.objective = 2;
  st->observe(t);
  CHECK(a->bandit().uses(1) == 1);  // ga is the second default arm
  CHECK(a->bandit().credit(1) == doctest::Approx(1.0));
  t.provenance.source = "agent";
  t.config = config{4};
  t.key = s.key(t.config);
  st->observe(t);
  CHECK(a->bandit().history() == 1);
}

TEST_CASE("auto's arms hear what the study says of cost and budget, the gittins rate included") {
  // Each question the study answers must reach an arm unchanged through
  // auto's batch context; the gittins rate once fell back to 0 there, so
  // `bo` under auto ranked by cooled EI with cost_rule gittins.
  const auto s = line_space(40);
  std::vector<asking_arm::answers> seen;
  std::vector<std::unique_ptr<strategy>> arms;
  arms.push_back(std::make_unique<asking_arm>(seen));
  auto st = make_auto_strategy({}, std::move(arms));
  fake_context context(s);
  context.alpha = 0.75;
  context.gittins = 0.125;
  context.budget = 30;
  context.seconds = [](const space&, const config& c) { return 2.0 + c[0]; };
  st->start(s, 5);
  REQUIRE(st->propose(2, context).size() == 2);
  REQUIRE(!seen.empty());  // once per slot the bandit gives the arm
  for (const auto& a : seen) {
    CHECK(a.alpha == 0.75);
    CHECK(a.gittins == 0.125);
    CHECK(a.cost == 9.0);
    CHECK(a.failed_cost == 9.0);
    CHECK(a.budget == std::optional<std::size_t>(30));
    CHECK(a.finished == 0);
  }
}
