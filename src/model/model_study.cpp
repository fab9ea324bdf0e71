// model_study (tessel/model.hpp): one budget across a model's kernel studies.
// Each step asks every kernel study without a pending candidate for one
// (study::ask, so the study's own strategy and scheduler choose it), scores
// the pending candidates by the policy, and evaluates the chosen kernel's
// (study::evaluate). The others keep theirs: nothing they know changed.
#include <tessel/error.hpp>
#include <tessel/model.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <set>

namespace tessel {
namespace {

std::size_t finished_trials(const study& s) {
  return static_cast<std::size_t>(
      std::count_if(s.trials().begin(), s.trials().end(),
                    [](const trial& t) { return t.state == trial_state::finished; }));
}

double cost_of(const study& s) {
  double total = 0;
  for (const auto& t : s.trials())
    if (t.state == trial_state::finished) total += t.result.cost.total();
  return total;
}

/// The first trial that could be a best (ok, measured at full fidelity).
const trial* first_ok(const study& s) {
  for (const auto& t : s.trials())
    if (t.state == trial_state::finished && t.result.ok() && !t.result.low_fidelity()) return &t;
  return nullptr;
}

/// How far a study's predictions of gain have come true: the gains its
/// finished trials realised (how much each lowered the best) over the gains
/// the scheduler expected of them, with two pseudo-observations at 1 so that
/// a short record moves it little. Read from the trials, so a resumed study
/// keeps its record.
double calibration(const study& s) {
  double predicted = 0, realised = 0;
  std::size_t n = 0;
  std::optional<double> best;
  for (const auto& t : s.trials()) {
    if (t.state != trial_state::finished) continue;
    const bool counted = t.result.ok() && !t.result.low_fidelity();
    if (best && t.prediction && std::isfinite(t.prediction->expected_gain)) {
      predicted += t.prediction->expected_gain;
      realised += counted ? std::max(0.0, *best - t.result.objective) : 0.0;
      ++n;
    }
    if (counted && (!best || t.result.objective < *best)) best = t.result.objective;
  }
  if (n == 0 || !(predicted > 0)) return 1.0;
  const double prior = 2.0 * predicted / static_cast<double>(n);
  return (realised + prior) / (predicted + prior);
}

double metric_or(const measurement& m, const char* name, double fallback) {
  const auto it = m.metrics.find(name);
  return it == m.metrics.end() ? fallback : it->second;
}

}  // namespace

std::string_view to_string(allocation a) noexcept {
  switch (a) {
    case allocation::utility: return "utility";
    case allocation::even: return "even";
    case allocation::share: return "share";
  }
  return "?";
}

std::optional<allocation> parse_allocation(std::string_view name) noexcept {
  for (auto a : {allocation::utility, allocation::even, allocation::share})
    if (to_string(a) == name) return a;
  return std::nullopt;
}

void model_study_options::validate() const {
  if (policy != allocation::utility && policy != allocation::even && policy != allocation::share)
    throw options_error("model_study::options::policy", "not an allocation (utility, even, share)");
  if (first_result_tries == 0)
    throw options_error("model_study::options::first_result_tries", "must be at least 1");
  if (!(floor_fraction >= 0 && floor_fraction <= 1))
    throw options_error("model_study::options::floor_fraction",
                        fmt::format("must be from 0 to 1, not {}", floor_fraction));
}

struct model_study::state {
  std::vector<model_member> members;
  options opts;
  std::vector<std::optional<suggestion>> pending;  ///< asked, not yet evaluated
  std::vector<bool> done;                          ///< the study has nothing more to propose
  std::vector<std::optional<double>> scores;       ///< the last utility score of each pending
  std::vector<std::shared_ptr<model_observer>> observers;

  /// Asks every kernel that has no pending candidate for one.
  void fill() {
    for (std::size_t i = 0; i < members.size(); ++i) {
      if (done[i] || pending[i]) continue;
      auto asked = members[i].study->ask(1);
      if (asked.empty()) {
        done[i] = true;
      } else {
        pending[i] = std::move(asked.front());
      }
    }
  }

