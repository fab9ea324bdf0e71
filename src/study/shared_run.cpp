// The study as one worker of a shared study (DESIGN.md §10,
// docs/distributed.md): the trials in memory mirror the store's, read
// incrementally (sync); trials are claimed from the store, never from other
// workers; whoever holds the proposer lock proposes from the whole study's
// history, so the search is one search; results go to the store, which keeps
// the first result of a trial and discards the rest.
//
// Who proposes: the process that takes the proposer lock keeps it while it
// works the study, and keeps the queue topped up (it looks every few
// milliseconds, evaluating on other threads meanwhile). The others only
// claim; when the queue is empty they try the lock, which they get only once
// its holder is gone (the server releases it with the holder's connection,
// kill -9 included). So one process does the modelling, and the others tell
// their models of the history only when they take over (state::unobserved):
// the work of the models is not repeated in every worker, and a worker that
// is killed and restarted costs little.
#include "study/evaluation_pool.hpp"
#include "study/state.hpp"

#include <tessel/error.hpp>

#include <fmt/format.h>

#include <unistd.h>
#include <algorithm>
#include <array>
#include <thread>

namespace tessel {
namespace {

using clock = std::chrono::steady_clock;

double seconds_since(clock::time_point t) {
  return std::chrono::duration<double>(clock::now() - t).count();
}

/// "host:pid", what a worker is called unless named.
std::string default_worker_name() {
  std::array<char, 256> host{};
  if (::gethostname(host.data(), host.size() - 1) != 0) host[0] = '\0';
  return fmt::format("{}:{}", host[0] ? host.data() : "localhost", ::getpid());
}

/// How long to wait before looking at the store again when there was
/// nothing to do: short at first, longer while it stays idle.
class backoff {
 public:
  void reset() { pause_ = first; }
  [[nodiscard]] std::chrono::milliseconds next() {
    const auto out = pause_;
    pause_ = std::min(pause_ * 2, last);
    return out;
  }

