// `tune --db postgresql://...` with `tessel worker` alongside, `show`,
// `export` and `copy` on a shared study, on a real server
// (storage/pg_cluster.hpp); and the worker's errors.
#include "storage/pg_cluster.hpp"
#include "tool.hpp"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <chrono>
#include <filesystem>
#include <thread>

using namespace cli_testing;
using json = nlohmann::json;
using tessel::testing::pg_cluster;

namespace {

/// `tessel ARGS` (the name `tessel` is also the library's namespace here).
result run(const std::string& args) { return cli_testing::tessel(args); }

const std::string bowl = "--backend 'command:fixtures/bowl.sh'";

/// `tessel ARGS` in the background, its output in files of its own.
class background {
 public:
  /// `env`: VAR=VALUE assignments for its environment.
  background(const std::string& name, const std::string& args, const std::string& env = "")
      : base_(work_folder + "/" + name + "_" + std::to_string(::getpid())),
        thread_([this, args, env] {
          const std::string command = std::string("cd '") + TESSEL_CLI_TESTS_DIR + "' && " + env +
                                      " '" + TESSEL_CLI_PATH + "' " + args + " >'" + base_ +
                                      ".out' 2>'" + base_ + ".err'";
          const int status = std::system(command.c_str());
          code_ = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
        }) {}
  /// Waits for it; its exit code, stdout and stderr.
  result wait() {
    thread_.join();
    return {code_, read_text(base_ + ".out"), read_text(base_ + ".err")};
  }

 private:
  std::string base_;
  int code_ = -1;
  std::thread thread_;
};

}  // namespace

TEST_CASE("worker: tune on PostgreSQL with two workers alongside; show, export and copy read it") {
  PG_CLUSTER_OR_SKIP();
  const auto url = pg_cluster::instance().study_url("cli");
  // Workers started first wait for tune to make the study; each evaluation
  // takes 30 ms, so all three get a share.
  const std::string slow = "BOWL_SLEEP=0.03";
  background one("w1", "worker '" + url + "' --wait 60 --jobs 1 --name one --lease 5 --heartbeat 1",
                 slow);
  background two("w2", "worker '" + url + "' --wait 60 --jobs 2 --name two --json -q", slow);
  background tune(
      "tune",
      "tune fixtures/small.tsl " + bowl + " --budget 60 --seed 3 -q --jobs 1 --db '" + url + "'",
      slow);
  const auto t = tune.wait(), w1 = one.wait(), w2 = two.wait();
  INFO("tune:\n", t.out, t.err, "\nworker one:\n", w1.out, w1.err, "\nworker two:\n", w2.out,
       w2.err);
  REQUIRE(t.code == 0);
  REQUIRE(w1.code == 0);
  REQUIRE(w2.code == 0);
  CHECK(contains(t.out, "60 evaluations done"));
  CHECK(contains(w1.err, "tessel worker one: study '" + url + "' (space 'small'"));
  CHECK(contains(w1.out, "60 evaluations done"));
  // The work was shared: results from more than one process.
  const auto schema = url.substr(url.find("?study=") + 7);
  CHECK(std::stoi(pg_cluster::instance().psql("SELECT count(DISTINCT worker_id) FROM " + schema +
                                              ".trials")) >= 2);
  const auto summary = json::parse(w2.out);
  CHECK(summary["summary"]["evaluations"] == 60);
  CHECK(summary["worker"] == "two");

  const auto show = run("show '" + url + "' --json");
  REQUIRE(show.code == 0);
  const auto shown = json::parse(show.out);
  CHECK(shown["finished"] == 60);
  CHECK(shown["pending"] == 0);
  // Its text names it for what it is: a shared study at the URL, not a file.
  const auto text = run("show '" + url + "'");
  REQUIRE(text.code == 0);
  CHECK(text.out.rfind("shared study " + url + "\nspace        small", 0) == 0);
  const auto csv = run("export '" + url + "' --format csv");
  REQUIRE(csv.code == 0);
  CHECK(std::count(csv.out.begin(), csv.out.end(), '\n') == 61);

  // Into a file and back into another PostgreSQL study: the same export.
  const std::string file = work_folder + "/copied_" + std::to_string(::getpid()) + ".tessel.db";
  std::filesystem::remove(file);
  const auto copied = run("copy '" + url + "' '" + file + "'");
  REQUIRE(copied.code == 0);
  CHECK(copied.out ==
        "copied study of space 'small' (60 trials) from " + url + " to " + file + "\n");
  const auto back_url = pg_cluster::instance().study_url("cli_back");
  REQUIRE(run("copy '" + file + "' '" + back_url + "'").code == 0);
  CHECK(run("show '" + file + "'").out.rfind("study file   " + file + "\n", 0) == 0);
  CHECK(run("export '" + file + "' --format csv").out == csv.out);
  CHECK(run("export '" + back_url + "' --format csv").out == csv.out);
  // Resumed on the server, it is a shared study there too, not a study file.
  const auto resumed =
      run("tune fixtures/small.tsl --budget 61 --resume -q --db '" + back_url + "'");
  CHECK(resumed.code == 0);
  CHECK(contains(resumed.err, "resuming with --backend command:fixtures/bowl.sh"));
  CHECK(contains(resumed.err, "as it began (as the study recorded it)"));
  CHECK(!contains(resumed.err, "study file"));
  const auto again = run("copy '" + file + "' '" + back_url + "'");
  CHECK(again.code == 1);
  CHECK(contains(again.err, "it holds 61 trials already"));
  std::filesystem::remove(file);
}

