// `tessel serve` and `tessel mcp` from the outside: the agent ops (help,
// typed space, predictions, defaults filled, explain, why_failed, verify,
// tokens) over JSON lines, and the MCP server's JSON-RPC framing and errors.
// (tests/mcp drives a whole MCP session with the official SDK client.)
#include "tool.hpp"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <sstream>
#include <thread>
#include <vector>

using namespace cli_testing;
using json = nlohmann::json;

namespace {

std::vector<json> lines_of(const std::string& out) {
  std::vector<json> replies;
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);) replies.push_back(json::parse(line));
  return replies;
}

json by_id(const std::vector<json>& replies, int id) {
  for (const auto& j : replies)
    if (j.contains("id") && j["id"] == id) return j;
  FAIL("no reply with id " << id);
  return json();
}

}  // namespace

TEST_CASE("serve: the agent ops on the simulator, with --verify") {
  const auto r = tessel(
      "serve ../../examples/sim_matmul.tsl --backend sim --no-db --seed 2 --verify "
      "< fixtures/serve_agents.jsonl");
  REQUIRE(r.code == 0);
  const auto replies = lines_of(r.out);
  auto reply = [&](int id) { return by_id(replies, id); };

  const auto ops = reply(1)["ops"];
  CHECK(ops.size() == 17);
  CHECK(ops[1]["op"] == "ask");
  CHECK(ops[1]["arguments"]["properties"].contains("n"));
  CHECK(contains(reply(2)["error"].get<std::string>(), "unknown argument \"op_name\""));

  const auto space = reply(3)["space"];
  CHECK(space["constants"]["M"].is_number());
  CHECK(space["target"]["constants"]["sbuf_bytes_per_partition"].is_number());
  for (const auto& p : space["parameters"]) {
    CHECK(p.contains("kind"));
    CHECK(p.contains("default"));
  }

  const auto suggestions = reply(4)["suggestions"];  // not a range over a temporary's member
  for (const auto& s : suggestions) {
    CHECK(s["prediction"]["basis"] == "prior");
    CHECK(s["reason"].is_string());
  }
  CHECK(reply(5)["trial"]["reported"] == true);
  CHECK(reply(5)["best"].is_null());  // --verify: a told time is not the answer yet
  CHECK(reply(7)["best"].is_null());

  const auto evaluated = reply(8)["trial"];
  CHECK(evaluated["config"]["tile_n"] == 1024);
  CHECK(evaluated["config"] == reply(9)["explanation"]["config"]);
  CHECK(evaluated["reported"] == false);
  CHECK(evaluated["note"] == "wider");
  CHECK(reply(9)["explanation"]["bottleneck"].is_string());
  CHECK(contains(reply(10)["error"].get<std::string>(), "explain: parameter 'tile_n'"));

  CHECK(reply(11)["failed"].get<int>() >= 1);
  CHECK(contains(reply(12)["why"].get<std::string>(), "compile_error"));
  CHECK(contains(reply(12)["why"].get<std::string>(), "SBUF overflow"));
  CHECK(reply(13)["valid"] == false);

  CHECK(reply(14)["verified"] == 1);  // trial 1's 1e-9 s is re-measured
  CHECK(reply(14)["best"]["reported"] == false);

  CHECK(contains(reply(15)["error"].get<std::string>(), "\"n\" must be a whole number"));
  CHECK(contains(reply(16)["error"].get<std::string>(), "unknown argument \"verbose\""));

  const auto summary = reply(17)["summary"];
  CHECK(summary["tokens"] == 95.0);
  CHECK(summary["verified"] == 1);
  CHECK(summary["reported"] == 1);  // the told compile_error: verify re-measures ok times only
}

TEST_CASE("serve: why_failed says a verdict's status once, with its hint") {
  const auto r =
      tessel("serve fixtures/small.tsl --no-db --seed 1 < fixtures/serve_why_failed.jsonl");
  REQUIRE(r.code == 0);
  const auto replies = lines_of(r.out);
  const auto why = [&](int id) { return by_id(replies, id)["why"].get<std::string>(); };
  // The gate's verdict opens with its status: said once, before the hint.
  CHECK(why(4) ==
        "suspicious: its outputs look forged (constant, non-deterministic, or faster than the "
        "roofline) — output C is constant on the normal suite where the reference is not");
  // A message that does not open with its status keeps all of it.
  CHECK(why(5) == "timeout: it ran past the time limit — timed out after 2 s");
}

