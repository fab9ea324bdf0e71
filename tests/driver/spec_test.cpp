// study_spec: its rules, and its JSON both ways, including the annotations
// older study files carry (the CLI's 8 keys, Python's 3).
#include <tessel/driver.hpp>
#include <tessel/error.hpp>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <set>
#include <string_view>

namespace {

using namespace tessel;
using json = nlohmann::json;

study_spec every_field_set() {
  study_spec s;
  s.file = "k.tsl";
  s.space = "mm";
  s.target = "trn1";
  s.sets = {{"M", "8192"}, {"N", "512"}};
  s.replay_space = "product";
  s.backend_settings = {{"timeout", "30"}};
  s.fidelity = {"sim:target=trn1", "sim"};
  s.fidelity_settings = {{"warmup", "2"}};
  s.gate = false;
  s.strategy = "bo[initial_draws=1]";
  s.scheduler = "fifo";
  s.cost_alpha = 1.5;
  s.min_gain = 0.01;
  s.budget_hint = 40;
  s.cost_budget_hint_s = 12.5;
  s.token_price_s = 0.25;
  s.seed = 7;
  s.jobs = 3;
  s.window = 0;
  s.baseline = false;
  s.verify = true;
  s.db = "k.tessel.db";
  s.budget = {100, 60, 30, 1e-3, 20, 8};
  return s;
}

}  // namespace

TEST_CASE("study_spec: its JSON reads back field for field") {
  const auto spec = every_field_set();
  const auto text = spec.to_json().dump();
  const auto again = study_spec::from_json(json::parse(text));
  CHECK(again.to_json().dump() == text);
  CHECK(again.sets.at("M") == "8192");
  CHECK(again.budget.target == doctest::Approx(1e-3));
  CHECK(again.fidelity.size() == 2);
  CHECK_FALSE(again.gate);
}

TEST_CASE("study_spec: reads the annotations of older study files") {
  SUBCASE("the CLI's eight keys, --set as NAME=VALUE strings") {
    const auto s = study_spec::from_json(json::parse(
        R"({"file": "a.tsl", "space": "", "target": "trn1", "set": ["M=8192", "K=1024"],
            "backend": "sim", "replay_space": "product", "strategy": "ga", "fidelity": []})"));
    CHECK(s.file == "a.tsl");
    CHECK(s.target == "trn1");
    CHECK(s.sets.size() == 2);
    CHECK(s.sets.at("K") == "1024");
    CHECK(s.backend == "sim");
    CHECK(s.strategy == "ga");
    CHECK(s.scheduler == "utility");  // absent: the default
  }
  SUBCASE("Python's three keys") {
    const auto s = study_spec::from_json(
        json::parse(R"({"target": "trn2", "backend": "python", "strategy": "random"})"));
    CHECK(s.target == "trn2");
    CHECK(s.sets.empty());
    CHECK(s.strategy == "random");
  }
  SUBCASE("a field of the wrong type is named") {
    CHECK_THROWS_WITH_AS(study_spec::from_json(json::parse(R"({"seed": "seven"})")),
                         doctest::Contains("\"seed\" has the wrong type"), error);
  }
}

TEST_CASE("study_spec::resolved: the target what evaluates implies, unless one is given") {
  study_spec s;
  CHECK(s.resolved().target == "trn2");
  s.backend = "cpu:threads=2";
  CHECK(s.resolved().target == "cpu");
  s.target = "trn1";
  CHECK(s.resolved().target == "trn1");
  study_spec two;
  two.fidelity = {"sim", "cpu"};  // the high fidelity decides
  CHECK(two.resolved().target == "cpu");
  two.fidelity = {"cpu", "sim"};
  CHECK(two.resolved().target == "trn2");
}

TEST_CASE("study_spec::validate names the field and the rule") {
  study_spec s;
  s.file = "k.tsl";
  s.backend = "sim";
  CHECK_NOTHROW(s.validate());
  auto bad = s;
  bad.scheduler = "lifo";
  CHECK_THROWS_WITH_AS(bad.validate(), "study_spec.scheduler: must be utility or fifo, not 'lifo'",
                       options_error);
  bad = s;
  bad.backend.clear();
  bad.fidelity = {"sim"};
  CHECK_THROWS_WITH_AS(bad.validate(), doctest::Contains("study_spec.fidelity: give exactly two"),
                       options_error);
  bad = s;
  bad.backend.clear();
  bad.verify = true;
  CHECK_THROWS_WITH_AS(
      bad.validate(),
      "study_spec.verify: re-measures agent-reported results on the backend; give one with "
      "--backend SPEC",
      options_error);
  bad = s;
  bad.token_price_s = -1;
  CHECK_THROWS_WITH_AS(bad.validate(), "study_spec.token_price_s: must be finite and >= 0, not -1",
                       options_error);
  bad = s;
  bad.budget.high_evaluations = 3;
  CHECK_THROWS_WITH_AS(
      bad.validate(),
      "study_spec.budget.high_evaluations = 3: counts high-fidelity evaluations; it "
      "needs --fidelity",
      options_error);
}

TEST_CASE("recorded_fields: each is a field of the spec's JSON, with its option and keyword") {
  const auto fields = tessel::study_spec{}.to_json();
  std::set<std::string_view> options;
  for (const auto& r : tessel::recorded_fields()) {
    CAPTURE(r.field);
    CHECK(fields.contains(std::string(r.field)));
    CHECK(r.option.starts_with("--"));
    CHECK(!r.keyword.empty());
    CHECK(options.insert(r.option).second);
  }
}
