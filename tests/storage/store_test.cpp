// What every study store does, checked on each (SQLite and PostgreSQL, the
// latter on a real server: pg_cluster.hpp): round trips of every field, state
// updates, the study record and its hash check, errors naming the store,
// concurrent writers, and copying a study from one store to the other.
#include "pg_cluster.hpp"
#include "storage_fixtures.hpp"

#include <tessel/error.hpp>
#include <tessel/storage.hpp>

#include <doctest/doctest.h>

#include <ctime>
#include <limits>
#include <map>
#include <thread>

using namespace tessel;
using namespace tessel::testing;

namespace {

/// Each kind of store: where a new study of it is, and how its messages
/// name it.
struct sqlite_kind {
  static constexpr bool available() { return true; }
  [[nodiscard]] std::string location(const std::string& name) const {
    return dir.file(name + ".tessel.db").string();
  }
  [[nodiscard]] static std::string subject(const std::string& location) {
    return "study file '" + location + "'";
  }
  [[nodiscard]] static std::string other_space_hint() {
    return "use another --db, or delete the file to start over";
  }
  temp_folder dir;
};

struct postgres_kind {
  static bool available() { return pg_cluster::instance().running(); }
  [[nodiscard]] static std::string location(const std::string& name) {
    return pg_cluster::instance().study_url(name);
  }
  [[nodiscard]] static std::string subject(const std::string& location) {
    return "study '" + location + "'";
  }
  [[nodiscard]] static std::string other_space_hint() {
    return "use another ?study=NAME, or --overwrite to start over";
  }
};

std::map<std::uint64_t, trial> by_id(const std::vector<trial>& trials) {
  std::map<std::uint64_t, trial> out;
  for (const auto& t : trials) out.emplace(t.id, t);
  return out;
}

}  // namespace

/// Skips (or, in CI, fails) a case for a store whose server did not start.
#define STORE_OR_SKIP(Kind)                       \
  do {                                            \
    if (!Kind::available()) PG_CLUSTER_OR_SKIP(); \
  } while (false)

#define STORE_KINDS sqlite_kind, postgres_kind

TEST_CASE_TEMPLATE("a new store has no study and no trials", Kind, STORE_KINDS) {
  STORE_OR_SKIP(Kind);
  const Kind kind;
  const auto where = kind.location("new");
  const auto db = open_store(where);
  CHECK(db->location() == where);
  CHECK_FALSE(db->study().has_value());
  CHECK(db->load(storage_space()).empty());
  CHECK(db->trial_count() == 0);
  CHECK_NOTHROW(db->check_integrity());
}

TEST_CASE_TEMPLATE("the study record round trips, and begin() on a resume keeps it", Kind,
                   STORE_KINDS) {
  STORE_OR_SKIP(Kind);
  const Kind kind;
  const auto where = kind.location("record");
  const auto s = storage_space();
  const auto record = storage_record(s);
  const double before = static_cast<double>(std::time(nullptr)) - 1;
  {
    const auto db = open_store(where);
    db->begin(record);
    db->begin(record);  // idempotent
  }
  const auto db = open_store(where);
  const auto got = db->study();
  REQUIRE(got.has_value());
  CHECK(got->space_name == record.space_name);
  CHECK(got->space_source == record.space_source);
  CHECK(got->space_hash == record.space_hash);
  CHECK(got->target == record.target);
  CHECK(got->backend == record.backend);
  CHECK(got->strategy == record.strategy);
  CHECK(got->options_json == record.options_json);
  CHECK(got->seed == 0xFEDC'BA98'7654'3210ULL);
  CHECK(got->schema_version >= 1);
  CHECK(got->created_at >= before);
  CHECK(got->created_at <= static_cast<double>(std::time(nullptr)) + 1);

  // Same space, other strategy: a resume; the stored record stays.
  auto other = record;
  other.strategy = "random";
  CHECK_NOTHROW(db->begin(other));
  CHECK(db->study()->strategy == "ga");
}

TEST_CASE_TEMPLATE("begin() refuses a study of another space", Kind, STORE_KINDS) {
  STORE_OR_SKIP(Kind);
  const Kind kind;
  const auto where = kind.location("mismatch");
  const auto s = storage_space();
  const auto db = open_store(where);
  db->begin(storage_record(s));
  auto other = storage_record(s);
  other.space_name = "conv";
  other.space_hash = "0123456789abcdef";
  CHECK_THROWS_WITH_AS(db->begin(other),
                       (Kind::subject(where) +
                        " holds a study of space 'gemm' (hash 9f3a5c0e11d2b7a4), not of space "
                        "'conv' (hash 0123456789abcdef); " +
                        Kind::other_space_hint())
                           .c_str(),
                       error);
}

TEST_CASE_TEMPLATE("trials round trip with every field", Kind, STORE_KINDS) {
  STORE_OR_SKIP(Kind);
  const Kind kind;
  const auto where = kind.location("trials");
  const auto s = storage_space();
  std::vector<trial> want;
  for (std::uint64_t id = 1; id <= 40; ++id) want.push_back(storage_trial(s, id));
  // The fixture covers what must survive: inactive conditional parameters,
  // permutations, keys above 2^63, every status, with and without predictions.
  bool inactive = false, high_key = false;
  for (const auto& t : want) {
    inactive |= !s.value_of(t.config, "prefetch").active;
    high_key |= t.key > std::uint64_t{std::numeric_limits<std::int64_t>::max()};
  }
  REQUIRE(inactive);
  REQUIRE(high_key);
  want[0].key = std::numeric_limits<std::uint64_t>::max();
  want[1].key = 0x8000'0000'0000'0000ULL;
  want[2].key = 0;
  {
    const auto db = open_store(where);
    for (std::size_t i = 0; i < 20; ++i) db->save(want[i], s);
    db->save_all({want.begin() + 20, want.end()}, s);
  }
  const auto db = open_store(where);  // read back through a fresh connection
  const auto got = db->load(s);
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < want.size(); ++i) check_same_trial(got[i], want[i]);
  CHECK(db->trial_count() == want.size());
}