TEST_CASE("serve: --verify needs a backend") {
  const auto r = tessel("serve fixtures/small.tsl --no-db --verify < /dev/null");
  CHECK(r.code != 0);
  CHECK(contains(r.err, "--verify"));
}

TEST_CASE("mcp: JSON-RPC framing, tools, resources and errors") {
  const auto r = tessel("mcp fixtures/small.tsl --no-db --seed 1 < fixtures/mcp_session.jsonl");
  REQUIRE(r.code == 0);
  const auto replies = lines_of(r.out);
  REQUIRE(replies.size() == 11);  // the notification gets no reply
  auto reply = [&](int id) { return by_id(replies, id); };
  CHECK(reply(1)["result"]["protocolVersion"] == "2025-06-18");
  CHECK(reply(1)["result"]["serverInfo"]["name"] == "tessel");
  CHECK(reply(2)["result"]["tools"].size() == 15);
  const auto asked = reply(3)["result"];
  CHECK(asked["isError"] == false);
  CHECK(asked["structuredContent"]["suggestions"].size() == 1);
  CHECK(json::parse(asked["content"][0]["text"].get<std::string>()) == asked["structuredContent"]);
  CHECK(reply(4)["result"]["isError"] == true);  // no backend: an error the model can read
  CHECK(contains(reply(4)["result"]["content"][0]["text"].get<std::string>(), "no backend"));
  CHECK(reply(5)["error"]["code"] == -32602);
  CHECK(reply(6)["result"]["resources"].size() == 3);
  CHECK(reply(7)["error"]["code"] == -32002);  // no best yet, so no trace
  CHECK(reply(8)["error"]["code"] == -32601);
  CHECK(replies[8]["error"]["code"] == -32700);
  CHECK(replies[8]["id"].is_null());
  CHECK(reply(9)["result"] == json::object());
  CHECK(reply(10)["result"]["protocolVersion"] == "2025-11-25");  // ours, newest
}

TEST_CASE("serve: explain keeps suggestions to the space's knobs, the rest apart") {
  // A re-read once per n block: examples/matmul.tsl has no a_reuse, which the
  // simulator would raise, and never hears of dma_queues (the compiler's).
  const auto r = tessel("serve ../../examples/matmul.tsl --no-db < fixtures/serve_explain.jsonl");
  REQUIRE(r.code == 0);
  const auto e = by_id(lines_of(r.out), 1)["explanation"];
  REQUIRE(!e["suggestions"].empty());
  for (const auto& s : e["suggestions"]) {
    CHECK_FALSE(contains(s.get<std::string>(), "dma_queues"));
    CHECK_FALSE(contains(s.get<std::string>(), "a_reuse"));
  }
  CHECK(contains(e["suggestions"][0].get<std::string>(), "raise tile_n"));
  bool found = false;
  for (const auto& o : e["outside_space"]) found |= o["parameter"] == "a_reuse";
  CHECK(found);
}

