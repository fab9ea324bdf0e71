// `auto`: OpenTuner's AUC bandit meta-technique (Ansel et al., PACT 2014)
// over other strategies. Each proposal slot goes to the arm the bandit
// selects (auc_bandit.hpp); the arm's result is whether that proposal became
// a new global best. An arm with nothing to propose records a result of no
// improvement, as OpenTuner's on_technique_no_desired_result does.
#include "strategies/auto.hpp"

#include "strategies/common.hpp"
#include "strategies/interaction_groups.hpp"

#include <tessel/error.hpp>

#include <algorithm>
#include <cmath>
#include <set>

namespace tessel {

namespace {

constexpr std::string_view where = "auto_options";

void validate_bandit(const auto_options& o) {
  if (!(o.exploration >= 0) || !std::isfinite(o.exploration))
    detail::options_failure(where, "exploration",
                            "must be finite and >= 0" + detail::got(o.exploration));
  if (o.window == 0)
    detail::options_failure(where, "window", "must be at least 1" + detail::got(o.window));
}

/// Arm names must be distinct: they are what proposals are credited to.
void validate_distinct(const std::vector<std::string>& names) {
  std::set<std::string, std::less<>> seen;
  for (std::size_t i = 0; i < names.size(); ++i)
    if (!seen.insert(names[i]).second)
      detail::options_failure(where, "arms[" + std::to_string(i) + "]",
                              "repeats '" + names[i] + "'");
}

void validate_rules(const auto_options& o) {
  if (!(o.explore_rejected >= 0 && o.explore_rejected <= 1))
    detail::options_failure(where, "explore_rejected",
                            "must be in [0, 1]" + detail::got(o.explore_rejected));
  if (o.explore_horizon == 0)
    detail::options_failure(where, "explore_horizon",
                            "must be at least 1" + detail::got(o.explore_horizon));
  if (!(o.interaction_threshold >= 0) || !std::isfinite(o.interaction_threshold))
    detail::options_failure(where, "interaction_threshold",
                            "must be finite and >= 0" + detail::got(o.interaction_threshold));
}

/// `arms`, plus the `groups` arm when the options ask for it.
std::vector<std::unique_ptr<strategy>> with_groups(const auto_options& o,
                                                   std::vector<std::unique_ptr<strategy>> arms) {
  if (o.interaction_groups)
    arms.push_back(detail::make_interaction_search(o.interaction_threshold));
  return arms;
}

}  // namespace

void auto_options::validate() const {
  if (arms.empty()) detail::options_failure(where, "arms", "must name at least one strategy");
  const auto known = strategy_names();
  for (std::size_t i = 0; i < arms.size(); ++i) {
    const std::string field = "arms[" + std::to_string(i) + "]";
    if (arms[i] == "auto") detail::options_failure(where, field, "must not be 'auto' itself");
    if (std::find(known.begin(), known.end(), arms[i]) == known.end())
      detail::options_failure(where, field, detail::unknown_strategy(arms[i]));
  }
  validate_distinct(arms);
  validate_bandit(*this);
  validate_rules(*this);
}

namespace detail {
namespace {

/// The study's context, plus the configs already in this batch and those
/// the learned rules vetoed as known, so arms never propose what another arm
/// just did, nor a vetoed config again.
class batch_context final : public forwarding_context {
 public:
  batch_context(const search_context& base, const batch& b,
                const std::unordered_set<std::uint64_t>& vetoed)
      : forwarding_context(base), batch_(b), vetoed_(vetoed) {}
  [[nodiscard]] bool known(std::uint64_t key) const override {
    return !batch_.fresh(key) || vetoed_.contains(key);
  }

