// constraint_learner: axis-aligned rules that separate one kind of failure
// from every success (tessel/constraints.hpp). Candidate conditions are
// thresholds on a parameter, on the product of two integer parameters or on
// a permutation element's position, a parameter equal to one value, and
// non-divisibility (a % b != 0, a % (b * c) != 0): the shapes of the
// restrictions GPU and NeuronCore kernels declare (block sizes times tile
// sizes under a limit, tiles dividing work-group sizes). Rules are chosen by
// greedy set cover of the failures (the separate-and-conquer idea of rule
// learners such as RIPPER, Cohen 1995), each covering no success, and kept
// only when that is unlikely to be chance: with a fraction p of successes
// among the labelled trials, k failures in a row with no success has
// probability (1 - p)^k, which must be under 5%.
#include "strategies/common.hpp"

#include <tessel/constraints.hpp>
#include <tessel/error.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <optional>

namespace tessel {
namespace {

constexpr double nan = std::numeric_limits<double>::quiet_NaN();
constexpr double chance_level = 0.05;

enum class feature_kind : unsigned char { value, position, product, modulo };
enum class test : unsigned char { at_least, at_most, equal, not_divisible };

struct feature {
  feature_kind kind = feature_kind::value;
  std::vector<std::size_t> params;  ///< value/position: 1; product: 2; modulo: 2 or 3
  std::size_t element = 0;          ///< position: the permutation element
  std::string text;                 ///< "MDIMC * NDIMC", "MWG % (MDIMC * VWM)"
  bool categorical = false;         ///< symbols and booleans: equality tests only
};

/// A parameter holding one value: the context of a conditional rule.
struct context {
  std::size_t feature = 0;
  double value = 0;
};

struct rule {
  std::size_t feature = 0;
  test kind = test::at_least;
  double threshold = 0;
  std::size_t support = 0;
  learned_constraint shown;
  std::optional<context> when;  ///< the rule holds only where this parameter has this value
};

std::string number(double v) {
  if (std::abs(v) < 9e15 && v == std::floor(v)) return fmt::format("{}", std::int64_t(v));
  return fmt::format("{:g}", v);
}

std::string percent(std::size_t part, std::size_t whole) {
  if (part == 0) return "none";
  if (part == whole) return "all";
  return fmt::format("{:.0f}%", 100.0 * static_cast<double>(part) / static_cast<double>(whole));
}

}  // namespace

std::string learned_constraint::line() const {
  return fmt::format("require {}   # rejects {} of the {} {} failures, {} of the {} successes",
                     require, percent(failures_rejected, failures), failures, to_string(kind),
                     percent(successes_rejected, successes), successes);
}

void constraint_learner_options::validate() const {
  constexpr std::string_view where = "constraint_learner_options";
  if (min_support == 0)
    detail::options_failure(where, "min_support", "must be at least 1" + detail::got(min_support));
  if (max_rules == 0)
    detail::options_failure(where, "max_rules", "must be at least 1" + detail::got(max_rules));
}

struct constraint_learner::impl {
  impl(const space& s, constraint_learner_options o) : space_(s), options_(o) {
    options_.validate();
    table_values();
    make_features();
  }

  /// values_[p][i]: what index i of parameter p is in a threshold (its
  /// integer value, 0/1, or the symbol's index).
  void table_values() {
    for (const auto& p : space_.parameters()) {
      std::vector<double> v;
      for (std::size_t i = 0; i < p.dom.size(); ++i)
        v.push_back(p.dom.kind == param_kind::integer || p.dom.kind == param_kind::boolean
                        ? static_cast<double>(p.dom.values[i])
                        : static_cast<double>(i));
      values_.push_back(std::move(v));
    }
  }

