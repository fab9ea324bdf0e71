// A study shared by several processes through a PostgreSQL store (a real
// server: storage/pg_cluster.hpp): one budget for all, no config evaluated as
// two trials, a killed worker's trial finished by another, resume, and the
// operations one process drives refused.
#include "core/space_fixtures.hpp"
#include "storage/pg_cluster.hpp"
#include "study/in_order.hpp"

#include <tessel/error.hpp>
#include <tessel/storage.hpp>
#include <tessel/study.hpp>

#include <doctest/doctest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <set>
#include <thread>

using namespace tessel;
using namespace tessel::testing;

namespace {

/// a, b in 1..10: 100 configs; objective (a - 7)^2 + (b - 4)^2 + 1.
space grid() {
  space::definition def;
  def.name = "grid";
  def.parameters.push_back(param("a", integers({1, 2, 3, 4, 5, 6, 7, 8, 9, 10})));
  def.parameters.push_back(param("b", integers({1, 2, 3, 4, 5, 6, 7, 8, 9, 10})));
  return space(def);
}

// in_order (study/in_order.hpp) proposes the configs no one has proposed
// yet, in rank order: every process proposes the same ones, so only reading
// the whole history first keeps them from being evaluated twice.

class bowl final : public backend {
 public:
  explicit bowl(std::chrono::milliseconds pause = std::chrono::milliseconds(2)) : pause_(pause) {}
  std::string name() const override { return "bowl"; }
  measurement evaluate(const space& s, const config& c) override {
    std::this_thread::sleep_for(pause_);
    const auto a = s.integer(c, "a"), b = s.integer(c, "b");
    return measurement::success(static_cast<double>((a - 7) * (a - 7) + (b - 4) * (b - 4) + 1));
  }

 private:
  std::chrono::milliseconds pause_;
};

study::options shared_options(double lease_s = 30) {
  study::options o;
  o.resume = true;
  o.jobs = 1;
  o.worker.heartbeat_s = lease_s / 5;
  o.worker.lease_s = lease_s;
  return o;
}

study make(const std::string& url, study::options o = shared_options(),
           std::shared_ptr<backend> b = std::make_shared<bowl>()) {
  return study(grid(), std::move(b), std::make_unique<in_order>(), o, open_store(url));
}

shared_store& shared_of(const std::shared_ptr<study_store>& db) {
  auto* out = db->shared();
  if (!out) throw std::logic_error("not a shared store");
  return *out;
}

}  // namespace

TEST_CASE("four processes work one study: one budget, each config once") {
  PG_CLUSTER_OR_SKIP();
  const auto url = pg_cluster::instance().study_url("four");
  std::vector<summary> summaries(4);
  std::vector<std::thread> workers;
  for (std::size_t w = 0; w < 4; ++w)
    workers.emplace_back([&, w] {
      auto o = shared_options();
      o.jobs = 1 + w % 2;
      summaries[w] = make(url, o).run(stop::evaluations(60));
    });
  for (auto& w : workers) w.join();
  const auto db = open_store(url);
  const auto s = grid();
  const auto trials = db->load(s);
  REQUIRE(trials.size() == 60);
  std::set<std::uint64_t> keys;
  for (std::size_t i = 0; i < trials.size(); ++i) {
    CHECK(trials[i].id == i + 1);
    CHECK(trials[i].state == trial_state::finished);
    keys.insert(trials[i].key);
  }
  CHECK(keys.size() == 60);
  const auto n = shared_of(db).counts();
  CHECK(n.claims == 60);
  CHECK(n.workers == 4);
  CHECK(n.live_workers == 0);
  for (const auto& sum : summaries) {
    CHECK(sum.evaluations == 60);  // each saw the whole study
    CHECK(sum.reason == termination::evaluations);
  }
}

