// postgres_store: the study in PostgreSQL, and the shared study's claims,
// proposer lock and heartbeats (postgres_store.hpp, docs/distributed.md).
#include "storage/postgres_store.hpp"

#include "storage/postgres_schema.hpp"
#include "storage/trial_row.hpp"

#include <tessel/error.hpp>

#include <fmt/format.h>

#include <condition_variable>
#include <thread>

namespace tessel::detail::storage {

namespace schema = storage::postgres;

/// A worker's heartbeat: a thread with a connection of its own, so a long
/// statement (or a reconnect) on the study's connection never makes the
/// worker look dead. A failed beat is retried at the next period.
class heartbeat {
 public:
  heartbeat(pg::location where, std::uint64_t worker, double period_s)
      : thread_([this, where = std::move(where), worker, period_s] {
          loop(where, worker, period_s);
        }) {}
  ~heartbeat() {
    {
      std::lock_guard lock(mutex_);
      stop_ = true;
    }
    wake_.notify_all();
    thread_.join();
  }
  heartbeat(const heartbeat&) = delete;
  heartbeat& operator=(const heartbeat&) = delete;

 private:
  void loop(const pg::location& where, std::uint64_t worker, double period_s) {
    std::unique_ptr<pg::connection> c;
    pg::params p;
    p.bind(1, static_cast<std::int64_t>(worker));
    const auto period = std::chrono::duration<double>(period_s);
    std::unique_lock lock(mutex_);
    while (!wake_.wait_for(lock, period, [this] { return stop_; })) {
      lock.unlock();
      try {
        if (!c) c = std::make_unique<pg::connection>(where);
        c->exec(
            "UPDATE workers SET heartbeat_at = now(), state = 'live' WHERE id = $1 AND state "
            "<> 'left'",
            p, "heartbeating");
      } catch (const error&) {
        c.reset();  // the server is away: connect again at the next beat
      }
      lock.lock();
    }
  }

