// A model opened, timed and tuned from C++ without the CLI
// (tessel/model_driver.hpp): the spec's JSON form and its errors, one budget
// over the kernels with a study file each, resumed, the same seed giving the
// same report, and the `model` / `tune_model` agent ops over the same.
#include "driver_fixtures.hpp"
#include "temp_folder.hpp"

#include <tessel/error.hpp>
#include <tessel/model_driver.hpp>
#include <tessel/ops.hpp>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

using namespace tessel;
using json = nlohmann::json;

namespace {

/// tests/cli/fixtures/two_kernels.tsl: a norm (3 calls) and a matmul (2 calls).
model_spec two_kernels(std::size_t budget) {
  model_spec s;
  s.file = std::string(TESSEL_SOURCE_DIR) + "/tests/cli/fixtures/two_kernels.tsl";
  s.budget = budget;
  return s;
}

}  // namespace

TEST_CASE("model_spec: the JSON form, and its errors named") {
  const auto s = model_spec::from_json(json::parse(R"({"file": "m.tsl", "target": "trn2_lnc2",
      "set": {"layers": 12}, "backend_set": {"model": "analytic"}, "budget": 40,
      "allocate": "even", "resume": true, "seed": 7})"));
  CHECK(s.file == "m.tsl");
  CHECK(s.target == "trn2_lnc2");
  CHECK(s.sets.at("layers") == "12");
  CHECK(s.backend_settings.at("model") == "analytic");
  CHECK(s.budget == 40);
  CHECK(s.policy == allocation::even);
  CHECK(s.mode == open_mode::resume);
  CHECK(s.seed == 7);
  CHECK_THROWS_WITH_AS(model_spec::from_json(json::parse(R"({"file": "m.tsl", "budgit": 4})")),
                       "model spec: unknown field \"budgit\"", error);
  CHECK_THROWS_WITH_AS(model_spec::from_json(json::parse(R"({"budget": "many"})")),
                       "model spec: \"budget\" has the wrong type: \"many\"", error);
  CHECK_THROWS_WITH_AS(model_spec::from_json(json::parse(R"({"allocate": "greedy"})")),
                       "model spec: \"allocate\" must be utility, even or share, not 'greedy'",
                       error);
  CHECK_THROWS_AS((void)open_model_tuning(two_kernels(0)), options_error);
}

TEST_CASE("open_model_tuning: one budget over the kernels, a study file each, resumed") {
  const testing::temp_folder dir;
  auto spec = two_kernels(8);
  spec.db_dir = dir.file("two.tessel").string();
  model_summary sum;
  {
    auto t = open_model_tuning(spec);
    CHECK(t.db_dir == spec.db_dir);
    REQUIRE(t.study.size() == 2);
    sum = t.run();
    CHECK(sum.evaluations == 8);
    const auto j = t.to_json();
    CHECK(j.at("evaluations") == 8);
    CHECK(j.at("kernels").size() == 2);
  }  // the study files are closed: another run may write them
  REQUIRE(sum.before_s);
  REQUIRE(sum.after_s);
  CHECK(*sum.after_s <= *sum.before_s);

  // the tuned step re-timed from the study files is the one the run reached
  const auto m = read_model(spec);
  const auto step = step_for(m, time_bests(m, spec, spec.db_dir));
  CHECK(step.step_s == doctest::Approx(*sum.after_s));

  // the files hold trials: refused unless resumed, and a resume continues the budget
  CHECK_THROWS_WITH_AS((void)open_model_tuning(spec), doctest::Contains("pass --resume"), error);
  auto again = spec;
  again.budget = 11;
  again.mode = open_mode::resume;
  auto resumed = open_model_tuning(again);
  CHECK(resumed.run().evaluations == 11);
  CHECK(*resumed.summary.before_s == *sum.before_s);
}

TEST_CASE("open_model_tuning: the same seed gives the same report") {
  auto spec = two_kernels(6);
  spec.no_db = true;
  spec.seed = 3;
  auto a = open_model_tuning(spec);
  a.run();
  auto b = open_model_tuning(spec);
  b.run();
  CHECK(a.to_json() == b.to_json());
}

