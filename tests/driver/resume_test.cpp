// Resuming a study: the trials after a resume are those of one run that was
// never stopped, with the default strategy and scheduler (auto, utility,
// window 4) and others, after a clean stop and after a kill that left trials
// in flight (docs/driver.md, "Resuming").
#include "temp_folder.hpp"

#include <tessel/driver.hpp>
#include <tessel/error.hpp>

#include <doctest/doctest.h>

#include <string>
#include <vector>

namespace {

using namespace tessel;
using tessel::testing::temp_folder;

study_spec sim_spec(const std::string& db, const std::string& strategy, std::size_t budget) {
  study_spec spec;
  spec.file = std::string(TESSEL_SOURCE_DIR) + "/examples/sim_matmul.tsl";
  spec.backend = "sim";
  spec.strategy = strategy;
  spec.seed = 3;
  spec.db = db;
  spec.budget.evaluations = budget;
  return spec;
}

/// The configs of a study file's trials, in id order, as JSON text.
std::vector<std::string> configs_of(const std::string& db) {
  const auto stored = reopen_study(db);
  std::vector<std::string> out;
  for (const auto& t : stored.trials) out.push_back(stored.space.to_json(t.config));
  return out;
}

/// A stop at `n` evaluations that tells nothing of the budget (as a time
/// limit or a target would): the run's choices stay those of its budget.
stop_condition stop_at(std::size_t n) {
  return {[n](const progress& p) { return p.evaluations >= n; }, "stopped",
          termination::evaluations};
}

std::vector<std::string> uninterrupted(const temp_folder& dir, const std::string& strategy) {
  const auto db = dir.file(strategy + "-whole.db").string();
  auto opened = open_study(sim_spec(db, strategy, 40), open_mode::create);
  (void)opened.study->run(opened.until());
  return configs_of(db);
}

std::vector<std::string> resumed(const std::string& db, const std::string& strategy) {
  auto again = open_study(sim_spec(db, strategy, 40), open_mode::resume);
  const auto sum = again.study->run(again.until());
  CHECK(sum.evaluations == 40);
  return configs_of(db);
}

}  // namespace

TEST_CASE("resume: a run stopped cleanly goes on with the trials of one uninterrupted run") {
  const temp_folder dir;
  for (const std::string strategy : {"auto", "bo", "ga"}) {
    CAPTURE(strategy);
    const auto whole = uninterrupted(dir, strategy);
    REQUIRE(whole.size() == 40);
    const auto db = dir.file(strategy + "-stopped.db").string();
    {
      auto opened = open_study(sim_spec(db, strategy, 40), open_mode::create);
      (void)opened.study->run(opened.until() || stop_at(17));
    }
    const auto first = configs_of(db);
    REQUIRE(first.size() >= 17);
    CHECK(std::vector(whole.begin(), whole.begin() + static_cast<long>(first.size())) == first);
    CHECK(resumed(db, strategy) == whole);
  }
}

TEST_CASE("resume: --budget 20, then 40 on resume, are the 40 trials of one run (the defaults)") {
  // The utility scheduler cools its cost exponent over the budget, so a
  // budget of 20 may choose otherwise than one of 40 before trial 20; here
  // it does not, and the resumed run must not either.
  const temp_folder dir;
  const auto whole = uninterrupted(dir, "auto");
  const auto db = dir.file("halves.db").string();
  {
    auto opened = open_study(sim_spec(db, "auto", 20), open_mode::create);
    (void)opened.study->run(opened.until());
  }
  REQUIRE(configs_of(db) == std::vector(whole.begin(), whole.begin() + 20));
  CHECK(resumed(db, "auto") == whole);
}

TEST_CASE("resume: trials a killed run left in flight are evaluated again in their place") {
  const temp_folder dir;
  for (const std::string strategy : {"auto", "ga"}) {
    CAPTURE(strategy);
    const auto whole = uninterrupted(dir, strategy);
    const auto db = dir.file(strategy + "-killed.db").string();
    {
      auto opened = open_study(sim_spec(db, strategy, 40), open_mode::create);
      (void)opened.study->run(opened.until() || stop_at(21));
    }
    {  // as SIGKILL leaves them: the last three running or proposed, no result
      const auto store = open_store(db, store_access::write);
      const auto stored = reopen_study(db);
      auto trials = stored.trials;
      REQUIRE(trials.size() >= 21);
      for (auto i = trials.size() - 3; i < trials.size(); ++i) {
        trials[i].state = i + 1 == trials.size() ? trial_state::proposed : trial_state::running;
        trials[i].result = {};
        trials[i].finished_at = 0;
        store->save(trials[i], stored.space);
      }
      CHECK(overview_of(reopen_study(db), 1).pending == 3);
    }
    CHECK(resumed(db, strategy) == whole);
  }
}

TEST_CASE("resume: ask and tell on a resumed study rebuild the search from the stored results") {
  const temp_folder dir;
  const auto db = dir.file("ask.db").string();
  {
    auto opened = open_study(sim_spec(db, "random", 10), open_mode::create);
    (void)opened.study->run(opened.until());
  }
  auto again = open_study(sim_spec(db, "random", 10), open_mode::resume);
  CHECK(again.study->trials().size() == 10);
  CHECK(again.study->current_summary().evaluations == 10);
  const auto next = again.study->ask(1);
  REQUIRE(next.size() == 1);
  CHECK(next.front().trial_id == 11);
}
