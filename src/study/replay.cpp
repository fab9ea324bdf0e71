// A resumed study's replay: run() proposes again from the start and takes
// each stored trial's result when its config comes up in its place, so the
// strategy, the scheduler's pool, the surrogate, the cost model and every
// random stream stand where the run that stored them stood, and the trials
// after a resume are those of one uninterrupted run (docs/driver.md,
// "Resuming").
#include "study/state.hpp"

namespace tessel {

void study::state::resume(std::vector<trial> stored) {
  // A shared study's trials come and go with its store (shared_run.cpp).
  deferred = !shared_ && !stored.empty();
  if (deferred) replay_ = stored;
  for (auto& t : stored) append_stored(std::move(t), /*requeue=*/!shared_);
  baseline_considered = !trials.empty();
}

void study::state::settle() {
  if (!deferred) return;
  deferred = false;
  replay_.clear();
  for (const auto& t : trials)
    if (t.state == trial_state::finished) observe_models(t);
}

void study::state::begin_replay() {
  deferred = false;
  in_replay = true;
  replay_next = 0;
  trials.clear();
  by_key.clear();
  queue.clear();
  interrupted.clear();
  pool.clear();
  pool_keys.clear();
  negligible = false;
  gittins_lambda.reset();
  best_index.reset();
  progress_ = {};
  by_status.clear();
  evaluations_to_best = 0;
  tokens_by_source.clear();
  reported = verified = 0;
  baseline_considered = false;
}

std::optional<std::size_t> study::state::replay_one(const config& c) {
  if (replay_next < replay_.size() && replay_[replay_next].key != space_.key(c)) diverge();
  if (!in_replay) return std::nullopt;
  auto t = std::move(replay_[replay_next++]);
  if (t.state == trial_state::finished) replay_results.emplace(trials.size(), t.result);
  // One a killed run left unfinished is evaluated again, in its place.
  t.state = trial_state::proposed;
  t.result = {};
  count_tokens(t.provenance.source, t.provenance.tokens, 1);
  by_key.emplace(t.key, trials.size());
  trials.push_back(std::move(t));
  if (replay_next == replay_.size()) {  // every stored trial is back: the run goes on
    in_replay = false;
    replay_.clear();
  }
  return trials.size() - 1;
}

void study::state::diverge() {
  in_replay = false;
  for (auto i = replay_next; i < replay_.size(); ++i)
    append_stored(std::move(replay_[i]), /*requeue=*/true);
  replay_.clear();
}

}  // namespace tessel