  void make_features() {
    const auto& ps = space_.parameters();
    std::vector<std::size_t> integers;
    for (std::size_t p = 0; p < ps.size(); ++p) {
      const auto& dom = ps[p].dom;
      if (dom.size() < 2) continue;
      if (dom.kind == param_kind::permutation) {
        for (std::size_t e = 0; e < dom.labels.size(); ++e)
          features_.push_back({feature_kind::position,
                               {p},
                               e,
                               fmt::format("pos({}, {})", ps[p].name, dom.labels[e]),
                               false});
        continue;
      }
      const bool categorical = dom.kind != param_kind::integer;
      features_.push_back({feature_kind::value, {p}, 0, ps[p].name, categorical});
      if (!categorical) integers.push_back(p);
    }
    auto positive = [&](std::size_t p) {
      const auto& v = ps[p].dom.values;
      return std::all_of(v.begin(), v.end(), [](std::int64_t x) { return x > 0; }) &&
             std::any_of(v.begin(), v.end(), [](std::int64_t x) { return x > 1; });
    };
    for (std::size_t i = 0; i < integers.size(); ++i)
      for (std::size_t j = i + 1; j < integers.size(); ++j)
        features_.push_back({feature_kind::product,
                             {integers[i], integers[j]},
                             0,
                             fmt::format("{} * {}", ps[integers[i]].name, ps[integers[j]].name),
                             false});
    for (auto a : integers)
      for (auto b : integers)
        if (a != b && positive(b))
          features_.push_back({feature_kind::modulo,
                               {a, b},
                               0,
                               fmt::format("{} % {}", ps[a].name, ps[b].name),
                               false});
    if (integers.size() > options_.max_params_for_triples) return;
    for (auto a : integers)
      for (std::size_t i = 0; i < integers.size(); ++i)
        for (std::size_t j = i + 1; j < integers.size(); ++j) {
          const auto b = integers[i], c = integers[j];
          if (a == b || a == c || !positive(b) || !positive(c)) continue;
          features_.push_back({feature_kind::modulo,
                               {a, b, c},
                               0,
                               fmt::format("{} % ({} * {})", ps[a].name, ps[b].name, ps[c].name),
                               false});
        }
  }

  /// The feature's value at `c`; NaN when a parameter it reads is inactive.
  [[nodiscard]] double value(const feature& f, const config& c) const {
    double v[3] = {0, 0, 0};
    for (std::size_t k = 0; k < f.params.size(); ++k) {
      const auto p = f.params[k];
      if (c[p] == config::inactive || c[p] >= values_[p].size()) return nan;
      v[k] = values_[p][c[p]];
    }
    switch (f.kind) {
      case feature_kind::value: return v[0];
      case feature_kind::position: {
        const auto order = space_.parameters()[f.params[0]].dom.permutation(c[f.params[0]]);
        const auto at = std::find(order.begin(), order.end(), f.element);
        return static_cast<double>(at - order.begin());
      }
      case feature_kind::product: return v[0] * v[1];
      case feature_kind::modulo: {
        const auto divisor = static_cast<std::int64_t>(f.params.size() == 3 ? v[1] * v[2] : v[1]);
        return divisor > 0 ? static_cast<double>(static_cast<std::int64_t>(v[0]) % divisor) : nan;
      }
    }
    return nan;
  }

  [[nodiscard]] bool matches(const rule& r, double v) const {
    if (std::isnan(v)) return false;
    switch (r.kind) {
      case test::at_least: return v >= r.threshold;
      case test::at_most: return v <= r.threshold;
      case test::equal: return v == r.threshold;
      case test::not_divisible: return v != 0;
    }
    return false;
  }

  void observe(const trial& t) {
    if (t.state != trial_state::finished) return;
    if (t.config.size() != space_.size()) return;
    std::vector<double> row(features_.size());
    for (std::size_t f = 0; f < features_.size(); ++f) row[f] = value(features_[f], t.config);
    rows_.push_back(std::move(row));
    labels_.push_back(t.result.status);
    if (rows_.size() >= next_learn_) learn();
  }

  /// A candidate: which failures of the kind it covers.
  struct candidate {
    rule r;
    std::vector<std::size_t> covered;  ///< indices into rows_
  };

  [[nodiscard]] std::string label_of(const feature& f, double v) const {
    if (!f.categorical) return number(v);
    const auto& p = space_.parameters()[f.params[0]];
    return p.dom.kind == param_kind::boolean ? (v != 0 ? "true" : "false")
                                             : p.dom.label(static_cast<std::size_t>(v));
  }

  void describe(rule& r) const {
    const auto& f = features_[r.feature];
    const auto v = label_of(f, r.threshold);
    auto& s = r.shown;
    switch (r.kind) {
      case test::at_least:
        s.condition = fmt::format("{} >= {}", f.text, v);
        s.require = fmt::format("{} < {}", f.text, v);
        break;
      case test::at_most:
        s.condition = fmt::format("{} <= {}", f.text, v);
        s.require = fmt::format("{} > {}", f.text, v);
        break;
      case test::equal:
        if (space_.parameters()[f.params[0]].dom.kind == param_kind::boolean) {
          s.condition = r.threshold != 0 ? f.text : "not " + f.text;
          s.require = r.threshold != 0 ? "not " + f.text : f.text;
        } else {
          s.condition = fmt::format("{} == {}", f.text, v);
          s.require = fmt::format("{} != {}", f.text, v);
        }
        break;
      case test::not_divisible:
        s.condition = fmt::format("{} != 0", f.text);
        s.require = fmt::format("{} == 0", f.text);
        break;
    }
    if (!r.when) return;
    const auto& w = features_[r.when->feature];
    const auto& wp = space_.parameters()[w.params[0]];
    const auto value = label_of(w, r.when->value);
    const bool boolean = wp.dom.kind == param_kind::boolean;
    const std::string is = boolean ? (r.when->value != 0 ? w.text : "not " + w.text)
                                   : fmt::format("{} == {}", w.text, value);
    const std::string is_not = boolean ? (r.when->value != 0 ? "not " + w.text : w.text)
                                       : fmt::format("{} != {}", w.text, value);
    s.condition = fmt::format("{} and {}", is, s.condition);
    s.require = fmt::format("{} or {}", is_not, s.require);
  }