 private:
  const batch& batch_;
  const std::unordered_set<std::uint64_t>& vetoed_;
};

}  // namespace

auto_search::auto_search(auto_options options, std::vector<std::unique_ptr<strategy>> arms)
    : options_(std::move(options)), arms_(std::move(arms)) {
  for (const auto& arm : arms_) names_.push_back(arm->name());
  bandit_ = auc_bandit(arms_.size(), options_.window, options_.exploration);
}

void auto_search::start(const space& s, std::uint64_t seed) {
  rng streams(seed);
  for (auto& arm : arms_) arm->start(s, streams());
  random_ = streams.split();
  bandit_ = auc_bandit(arms_.size(), options_.window, options_.exploration);
  best_ = std::numeric_limits<double>::infinity();
  proposed_ = 0;
  owner_.clear();
  vetoed_.clear();
  observed_ = 0;
  rules_.reset();
  if (options_.learn_constraints) rules_.emplace(s);
}

bool auto_search::veto(const config& c) {
  if (!rules_ || rules_->rejecting_support(c) == 0) return false;
  const double horizon = static_cast<double>(options_.explore_horizon);
  const double explore =
      options_.explore_rejected * horizon / (horizon + static_cast<double>(observed_));
  return random_.uniform01() >= explore;
}

/// One slot at a time: the bandit picks an arm (counting this batch's
/// earlier picks as uses awaiting results), the arm proposes one config
/// unknown to the study and to this batch. An arm that proposes nothing is
/// skipped for the rest of the batch; the batch ends short only when every
/// arm came up empty.
std::vector<config> auto_search::propose(std::size_t n, const search_context& context) {
  batch b(context, n);
  const batch_context view(context, b, vetoed_);
  std::vector<std::size_t> picks(arms_.size(), 0);
  std::vector<bool> dry(arms_.size(), false);
  std::size_t vetoes = 0;  // in this slot
  while (!b.full()) {
    const auto arm = proposed_ < options_.lead && !dry[0] ? std::optional<std::size_t>(0)
                                                          : bandit_.select(random_, picks, dry);
    if (!arm) break;
    bool added = false, vetoed = false;
    for (const auto& c : arms_[*arm]->propose(1, view)) {
      if (vetoes < options_.max_vetoes && !arms_[*arm]->weighs_learned_constraints() &&
          view.known(context.space().key(c)) == false && veto(c)) {
        vetoed_.insert(context.space().key(c));
        ++vetoes;
        vetoed = true;
        continue;
      }
      if (auto key = b.add(c)) {
        owner_[*key] = *arm;
        ++picks[*arm];
        ++proposed_;
        added = true;
        vetoes = 0;
      }
    }
    if (vetoed && !added) continue;  // the same slot again, the veto counted
    if (!added) {
      dry[*arm] = true;
      bandit_.record(*arm, false);
    }
  }
  return b.take();
}

/// Every arm observes every trial; the arm that proposed it (if any)
/// records whether it beat the best objective observed before it.
void auto_search::observe(const trial& t) {
  for (auto& arm : arms_) arm->observe(t);
  if (rules_) rules_->observe(t);
  ++observed_;
  const double score = score_of(t);
  const bool improved = score < best_;
  if (improved) best_ = score;
  if (auto arm = arm_of(t)) bandit_.record(*arm, improved);
}

std::optional<std::size_t> auto_search::arm_of(const trial& t) {
  if (auto it = owner_.find(t.key); it != owner_.end()) {
    const auto arm = it->second;
    owner_.erase(it);
    return arm;
  }
  // Not ours in this run; a resumed study replays "auto/<arm>[/...]" from its records.
  constexpr std::string_view prefix = "auto/";
  const std::string_view source = t.provenance.source;
  if (!source.starts_with(prefix)) return std::nullopt;
  const auto rest = source.substr(prefix.size());
  const auto it = std::find(names_.begin(), names_.end(), rest.substr(0, rest.find('/')));
  if (it == names_.end()) return std::nullopt;
  return static_cast<std::size_t>(it - names_.begin());
}

std::string auto_search::source_of(std::uint64_t key) const {
  const auto it = owner_.find(key);
  return it == owner_.end() ? name() : "auto/" + arms_[it->second]->source_of(key);
}

}  // namespace detail

std::unique_ptr<strategy> make_auto_strategy(const auto_options& options) {
  options.validate();
  std::vector<std::unique_ptr<strategy>> arms;
  for (const auto& name : options.arms) arms.push_back(make_strategy(name));
  return std::make_unique<detail::auto_search>(options, with_groups(options, std::move(arms)));
}

std::unique_ptr<strategy> make_auto_strategy(const auto_options& options,
                                             std::vector<std::unique_ptr<strategy>> arms) {
  if (arms.empty()) detail::options_failure(where, "arms", "must hold at least one strategy");
  arms = with_groups(options, std::move(arms));
  std::vector<std::string> names;
  for (const auto& arm : arms) {
    if (!arm) detail::options_failure(where, "arms", "must not hold a null strategy");
    names.push_back(arm->name());
  }
  validate_distinct(names);
  validate_bandit(options);
  validate_rules(options);
  return std::make_unique<detail::auto_search>(options, std::move(arms));
}
}  // namespace tessel