TEST_CASE("each result says whose it is: a worker's observers tell its own from the others'") {
  // Before: on_trial fired alike for this worker's results and for the other
  // workers' it read back, and nothing told them apart: `tessel worker`'s
  // count of its finished trials counted every worker's.
  PG_CLUSTER_OR_SKIP();
  const auto url = pg_cluster::instance().study_url("whose");
  struct counted final : observer {
    const study* s = nullptr;
    std::size_t own = 0, others = 0, unknown = 0;
    void on_trial(const trial& t, const progress&) override {
      if (t.worker == 0) ++unknown;
      (t.worker == s->worker_id() ? own : others) += t.worker != 0;
    }
  };
  std::vector<std::shared_ptr<counted>> seen(3);
  std::vector<std::uint64_t> ids(3), before(3, 1);
  std::vector<std::thread> workers;
  for (std::size_t w = 0; w < seen.size(); ++w)
    workers.emplace_back([&, w] {
      auto st = make(url);
      seen[w] = std::make_shared<counted>();
      seen[w]->s = &st;
      st.add_observer(seen[w]);
      before[w] = st.worker_id();  // not joined yet: 0
      (void)st.run(stop::evaluations(45));
      ids[w] = st.worker_id();
    });
  for (auto& w : workers) w.join();
  const auto db = open_store(url);
  const auto trials = db->load(grid());
  REQUIRE(trials.size() == 45);
  std::size_t total = 0;
  for (std::size_t w = 0; w < seen.size(); ++w) {
    INFO("worker ", w, " (id ", ids[w], ")");
    CHECK(before[w] == 0);
    CHECK(ids[w] != 0);
    // What the store recorded (worker_id), read back through trial::worker.
    const auto stored = static_cast<std::size_t>(std::count_if(
        trials.begin(), trials.end(), [&](const trial& t) { return t.worker == ids[w]; }));
    CHECK(seen[w]->own == stored);
    CHECK(seen[w]->unknown == 0);
    CHECK(seen[w]->own + seen[w]->others <= 45);  // the others' as far as it read them
    total += stored;
  }
  CHECK(total == 45);  // every result is one worker's
  CHECK(std::set<std::uint64_t>(ids.begin(), ids.end()).size() == 3);
}

TEST_CASE("a killed worker's trial goes back to the queue and is finished by another") {
  PG_CLUSTER_OR_SKIP();
  const auto url = pg_cluster::instance().study_url("killed");
  (void)open_store(url);  // the schema exists before the child races for it
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {  // claims a trial, then hangs in its evaluation until killed
    try {
      auto st = make(url, shared_options(1.0), std::make_shared<bowl>(std::chrono::hours(1)));
      (void)st.run(stop::evaluations(20));
    } catch (...) {
    }
    ::_exit(0);
  }
  const auto db = open_store(url);
  for (int i = 0; i < 1000 && shared_of(db).counts().running == 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  REQUIRE(shared_of(db).counts().running == 1);
  ::kill(child, SIGKILL);
  int status = 0;
  ::waitpid(child, &status, 0);

  const auto sum = make(url, shared_options(1.0)).run(stop::evaluations(20));
  CHECK(sum.evaluations == 20);
  const auto n = shared_of(db).counts();
  CHECK(n.finished == 20);
  CHECK(n.running == 0);
  CHECK(n.requeues >= 1);
  CHECK(n.claims == 20 + n.requeues);
  CHECK_NOTHROW(db->check_integrity());
}

TEST_CASE("a shared study resumes, and a new one is not silently extended") {
  PG_CLUSTER_OR_SKIP();
  const auto url = pg_cluster::instance().study_url("resume");
  CHECK(make(url).run(stop::evaluations(15)).evaluations == 15);
  auto fresh = shared_options();
  fresh.resume = false;
  CHECK_THROWS_WITH_AS(make(url, fresh),
                       ("study '" + url +
                        "' already holds 15 trials of space 'grid': resume it "
                        "(study::options::resume, the CLI's --resume) or use another store")
                           .c_str(),
                       error);
  auto again = make(url);
  CHECK(again.trials().size() == 15);
  const auto sum = again.run(stop::evaluations(25));
  CHECK(sum.evaluations == 25);
  CHECK(open_store(url)->trial_count() == 25);
  REQUIRE(sum.best.has_value());
  double best = 1e9;
  for (const auto& t : open_store(url)->load(grid())) best = std::min(best, t.result.objective);
  CHECK(sum.best->result.objective == best);
}

TEST_CASE("ask, tell and evaluate are refused on a shared study") {
  PG_CLUSTER_OR_SKIP();
  const auto url = pg_cluster::instance().study_url("refused");
  auto st = make(url);
  const std::string why =
      ": study '" + url +
      "' is shared by many processes, which run() works (`tessel worker`); ask, tell, enqueue, "
      "evaluate and verify are for a study one process drives";
  CHECK_THROWS_WITH_AS(st.ask(1), ("ask" + why).c_str(), error);
  CHECK_THROWS_WITH_AS(st.tell(1, measurement::success(1)), ("tell" + why).c_str(), error);
  CHECK_THROWS_WITH_AS(st.evaluate(grid().at(0), {}), ("evaluate" + why).c_str(), error);
}
