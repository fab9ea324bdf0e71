// What the study promises an agent (docs/agents.md): a prediction on every
// suggestion (the prior before a model), told results marked as reported and
// re-measured by verify(), tokens counted per source and weighed as cost, a
// token budget, and partial configs completed with defaults.
#include "core/space_fixtures.hpp"
#include "study/in_order.hpp"
#include "temp_folder.hpp"

#include <tessel/error.hpp>
#include <tessel/storage.hpp>
#include <tessel/study.hpp>

#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>

using namespace tessel;
using namespace tessel::testing;

namespace {

space line_space() {
  space::definition def;
  def.name = "line";
  def.parameters.push_back(param("a", integers({1, 2, 3, 4, 5, 6})));
  def.parameters.back().default_index = 2;
  def.parameters.push_back(param("b", integers({1, 2})));
  return space(def);
}

/// objective = a + b seconds; costs 1 s to evaluate.
class sum_backend final : public backend {
 public:
  std::string name() const override { return "sum"; }
  measurement evaluate(const space& s, const config& c) override {
    ++calls;
    return measurement::success(static_cast<double>(s.integer(c, "a") + s.integer(c, "b")),
                                {0, 0, 1.0});
  }
  int calls = 0;
};

study make(study::options o = {}, std::shared_ptr<sqlite_store> db = nullptr) {
  return study(line_space(), std::make_shared<sum_backend>(),
               std::make_unique<in_order>("first_unknown"), o, std::move(db));
}

}  // namespace

TEST_CASE("every suggestion carries a prediction: the prior before any model") {
  auto st = make();
  const auto first = st.ask(2);
  REQUIRE(first.size() == 2);
  for (const auto& s : first) {
    REQUIRE(s.prediction);
    CHECK(s.prediction->from == prediction::basis::prior);
    CHECK(std::isnan(s.prediction->mean));  // nothing observed yet
    CHECK(s.prediction->p_feasible == doctest::Approx(0.5));
    CHECK(s.prediction->cost_s > 0);
  }
  st.tell(first[0].trial_id, measurement::success(4.0));
  st.tell(first[1].trial_id, measurement::failure(status::compile_error, "too big"));
  const auto next = st.ask(1);
  REQUIRE(next.size() == 1);
  REQUIRE(next[0].prediction);
  CHECK(next[0].prediction->mean == doctest::Approx(4.0));
  CHECK(next[0].prediction->p_feasible == doctest::Approx(0.5));  // (1 + 1) / (2 + 2)
  CHECK(st.predict(line_space().at(0), {"agent", 0, ""}).from == prediction::basis::prior);
}

TEST_CASE("told results are agent-reported; with verify_reported they wait for verify()") {
  study::options o;
  o.verify_reported = true;
  auto st = make(o);
  const auto s = st.ask(1);
  const auto& told = st.tell(s[0].trial_id, measurement::success(0.001), 30);
  CHECK(told.reported);
  CHECK(told.provenance.tokens == 30);
  CHECK(st.best() == nullptr);  // not the answer until re-measured
  CHECK(st.current_summary().reported == 1);
  CHECK(st.verify(5) == 1);
  const auto& t = st.trials()[s[0].trial_id - 1];
  CHECK_FALSE(t.reported);
  CHECK(t.result.metrics.at("reported_objective") == 0.001);
  REQUIRE(st.best());
  CHECK(st.best()->id == t.id);
  CHECK(st.best()->result.objective == doctest::Approx(4.0));  // a = 3 (default), b = 1
  const auto sum = st.current_summary();
  CHECK(sum.reported == 0);
  CHECK(sum.verified == 1);
  CHECK(st.verify(5) == 0);  // nothing left to re-measure
}

TEST_CASE("without verify_reported a told result may be the best, marked as reported") {
  auto st = make();
  const auto s = st.ask(1);
  st.tell(s[0].trial_id, measurement::success(0.5));
  REQUIRE(st.best());
  CHECK(st.best()->reported);
  CHECK(st.current_summary().full_report().find("agent-reported") != std::string::npos);
}