  /// A parameter whose values can be the context of a rule: symbols,
  /// booleans, and integers with at most 4 values (flags such as use_shmem).
  [[nodiscard]] bool is_context(const feature& f) const {
    return f.kind == feature_kind::value &&
           (f.categorical || space_.parameters()[f.params[0]].dom.size() <= 4);
  }

  /// Every candidate rule for the failures `failed`, against `ok` (row
  /// indices), then the same within each value of a context parameter
  /// (is_context: what a GPU or NeuronCore limit often depends on, e.g.
  /// where a block lives, whether shared memory is used) that both
  /// successes and failures hold.
  [[nodiscard]] std::vector<candidate> candidates(const std::vector<std::size_t>& failed,
                                                  const std::vector<std::size_t>& ok) const {
    auto out = candidates_within(failed, ok, std::nullopt);
    for (std::size_t w = 0; w < features_.size(); ++w) {
      if (!is_context(features_[w])) continue;
      std::map<double, std::pair<std::vector<std::size_t>, std::vector<std::size_t>>> by_value;
      for (auto i : failed)
        if (!std::isnan(rows_[i][w])) by_value[rows_[i][w]].first.push_back(i);
      for (auto i : ok)
        if (!std::isnan(rows_[i][w])) by_value[rows_[i][w]].second.push_back(i);
      for (const auto& [v, sides] : by_value) {
        if (sides.first.size() < options_.min_support || sides.second.empty()) continue;
        for (auto& c : candidates_within(sides.first, sides.second, context{w, v}))
          if (c.r.feature != w) out.push_back(std::move(c));
      }
    }
    return out;
  }

  [[nodiscard]] std::vector<candidate> candidates_within(const std::vector<std::size_t>& failed,
                                                         const std::vector<std::size_t>& ok,
                                                         std::optional<context> when) const {
    std::vector<candidate> out;
    for (std::size_t f = 0; f < features_.size(); ++f) {
      const auto& feat = features_[f];
      auto cover = [&](rule r) {
        r.when = when;
        candidate c{r, {}};
        for (auto i : failed)
          if (matches(r, rows_[i][f])) c.covered.push_back(i);
        if (!c.covered.empty()) out.push_back(std::move(c));
      };
      double lo = std::numeric_limits<double>::infinity(), hi = -lo;
      bool any_ok = false, ok_divisible_only = true;
      std::vector<double> ok_values;
      for (auto i : ok) {
        const double v = rows_[i][f];
        if (std::isnan(v)) continue;
        any_ok = true;
        lo = std::min(lo, v);
        hi = std::max(hi, v);
        if (v != 0) ok_divisible_only = false;
        if (feat.categorical || feat.kind == feature_kind::value) ok_values.push_back(v);
      }
      if (!any_ok) continue;
      if (feat.kind == feature_kind::modulo) {
        if (ok_divisible_only) cover({f, test::not_divisible, 0, 0, {}, std::nullopt});
        continue;
      }
      if (feat.categorical || feat.kind == feature_kind::value) {
        std::sort(ok_values.begin(), ok_values.end());
        std::map<double, bool> tried;
        for (auto i : failed) {
          const double v = rows_[i][f];
          if (std::isnan(v) || tried.count(v)) continue;
          tried[v] = true;
          if (!std::binary_search(ok_values.begin(), ok_values.end(), v))
            cover({f, test::equal, v, 0, {}, std::nullopt});
        }
      }
      if (feat.categorical) continue;
      // The nearest failing values beyond the successes' range: the rule
      // rejects only as far as failures were seen.
      double above = std::numeric_limits<double>::infinity(), below = -above;
      for (auto i : failed) {
        const double v = rows_[i][f];
        if (v > hi) above = std::min(above, v);
        if (v < lo) below = std::max(below, v);
      }
      if (std::isfinite(above)) cover({f, test::at_least, above, 0, {}, std::nullopt});
      if (std::isfinite(below)) cover({f, test::at_most, below, 0, {}, std::nullopt});
    }
    return out;
  }