  /// calls x expected gain / cost of kernel i's pending candidate: the gain
  /// its study predicts, scaled by how far its predictions have come true,
  /// and capped at what is left above the roofline of its best.
  double utility(std::size_t i) const {
    const auto& s = *members[i].study;
    const auto& p = *pending[i];
    const auto predicted = p.prediction ? *p.prediction : s.predict(p.config, p.provenance);
    double gain = std::isfinite(predicted.expected_gain) ? predicted.expected_gain : 0.0;
    gain *= calibration(s);
    if (const auto* best = s.best()) {
      const double roofline = metric_or(best->result, "roofline_s", 0.0);
      if (roofline > 0) gain = std::min(gain, std::max(0.0, best->result.objective - roofline));
    }
    const double cost = opts.cost_is_seconds ? std::max(predicted.cost_s, 1e-12) : 1.0;
    return static_cast<double>(members[i].calls) * std::max(0.0, gain) / cost;
  }

  /// The kernel the policy gives the next evaluation, among those with a
  /// pending candidate.
  std::optional<std::size_t> choose() {
    std::vector<std::size_t> open;
    for (std::size_t i = 0; i < members.size(); ++i)
      if (pending[i]) open.push_back(i);
    if (open.empty()) return std::nullopt;
    // Every kernel first gets a result: the step time is unknown without one.
    for (auto i : open) {
      const auto& s = *members[i].study;
      if (!first_ok(s) && finished_trials(s) < opts.first_result_tries) return i;
    }
    auto fewest = [&](auto&& weight) {
      std::optional<std::size_t> pick;
      double pick_load = 0;
      for (auto i : open) {
        const double w = weight(i);
        if (!(w > 0)) continue;
        const double load = static_cast<double>(finished_trials(*members[i].study)) / w;
        if (!pick || load < pick_load) pick = i, pick_load = load;
      }
      return pick ? pick : std::optional<std::size_t>(open.front());
    };
    switch (opts.policy) {
      case allocation::even: return fewest([](std::size_t) { return 1.0; });
      case allocation::share: {
        const auto first = first_step_of();
        return fewest([&](std::size_t i) { return first.kernels[i].share; });
      }
      case allocation::utility: break;
    }
    // Every kernel first gets its floor, the fewest evaluations first.
    std::optional<std::size_t> below;
    for (auto i : open) {
      const auto& st = *members[i].study;
      const double floor = opts.floor_fraction * static_cast<double>(st.opts().budget_hint);
      if (static_cast<double>(finished_trials(st)) < std::ceil(floor) &&
          (!below || finished_trials(st) < finished_trials(*members[*below].study)))
        below = i;
    }
    if (below) return below;
    std::optional<std::size_t> pick;
    for (auto i : open) {
      scores[i] = utility(i);
      if (!pick || *scores[i] > *scores[*pick]) pick = i;
    }
    // No kernel expects a gain: spread what is left evenly.
    if (!(*scores[*pick] > 0)) return fewest([](std::size_t) { return 1.0; });
    return pick;
  }

  [[nodiscard]] step_breakdown step_with(const trial* (*pick)(const tessel::study&)) const {
    std::vector<kernel_result> rows;
    for (const auto& m : members) {
      const trial* t = pick(*m.study);
      rows.push_back({m.name, m.calls, t ? &t->result : nullptr});
    }
    return step_of(rows);
  }
  [[nodiscard]] step_breakdown first_step_of() const { return step_with(&first_ok); }
  [[nodiscard]] step_breakdown best_step_of() const {
    return step_with([](const tessel::study& s) { return s.best(); });
  }

