// `tessel tune`, `show`, `export` and `serve` as a user runs them: replay and
// command backends, reproducibility, kill -9 and --resume, a scripted agent
// conversation with malformed lines.
#include "tool.hpp"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <set>
#include <sstream>
#include <thread>

using namespace cli_testing;
using json = nlohmann::json;

namespace {

const std::string replay_file =
    std::string(TESSEL_DATA_DIR) + "/bench/convolution_RTX_3090.json.gz";
const std::string bowl = "--backend 'command:fixtures/bowl.sh'";

std::string temp_db(const std::string& name) {
  const auto path = std::filesystem::path(TESSEL_CLI_WORK_DIR) / (name + ".tessel.db");
  std::filesystem::remove(path);
  std::filesystem::remove(path.string() + "-wal");
  std::filesystem::remove(path.string() + "-shm");
  return path.string();
}

/// Every trial of a study file, through `tessel export --format json`.
std::vector<json> exported(const std::string& db) {
  const auto r = tessel("export '" + db + "' --format json");
  REQUIRE(r.code == 0);
  std::vector<json> out;
  std::istringstream lines(r.out);
  for (std::string line; std::getline(lines, line);)
    if (!line.empty()) out.push_back(json::parse(line));
  return out;
}

/// The configs (as JSON text) of the finished trials, in trial order.
std::vector<std::string> sequence(const std::string& db) {
  std::vector<std::string> out;
  for (const auto& t : exported(db))
    if (t.value("state", "") == "finished") out.push_back(t.at("config").dump());
  return out;
}

}  // namespace

TEST_CASE("tune on a replay file: the file is the space and the backend") {
  const auto r = tessel("tune '" + replay_file + "' --budget 60 --seed 3 --no-db --json --quiet");
  REQUIRE(r.code == 0);
  const auto out = json::parse(r.out);
  CHECK(out["evaluations"] == 60);
  CHECK(out["termination"] == "evaluations");
  CHECK(out["best"]["objective"].get<double>() > 0);
}

TEST_CASE("tune: the same seed gives the same trial sequence, also with --jobs 2") {
  for (const char* jobs : {"1", "2"}) {
    const auto a = temp_db(std::string("seq_a") + jobs), b = temp_db(std::string("seq_b") + jobs);
    const std::string args =
        " --budget 40 --seed 11 --quiet --jobs " + std::string(jobs) + " --strategy auto";
    REQUIRE(tessel("tune '" + replay_file + "' --db '" + a + "'" + args).code == 0);
    REQUIRE(tessel("tune '" + replay_file + "' --db '" + b + "'" + args).code == 0);
    const auto first = sequence(a);
    CHECK(first.size() == 40);
    CHECK(first == sequence(b));
    CHECK(std::set<std::string>(first.begin(), first.end()).size() == first.size());  // no repeats
  }
}

TEST_CASE("tune with a command backend, then show and export") {
  const auto db = temp_db("command");
  const auto r =
      tessel("tune fixtures/small.tsl " + bowl + " --budget 30 --seed 2 --db '" + db + "'");
  REQUIRE(r.code == 0);
  CHECK(contains(r.out, "30 evaluations done"));
  CHECK(contains(r.out, "best config"));
  const auto show = tessel("show '" + db + "' --top 3");
  REQUIRE(show.code == 0);
  CHECK(contains(show.out, "30 finished"));
  CHECK(contains(show.out, "backend      command"));
  const auto csv = tessel("export '" + db + "' --format csv");
  REQUIRE(csv.code == 0);
  CHECK(std::count(csv.out.begin(), csv.out.end(), '\n') == 31);
  const auto t4 = tessel("export '" + db + "' --format t4");
  REQUIRE(t4.code == 0);
  CHECK(json::parse(t4.out)["results"].size() == 30);
  // Starting again on the same file without --resume is refused.
  const auto again = tessel("tune fixtures/small.tsl " + bowl + " --budget 5 --db '" + db + "'");
  CHECK(again.code == 1);
  CHECK(contains(again.err, "already holds a study: pass --resume"));
}