TEST_CASE("the model and tune_model ops: the driver's model over JSON, progress, errors named") {
  study_spec s;
  s.file = testing::small_tsl();
  auto opened = open_study(s, open_options{});
  agent_ops ops(*opened.study, opened.backend, opened.evaluates);
  const auto file = two_kernels(0).file;

  const auto step = ops.call("model", {{"file", file}}).at("step");
  CHECK(step.at("model") == "two");
  CHECK(step.at("kernels").size() == 2);
  const auto m = read_model(two_kernels(0));
  CHECK(step.at("step_s").get<double>() ==
        doctest::Approx(step_for(m, time_defaults(m, two_kernels(0))).step_s));

  std::vector<std::string> lines;
  const auto tuned =
      ops.call("tune_model", {{"file", file}, {"budget", 6}, {"no_db", true}, {"seed", 3}},
               [&](double done, double total, const std::string& line) {
                 CHECK(total == 6);
                 CHECK(done == static_cast<double>(lines.size() + 1));
                 lines.push_back(line);
               })
          .at("tuning");
  CHECK(lines.size() == 6);
  // the op's report is the driver's, the same seed giving the same trials
  auto spec = two_kernels(6);
  spec.no_db = true;
  spec.seed = 3;
  auto direct = open_model_tuning(spec);
  direct.run();
  CHECK(tuned == direct.to_json());

  CHECK_THROWS_WITH_AS(ops.call("tune_model", {{"file", file}, {"budjet", 6}}),
                       doctest::Contains("unknown argument \"budjet\""), op_error);
  // A rule a model_spec field breaks names the argument the client sent, not the field.
  CHECK_THROWS_WITH_AS(
      ops.call("tune_model", {{"file", file}, {"budget", 6}, {"no_db", true}, {"cost_budget", -1}}),
      "tune_model: argument \"cost_budget\": must be finite and >= 0, not -1", op_error);
  CHECK_THROWS_WITH_AS(
      ops.call("tune_model",
               {{"file", file}, {"budget", 6}, {"no_db", true}, {"scheduler", "lifo"}}),
      "tune_model: argument \"scheduler\": must be utility or fifo, not 'lifo'", op_error);
  // A rule the driver words for the command line names the arguments, not --budget.
  CHECK_THROWS_WITH_AS(
      ops.call("tune_model", {{"file", file}, {"no_db", true}}),
      R"(tune_model: needs a budget: "budget" (evaluations) or "cost_budget" (seconds))", op_error);
}

TEST_CASE("the tune_model op resumed: its result says what it took from the study files") {
  // Before: the op went on with each kernel study's recorded options but its
  // result did not say so (only the CLI printed the notes).
  study_spec s;
  s.file = testing::small_tsl();
  auto opened = open_study(s, open_options{});
  agent_ops ops(*opened.study, opened.backend, opened.evaluates);
  const testing::temp_folder dir;
  const json began = {{"file", two_kernels(0).file},
                      {"db_dir", dir.path().string()},
                      {"seed", 5},
                      {"strategy", "random"},
                      {"budget", 4}};
  CHECK_FALSE(ops.call("tune_model", began).at("tuning").contains("notes"));
  json more = {{"file", began["file"]}, {"db_dir", began["db_dir"]}, {"budget", 6}};
  more["resume"] = true;
  CHECK(ops.call("tune_model", more).at("tuning").at("notes") ==
        json{"resuming with strategy='random', seed=5, as it began (as the study recorded it)"});
  more["seed"] = 9;  // given and different: kept, and said
  more["budget"] = 8;
  CHECK(ops.call("tune_model", more).at("tuning").at("notes") ==
        json{"resuming with strategy='random', as it began (as the study recorded it)",
             "begun with seed=5; this tuning proposes with seed=9 as given (leave it out to "
             "continue it as it began)"});
}