  [[nodiscard]] std::optional<double> step_now() const {
    const auto b = best_step_of();
    if (!b.untimed.empty()) return std::nullopt;
    return b.step_s;
  }
};

model_study::model_study(std::vector<model_member> members, options o)
    : state_(std::make_unique<state>()) {
  o.validate();
  if (members.empty()) throw error("model_study: a model needs at least one kernel");
  std::set<std::string> names;
  for (const auto& m : members) {
    if (!m.study) throw error(fmt::format("model_study: kernel '{}' has no study", m.name));
    if (m.calls < 1)
      throw error(fmt::format("model_study: kernel '{}' runs {} times per step; at least 1", m.name,
                              m.calls));
    if (!names.insert(m.name).second)
      throw error(fmt::format("model_study: two kernels are named '{}'", m.name));
  }
  // A kernel's step time before tuning is its default config's; where the
  // default is not valid at the kernel's shapes, the space's first valid
  // config stands in (as `tessel model` times it), not whatever comes first.
  for (auto& m : members) {
    auto& st = *m.study;
    if (st.trials().empty() && st.opts().evaluate_baseline && !st.space().default_config() &&
        st.space().count() > 0)
      (void)st.enqueue(
          st.space().at(0),
          {"baseline", 0, "the space's first valid config (its default is not valid)"});
  }
  auto& s = *state_;
  s.members = std::move(members);
  s.opts = o;
  s.pending.resize(s.members.size());
  s.done.resize(s.members.size(), false);
  s.scores.resize(s.members.size());
}

model_study::~model_study() = default;
model_study::model_study(model_study&&) noexcept = default;
model_study& model_study::operator=(model_study&&) noexcept = default;

std::optional<std::size_t> model_study::step() {
  auto& s = *state_;
  s.fill();
  const auto chosen = s.choose();
  if (!chosen) return std::nullopt;
  auto candidate = std::move(*s.pending[*chosen]);
  s.pending[*chosen].reset();
  const trial& t = s.members[*chosen].study->evaluate(candidate.config, candidate.provenance);
  const auto now = s.step_now();
  for (const auto& o : s.observers) o->on_evaluation(*chosen, t, now);
  return chosen;
}

model_summary model_study::run(std::size_t evaluations, double cost_s) {
  std::string stopped;
  while (true) {
    const auto summary = current_summary();
    if (evaluations > 0 && summary.evaluations >= evaluations) {
      stopped = fmt::format("{} evaluations done", evaluations);
      break;
    }
    if (cost_s > 0 && summary.cost_s >= cost_s) {
      stopped = fmt::format("{:g} s of evaluation cost spent", cost_s);
      break;
    }
    if (!step()) {
      stopped = "no kernel has anything left to evaluate";
      break;
    }
  }
  auto out = current_summary();
  out.stopped = std::move(stopped);
  return out;
}

void model_study::add_observer(std::shared_ptr<model_observer> o) {
  if (o) state_->observers.push_back(std::move(o));
}

std::size_t model_study::size() const { return state_->members.size(); }
const model_member& model_study::member(std::size_t i) const { return state_->members.at(i); }
study& model_study::kernel_study(std::size_t i) { return *state_->members.at(i).study; }
const model_study::options& model_study::opts() const { return state_->opts; }
step_breakdown model_study::best_step() const { return state_->best_step_of(); }
step_breakdown model_study::first_step() const { return state_->first_step_of(); }

model_summary model_study::current_summary() const {
  const auto& s = *state_;
  model_summary out;
  bool all_first = true, all_best = true;
  double before = 0, after = 0;
  for (std::size_t i = 0; i < s.members.size(); ++i) {
    const auto& m = s.members[i];
    kernel_progress k;
    k.name = m.name;
    k.calls = m.calls;
    k.evaluations = finished_trials(*m.study);
    k.cost_s = cost_of(*m.study);
    k.first = first_ok(*m.study);
    k.best = m.study->best();
    k.done = s.done[i];
    k.last_score = s.scores[i];
    const auto calls = static_cast<double>(m.calls);
    if (k.first)
      before += calls * k.first->result.objective;
    else
      all_first = false;
    if (k.best)
      after += calls * k.best->result.objective;
    else
      all_best = false;
    out.evaluations += k.evaluations;
    out.cost_s += k.cost_s;
    out.kernels.push_back(std::move(k));
  }
  if (all_first) out.before_s = before;
  if (all_best) out.after_s = after;
  return out;
}

}  // namespace tessel