 private:
  static constexpr std::chrono::milliseconds first{2}, last{200};
  std::chrono::milliseconds pause_ = first;
};

}  // namespace

void study::state::sync() {
  std::vector<std::uint64_t> pending;
  for (const auto& t : trials)
    if (t.state != trial_state::finished) pending.push_back(t.id);
  bool pool_stale = false;
  for (auto& t : shared_->changes(space_, trials.size(), pending)) {
    if (t.id > trials.size()) {  // proposed by another process
      pool_stale |= pool_keys.count(t.key) != 0;
      append_stored(std::move(t), /*requeue=*/false);
      continue;
    }
    const auto index = t.id - 1;  // finished by another process (or by this one, earlier)
    if (trials[index].state == trial_state::finished) continue;
    const auto result = t.result;
    t.state = trials[index].state;
    trials[index] = std::move(t);
    finish(index, result, /*replaying=*/true);
  }
  if (pool_stale)  // scored candidates another process has proposed meanwhile
    std::erase_if(pool, [&](const auto& candidate) {
      const auto key = space_.key(candidate.first);
      if (by_key.count(key) == 0) return false;
      pool_keys.erase(key);
      return true;
    });
}

std::optional<std::size_t> study::state::propose_shared(const stop_condition& until,
                                                        std::size_t free_jobs) {
  const auto before = shared_->counts();
  if (free_jobs == 0 && before.proposed + before.running >= before.live_jobs) return 0;
  if (!shared_->try_lock_proposer()) return std::nullopt;
  sync();  // the whole history, up to the last trial, before choosing
  for (const auto index : std::exchange(unobserved, {})) observe_models(trials[index]);
  const std::size_t open =
      static_cast<std::size_t>(std::count_if(trials.begin(), trials.end(), [](const trial& t) {
        return t.state != trial_state::finished;
      }));
  auto p = progress_;
  p.wall_s = seconds_since(run_started.value_or(created));
  // Enough for every idle slot of every live worker, and never past the budget.
  std::size_t n = std::max(free_jobs, before.live_jobs);
  n = n > open ? std::max(free_jobs, n - open) : free_jobs;
  if (const auto left = until.evaluations_left(p)) n = std::min(n, *left > open ? *left - open : 0);
  if (n == 0) return 0;
  run_spent = until.spent(p);

  const std::size_t first = trials.size();
  for (auto& t : std::exchange(unsent, {}))
    if (trials.size() - first < n && !known(t.key)) {
      const auto index = add_trial(t.config, t.provenance);
      trials[index].prediction = t.prediction;
    }
  if (trials.size() - first < n) (void)choose(n - (trials.size() - first));
  const std::vector<trial> batch(trials.begin() + static_cast<std::ptrdiff_t>(first), trials.end());
  try {
    shared_->propose(batch, space_);
  } catch (const store_interrupted&) {
    retract(first);  // stored or not, they are read back or proposed again next time
    return std::nullopt;
  }
  return batch.size();
}

void study::state::retract(std::size_t first) {
  std::vector<trial> taken(
      std::make_move_iterator(trials.begin() + static_cast<std::ptrdiff_t>(first)),
      std::make_move_iterator(trials.end()));
  trials.resize(first);
  for (const auto& t : taken) {
    by_key.erase(t.key);
    std::erase(queue, static_cast<std::size_t>(t.id - 1));
    auto& [tokens, proposals] = tokens_by_source[t.provenance.source];
    tokens -= t.provenance.tokens;
    --proposals;
    progress_.tokens -= t.provenance.tokens;
  }
  unsent.insert(unsent.begin(), std::make_move_iterator(taken.begin()),
                std::make_move_iterator(taken.end()));
}

summary study::state::run_shared(const stop_condition& until) {
  const auto started = clock::now();
  const double wall_before = run_wall_s;
  run_started = started;
  if (!prepared) {
    backend_->prepare(space_);
    prepared = true;
  }
  const std::size_t jobs =
      options_.jobs ? options_.jobs : std::max<std::size_t>(1, backend_->concurrency());
  jobs_used = jobs;
  auto me = options_.worker;
  me.jobs = jobs;
  if (me.name.empty()) me.name = default_worker_name();
  worker_id = shared_->join(me);
  auto progress_now = [&] {
    auto p = progress_;
    p.wall_s = seconds_since(started);
    return p;
  };

  struct in_flight {
    std::size_t index;
    measurement result;
    std::shared_ptr<detail::evaluation_pool::job> job;
  };
  std::vector<std::unique_ptr<in_flight>> flight;
  std::optional<run_end> ending;
  backoff idle;
  bool proposer = false;  ///< holds the proposer lock: keeps the queue topped up
  {
    detail::evaluation_pool threads(jobs);
    while (true) {
      const auto seen = threads.finished();
      // Results first, in the order they were claimed.
      for (auto it = flight.begin(); it != flight.end();) {
        if (!threads.done((*it)->job)) {
          ++it;
          continue;
        }
        if (trials[(*it)->index].state == trial_state::finished) {
          // Re-queued and finished elsewhere meanwhile: the store counts it as discarded.
          auto late = trials[(*it)->index];
          late.result = (*it)->result;
          (void)shared_->finish(late, space_);
        } else {
          finish((*it)->index, (*it)->result);
        }
        it = flight.erase(it);
      }
      sync();
      if (!ending && until(progress_now())) ending = run_end::condition;
      if (!ending && proposer) {  // top the queue up for everyone
        const auto made = propose_shared(until, jobs - flight.size());
        if (!made) proposer = false;  // another process holds the lock
      }
      bool claimed = false;
      while (!ending && flight.size() < jobs) {
        auto t = shared_->claim(space_);
        if (!t) {
          const auto made = propose_shared(until, jobs - flight.size());
          proposer = made.has_value();
          if (made && *made > 0) continue;
          // Nothing to propose, nothing queued or running anywhere: done.
          if (made && flight.empty() &&
              std::all_of(trials.begin(), trials.end(),
                          [](const trial& x) { return x.state == trial_state::finished; }) &&
              until.evaluations_left(progress_now()).value_or(1) > 0)
            ending = negligible ? run_end::negligible : run_end::empty;
          break;
        }
        if (t->id > trials.size()) sync();  // proposed since the last look
        auto f = std::make_unique<in_flight>();
        f->index = t->id - 1;
        auto* slot = f.get();
        f->job = threads.submit([this, slot, c = t->config] {
          try {
            slot->result = backend_->evaluate(space_, c);
          } catch (const std::exception& e) {
            slot->result = measurement::failure(status::runtime_error,
                                                std::string("backend threw: ") + e.what());
          } catch (...) {
            slot->result = measurement::failure(status::runtime_error,
                                                "backend threw a non-standard exception");
          }
        });
        flight.push_back(std::move(f));
        claimed = true;
      }
      if (ending && flight.empty()) break;
      if (claimed) idle.reset();
      const auto eval_started = clock::now();
      threads.wait_past(
          seen, flight.size() < jobs && !ending ? idle.next() : std::chrono::milliseconds(1000));
      evaluate_s += seconds_since(eval_started);
    }
  }
  shared_->leave();  // gives the proposer lock and any claim back
  run_wall_s = wall_before + seconds_since(started);
  run_started.reset();
  run_spent.reset();
  return end_run(*ending, until, progress_now());
}

}  // namespace tessel