TEST_CASE("tune: bad options and a bad backend give clear errors") {
  CHECK(tessel("tune fixtures/small.tsl --no-db --budget 3").code == 1);
  const auto unknown = tessel("tune fixtures/small.tsl --backend warp:9 --no-db --budget 3");
  CHECK(unknown.code == 1);
  CHECK(contains(unknown.err, "warp"));
  const auto strategy =
      tessel("tune fixtures/small.tsl " + bowl + " --strategy anealing --no-db --budget 3");
  CHECK(strategy.code == 1);
  CHECK(contains(strategy.err, "did you mean 'annealing'"));
}

TEST_CASE("kill -9 at random moments loses no finished trial, and --resume completes the study") {
  const auto db = temp_db("killed");
  const std::string args = "tune fixtures/small.tsl " + bowl +
                           " --budget 40 --seed 5 --quiet --resume --db '" + db + "'";
  std::map<std::uint64_t, std::string>
      finished;  // trial id -> config + objective, as seen before each kill
  for (int round = 0; round < 4; ++round) {
    const pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      ::setenv("BOWL_SLEEP", "0.05", 1);
      const std::string command = std::string("cd '") + TESSEL_CLI_TESTS_DIR + "' && exec '" +
                                  TESSEL_CLI_PATH + "' " + args + " >/dev/null 2>&1";
      execl("/bin/sh", "sh", "-c", command.c_str(), static_cast<char*>(nullptr));
      _exit(127);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(250 + 170 * round));
    kill(pid, SIGKILL);
    int status = 0;
    waitpid(pid, &status, 0);
    if (!std::filesystem::exists(db)) continue;
    for (const auto& t : exported(db)) {
      if (t.value("state", "") != "finished") continue;
      const auto id = t.at("id").get<std::uint64_t>();
      const auto seen = t.at("config").dump() + " " + t.at("result").at("objective").dump();
      const auto [it, fresh] = finished.emplace(id, seen);
      CHECK(it->second == seen);  // a finished trial never changes or disappears
    }
    for (const auto& [id, seen] : finished) CHECK(id > 0);
  }
  ::setenv("BOWL_SLEEP", "0", 1);
  const auto done = tessel(args);
  ::unsetenv("BOWL_SLEEP");
  REQUIRE(done.code == 0);
  const auto trials = exported(db);
  std::map<std::uint64_t, std::string> final;
  std::set<std::string> configs;
  for (const auto& t : trials) {
    CHECK(t.value("state", "") == "finished");
    final[t.at("id").get<std::uint64_t>()] =
        t.at("config").dump() + " " + t.at("result").at("objective").dump();
    configs.insert(t.at("config").dump());
  }
  CHECK(final.size() == 40);
  CHECK(configs.size() == 40);
  for (const auto& [id, seen] : finished) CHECK(final[id] == seen);
}

TEST_CASE("serve: --cost-budget-hint cools the cost weight the suggestions report") {
  // Six trials told at 2 s each (12 s); then one ask. Without a hint alpha
  // stays at its start, 2 by default (utility = gain / cost^2) or as
  // --cost-alpha says; with a 6 s hint the budget is spent and alpha is 0
  // (utility = gain).
  auto prediction = [](const std::string& hint) {
    const auto r = tessel("serve fixtures/small.tsl --no-db --seed 1 " + hint +
                          " < fixtures/serve_cost.jsonl");
    REQUIRE(r.code == 0);
    std::istringstream lines(r.out);
    for (std::string line; std::getline(lines, line);) {
      const auto j = json::parse(line);
      if (j.contains("id") && j["id"] == 2) return j["suggestions"][0]["prediction"];
    }
    FAIL("no reply to the second ask");
    return json();
  };
  const auto plain = prediction("");
  const double plain_cost = plain["cost_s"].get<double>();
  CHECK(plain["utility"].get<double>() ==
        doctest::Approx(plain["expected_gain"].get<double>() / (plain_cost * plain_cost)));
  const auto per_second = prediction("--cost-alpha 1");
  CHECK(per_second["utility"].get<double>() ==
        doctest::Approx(per_second["expected_gain"].get<double>() /
                        per_second["cost_s"].get<double>()));
  const auto cooled = prediction("--cost-budget-hint 6");
  // (the predicted cost is not 1 s, so the two utilities are distinguishable)
  CHECK(cooled["cost_s"].get<double>() != doctest::Approx(1.0));
  CHECK(cooled["utility"].get<double>() == doctest::Approx(cooled["expected_gain"].get<double>()));
  const auto bad = tessel("serve fixtures/small.tsl --no-db --cost-budget-hint -1 < /dev/null");
  CHECK(bad.code != 0);
  CHECK(contains(bad.err, "--cost-budget-hint"));
  const auto bad_alpha = tessel("serve fixtures/small.tsl --no-db --cost-alpha -1 < /dev/null");
  CHECK(bad_alpha.code != 0);
  CHECK(contains(bad_alpha.err, "--cost-alpha"));
}

