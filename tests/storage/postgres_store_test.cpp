// The PostgreSQL store's own behaviour, on a real server (pg_cluster.hpp):
// its locations and errors, and the shared study's operations: claims never
// doubled, the proposer lock, a late worker's trials re-queued, a late
// result kept once, and surviving a restart of the server.
#include "pg_cluster.hpp"
#include "storage_fixtures.hpp"

#include <tessel/error.hpp>
#include <tessel/storage.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <mutex>
#include <set>
#include <thread>

using namespace tessel;
using namespace tessel::testing;

namespace {

/// The schema name in a study URL (after "?study=").
std::string schema_of(const std::string& url) { return url.substr(url.find("?study=") + 7); }

/// Proposes trials first..last (proposed, every field set) under the lock.
void propose_range(shared_store& db, const space& s, std::uint64_t first, std::uint64_t last) {
  std::vector<trial> batch;
  for (auto id = first; id <= last; ++id)
    batch.push_back(storage_trial(s, id, trial_state::proposed));
  REQUIRE(db.try_lock_proposer());
  db.propose(batch, s);
  db.unlock_proposer();
}

/// The store's shared operations; fails the test for a store without them.
shared_store& shared_of(const std::shared_ptr<study_store>& db) {
  auto* out = db->shared();
  if (!out) throw std::logic_error("not a shared store: " + db->location());
  return *out;
}

worker_info worker(std::string name, double lease_s = 30) {
  return {std::move(name), 1, std::min(1.0, lease_s / 4), lease_s};
}

}  // namespace

TEST_CASE("a PostgreSQL location is checked, and its password never shown") {
  CHECK_THROWS_WITH_AS(
      (void)open_store("postgresql://127.0.0.1/db?study=Mixed-Case"),
      "study 'postgresql://127.0.0.1/db?study=Mixed-Case': study name 'Mixed-Case' must be 1 to "
      "63 lower-case letters, digits and _, not starting with a digit (it names the PostgreSQL "
      "schema that holds the study)",
      error);
  CHECK_THROWS_WITH_AS((void)open_store("postgresql://127.0.0.1/db?colour=blue"),
                       doctest::Contains("is not a PostgreSQL connection URI: invalid URI query "
                                         "parameter: \"colour\""),
                       error);
  CHECK(is_postgres_location("postgres://h/db"));
  CHECK(is_postgres_location("postgresql://h/db"));
  CHECK_FALSE(is_postgres_location("sqlite:postgresql.db"));
  // Port 1 on loopback: refused at once.
  try {
    (void)open_store("postgresql://tessel:hunter2@127.0.0.1:1/tessel?study=x");
    FAIL("connected to port 1");
  } catch (const error& e) {
    const std::string what = e.what();
    CHECK(what.rfind("study 'postgresql://tessel@127.0.0.1:1/tessel?study=x': cannot connect: ",
                     0) == 0);
    CHECK(what.find("hunter2") == std::string::npos);
  }
}

TEST_CASE("a PostgreSQL schema of another program, or of a newer tessel, is refused") {
  PG_CLUSTER_OR_SKIP();
  const auto& cluster = pg_cluster::instance();
  const auto url = cluster.study_url("other");
  REQUIRE(cluster
              .psql("CREATE SCHEMA " + schema_of(url) + "; CREATE TABLE " + schema_of(url) +
                    ".songs (title text)")
              .empty());
  CHECK_THROWS_WITH_AS((void)open_store(url),
                       ("study '" + url +
                        "': its PostgreSQL schema holds tables of another program, not a tessel "
                        "study; name another with ?study=NAME")
                           .c_str(),
                       error);

  const auto future = cluster.study_url("future");
  (void)open_store(future);
  REQUIRE(cluster.psql("UPDATE " + schema_of(future) + ".meta SET schema_version = 99").empty());
  CHECK_THROWS_WITH_AS((void)open_store(future),
                       doctest::Contains("has schema version 99, newer than this tessel"), error);
}