TEST_CASE_TEMPLATE("load() returns trials by id whatever the order they were saved in", Kind,
                   STORE_KINDS) {
  STORE_OR_SKIP(Kind);
  const Kind kind;
  const auto s = storage_space();
  const auto db = open_store(kind.location("order"));
  for (std::uint64_t id : {5, 3, 9, 1, 7}) db->save(storage_trial(s, id), s);
  std::vector<std::uint64_t> ids;
  for (const auto& t : db->load(s)) ids.push_back(t.id);
  CHECK(ids == std::vector<std::uint64_t>{1, 3, 5, 7, 9});
}

TEST_CASE_TEMPLATE("non-finite doubles survive", Kind, STORE_KINDS) {
  STORE_OR_SKIP(Kind);
  const Kind kind;
  const auto s = storage_space();
  auto t = storage_trial(s, 2);
  const double inf = std::numeric_limits<double>::infinity();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  t.result.objective = inf;
  t.result.samples = {inf, -inf, nan, -0.0, std::numeric_limits<double>::denorm_min()};
  t.result.metrics["roofline"] = -inf;
  t.result.cost.gate_s = nan;
  t.prediction = prediction{nan, inf, 0.5, -inf, 0, 0};
  const auto db = open_store(kind.location("nonfinite"));
  db->save(t, s);
  const auto got = db->load(s);
  REQUIRE(got.size() == 1);
  check_same_trial(got[0], t);
}

TEST_CASE_TEMPLATE("a trial moves from proposed to running to finished", Kind, STORE_KINDS) {
  STORE_OR_SKIP(Kind);
  const Kind kind;
  const auto where = kind.location("states");
  const auto s = storage_space();
  const auto db = open_store(where);
  const auto finished = storage_trial(s, 3);

  db->save(storage_trial(s, 3, trial_state::proposed), s);
  auto got = db->load(s);
  REQUIRE(got.size() == 1);
  check_same_trial(got[0], storage_trial(s, 3, trial_state::proposed));
  // Unfinished: the result is not stored, whatever the struct held.
  CHECK(got[0].result.samples.empty());
  CHECK(got[0].finished_at == 0);

  db->save(storage_trial(s, 3, trial_state::running), s);
  got = db->load(s);
  REQUIRE(got.size() == 1);
  CHECK(got[0].state == trial_state::running);

  db->save(finished, s);
  got = db->load(s);
  REQUIRE(got.size() == 1);
  check_same_trial(got[0], finished);

  // A fresh connection sees the last state.
  got = open_store(where)->load(s);
  REQUIRE(got.size() == 1);
  check_same_trial(got[0], finished);
}

TEST_CASE_TEMPLATE("save() refuses trials it cannot store faithfully", Kind, STORE_KINDS) {
  STORE_OR_SKIP(Kind);
  const Kind kind;
  const auto where = kind.location("bad");
  const auto s = storage_space();
  const auto db = open_store(where);
  auto t = storage_trial(s, 1);
  t.id = 0;
  CHECK_THROWS_WITH_AS(
      db->save(t, s),
      (Kind::subject(where) + ": cannot store trial id 0: trial ids are 1-based and below 2^63")
          .c_str(),
      error);
  t.id = 4;
  t.config = config{0, 0};
  CHECK_THROWS_WITH_AS(
      db->save(t, s),
      (Kind::subject(where) + ": cannot store trial 4: its config has 2 values, space 'gemm' has 5 "
                              "parameters")
          .c_str(),
      error);
  // save_all() is all or nothing.
  auto good = storage_trial(s, 5);
  CHECK_THROWS_AS(db->save_all({good, t}, s), error);
  CHECK(db->load(s).empty());
}