TEST_CASE("serve: a scripted agent conversation, malformed lines included") {
  const auto r = tessel("serve fixtures/small.tsl --no-db --seed 1 < fixtures/serve_script.jsonl");
  REQUIRE(r.code == 0);
  std::vector<json> replies;
  std::istringstream lines(r.out);
  for (std::string line; std::getline(lines, line);) replies.push_back(json::parse(line));
  REQUIRE(replies.size() == 19);  // one per line up to quit; nothing after it
  auto reply = [&](int id) {
    for (const auto& j : replies)
      if (j.contains("id") && j["id"] == id) return j;
    FAIL("no reply with id " << id);
    return json();
  };
  CHECK(reply(1)["space"]["valid_configs"] == 78);
  CHECK(replies[1]["ok"] == false);  // not JSON
  CHECK(contains(replies[1]["error"].get<std::string>(), "not a JSON object"));
  CHECK(contains(reply(2)["error"].get<std::string>(), "unknown op 'fly'"));
  CHECK(reply(3)["suggestions"].size() == 2);
  CHECK(reply(3)["suggestions"][0]["source"] == "baseline");
  CHECK(reply(4)["trial"]["status"] == "ok");
  CHECK(contains(reply(5)["error"].get<std::string>(), "already finished"));
  CHECK(contains(reply(6)["error"].get<std::string>(), "unknown trial id 99"));
  CHECK(reply(7)["trial"]["status"] == "compile_error");
  CHECK(reply(8)["ok"] == false);
  CHECK(contains(reply(9)["error"].get<std::string>(), "tile * unroll must divide N"));
  CHECK(reply(10)["trial_id"] == 3);
  CHECK(reply(11)["duplicate"] == true);
  CHECK(contains(reply(12)["error"].get<std::string>(), "parameter 'tile': 7 is not one of"));
  CHECK(reply(13)["suggestions"][0]["trial_id"] == 3);
  CHECK(reply(13)["suggestions"][0]["tokens"] == 40.0);
  CHECK(reply(14)["best"]["objective"] == 2.5);
  CHECK(contains(reply(15)["error"].get<std::string>(), "no backend"));
  CHECK(reply(16)["best"]["trial_id"] == 3);
  CHECK(reply(17)["summary"]["evaluations"] == 3);
  CHECK(reply(18)["ok"] == true);
}

TEST_CASE("show, check --suggest-constraints: learned constraints as require lines") {
  // On the Cartesian product of a replay file, configs outside the table
  // fail (invalid): the kernel's restrictions, which no require states.
  const auto db = temp_db("learned");
  REQUIRE(
      tessel("tune '" + replay_file + "' --budget 120 --seed 3 --quiet --db '" + db + "'").code ==
      0);
  const auto suggested = tessel("check --suggest-constraints '" + db + "'");
  REQUIRE(suggested.code == 0);
  CHECK(contains(suggested.out, "\nrequire "));
  CHECK(contains(suggested.out, "invalid failures, none of the"));
  const auto shown = tessel("show '" + db + "'");
  REQUIRE(shown.code == 0);
  CHECK(contains(shown.out, "learned constraints:"));
  const auto as_json = json::parse(tessel("show '" + db + "' --json").out);
  REQUIRE(as_json.at("learned_constraints").size() > 0);
  const auto& first = as_json.at("learned_constraints").at(0);
  CHECK(first.at("successes_rejected") == 0);
  CHECK(first.at("failures_rejected").get<int>() >= 3);
}