  void learn_kind(status kind, const std::vector<std::size_t>& failed,
                  const std::vector<std::size_t>& ok) {
    if (failed.size() < options_.min_support || ok.empty()) return;
    // k failures with no success among them is chance with probability
    // (1 - p)^k, p the success share among these labels.
    const double p =
        static_cast<double>(ok.size()) / static_cast<double>(ok.size() + failed.size());
    const auto significant =
        static_cast<std::size_t>(std::ceil(std::log(chance_level) / std::log1p(-p)));
    const std::size_t needed = std::max(options_.min_support, significant);
    auto pool = candidates(failed, ok);
    std::vector<bool> done(rows_.size(), false);
    for (std::size_t n = 0; n < options_.max_rules; ++n) {
      std::size_t best = pool.size(), best_new = 0;
      for (std::size_t c = 0; c < pool.size(); ++c) {
        std::size_t fresh = 0;
        for (auto i : pool[c].covered) fresh += done[i] ? 0 : 1;
        if (fresh > best_new) {
          best_new = fresh;
          best = c;
        }
      }
      if (best == pool.size() || best_new < needed) break;
      rule r = pool[best].r;
      for (auto i : pool[best].covered) done[i] = true;
      r.support = pool[best].covered.size();
      r.shown.kind = kind;
      r.shown.failures_rejected = r.support;
      r.shown.failures = failed.size();
      r.shown.successes = ok.size();
      describe(r);
      rules_.push_back(std::move(r));
      pool.erase(pool.begin() + static_cast<std::ptrdiff_t>(best));
    }
  }

  void learn() {
    rules_.clear();
    std::map<status, std::vector<std::size_t>> by_kind;
    std::vector<std::size_t> ok;
    for (std::size_t i = 0; i < rows_.size(); ++i)
      (labels_[i] == status::ok ? ok : by_kind[labels_[i]]).push_back(i);
    for (const auto& [kind, failed] : by_kind) learn_kind(kind, failed, ok);
    std::stable_sort(rules_.begin(), rules_.end(),
                     [](const rule& a, const rule& b) { return a.support > b.support; });
    shown_.clear();
    for (const auto& r : rules_) shown_.push_back(r.shown);
    next_learn_ = rows_.size() + std::max<std::size_t>(4, rows_.size() / 10);
  }

  [[nodiscard]] std::size_t rejecting_support(const config& c) const {
    if (c.size() != space_.size()) return 0;
    std::size_t most = 0;
    for (const auto& r : rules_) {
      if (r.support <= most || !matches(r, value(features_[r.feature], c))) continue;
      if (r.when && value(features_[r.when->feature], c) != r.when->value) continue;
      most = r.support;
    }
    return most;
  }

  space space_;
  constraint_learner_options options_;
  std::vector<std::vector<double>> values_;
  std::vector<feature> features_;
  std::vector<std::vector<double>> rows_;
  std::vector<status> labels_;
  std::vector<rule> rules_;
  std::vector<learned_constraint> shown_;
  std::size_t next_learn_ = 4;
};

constraint_learner::constraint_learner(const space& s, constraint_learner_options options)
    : impl_(std::make_unique<impl>(s, options)) {}
constraint_learner::~constraint_learner() = default;
constraint_learner::constraint_learner(constraint_learner&&) noexcept = default;
constraint_learner& constraint_learner::operator=(constraint_learner&&) noexcept = default;

void constraint_learner::observe(const trial& t) { impl_->observe(t); }
void constraint_learner::learn() { impl_->learn(); }
const std::vector<learned_constraint>& constraint_learner::rules() const noexcept {
  return impl_->shown_;
}
std::size_t constraint_learner::rejecting_support(const config& c) const {
  return impl_->rejecting_support(c);
}
double constraint_learner::p_feasible(const config& c) const {
  const auto k = rejecting_support(c);
  return k == 0 ? 1.0 : 1.0 / (static_cast<double>(k) + 2.0);
}
std::size_t constraint_learner::observed() const noexcept { return impl_->rows_.size(); }

std::vector<learned_constraint> learn_constraints(const space& s, const std::vector<trial>& trials,
                                                  constraint_learner_options options) {
  constraint_learner learner(s, options);
  for (const auto& t : trials) learner.observe(t);
  learner.learn();
  return learner.rules();
}

}  // namespace tessel