TEST_CASE("one proposer at a time; the lock goes with its connection") {
  PG_CLUSTER_OR_SKIP();
  const auto url = pg_cluster::instance().study_url("lock");
  const auto a = open_store(url), b = open_store(url);
  CHECK(shared_of(a).try_lock_proposer());
  CHECK(shared_of(a).try_lock_proposer());  // held: still true
  CHECK_FALSE(shared_of(b).try_lock_proposer());
  shared_of(a).unlock_proposer();
  CHECK(shared_of(b).try_lock_proposer());
  CHECK_FALSE(shared_of(a).try_lock_proposer());
  const auto s = storage_space();
  CHECK_THROWS_WITH_AS(
      shared_of(a).propose({storage_trial(s, 1, trial_state::proposed)}, s),
      ("study '" + url + "': propose() needs the proposer lock (try_lock_proposer())").c_str(),
      error);
  {
    const auto c = open_store(url);
    shared_of(b).unlock_proposer();
    CHECK(shared_of(c).try_lock_proposer());
  }  // c's connection closes: the server releases its lock, soon after
  bool taken = false;
  for (int i = 0; i < 500 && !taken; ++i) {
    taken = shared_of(a).try_lock_proposer();
    if (!taken) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  CHECK(taken);
}

TEST_CASE("claims are never doubled: eight workers on 300 trials") {
  PG_CLUSTER_OR_SKIP();
  const auto url = pg_cluster::instance().study_url("claims");
  const auto s = storage_space();
  const auto proposer = open_store(url);
  propose_range(shared_of(proposer), s, 1, 300);
  std::mutex mutex;
  std::vector<std::uint64_t> claimed;
  std::vector<std::thread> workers;
  for (int w = 0; w < 8; ++w)
    workers.emplace_back([&, w] {
      const auto db = open_store(url);
      auto& shared = shared_of(db);
      shared.join(worker("w" + std::to_string(w)));
      while (const auto t = shared.claim(s)) {
        CHECK(t->state == trial_state::running);
        auto done = storage_trial(s, t->id);
        CHECK(shared.finish(done, s));
        std::lock_guard lock(mutex);
        claimed.push_back(t->id);
      }
    });
  for (auto& w : workers) w.join();
  std::sort(claimed.begin(), claimed.end());
  REQUIRE(claimed.size() == 300);
  for (std::uint64_t id = 1; id <= 300; ++id) CHECK(claimed[id - 1] == id);
  const auto n = shared_of(proposer).counts();
  CHECK(n.finished == 300);
  CHECK(n.claims == 300);
  CHECK(n.requeues == 0);
  CHECK(n.discarded == 0);
  CHECK(n.workers == 8);
  CHECK(n.live_workers == 0);  // all left
  const auto got = proposer->load(s);
  for (std::size_t i = 0; i < got.size(); ++i) check_same_trial(got[i], storage_trial(s, i + 1));
  CHECK_NOTHROW(proposer->check_integrity());
}

TEST_CASE("a late worker's trial is re-queued, and a late result is kept once") {
  PG_CLUSTER_OR_SKIP();
  const auto& cluster = pg_cluster::instance();
  const auto url = cluster.study_url("late");
  const auto s = storage_space();
  const auto a = open_store(url), b = open_store(url);
  propose_range(shared_of(a), s, 1, 2);
  const auto id_a = shared_of(a).join(worker("a", 60));
  shared_of(b).join(worker("b", 60));

  const auto first = shared_of(a).claim(s);
  REQUIRE(first.has_value());
  CHECK(first->id == 1);
  // a stops heartbeating: its last beat is now older than its lease.
  REQUIRE(cluster
              .psql("UPDATE " + schema_of(url) +
                    ".workers SET heartbeat_at = now() - interval '61 seconds' WHERE id = " +
                    std::to_string(id_a))
              .empty());
  const auto again = shared_of(b).claim(s);  // re-queues trial 1, then claims it (lowest id)
  REQUIRE(again.has_value());
  CHECK(again->id == 1);
  CHECK(again->state == trial_state::running);
  auto n = shared_of(a).counts();
  CHECK(n.requeues == 1);
  CHECK(n.claims == 2);
  CHECK(n.running == 1);
  CHECK(n.live_workers == 1);

  // a's late result arrives first: kept; b's, for the same trial: discarded.
  auto from_a = storage_trial(s, 1);
  from_a.result.message = "from a";
  auto from_b = storage_trial(s, 1);
  from_b.result.message = "from b";
  CHECK(shared_of(a).finish(from_a, s));
  CHECK_FALSE(shared_of(b).finish(from_b, s));
  CHECK_FALSE(shared_of(a).finish(from_a, s));  // and never twice
  auto got = a->load(s);
  REQUIRE(got.size() == 2);
  CHECK(got[0].state == trial_state::finished);
  CHECK(got[0].result.message == "from a");
  n = shared_of(a).counts();
  CHECK(n.finished == 1);
  CHECK(n.discarded == 2);

  // leave() gives a running trial back at once.
  const auto second = shared_of(b).claim(s);
  REQUIRE(second.has_value());
  CHECK(second->id == 2);
  shared_of(b).leave();
  n = shared_of(a).counts();
  CHECK(n.proposed == 1);
  CHECK(n.requeues == 2);
  CHECK_NOTHROW(a->check_integrity());
}

TEST_CASE("changes() returns new trials and newly finished ones") {
  PG_CLUSTER_OR_SKIP();
  const auto url = pg_cluster::instance().study_url("changes");
  const auto s = storage_space();
  const auto db = open_store(url);
  auto& shared = shared_of(db);
  propose_range(shared, s, 1, 4);
  shared.join(worker("w"));
  const auto t = shared.claim(s);
  REQUIRE(t.has_value());
  shared.finish(storage_trial(s, t->id), s);
  std::vector<std::uint64_t> ids;
  for (const auto& c : shared.changes(s, 2, {1, 2})) ids.push_back(c.id);
  CHECK(ids == std::vector<std::uint64_t>{1, 3, 4});  // 1 finished; 2 still proposed
  CHECK(shared.changes(s, 4, {2, 3, 4}).empty());
}

TEST_CASE("a restart of the server: reads and claims reconnect, a proposal is interrupted") {
  PG_CLUSTER_OR_SKIP();
  const auto& cluster = pg_cluster::instance();
  const auto url = cluster.study_url("restart");
  const auto s = storage_space();
  const auto db = open_store(url);
  auto& shared = shared_of(db);
  propose_range(shared, s, 1, 3);
  shared.join(worker("w"));
  const auto held = shared.claim(s);
  REQUIRE(held.has_value());

  cluster.restart();
  CHECK(db->trial_count() == 3);  // reconnected
  const auto next = shared.claim(s);
  REQUIRE(next.has_value());
  CHECK(next->id == 2);
  CHECK(shared.finish(storage_trial(s, held->id), s));  // the claim made before still counts

  REQUIRE(shared.try_lock_proposer());
  cluster.restart();
  CHECK_THROWS_AS(shared.propose({storage_trial(s, 4, trial_state::proposed)}, s),
                  store_interrupted);
  CHECK(db->trial_count() == 3);
  CHECK(shared.try_lock_proposer());  // taken again on the new connection
  shared.propose({storage_trial(s, 4, trial_state::proposed)}, s);
  CHECK(db->trial_count() == 4);
}
