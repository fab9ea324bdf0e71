// The `interactions` agent op (tessel/ops.hpp): its exact keys, every figure
// marked measured or predicted, the budget of evaluations respected (the
// study's own trials are free), the only-together sentence on a made-up
// kernel with one known interaction, the JSON-lines transport, and bad
// arguments refused with the argument named.
#include "driver/driver_fixtures.hpp"

#include <tessel/backends.hpp>
#include <tessel/driver.hpp>
#include <tessel/ops.hpp>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <set>
#include <string>

namespace {

using namespace tessel;
using json = nlohmann::json;
using tessel::testing::small_tsl;

/// On small.tsl (N = 64): 1 ms at the baseline (tile 8, unroll 2, bufs 1,
/// vector); tile 16 saves 20%; scalar saves nothing alone, but with bufs 3
/// it saves 30% more; bufs 3 alone saves nothing either.
std::shared_ptr<backend> made_up() {
  return std::make_shared<callback_backend>([](const space& s, const config& c) {
    double t = 1e-3;
    if (s.value_of(c, 0).integer == 16) t *= 0.8;
    if (s.value_of(c, 2).integer == 3 && s.value_of(c, 3).to_string() == "scalar") t *= 0.7;
    return t;
  });
}

struct session {
  opened_study opened;
  agent_ops ops;
  explicit session(bool evaluates)
      : opened(open(evaluates)), ops(*opened.study, opened.backend, evaluates) {}
  static opened_study open(bool evaluates) {
    study_spec spec;
    spec.file = small_tsl();
    spec.strategy = "random";
    spec.seed = 5;
    open_options o;
    if (evaluates) {
      o.backend = made_up();
      o.backend_label = "made_up";
    }
    return open_study(spec, std::move(o));
  }
  [[nodiscard]] std::size_t trials() const { return opened.study->trials().size(); }
};

const json wanted = {{"tile", 16}, {"bufs", 3}, {"engine", "scalar"}};

std::set<std::string> keys(const json& j) {
  std::set<std::string> out;
  for (const auto& [k, _] : j.items()) out.insert(k);
  return out;
}

/// Every point of the three designs and the two ends.
std::vector<json> points(const json& r) {
  std::vector<json> out{r["base"], r["target"]};
  for (const char* design : {"alone", "without", "pairs"})
    for (const auto& p : r[design]) out.push_back(p);
  return out;
}

std::string error_of(agent_ops& ops, const json& args) {
  try {
    (void)ops.call("interactions", args);
  } catch (const op_error& e) {
    return e.what();
  }
  FAIL("no error for " << args.dump());
  return {};
}

}  // namespace

TEST_CASE("interactions op: exact keys, measured or predicted, the budget respected") {
  session s(true);
  (void)s.ops.call("run", {{"evaluations", 8}});  // the baseline and 7 random configs
  const auto before = s.trials();
  const auto reply = s.ops.call("interactions", {{"config", wanted}, {"budget", 3}});
  CHECK(keys(reply) == std::set<std::string>{"interactions"});
  const auto r = reply["interactions"];
  CHECK(keys(r) == std::set<std::string>{"changes", "base", "target", "alone", "without", "pairs",
                                         "only_together", "measured", "spent", "predicted",
                                         "text"});
  CHECK(r["changes"] == json{"tile=16", "bufs=3", "engine=scalar"});
  CHECK(r["alone"].size() == 3);
  CHECK(r["without"].size() == 3);
  CHECK(r["pairs"].size() == 3);
  CHECK(r["spent"] == 3);
  CHECK(s.trials() - before <= 3);          // each spent evaluation is a kept trial, never more
  CHECK(r["base"]["basis"] == "measured");  // the study's baseline trial, at no cost
  CHECK(r["base"]["objective"] == 1e-3);
  std::size_t measured = 0, predicted = 0;
  for (const auto& p : points(r)) {
    CHECK(keys(p) ==
          std::set<std::string>{"changes", "config", "objective", "gain", "basis", "note"});
    if (p["basis"] == "measured") ++measured;
    if (p["basis"] == "predicted") ++predicted;
    CHECK(p["basis"].is_null() == p["objective"].is_null());
  }
  CHECK(measured == r["measured"]);
  CHECK(predicted == r["predicted"]);
  CHECK(measured + predicted == 11);  // 8 study trials ready the surrogate: the rest predicted
  CHECK(predicted >= 1);
  CHECK(r["text"].get<std::string>().find("budget: 3 evaluations spent") != std::string::npos);

  // With budget for all: every figure measured, the interaction found; again: nothing spent.
  const auto full = s.ops.call("interactions", {{"config", wanted}, {"budget", 100}});
  const auto& f = full["interactions"];
  for (const auto& p : points(f)) CHECK(p["basis"] == "measured");
  CHECK(f["predicted"] == 0);
  CHECK(f["only_together"] == json{"bufs=3 gains 0% alone, 30% with engine=scalar (measured)",
                                   "engine=scalar gains 0% alone, 30% with bufs=3 (measured)"});
  const auto count = s.trials();
  CHECK(s.ops.call("interactions",
                   {{"config", wanted}, {"budget", 100}})["interactions"]["spent"] == 0);
  CHECK(s.trials() == count);

  // The best trial by default, through serve's JSON lines.
  const auto line =
      json::parse(json_lines_session(s.ops).handle(R"({"op": "interactions", "id": 4})"));
  CHECK(line["ok"] == true);
  CHECK(line["id"] == 4);
  CHECK(line["interactions"]["target"]["config"] == s.ops.call("best", {})["best"]["config"]);
  CHECK(line["interactions"]["spent"] == 0);
}

TEST_CASE("interactions op: bad arguments name the argument; a budget needs a backend") {
  session s(true);
  CHECK(error_of(s.ops, {}) ==
        "interactions: no successful trial yet: give a \"config\" or a \"trial_id\"");
  CHECK(error_of(s.ops, {{"config", wanted}, {"budget", -1}}) ==
        "interactions: \"budget\" must be a whole number from 0 to 1000000, not -1");
  CHECK(error_of(s.ops, {{"config", wanted}, {"against", 3}}) ==
        "interactions: \"against\" must be an object of parameter names to values, got 3");
  CHECK(error_of(s.ops, {{"config", wanted}, {"against", {{"tile", 5}}}})
            .starts_with("interactions: \"against\": "));
  CHECK(error_of(s.ops, {{"config", wanted}, {"against", {{"tile", 64}}}})
            .starts_with("interactions: against {"));
  CHECK(error_of(s.ops, {{"trial_id", 99}}) == "interactions: no trial 99");
  CHECK(error_of(s.ops, {{"config", wanted}, {"verbose", true}})
            .starts_with("interactions: unknown argument \"verbose\""));

  session none(false);
  try {
    (void)none.ops.call("interactions", {{"config", wanted}, {"budget", 2}});
    FAIL("a budget without a backend was accepted");
  } catch (const op_error& e) {
    INFO(e.what());
    CHECK(e.kind() == op_error_kind::unavailable);
    CHECK(std::string(e.what()).starts_with(
        "interactions with a \"budget\" above 0: this session has no backend"));
  }
  // Without a budget nothing is measured: no trials, no surrogate, every figure noted.
  const auto r = none.ops.call("interactions", {{"config", wanted}})["interactions"];
  CHECK(r["measured"] == 0);
  CHECK(r["base"]["note"] == "not evaluated (over budget)");
}
