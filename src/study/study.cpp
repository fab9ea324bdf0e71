// The study: ask/tell bookkeeping, resume, and run()'s dispatch loop.
#include "study/evaluation_pool.hpp"
#include "study/scheduler.hpp"
#include "study/state.hpp"

#include <tessel/error.hpp>
#include <tessel/hash.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <deque>
#include <exception>
#include <memory>

namespace tessel {
namespace {

using clock = std::chrono::steady_clock;

double seconds_since(clock::time_point t) {
  return std::chrono::duration<double>(clock::now() - t).count();
}

std::string space_hash(const space& s) {
  // FNV-1a over the source and the resolved constants (so --set changes it).
  std::uint64_t h = fnv1a(s.def().source.empty() ? s.name() : s.def().source);
  for (const auto& k : s.def().constants) h = fnv1a(fmt::format(";{}={}", k.name, k.value), h);
  for (const auto& p : s.parameters()) h = fnv1a(";" + p.name, h);
  return fmt::format("{:016x}", h);
}

}  // namespace

void study_options::validate() const {
  if (annotations.empty() || annotations.front() != '{' || annotations.back() != '}')
    throw options_error("study::options::annotations", "must be a JSON object, e.g. {}");
  if (pool_factor == 0) throw options_error("study::options::pool_factor", "must be at least 1");
  if (!(cost_alpha_start >= 0) || !(cost_alpha_end >= 0))
    throw options_error("study::options::cost_alpha_start/end", "must be >= 0");
  if (!(gittins_lambda > 0) || !std::isfinite(gittins_lambda))
    throw options_error("study::options::gittins_lambda", "must be finite and > 0");
  if (cost_rule != cost_rule_kind::cooled_ei && cost_rule != cost_rule_kind::gittins)
    throw options_error("study::options::cost_rule", "must be cooled_ei or gittins");
  if (!(cost_budget_hint_s >= 0) || !std::isfinite(cost_budget_hint_s))
    throw options_error("study::options::cost_budget_hint_s", "must be finite and >= 0");
  if (!(min_gain_fraction >= 0))
    throw options_error("study::options::min_gain_fraction", "must be >= 0");
  if (!(token_price_s >= 0) || !std::isfinite(token_price_s))
    throw options_error("study::options::token_price_s", "must be finite and >= 0");
  if (window > 4096)
    throw options_error("study::options::window", window,
                        "must be at most 4096 (0 = as many as jobs)");
  if (!(worker.heartbeat_s > 0) || !(worker.lease_s > worker.heartbeat_s))
    throw options_error("study::options::worker",
                        fmt::format("heartbeat_s = {} must be > 0 and lease_s = {} greater than it",
                                    worker.heartbeat_s, worker.lease_s));
  if (jobs > 4096)
    throw options_error("study::options::jobs", jobs,
                        "must be at most 4096 (0 = the backend's concurrency)");
}

study::state::state(tessel::space s, std::shared_ptr<backend> b, std::unique_ptr<strategy> st,
                    study_options o, std::shared_ptr<study_store> d)
    : space_(std::move(s)),
      backend_(std::move(b)),
      strategy_(std::move(st)),
      options_(o),
      db_(std::move(d)) {
  if (!backend_) throw error("study: a backend is required");
  if (!strategy_) throw error("study: a strategy is required");
  options_.validate();
  scheduler_ = scheduler::make(options_);
  strategy_->start(space_, options_.seed);
  if (!db_) return;
  study_record record;
  record.space_name = space_.name();
  record.space_source = space_.def().source;
  record.space_hash = space_hash(space_);
  record.target = backend_->hardware().value_or(space_.def().target.name);
  record.backend = backend_->name();
  record.strategy = strategy_->name();
  record.options_json = fmt::format(
      R"({{"seed": {}, "jobs": {}, "window": {}, "evaluate_baseline": {}, "annotations": {}}})",
      options_.seed, options_.jobs, options_.window, options_.evaluate_baseline,
      options_.annotations);
  record.seed = options_.seed;
  shared_ = db_->shared();
  db_->claim_writer();
  db_->begin(record);
  if (shared_) {  // times from the study's start, whichever process records them
    using namespace std::chrono;
    const double unix_now = duration<double>(system_clock::now().time_since_epoch()).count();
    clock_offset = std::max(0.0, unix_now - db_->study()->created_at);
  }
  auto stored = db_->load(space_);
  if (!stored.empty() && !options_.resume)
    throw error(
        fmt::format("study '{}' already holds {} trial{} of space '{}': resume it "
                    "(study::options::resume, the CLI's --resume) or use another store",
                    db_->location(), stored.size(), stored.size() == 1 ? "" : "s", space_.name()));
  resume(std::move(stored));
}

study::state::~state() = default;

double study::state::now() const { return seconds_since(created) + clock_offset; }

bool study::state::save(const trial& t) {
  if (!db_) return true;
  // A shared study's proposals and claims go through the store's own
  // operations (shared_run.cpp); only results are written here.
  if (shared_) return t.state != trial_state::finished || shared_->finish(t, space_);
  db_->save(t, space_);
  return true;
}

void study::state::one_process(std::string_view what) const {
  if (shared_)
    throw error(fmt::format(
        "{}: study '{}' is shared by many processes, which run() works (`tessel worker`); "
        "ask, tell, enqueue, evaluate and verify are for a study one process drives",
        what, db_->location()));
}

std::size_t study::state::add_trial(const config& c, provenance source) {
  if (in_replay)
    if (const auto index = replay_one(c)) return *index;
  trial t;
  t.id = trials.size() + 1;
  t.config = c;
  t.key = space_.key(c);
  t.provenance = std::move(source);
  t.proposed_at = now();
  count_tokens(t.provenance.source, t.provenance.tokens, 1);
  by_key.emplace(t.key, trials.size());
  trials.push_back(std::move(t));
  save(trials.back());
  return trials.size() - 1;
}

suggestion study::state::start(std::size_t index) {
  auto& t = trials[index];
  t.state = trial_state::running;
  if (!replay_results.contains(index)) save(t);
  return {t.id, t.config, t.provenance, t.prediction};
}

const trial& study::state::finish(std::size_t index, const measurement& m, bool replaying) {
  auto& t = trials[index];
  const auto before = t.state;
  t.state = trial_state::finished;
  t.result = m;
  if (m.ok() && !std::isfinite(m.objective)) {
    t.result.status = status::runtime_error;
    t.result.message = fmt::format("objective is not finite ({}); {}", m.objective, m.message);
  }
  if (!replaying) {
    t.finished_at = now();
    if (!save(t)) {  // another worker's result was kept: it arrives with the next sync
      t.state = before;
      t.result = {};
      t.finished_at = 0;
      return t;
    }
    if (shared_) t.worker = worker_id;  // as the store recorded it (postgres_store::finish)
  }

  ++progress_.evaluations;
  ++by_status[t.result.status];
  progress_.cost_s += t.result.cost.total();
  if (t.reported) ++reported;
  if (!t.result.ok()) ++progress_.failures;
  // An agent-reported time waits for verify() before it can be the answer.
  const bool improved = !(t.reported && options_.verify_reported) && consider_best(index);
  if (!improved) ++progress_.since_improvement;
  if (shared_) {
    unobserved.push_back(index);  // told the models when this process next proposes
  } else if (!deferred) {
    observe_models(t);
  }
  if (replaying && !shared_) return t;  // observers heard of it in the run that stored it
  auto p = progress_;
  p.wall_s = seconds_since(run_started.value_or(created));
  for (const auto& o : observers) {
    o->on_trial(t, p);
    if (improved) o->on_improvement(t, p);
  }
  return t;
}

void study::state::observe_models(const trial& t) {
  const auto started = clock::now();
  strategy_->observe(t);
  if (options_.surrogate) options_.surrogate->observe(t);
  if (options_.costs) options_.costs->observe(t);
  propose_s += seconds_since(started);
}

bool study::state::consider_best(std::size_t index) {
  const auto& t = trials[index];
  // A multi-fidelity screen's objective is a prediction: never the best.
  if (!t.result.ok() || t.result.low_fidelity() ||
      (progress_.best && t.result.objective >= *progress_.best))
    return false;
  progress_.best = t.result.objective;
  best_index = index;
  evaluations_to_best = progress_.evaluations;
  progress_.since_improvement = 0;
  return true;
}

void study::state::reverify(std::size_t index) {
  auto& t = trials[index];
  measurement m;
  try {
    m = backend_->evaluate(space_, t.config);
  } catch (const std::exception& e) {
    m = measurement::failure(status::runtime_error, std::string("backend threw: ") + e.what());
  }
  m.metrics["reported_objective"] = t.result.objective;
  if (!m.ok())
    m.message =
        fmt::format("agent reported {:g}, but re-measured: {}", t.result.objective, m.message);
  --by_status[t.result.status];
  if (by_status[t.result.status] == 0) by_status.erase(t.result.status);
  ++by_status[m.status];
  if (!m.ok()) ++progress_.failures;
  progress_.cost_s += m.cost.total();
  t.result = m;
  t.reported = false;
  --reported;
  ++verified;
  save(t);
  if (consider_best(index))
    for (const auto& o : observers) o->on_improvement(t, progress_);
}

void study::state::append_stored(trial t, bool requeue) {
  if (t.id != trials.size() + 1)
    throw error(
        fmt::format("study '{}': trial ids are not contiguous at {}", db_->location(), t.id));
  const bool done = t.state == trial_state::finished;
  const auto result = t.result;
  count_tokens(t.provenance.source, t.provenance.tokens, 1);
  t.state = trial_state::proposed;
  t.result = {};
  by_key.emplace(t.key, trials.size());
  trials.push_back(std::move(t));
  if (done) {
    finish(trials.size() - 1, result, /*replaying=*/true);
  } else if (requeue) {
    interrupted.push_back(trials.size() - 1);  // proposed or running when the process died
  }
}

// --- study ----------------------------------------------------------------------

study::study(tessel::space s, std::shared_ptr<backend> b, std::unique_ptr<strategy> st, options o,
             std::shared_ptr<study_store> db)
    : state_(std::make_unique<state>(std::move(s), std::move(b), std::move(st), o, std::move(db))) {
}
study::~study() = default;
study::study(study&&) noexcept = default;
study& study::operator=(study&&) noexcept = default;

std::vector<std::size_t> study::state::choose(std::size_t n) {
  std::vector<std::size_t> out;
  while (out.size() < n && !interrupted.empty()) {
    out.push_back(interrupted.front());
    interrupted.pop_front();
  }
  if (out.size() == n) return out;
  if (!baseline_considered) {
    baseline_considered = true;
    if (options_.evaluate_baseline)
      if (auto base = space_.default_config(); base && !known(space_.key(*base)))
        queue.push_front(add_trial(*base, {"baseline", 0, "the space's default config"}));
  }
  for (auto index : scheduler_->select(*this, n - out.size())) out.push_back(index);
  return out;
}

std::vector<suggestion> study::ask(std::size_t n) {
  auto& s = *state_;
  s.one_process("ask");
  s.settle();
  std::vector<suggestion> out;
  for (auto index : s.choose(n)) out.push_back(s.start(index));
  return out;
}

const trial& study::tell(std::uint64_t trial_id, const measurement& m, double tokens) {
  auto& s = *state_;
  s.one_process("tell");
  s.settle();
  if (trial_id == 0 || trial_id > s.trials.size())
    throw error(fmt::format("tell: unknown trial id {}", trial_id));
  const auto index = trial_id - 1;
  if (s.trials[index].state == trial_state::finished)
    throw error(fmt::format("tell: trial {} is already finished", trial_id));
  if (s.trials[index].state == trial_state::proposed)
    throw error(fmt::format("tell: trial {} was queued but not asked for yet", trial_id));
  if (!(tokens >= 0) || !std::isfinite(tokens))
    throw error(fmt::format("tell: tokens must be finite and >= 0, got {}", tokens));
  auto& t = s.trials[index];
  t.reported = true;
  t.provenance.tokens += tokens;
  s.count_tokens(t.provenance.source, tokens, 0);
  return s.finish(index, m);
}

std::optional<std::uint64_t> study::enqueue(const config& c, provenance source) {
  auto& s = *state_;
  s.one_process("enqueue");
  s.settle();
  if (const auto why = s.space_.why_invalid(c); !why.empty())
    throw error("enqueue: config is not valid: " + why);
  if (s.known(s.space_.key(c))) return std::nullopt;
  const auto index = s.add_trial(c, std::move(source));
  s.queue.push_back(index);
  return s.trials[index].id;
}

const trial& study::evaluate(const config& c, provenance source) {
  auto& s = *state_;
  s.one_process("evaluate");
  s.settle();
  if (!s.prepared) {
    s.backend_->prepare(s.space_);
    s.prepared = true;
  }
  // A config measured already is not measured twice, unless only an agent
  // reported it: then evaluating it is verifying it.
  if (const auto it = s.by_key.find(s.space_.key(c));
      it != s.by_key.end() && s.trials[it->second].state == trial_state::finished) {
    if (s.trials[it->second].reported) s.reverify(it->second);
    return s.trials[it->second];
  }
  std::size_t index = 0;
  if (const auto it = s.by_key.find(s.space_.key(c)); it != s.by_key.end()) {
    index = it->second;
    std::erase(s.queue, index);
    std::erase(s.interrupted, index);
  } else {
    if (const auto why = s.space_.why_invalid(c); !why.empty())
      throw error("evaluate: config is not valid: " + why);
    index = s.add_trial(c, std::move(source));
  }
  s.start(index);
  measurement m;
  try {
    m = s.backend_->evaluate(s.space_, c);
  } catch (const std::exception& e) {
    m = measurement::failure(status::runtime_error, std::string("backend threw: ") + e.what());
    s.finish(index, m);
    if (s.options_.rethrow_exceptions) throw;
    return s.trials[index];
  }
  return s.finish(index, m);
}

std::size_t study::verify(std::size_t max) {
  auto& s = *state_;
  s.one_process("verify");
  s.settle();
  std::vector<std::size_t> candidates;
  for (std::size_t i = 0; i < s.trials.size(); ++i) {
    const auto& t = s.trials[i];
    if (t.reported && t.state == trial_state::finished && t.result.ok()) candidates.push_back(i);
  }
  std::stable_sort(candidates.begin(), candidates.end(), [&](std::size_t a, std::size_t b) {
    return s.trials[a].result.objective < s.trials[b].result.objective;
  });
  if (!s.prepared && !candidates.empty()) {
    s.backend_->prepare(s.space_);
    s.prepared = true;
  }
  std::size_t done = 0;
  for (auto index : candidates) {
    if (done == max) break;
    if (s.progress_.best && s.trials[index].result.objective >= *s.progress_.best) break;
    s.reverify(index);
    ++done;
  }
  return done;
}

prediction study::predict(const config& c, const provenance& source) const {
  state_->settle();
  return state_->scheduler_->predict(*state_, c, source);
}

summary study::run(const stop_condition& until) {
  auto& s = *state_;
  if (s.shared_) return s.run_shared(until);
  const auto started = clock::now();
  const double wall_before = s.run_wall_s;
  s.run_started = started;
  if (s.deferred) s.begin_replay();
  if (!s.prepared) {
    s.backend_->prepare(s.space_);
    s.prepared = true;
  }
  const std::size_t jobs =
      s.options_.jobs ? s.options_.jobs : std::max<std::size_t>(1, s.backend_->concurrency());
  // The proposals in flight at once. A fixed window (not the thread count)
  // makes the trials the same at any --jobs: proposal k is made knowing the
  // results of the first k - window trials, whatever number of threads
  // evaluates them (docs/scheduler.md, "Reproducible by default").
  const std::size_t window = s.options_.window ? s.options_.window : jobs;
  s.jobs_used = std::min(jobs, window);
  auto progress_now = [&] {
    auto p = s.progress_;
    p.wall_s = seconds_since(started);
    return p;
  };
  struct in_flight {
    std::size_t index;
    measurement result;
    bool replayed = false;  ///< its stored result (begin_replay), not evaluated
    std::exception_ptr error;
    std::shared_ptr<detail::evaluation_pool::job> job;
  };
  std::deque<std::unique_ptr<in_flight>> flight;
  std::exception_ptr to_rethrow;
  enum class stop : unsigned char { none, condition, negligible, empty } stopping = stop::none;
  {
    detail::evaluation_pool pool(s.jobs_used);
    while (true) {
      // Fill the window: one proposal at a time, so the proposals do not
      // depend on how many are asked at once.
      while (stopping == stop::none && !to_rethrow && flight.size() < window) {
        const auto p = progress_now();
        if (until(p)) {
          stopping = stop::condition;
          break;
        }
        const auto left = until.evaluations_left(p);
        if (left && *left <= flight.size()) break;
        s.run_spent = until.spent(p);
        s.run_budget = left ? std::optional(p.evaluations + *left) : std::nullopt;
        if (s.options_.verify_reported) verify(1);
        const auto batch = ask(1);
        if (batch.empty()) {
          // The strategy may propose again once the results in flight are told.
          if (flight.empty()) stopping = s.negligible ? stop::negligible : stop::empty;
          break;
        }
        auto f = std::make_unique<in_flight>();
        f->index = batch.front().trial_id - 1;
        if (const auto stored = s.replay_results.find(f->index); stored != s.replay_results.end()) {
          f->result = stored->second;
          f->replayed = true;
          s.replay_results.erase(stored);
          flight.push_back(std::move(f));
          continue;
        }
        auto* slot = f.get();
        const auto c = batch.front().config;
        f->job = pool.submit([&s, slot, c] {
          try {
            slot->result = s.backend_->evaluate(s.space_, c);
          } catch (const std::exception& e) {
            slot->result = measurement::failure(status::runtime_error,
                                                std::string("backend threw: ") + e.what());
            slot->error = std::current_exception();
          } catch (...) {
            slot->result = measurement::failure(status::runtime_error,
                                                "backend threw a non-standard exception");
            slot->error = std::current_exception();
          }
        });
        flight.push_back(std::move(f));
      }
      if (flight.empty()) break;
      // Told in proposal order, whatever order the threads finish in.
      const auto eval_started = clock::now();
      if (flight.front()->job) pool.wait(flight.front()->job);
      s.evaluate_s += seconds_since(eval_started);
      auto done = std::move(flight.front());
      flight.pop_front();
      s.finish(done->index, done->result, done->replayed);
      if (s.options_.rethrow_exceptions && done->error && !to_rethrow) to_rethrow = done->error;
    }
  }
  if (s.in_replay) s.diverge();  // stopped before every stored trial came up again
  s.run_wall_s = wall_before + seconds_since(started);
  s.run_started.reset();
  s.run_spent.reset();
  s.run_budget.reset();
  if (to_rethrow) std::rethrow_exception(to_rethrow);
  return s.end_run(stopping == stop::condition    ? state::run_end::condition
                   : stopping == stop::negligible ? state::run_end::negligible
                                                  : state::run_end::empty,
                   until, progress_now());
}

summary study::state::end_run(run_end how, const stop_condition& until, const progress& p) {
  if (how == run_end::condition) {
    last_reason = until.kind(p);
    last_message = until.reason(p);
  } else if (how == run_end::negligible) {
    last_reason = termination::negligible_gain;
    last_message = fmt::format("the best expected gain left is below {:g} of the incumbent",
                               options_.min_gain_fraction);
  } else {
    const bool exhausted = progress_.evaluations >= space_.count();
    last_reason = exhausted ? termination::space_exhausted : termination::strategy_done;
    last_message =
        exhausted ? fmt::format("all {} valid configs evaluated", space_.count())
                  : fmt::format("strategy '{}' has nothing more to propose", strategy_->name());
  }
  auto result = make_summary();
  for (const auto& o : observers) o->on_end(result);
  return result;
}

void study::add_observer(std::shared_ptr<observer> o) {
  if (o) state_->observers.push_back(std::move(o));
}

const trial* study::best() const { return state_->best(); }
const std::vector<trial>& study::trials() const { return state_->trials; }
summary study::current_summary() const { return state_->make_summary(); }
const tessel::space& study::space() const { return state_->space_; }
const study::options& study::opts() const { return state_->options_; }
std::uint64_t study::worker_id() const { return state_->worker_id; }

}  // namespace tessel