TEST_CASE("worker: SIGINT or SIGTERM mid-run says so; its trials go back to the study") {
  // Before: the worker ended without a word (as tune did).
  PG_CLUSTER_OR_SKIP();
  for (const int sig : {SIGINT, SIGTERM}) {
    const auto url = pg_cluster::instance().study_url("interrupted");
    const std::string base = work_folder + "/interrupted_worker_" + std::to_string(sig) + "_" +
                             std::to_string(::getpid());
    std::filesystem::remove(base + ".err");
    const pid_t pid = fork();  // the worker, whose pid the signal goes to
    REQUIRE(pid >= 0);
    if (pid == 0) {
      ::setenv("BOWL_SLEEP", "0.1", 1);
      const std::string command = std::string("cd '") + TESSEL_CLI_TESTS_DIR + "' && exec '" +
                                  TESSEL_CLI_PATH + "' worker '" + url +
                                  "' --wait 60 --jobs 2 --name w --heartbeat 0.5 --lease 2 "
                                  ">/dev/null 2>'" +
                                  base + ".err'";
      execl("/bin/sh", "sh", "-c", command.c_str(), static_cast<char*>(nullptr));
      _exit(127);
    }
    background tune(
        "interrupted_tune",
        "tune fixtures/small.tsl " + bowl + " --budget 30 --seed 3 -q --jobs 1 --db '" + url + "'",
        "BOWL_SLEEP=0.1");
    // The start line follows the handler; then a few trials, 0.1 s each.
    for (int i = 0; i < 600 && !contains(read_text(base + ".err"), "tessel worker w:"); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    CHECK(contains(read_text(base + ".err"), "tessel worker w:"));
    // Its own kept results (worker_id), not the study's: tune finishes more
    // meanwhile, which the worker's observers also see (before: said counted them).
    const auto schema = url.substr(url.find("?study=") + 7);
    const auto own_results = [&] {
      const auto text = pg_cluster::instance().psql(
          "SELECT count(*) FROM " + schema + ".trials t JOIN " + schema +
          ".workers w ON t.worker_id = w.id WHERE t.state = 'finished' AND w.name = 'w'");
      return text.empty() || std::isdigit(static_cast<unsigned char>(text[0])) == 0
                 ? 0ULL
                 : std::stoull(text);
    };
    // Mid-run: once it has kept a result (0.1 s a trial, two at a time). A
    // fixed 0.8 s after its start line could pass before its first on a
    // loaded machine, and own > 0 below failed.
    for (int i = 0; i < 600 && own_results() == 0; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    ::kill(pid, sig);
    int status = 0;
    ::waitpid(pid, &status, 0);
    // Its running trials are re-queued: tune finishes the budget alone.
    // Waited for first, so a failed REQUIRE below leaves no thread behind.
    const auto t = tune.wait();
    INFO("tune: ", t.out, t.err);
    CHECK(t.code == 0);
    CHECK(contains(t.out, "30 evaluations done"));
    CHECK(WIFSIGNALED(status));  // still ended by the signal
    CHECK(WTERMSIG(status) == sig);
    const auto err = read_text(base + ".err");
    INFO("worker stderr: ", err);
    const std::string start = "tessel: interrupted; worker w stops; ";
    const auto at = err.find(start);
    REQUIRE(at != std::string::npos);
    const auto line = err.substr(at, err.find('\n', at) + 1 - at);
    const auto said = std::stoull(line.substr(start.size()));
    const auto finished = std::stoull(pg_cluster::instance().psql(
        "SELECT count(*) FROM " + schema + ".trials WHERE state = 'finished'"));
    const auto own = own_results();
    INFO("said ", said, ", own ", own, ", finished ", finished);
    CHECK(own > 0);
    CHECK(own < finished);
    CHECK(said <= own);      // a result is counted once the store kept it
    CHECK(said + 2 >= own);  // at most its 2 jobs' results kept between the count and the signal
    // Signalled once it has kept a result: often just one ("1 finished
    // trial of this worker is stored").
    const std::string stored = said == 1 ? " finished trial of this worker is stored in "
                                         : " finished trials of this worker are stored in ";
    CHECK(line.ends_with(stored + url +
                         "; the trials it was running go back to the queue when its lease "
                         "(2 s) runs out\n"));
  }
}

TEST_CASE("worker: a study file, an empty study and a bad URL are refused with the reason") {
  const auto file = run("worker small.tessel.db");
  CHECK(file.code == 1);
  CHECK(contains(file.err,
                 "tessel worker joins a shared study: give a postgresql:// URL, not "
                 "'small.tessel.db' (a SQLite study file has one writer; continue it with "
                 "`tessel tune FILE --db PATH --resume`)"));
  const auto bad = run("worker 'postgresql://127.0.0.1/db?study=Bad'");
  CHECK(bad.code == 1);
  CHECK(contains(bad.err, "study name 'Bad' must be 1 to 63 lower-case letters"));
  PG_CLUSTER_OR_SKIP();
  const auto url = pg_cluster::instance().study_url("empty");
  const auto empty = run("worker '" + url + "'");
  CHECK(empty.code == 1);
  CHECK(contains(empty.err, "'" + url +
                                "' holds no study yet: create it with `tessel tune FILE --backend "
                                "SPEC --db URL --budget N`, then start workers"));
}