TEST_CASE_TEMPLATE("a stored config the space no longer has names its trial", Kind, STORE_KINDS) {
  STORE_OR_SKIP(Kind);
  const Kind kind;
  const auto where = kind.location("drift");
  const auto s = storage_space();
  const auto db = open_store(where);
  for (std::uint64_t id = 1; id <= 30; ++id) db->save(storage_trial(s, id), s);
  const auto narrower = storage_space({128, 256});
  std::uint64_t first_512 = 0;
  for (std::uint64_t id = 1; id <= 30 && !first_512; ++id)
    if (s.integer(storage_trial(s, id).config, "tile") == 512) first_512 = id;
  REQUIRE(first_512 != 0);
  CHECK_THROWS_WITH_AS(
      (void)db->load(narrower),
      (Kind::subject(where) + ": trial " + std::to_string(first_512) +
       " does not read back through space 'gemm': parameter 'tile': 512 is not one of {128, 256}")
          .c_str(),
      error);
}

TEST_CASE_TEMPLATE("save() from two threads, on one connection and on two", Kind, STORE_KINDS) {
  STORE_OR_SKIP(Kind);
  const Kind kind;
  const auto where = kind.location("threads");
  const auto s = storage_space();
  constexpr std::uint64_t per_thread = 150;
  const auto shared = open_store(where);
  const auto second = open_store(where);  // another connection to the same study
  auto writer = [&](study_store& db, std::uint64_t first) {
    for (std::uint64_t i = 0; i < per_thread; ++i) {
      const auto id = first + 3 * i;  // the three writers interleave ids
      db.save(storage_trial(s, id, trial_state::running), s);
      db.save(storage_trial(s, id), s);
    }
  };
  std::thread a(writer, std::ref(*shared), 1);
  std::thread b(writer, std::ref(*shared), 2);
  std::thread c(writer, std::ref(*second), 3);
  std::size_t loads = 0;
  std::thread reader([&] {
    for (int i = 0; i < 20; ++i) loads += shared->load(s).size() > 0 ? 1 : 0;
  });
  a.join();
  b.join();
  c.join();
  reader.join();
  const auto got = by_id(open_store(where)->load(s));
  REQUIRE(got.size() == 3 * per_thread);
  for (std::uint64_t id = 1; id <= 3 * per_thread; ++id) {
    REQUIRE(got.count(id) == 1);
    check_same_trial(got.at(id), storage_trial(s, id));
  }
  CHECK_NOTHROW(shared->check_integrity());
}

TEST_CASE_TEMPLATE("clear() empties the store for a new study", Kind, STORE_KINDS) {
  STORE_OR_SKIP(Kind);
  const Kind kind;
  const auto s = storage_space();
  const auto db = open_store(kind.location("clear"));
  db->begin(storage_record(s));
  for (std::uint64_t id = 1; id <= 5; ++id) db->save(storage_trial(s, id), s);
  db->claim_writer();
  db->clear();
  CHECK_FALSE(db->study().has_value());
  CHECK(db->trial_count() == 0);
}

TEST_CASE("a study copies from SQLite to PostgreSQL and back, every field kept") {
  PG_CLUSTER_OR_SKIP();
  const sqlite_kind kind;
  const auto s = storage_space();
  const auto file = kind.location("copy");
  const auto url = postgres_kind::location("copy");
  auto record = storage_record(s);
  std::vector<trial> want;
  for (std::uint64_t id = 1; id <= 30; ++id)
    want.push_back(storage_trial(s, id, id > 27 ? trial_state::running : trial_state::finished));
  {
    const auto from = open_store(file);
    from->begin(record);
    from->save_all(want, s);
  }
  const auto original = open_store(file);
  const auto created = original->study()->created_at;
  const auto pg = open_store(url);
  copy_study(*original, *pg, s);
  const auto back_file = kind.location("copy_back");
  const auto back = open_store(back_file);
  copy_study(*pg, *back, s);
  for (const auto* store : {pg.get(), back.get()}) {
    INFO(store->location());
    const auto got = store->load(s);
    REQUIRE(got.size() == want.size());
    for (std::size_t i = 0; i < want.size(); ++i) check_same_trial(got[i], want[i]);
    const auto r = store->study();
    REQUIRE(r.has_value());
    CHECK(r->space_hash == record.space_hash);
    CHECK(r->seed == record.seed);
    CHECK(r->options_json == record.options_json);
    CHECK(r->created_at == created);  // trial times stay relative to the same start
  }
  // A store that holds trials is not overwritten.
  CHECK_THROWS_WITH_AS(copy_study(*original, *pg, s),
                       ("cannot copy into '" + url +
                        "': it holds 30 trials already (copy into a new store, or clear it first)")
                           .c_str(),
                       error);
}