  std::mutex mutex_;
  std::condition_variable wake_;
  bool stop_ = false;
  std::thread thread_;
};

namespace {

/// `{1,2,3}`: a bigint[] parameter.
std::string id_array(const std::vector<std::uint64_t>& ids) {
  std::string out = "{";
  for (std::size_t i = 0; i < ids.size(); ++i) out += (i ? "," : "") + std::to_string(ids[i]);
  return out + "}";
}

/// The trial columns, then worker_id (read_shared_trial).
std::string shared_trial_columns() { return fmt::format("{}, worker_id", trial_columns); }

std::string select_trials(std::string_view where) {
  return fmt::format("SELECT {} FROM trials {} ORDER BY id", shared_trial_columns(), where);
}

/// A row of shared_trial_columns(): the trial, and trial::worker from worker_id.
trial read_shared_trial(const pg::row& row, const space& s) {
  auto t = read_trial(row, s);
  if (!row.is_null(trial_column_count))
    t.worker = static_cast<std::uint64_t>(row.integer(trial_column_count));
  return t;
}

std::vector<trial> read_trials(const pg::result& r, const space& s) {
  std::vector<trial> out;
  out.reserve(static_cast<std::size_t>(r.rows()));
  for (int i = 0; i < r.rows(); ++i) out.push_back(read_shared_trial(r.at(i), s));
  return out;
}

/// Gives a worker's running trials back to the queue.
constexpr const char* requeue_sql =
    "UPDATE trials SET state = 'proposed', worker_id = NULL, requeues = requeues + 1 "
    "WHERE state = 'running' AND worker_id = $1 AND NOT (id = ANY($2::bigint[]))";

/// A worker is late when no heartbeat came for its lease; its trials go back.
constexpr const char* expire_sql =
    "UPDATE trials t SET state = 'proposed', worker_id = NULL, requeues = t.requeues + 1 "
    "FROM workers w WHERE t.state = 'running' AND t.worker_id = w.id AND (w.state = 'left' OR "
    "w.heartbeat_at < now() - make_interval(secs => w.lease_s)); "
    "UPDATE workers SET state = 'lost' WHERE state = 'live' AND "
    "heartbeat_at < now() - make_interval(secs => lease_s)";

constexpr const char* live_workers =
    "state = 'live' AND heartbeat_at >= now() - make_interval(secs => lease_s)";

}  // namespace

postgres_store::postgres_store(pg::location where) : db_(std::move(where)) { schema::prepare(db_); }

postgres_store::~postgres_store() {
  try {
    leave();
  } catch (const error&) {  // the server is gone: the lease returns the trials
  }
}

template <class F>
auto postgres_store::retrying(F&& f) const {
  // A few losses in a row: the server restarted more than once (each
  // reconnect already waits up to reconnect_patience); beyond that, fail.
  constexpr int max_losses = 5;
  for (int losses = 1;; ++losses) {
    try {
      return f();
    } catch (const pg::connection_lost&) {
      if (losses == max_losses) throw;
      try {
        db_.reconnect(reconnect_patience);
      } catch (const error&) {
        gone_ = true;
        throw;
      }
      recover();
    }
  }
}

void postgres_store::recover() const {
  proposer_ = false;  // the server released it with the old session
  if (!worker_) return;
  pg::params p;
  p.bind(1, static_cast<std::int64_t>(*worker_));
  p.bind(2, std::string_view(id_array({held_.begin(), held_.end()})));
  try {
    db_.exec(requeue_sql, p, "giving back claims whose answer was lost");
  } catch (const pg::connection_lost&) {  // the next statement reconnects again
  }
}

std::string postgres_store::location() const { return db_.where().shown; }

std::optional<study_record> postgres_store::study() const {
  std::lock_guard lock(mutex_);
  return retrying([&]() -> std::optional<study_record> {
    const auto r = db_.exec(
        "SELECT s.space_name, s.space_source, s.space_hash, s.target, s.backend, s.strategy, "
        "s.options_json, s.seed, m.schema_version, m.created_at FROM study s, meta m "
        "WHERE s.id = 1 AND m.id = 1",
        "reading the study record");
    if (r.rows() == 0) return std::nullopt;
    const auto q = r.at(0);
    study_record out = read_study_columns(q);
    out.schema_version = static_cast<int>(q.integer(8));
    out.created_at = q.real(9);
    return out;
  });
}

void postgres_store::begin(const study_record& record) {
  std::lock_guard lock(mutex_);
  retrying([&] {
    pg::transaction tx(db_);
    pg::params p;
    p.bind(1, std::string_view(record.space_name));
    p.bind(2, std::string_view(record.space_source));
    p.bind(3, std::string_view(record.space_hash));
    p.bind(4, std::string_view(record.target));
    p.bind(5, std::string_view(record.backend));
    p.bind(6, std::string_view(record.strategy));
    p.bind(7, std::string_view(record.options_json));
    p.bind(8, static_cast<std::int64_t>(record.seed));
    // Two processes beginning one new study: one inserts, both compare.
    const auto inserted = db_.exec(
        "INSERT INTO study (id, space_name, space_source, space_hash, target, backend, "
        "strategy, options_json, seed) VALUES (1, $1, $2, $3, $4, $5, $6, $7, $8) "
        "ON CONFLICT (id) DO NOTHING",
        p, "storing the study record");
    if (inserted.affected() == 1 && record.created_at > 0) {
      pg::params c;
      c.bind(1, record.created_at);
      db_.exec("UPDATE meta SET created_at = $1 WHERE id = 1", c, "keeping the creation time");
    }
    const auto stored = db_.exec("SELECT space_name, space_hash FROM study WHERE id = 1",
                                 "reading the study record");
    const auto name = stored.at(0).text(0), hash = stored.at(0).text(1);
    if (hash != record.space_hash)
      throw error(fmt::format(
          "{} holds a study of space '{}' (hash {}), not of space '{}' (hash {}); use another "
          "?study=NAME, or --overwrite to start over",
          db_.subject(), name, hash, record.space_name, record.space_hash));
    tx.commit();
  });
}

template <class F>
auto postgres_store::naming_study(F&& f) const {
  try {
    return f();
  } catch (const pg::connection_lost&) {
    throw;
  } catch (const error& e) {
    const std::string what = e.what();
    if (what.rfind(db_.subject(), 0) == 0) throw;
    throw error(db_.subject() + ": " + what);
  }
}

void postgres_store::save(const trial& t, const space& s) {
  const auto row = naming_study([&] { return trial_row(t, s); });
  std::lock_guard lock(mutex_);
  pg::params p;
  row.bind(p);
  retrying([&] { db_.exec(upsert_sql(true), p, "saving a trial"); });
}

void postgres_store::save_all(const std::vector<trial>& trials, const space& s) {
  std::vector<pg::params> rows(trials.size());
  naming_study([&] {
    for (std::size_t i = 0; i < trials.size(); ++i) trial_row(trials[i], s).bind(rows[i]);
  });
  const auto sql = upsert_sql(true);
  std::lock_guard lock(mutex_);
  retrying([&] {
    pg::transaction tx(db_);
    for (const auto& p : rows) db_.exec(sql, p, "saving a trial");
    tx.commit();
  });
}

std::size_t postgres_store::trial_count() const {
  std::lock_guard lock(mutex_);
  return retrying([&] {
    return static_cast<std::size_t>(
        db_.exec("SELECT count(*) FROM trials", "counting trials").at(0).integer(0));
  });
}

void postgres_store::clear() {
  pg::params me;
  me.bind(1, static_cast<std::int64_t>(worker_.value_or(0)));
  std::lock_guard lock(mutex_);
  retrying([&] {
    pg::transaction tx(db_);
    const auto live =
        db_.exec(fmt::format("SELECT count(*) FROM workers WHERE {} AND id <> $1", live_workers),
                 me, "counting live workers")
            .at(0)
            .integer(0);
    if (live > 0)
      throw error(fmt::format("{}: {} worker{} {} working this study; stop {} before deleting it",
                              db_.subject(), live, live == 1 ? "" : "s", live == 1 ? "is" : "are",
                              live == 1 ? "it" : "them"));
    db_.exec("DELETE FROM trials; DELETE FROM study; DELETE FROM workers WHERE state <> 'live'",
             "deleting the study");
    tx.commit();
  });
}

std::vector<trial> postgres_store::load(const space& s) const {
  std::lock_guard lock(mutex_);
  const auto r = retrying([&] { return db_.exec(select_trials(""), "loading trials"); });
  return naming_study([&] { return read_trials(r, s); });
}

void postgres_store::check_integrity() const {
  std::lock_guard lock(mutex_);
  const auto r = retrying([&] {
    return db_.exec(
        "SELECT count(*), coalesce(max(id), 0), "
        "count(*) FILTER (WHERE state = 'running' AND worker_id IS NULL), "
        "count(*) FILTER (WHERE state = 'finished' AND status IS NULL), "
        "count(*) FILTER (WHERE state <> 'finished' AND status IS NOT NULL), "
        "(SELECT count(*) FROM meta) FROM trials",
        "checking the study");
  });
  const auto q = r.at(0);
  std::string problems;
  if (q.integer(0) != q.integer(1))
    problems += fmt::format("\n  trial ids are not 1..{}: {} trials", q.integer(1), q.integer(0));
  if (q.integer(2) > 0)
    problems += fmt::format("\n  {} running trials have no worker", q.integer(2));
  if (q.integer(3) > 0)
    problems += fmt::format("\n  {} finished trials have no status", q.integer(3));
  if (q.integer(4) > 0)
    problems += fmt::format("\n  {} unfinished trials have a result", q.integer(4));
  if (q.integer(5) != 1) problems += "\n  the meta row is missing";
  if (!problems.empty()) throw error(db_.subject() + " is damaged:" + problems);
}

// --- the shared study --------------------------------------------------------------

std::uint64_t postgres_store::join(const worker_info& w) {
  if (!(w.heartbeat_s > 0) || !(w.lease_s > w.heartbeat_s))
    throw options_error("worker_info",
                        fmt::format("heartbeat_s ({}) must be > 0 and lease_s ({}) greater than it",
                                    w.heartbeat_s, w.lease_s));
  std::lock_guard lock(mutex_);
  if (worker_) return *worker_;
  pg::params p;
  p.bind(1, std::string_view(w.name));
  p.bind(2, static_cast<std::int64_t>(std::max<std::size_t>(1, w.jobs)));
  p.bind(3, w.heartbeat_s);
  p.bind(4, w.lease_s);
  const auto id = retrying([&] {
    return db_
        .exec(
            "INSERT INTO workers (name, jobs, heartbeat_s, lease_s, state) VALUES ($1, $2, "
            "$3, $4, 'live') RETURNING id",
            p, "joining the study")
        .at(0)
        .integer(0);
  });
  worker_ = static_cast<std::uint64_t>(id);
  heartbeat_ = std::make_unique<heartbeat>(db_.where(), *worker_, w.heartbeat_s);
  return *worker_;
}

void postgres_store::leave() {
  heartbeat_.reset();
  unlock_proposer();
  std::lock_guard lock(mutex_);
  if (gone_) worker_.reset();  // its lease returns the trials; a second wait would be in vain
  if (!worker_) return;
  pg::params me;
  me.bind(1, static_cast<std::int64_t>(*worker_));
  auto nothing_held = me;
  nothing_held.bind(2, std::string_view("{}"));
  retrying([&] {
    db_.exec(requeue_sql, nothing_held, "giving back running trials");
    db_.exec("UPDATE workers SET state = 'left' WHERE id = $1", me, "leaving the study");
  });
  worker_.reset();
  held_.clear();
}

std::vector<trial> postgres_store::changes(const space& s, std::uint64_t known,
                                           const std::vector<std::uint64_t>& pending) const {
  pg::params p;
  p.bind(1, static_cast<std::int64_t>(known));
  p.bind(2, std::string_view(id_array(pending)));
  std::lock_guard lock(mutex_);
  const auto r = retrying([&] {
    return db_.exec(
        select_trials("WHERE id > $1 OR (state = 'finished' AND id = ANY($2::bigint[]))"), p,
        "reading what changed");
  });
  return naming_study([&] { return read_trials(r, s); });
}

bool postgres_store::try_lock_proposer() {
  std::lock_guard lock(mutex_);
  if (proposer_) return true;
  proposer_ = retrying([&] {
    return db_.exec(fmt::format("SELECT pg_try_advisory_lock({}, hashtext(current_schema()))",
                                schema::proposer_lock_class),
                    "taking the proposer lock")
               .at(0)
               .text(0) == "t";
  });
  return proposer_;
}

void postgres_store::unlock_proposer() {
  std::lock_guard lock(mutex_);
  if (!proposer_) return;
  proposer_ = false;
  try {
    db_.exec(fmt::format("SELECT pg_advisory_unlock({}, hashtext(current_schema()))",
                         schema::proposer_lock_class),
             "releasing the proposer lock");
  } catch (const pg::connection_lost&) {  // released with the session; reconnect later
  }
}

void postgres_store::propose(const std::vector<trial>& trials, const space& s) {
  if (trials.empty()) return;
  std::vector<trial_row> rows;
  rows.reserve(trials.size());
  naming_study([&] {
    for (const auto& t : trials) rows.emplace_back(t, s);
  });
  pg::params p;
  for (std::size_t i = 0; i < rows.size(); ++i)
    rows[i].bind(p, static_cast<int>(i) * trial_column_count);
  std::lock_guard lock(mutex_);
  if (!proposer_)
    throw error(db_.subject() + ": propose() needs the proposer lock (try_lock_proposer())");
  try {
    db_.exec(insert_sql(rows.size()), p, "storing proposals");
  } catch (const pg::connection_lost& e) {
    db_.reconnect(reconnect_patience);
    recover();
    throw store_interrupted(e.what());
  }
}

std::optional<trial> postgres_store::claim(const space& s) {
  std::lock_guard lock(mutex_);
  if (!worker_) throw error(db_.subject() + ": claim() needs join() first");
  pg::params p;
  p.bind(1, static_cast<std::int64_t>(*worker_));
  const auto r = retrying([&] {
    db_.exec(expire_sql, "re-queueing the trials of late workers");
    return db_.exec(
        fmt::format("UPDATE trials SET state = 'running', worker_id = $1, claims = claims + 1 "
                    "WHERE id = (SELECT id FROM trials WHERE state = 'proposed' ORDER BY id "
                    "LIMIT 1 FOR UPDATE SKIP LOCKED) RETURNING {}",
                    shared_trial_columns()),
        p, "claiming a trial");
  });
  if (r.rows() == 0) return std::nullopt;
  auto t = naming_study([&] { return read_shared_trial(r.at(0), s); });
  held_.insert(t.id);
  return t;
}

bool postgres_store::finish(const trial& t, const space& s) {
  const auto row = naming_study([&] { return trial_row(t, s); });
  pg::params p;
  row.bind(p);
  if (worker_) {
    p.bind(trial_column_count + 1, static_cast<std::int64_t>(*worker_));
  } else {
    p.bind(trial_column_count + 1, nullptr);
  }
  pg::params id;
  id.bind(1, static_cast<std::int64_t>(t.id));
  std::lock_guard lock(mutex_);
  const bool kept = retrying([&] {
    // worker_id: who evaluated the result kept (NULL from a process that never joined).
    if (db_.exec(update_sql() + ", worker_id = $24 WHERE id = $1 AND state <> 'finished'", p,
                 "storing a result")
            .affected() == 1)
      return true;
    db_.exec("UPDATE trials SET discarded = discarded + 1 WHERE id = $1", id,
             "counting a result not kept");
    return false;
  });
  held_.erase(t.id);
  return kept;
}

shared_counts postgres_store::counts() const {
  std::lock_guard lock(mutex_);
  const auto r = retrying([&] {
    return db_.exec(
        fmt::format("SELECT count(*) FILTER (WHERE state = 'proposed'), "
                    "count(*) FILTER (WHERE state = 'running'), "
                    "count(*) FILTER (WHERE state = 'finished'), coalesce(sum(claims), 0), "
                    "coalesce(sum(requeues), 0), coalesce(sum(discarded), 0), "
                    "(SELECT count(*) FROM workers), (SELECT count(*) FROM workers WHERE {0}), "
                    "(SELECT coalesce(sum(jobs), 0) FROM workers WHERE {0}) FROM trials",
                    live_workers),
        "counting");
  });
  const auto q = r.at(0);
  auto n = [&q](int col) { return static_cast<std::size_t>(q.integer(col)); };
  return {n(0), n(1), n(2), n(3), n(4), n(5), n(6), n(7), n(8)};
}

}  // namespace tessel::detail::storage