TEST_CASE("serve: SIGTERM mid-session says so on stderr, with the trials told and how to resume") {
  // Before: the session ended without a word. stdout stays JSON lines only.
  const std::string base = work_folder + "/interrupted_serve_" + std::to_string(::getpid());
  const std::string db = base + ".tessel.db";
  std::filesystem::remove(db);
  int requests[2];
  REQUIRE(::pipe(requests) == 0);
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {  // the session reads the pipe, which stays open
    ::dup2(requests[0], STDIN_FILENO);
    ::close(requests[0]);
    ::close(requests[1]);
    const std::string command = std::string("cd '") + TESSEL_CLI_TESTS_DIR + "' && exec '" +
                                TESSEL_CLI_PATH + "' serve fixtures/small.tsl --seed 1 --db '" +
                                db + "' >'" + base + ".out' 2>'" + base + ".err'";
    execl("/bin/sh", "sh", "-c", command.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  ::close(requests[0]);
  // An ask and six tells (as fixtures/serve_cost.jsonl), then nothing: no quit.
  std::string told = R"({"op": "ask", "n": 6, "id": 1})"
                     "\n";
  for (int id = 1; id <= 6; ++id)
    told += R"({"op": "tell", "trial_id": )" + std::to_string(id) + R"(, "objective": )" +
            std::to_string(id) + "}\n";
  REQUIRE(::write(requests[1], told.data(), told.size()) == static_cast<ssize_t>(told.size()));
  // Seven replies (the ask, six tells): the trials are finished.
  const auto replies = [&] {
    const auto out = read_text(base + ".out");
    return std::count(out.begin(), out.end(), '\n');
  };
  for (int i = 0; i < 600 && replies() < 7; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  REQUIRE(replies() == 7);
  ::kill(pid, SIGTERM);
  int status = 0;
  ::waitpid(pid, &status, 0);
  ::close(requests[1]);
  CHECK(WIFSIGNALED(status));  // still ended by the signal
  CHECK(WTERMSIG(status) == SIGTERM);
  const auto err = read_text(base + ".err");
  INFO("stderr: ", err);
  CHECK(contains(err, "tessel: interrupted; 6 finished trials are stored in " + db +
                          "; resume with: " + TESSEL_CLI_PATH +
                          " serve fixtures/small.tsl --seed 1 --db " + db + " --resume\n"));
  for (const auto& reply : lines_of(read_text(base + ".out"))) CHECK(reply["ok"] == true);
}

TEST_CASE("serve and mcp --resume go on with the study's own strategy and seed") {
  // Before: they went on with auto and seed 0 unless given the first run's.
  const auto db = work_folder + "/serve_resume.tessel.db";
  std::filesystem::remove(db);
  REQUIRE(tessel("tune fixtures/small.tsl --backend command:fixtures/bowl.sh --quiet --budget 3 "
                 "--seed 7 --strategy random --db '" +
                 db + "'")
              .code == 0);
  const auto serve = tessel("serve fixtures/small.tsl --resume --db '" + db + "' < /dev/null");
  REQUIRE(serve.code == 0);
  CHECK(contains(serve.err, "tessel: note: " + db +
                                ": resuming with --strategy random --seed 7, as it began (as the "
                                "study recorded it)\n"));
  const auto mcp = tessel("mcp fixtures/small.tsl --resume --seed 8 --db '" + db + "' < /dev/null");
  REQUIRE(mcp.code == 0);
  CHECK(
      contains(mcp.err, "tessel: note: " + db + ": resuming with --strategy random, as it began"));
  CHECK(contains(mcp.err, "tessel: note: " + db +
                              ": begun with --seed 7; this run proposes with --seed 8 as "
                              "given (leave it out to continue it as it began)\n"));
}

TEST_CASE("serve and mcp: an unknown op, tool or argument gets a did-you-mean") {
  // Before: "unknown op 'aks': use help, ask, ...", no nearest name, unlike
  // the CLI's own options ("unknown option '--budjet'; did you mean '--budget'?").
  const auto lines = work_folder + "/did_you_mean.jsonl";
  {
    std::ofstream out(lines);
    out << R"({"op": "aks", "id": 1})"
        << "\n"
        << R"({"op": "ask", "nn": 2, "id": 2})"
        << "\n"
        << R"({"op": "fly", "id": 3})"
        << "\n";
  }
  const auto serve = tessel("serve fixtures/small.tsl --no-db < '" + lines + "'");
  REQUIRE(serve.code == 0);
  const auto replies = lines_of(serve.out);
  const auto error = [&](int id) { return by_id(replies, id)["error"].get<std::string>(); };
  CHECK(error(1).starts_with("unknown op 'aks'; did you mean 'ask'? (use space, ask, tell, "));
  CHECK(contains(error(2), "unknown argument \"nn\"; did you mean 'n'? (takes: "));
  CHECK(error(3).starts_with("unknown op 'fly': use space, ask, tell, "));  // none near: the list

  const auto rpc = work_folder + "/did_you_mean_mcp.jsonl";
  {
    std::ofstream out(rpc);
    out << R"({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"evalute"}})"
        << "\n";
  }
  const auto mcp = tessel("mcp fixtures/small.tsl --no-db < '" + rpc + "'");
  REQUIRE(mcp.code == 0);
  CHECK(by_id(lines_of(mcp.out), 1)["error"]["message"] ==
        "unknown tool 'evalute'; did you mean 'evaluate'? (tools/list names them)");
}