TEST_CASE("run() measures itself, so its results are not reported, and it verifies first") {
  study::options o;
  o.verify_reported = true;
  auto st = make(o);
  const auto s = st.ask(1);
  st.tell(s[0].trial_id, measurement::success(0.25));
  const auto sum = st.run(stop::evaluations(4));
  CHECK(sum.verified == 1);
  for (const auto& t : st.trials()) CHECK_FALSE(t.reported);
}

TEST_CASE("tokens: counted per source, weighed by token_price_s, a budget stops on them") {
  study::options o;
  o.token_price_s = 2.0;  // 1,000 tokens are worth 2 s
  auto st = make(o);
  const auto& s = st.space();
  REQUIRE(st.enqueue(s.from_partial_json(R"({"a": 1})"), {"agent", 500, "low a"}));
  const auto sug = st.ask(2);
  REQUIRE(sug.size() == 2);
  const auto& agent = sug[0].provenance.source == "agent" ? sug[0] : sug[1];
  REQUIRE(agent.prediction);
  CHECK(agent.prediction->tokens == 500);
  // 1 s backend estimate (the default) + 500 tokens at 2 s per 1,000
  CHECK(agent.prediction->cost_s == doctest::Approx(2.0));
  // An agent proposal without tokens of its own is expected to cost its source's mean.
  CHECK(st.predict(s.at(5), {"agent", 0, ""}).tokens == doctest::Approx(500));
  CHECK(st.predict(s.at(5), {"first_unknown", 0, ""}).tokens == 0);
  st.tell(agent.trial_id, measurement::success(2.0), 100);
  CHECK(st.current_summary().tokens == 600);
  const auto by_source = st.current_summary().tokens_by_source;
  REQUIRE(by_source.count("agent") == 1);
  CHECK(by_source.at("agent").first == 600);
  CHECK(by_source.at("agent").second == 1);
  CHECK(by_source.count("first_unknown") == 0);  // strategies spend none
  const auto sum = st.run(stop::tokens(600));
  CHECK(sum.reason == termination::token_budget);
}

TEST_CASE("from_partial_json fills what is left out with defaults") {
  const auto s = line_space();
  CHECK(s.to_json(s.from_partial_json("{}")) == R"({"a":3,"b":1})");
  CHECK(s.to_json(s.from_partial_json(R"({"b": 2})")) == R"({"a":3,"b":2})");
  CHECK_THROWS_WITH_AS((void)s.from_partial_json(R"({"c": 1})"),
                       doctest::Contains("unknown parameter 'c'"), error);
  CHECK_THROWS_AS((void)s.from_json(R"({"b": 2})"), error);  // the strict one still refuses
}

TEST_CASE("reported results survive the study file") {
  const temp_folder folder;
  const auto path = folder.file("tessel_agents_test.tessel.db");
  {
    auto st = make({}, std::make_shared<sqlite_store>(path));
    const auto s = st.ask(1);
    st.tell(s[0].trial_id, measurement::success(3.0), 12);
  }
  study::options resume;
  resume.resume = true;
  auto st = make(resume, std::make_shared<sqlite_store>(path));
  REQUIRE(st.trials().size() == 1);
  CHECK(st.trials()[0].reported);
  CHECK(st.trials()[0].result.metrics.empty());  // the marker is not a metric
  CHECK(st.current_summary().reported == 1);
  CHECK(st.current_summary().tokens == 12);
}

TEST_CASE("evaluate() re-measures a config only an agent reported, and only that") {
  auto st = make();
  const auto s = st.ask(1);
  st.tell(s[0].trial_id, measurement::success(0.5));
  const auto& t = st.evaluate(s[0].config, {"agent", 0, ""});
  CHECK(t.id == s[0].trial_id);
  CHECK_FALSE(t.reported);
  CHECK(t.result.objective == doctest::Approx(4.0));
  CHECK(st.current_summary().evaluations == 1);  // the same trial, measured now
  const auto& again = st.evaluate(s[0].config, {"agent", 0, ""});
  CHECK(again.result.objective == doctest::Approx(4.0));
  CHECK(st.current_summary().verified == 1);  // not measured twice
}
