// The study's schedulers (DESIGN.md §5, docs/scheduler.md). fifo: proposals
// in the order they were made. utility: rank candidates by expected gain per
// unit of predicted cost, cost^alpha with alpha cooled as the budget is spent
// (EI per second: Snoek, Larochelle & Adams 2012; cost cooling: Lee, Eriksson,
// Bindel & Wilson 2020), or with study_options::cost_rule gittins by the
// Pandora's-box Gittins index (Weitzman 1979; Xie et al. 2024), solved here.
#include "study/scheduler.hpp"

#include <boost/math/distributions/normal.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <numbers>

namespace tessel {
namespace {

/// Floor on P(feasible) where the utility divides by it.
constexpr double min_p_feasible = 1e-4;

struct candidate {
  std::optional<std::size_t> queued;  ///< index into trials when it came from the queue
  std::size_t pooled = 0;             ///< index into pool otherwise
  prediction predicted;
};

/// ln h(z), h(z) = z Phi(z) + phi(z) = E[(z - x)^+] for x ~ N(0, 1). Above
/// -30 directly (relative error about eps z^2); below, its asymptotic series
/// phi(z) / z^2 (1 - 3/z^2 + 15/z^4 - ...), to 6 terms (the next is 2.5e-13
/// of the sum at -30).
double log_h(double z) noexcept {
  if (z >= -30) {
    const double cdf = 0.5 * std::erfc(-z / std::numbers::sqrt2);
    const double pdf = std::exp(-0.5 * z * z) / std::sqrt(2 * std::numbers::pi);
    return std::log(pdf + z * cdf);
  }
  const double w = 1 / (z * z);
  const double series = 1 + w * (-3 + w * (15 + w * (-105 + w * (945 + w * -10395))));
  return -0.5 * z * z - 0.5 * std::log(2 * std::numbers::pi) + std::log(w) + std::log(series);
}

/// d ln h / dz = Phi(z) / h(z); below -30, -z - 2/z (+ O(z^-3)).
double log_h_slope(double z) noexcept {
  if (z >= -30) {
    const double cdf = 0.5 * std::erfc(-z / std::numbers::sqrt2);
    const double pdf = std::exp(-0.5 * z * z) / std::sqrt(2 * std::numbers::pi);
    return cdf / (pdf + z * cdf);
  }
  return -z - 2 / z;
}

/// The gittins index of a scored candidate on the log scale: ln f ~ N(m,
/// s^2) matched to the surrogate's log-normal mean and sigma (the GP
/// surrogate's own log posterior, when it models ln f). A non-positive mean
/// (a surrogate of the objective itself) is linearised about the incumbent,
/// ln f ~ ln|b| + (f - |b|) / |b|.
double log_gittins(const candidate_score& cs, double price, std::optional<double> incumbent) {
  if (cs.mean > 0) {
    const double var = std::log1p((cs.sigma / cs.mean) * (cs.sigma / cs.mean));
    return gittins_index(std::log(cs.mean) - 0.5 * var, std::sqrt(var), price);
  }
  const double b = incumbent && *incumbent != 0 ? std::abs(*incumbent) : 1.0;
  return gittins_index(std::log(b) + (cs.mean - b) / b, cs.sigma / b, price);
}

}  // namespace

double gittins_index(double mean, double sigma, double price) noexcept {
  if (!(price > 0)) return -std::numeric_limits<double>::infinity();
  if (!(sigma > 0)) return mean + price;
  // Newton's method on F(z) = ln h(z) - ln(price / sigma): F is increasing
  // and concave, so from the left of the root every step stays left and
  // rises to it, and a first step from the right lands left of it.
  const double target = std::log(price) - std::log(sigma);
  double z = target > 0 ? std::exp(target) : 0.0;  // h(z) > z: never left of the root
  for (int i = 0; i < 200; ++i) {
    const double f = log_h(z) - target;
    const double step = f / log_h_slope(z);
    if (!std::isfinite(step)) break;
    z -= step;
    if (std::abs(step) <= 1e-15 * (1 + std::abs(z))) break;
  }
  return mean + sigma * z;
}

double study::state::cost_alpha() const { return scheduler_->cost_alpha(*this); }

double study::state::gittins_rate() const {
  if (options_.cost_rule != study_options::cost_rule_kind::gittins) return 0.0;
  if (progress_.evaluations == 0 || !(progress_.cost_s > 0)) return 0.0;
  if (!(cost_alpha() > 0)) return 0.0;
  return gittins_lambda.value_or(options_.gittins_lambda) *
         static_cast<double>(progress_.evaluations) / progress_.cost_s;
}

/// The surrogate's score of `c` when the cost model reads it and it is ready.
std::optional<candidate_score> study::state::surrogate_score(const config& c) const {
  if (options_.costs && options_.costs->wants_objective() && options_.surrogate &&
      options_.surrogate->ready())
    return options_.surrogate->score(c, progress_.best);
  return std::nullopt;
}

double study::state::predicted_cost(const config& c) const {
  return predicted_cost(c, surrogate_score(c));
}

double study::state::predicted_cost(const config& c,
                                    const std::optional<candidate_score>& scored) const {
  const double estimate = backend_->estimated_cost(space_, c);
  return std::max(1e-9, options_.costs ? options_.costs->predict(c, {estimate, scored}) : estimate);
}

cost_forecast study::state::predicted_costs(const config& c) const {
  const auto scored = surrogate_score(c);
  return {predicted_cost(c, scored), predicted_failure_cost(c, scored)};
}

double study::state::predicted_failure_cost(const config& c,
                                            const std::optional<candidate_score>& scored) const {
  const double estimate = backend_->estimated_cost(space_, c);
  return std::max(
      1e-9, options_.costs ? options_.costs->predict_failure(c, {estimate, scored}) : estimate);
}

// --- the schedulers ------------------------------------------------------------------

std::unique_ptr<study::state::scheduler> study::state::scheduler::make(
    const study_options& options) {
  if (options.surrogate) return std::make_unique<utility_scheduler>();
  return std::make_unique<fifo_scheduler>();
}

std::vector<std::size_t> study::state::scheduler::in_proposal_order(state& s, std::size_t n) {
  std::vector<std::size_t> chosen;
  auto with_prior = [&s, &chosen](std::size_t index) {
    auto& t = s.trials[index];
    if (!t.prediction) t.prediction = s.prior(t.config, t.provenance);
    chosen.push_back(index);
  };
  while (chosen.size() < n && !s.queue.empty()) {
    with_prior(s.queue.front());
    s.queue.pop_front();
  }
  if (chosen.size() < n) {
    const auto started = std::chrono::steady_clock::now();
    auto proposals = s.strategy_->propose(n - chosen.size(), s);
    s.propose_s +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    for (auto& c : proposals) {
      // Strategies promise valid, unknown configs; the study holds them to it.
      if (!s.space_.is_valid(c) || s.known(s.space_.key(c))) continue;
      with_prior(s.add_trial(c, {s.strategy_->source_of(s.space_.key(c)), 0, {}}));
    }
  }
  return chosen;
}

std::vector<std::size_t> study::state::fifo_scheduler::select(state& s, std::size_t n) {
  return in_proposal_order(s, n);
}

prediction study::state::fifo_scheduler::predict(const state& s, const config& c,
                                                 const provenance& source) const {
  return s.prior(c, source);
}

double study::state::utility_scheduler::cost_alpha(const state& s) const {
  const auto& o = s.options_;
  // The exploration floor: the k-th, 2k-th, ... evaluation at alpha 0.
  if (o.cost_explore_every > 0 && (s.progress_.evaluations + 1) % o.cost_explore_every == 0)
    return 0.0;
  // The hints (for ask/tell, where no stop condition is known) win over
  // run()'s condition; with both hints, whichever is more used up.
  std::optional<double> spent;
  if (o.budget_hint > 0)
    spent = static_cast<double>(s.progress_.evaluations) / static_cast<double>(o.budget_hint);
  if (o.cost_budget_hint_s > 0)
    spent = std::max(spent.value_or(0.0), s.progress_.cost_s / o.cost_budget_hint_s);
  if (!spent) spent = s.run_spent;
  if (!spent) return o.cost_alpha_start;
  return o.cost_alpha_start + (o.cost_alpha_end - o.cost_alpha_start) * std::min(1.0, *spent);
}

prediction study::state::utility_scheduler::score(const state& s, const config& c,
                                                  const provenance& source) const {
  const auto cs = s.options_.surrogate->score(c, s.progress_.best);
  const double tokens = s.expected_tokens(source);
  const double token_s = s.token_cost_s(tokens);
  const double cost = s.predicted_cost(c, cs) + token_s;
  // The price of a success, (p cost + (1 - p) failed) / p: a failure buys
  // nothing but costs what failures cost there (a compile error little, a
  // timeout much), so a config likely to fail is not preferred for failing
  // cheaply, nor spared for a cheap failure when its success is costly.
  const double failed = s.predicted_failure_cost(c, cs) + token_s;
  const double per_success = price_per_success(cs.p_feasible, cost, failed, min_p_feasible);
  // The gittins rule: the lowest index first, so utility = -index.
  const double rate = s.gittins_rate();
  const double utility = rate > 0 ? -log_gittins(cs, rate * per_success, s.progress_.best)
                                  : cs.expected_gain / std::pow(per_success, cost_alpha(s));
  return {cs.mean, cs.sigma, cs.p_feasible, cs.expected_gain,
          cost,    utility,  tokens,        prediction::basis::model};
}

prediction study::state::utility_scheduler::predict(const state& s, const config& c,
                                                    const provenance& source) const {
  if (!s.options_.surrogate->ready()) return s.prior(c, source);
  return score(s, c, source);
}

std::vector<std::size_t> study::state::utility_scheduler::select(state& s, std::size_t n) {
  if (!s.options_.surrogate->ready()) return in_proposal_order(s, n);
  s.negligible = false;
  const std::size_t want = std::max<std::size_t>(n, s.options_.pool_factor * n);
  if (s.queue.size() + s.pool.size() < want) {
    const auto started = std::chrono::steady_clock::now();
    for (auto& c : s.strategy_->propose(want - s.queue.size() - s.pool.size(), s)) {
      const auto key = s.space_.key(c);
      if (!s.space_.is_valid(c) || s.known(key)) continue;
      s.pool_keys.insert(key);
      s.pool.emplace_back(c, s.strategy_->source_of(key));
    }
    s.propose_s +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  }

  std::vector<candidate> candidates;
  for (auto index : s.queue)
    candidates.push_back({index, 0, score(s, s.trials[index].config, s.trials[index].provenance)});
  for (std::size_t i = 0; i < s.pool.size(); ++i)
    candidates.push_back({std::nullopt, i, score(s, s.pool[i].first, {s.pool[i].second, 0, {}})});
  std::stable_sort(candidates.begin(), candidates.end(),
                   [](const candidate& a, const candidate& b) {
                     return a.predicted.utility > b.predicted.utility;
                   });

  if (s.options_.min_gain_fraction > 0 && s.progress_.best && !candidates.empty()) {
    double best_gain = 0;
    for (const auto& c : candidates) best_gain = std::max(best_gain, c.predicted.expected_gain);
    if (best_gain < s.options_.min_gain_fraction * std::abs(*s.progress_.best)) {
      s.negligible = true;
      return {};
    }
  }

  // PBGI-D: when even the first choice's index is not below the incumbent
  // (Weitzman's rule would stop), lambda halves.
  if (s.options_.gittins_decay && !candidates.empty() && s.gittins_rate() > 0 && s.progress_.best &&
      *s.progress_.best > 0 && -candidates.front().predicted.utility >= std::log(*s.progress_.best))
    s.gittins_lambda = 0.5 * s.gittins_lambda.value_or(s.options_.gittins_lambda);

  std::vector<std::size_t> chosen;
  std::vector<bool> taken(s.pool.size(), false);
  for (std::size_t i = 0; i < candidates.size() && chosen.size() < n; ++i) {
    const auto& c = candidates[i];
    std::size_t index = 0;
    if (c.queued) {
      index = *c.queued;
      std::erase(s.queue, index);
    } else {
      taken[c.pooled] = true;
      s.pool_keys.erase(s.space_.key(s.pool[c.pooled].first));
      index = s.add_trial(s.pool[c.pooled].first, {s.pool[c.pooled].second, 0, {}});
    }
    s.trials[index].prediction = c.predicted;
    chosen.push_back(index);
  }
  // Keep the rest of the pool for the next round, best first, bounded.
  std::vector<std::pair<config, std::string>> rest;
  for (const auto& c : candidates)
    if (!c.queued && !taken[c.pooled]) rest.push_back(std::move(s.pool[c.pooled]));
  const std::size_t cap = 4 * want;
  for (std::size_t i = cap; i < rest.size(); ++i) s.pool_keys.erase(s.space_.key(rest[i].first));
  if (rest.size() > cap) rest.resize(cap);
  s.pool = std::move(rest);
  return chosen;
}

// --- what both schedulers price with ---------------------------------------------------

double study::state::expected_tokens(const provenance& source) const {
  if (source.tokens > 0) return source.tokens;
  const auto it = tokens_by_source.find(source.source);
  if (it == tokens_by_source.end() || it->second.second == 0) return 0.0;
  return it->second.first / static_cast<double>(it->second.second);
}

void study::state::count_tokens(const std::string& source, double tokens, std::size_t proposals) {
  auto& [total, n] = tokens_by_source[source];
  total += tokens;
  n += proposals;
  progress_.tokens += tokens;
}

prediction study::state::prior(const config& c, const provenance& source) const {
  // Mean and spread of the ok objectives so far (Welford), the success rate
  // with Laplace's rule, and expected improvement under that normal.
  std::size_t n = 0, ok = 0;
  double mean = 0, m2 = 0;
  for (const auto& t : trials) {
    if (t.state != trial_state::finished) continue;
    ++n;
    if (!t.result.ok()) continue;
    ++ok;
    const double d = t.result.objective - mean;
    mean += d / static_cast<double>(ok);
    m2 += d * (t.result.objective - mean);
  }
  prediction p;
  p.from = prediction::basis::prior;
  p.p_feasible = (static_cast<double>(ok) + 1.0) / (static_cast<double>(n) + 2.0);
  p.tokens = expected_tokens(source);
  p.cost_s = predicted_cost(c) + token_cost_s(p.tokens);
  const double nan = std::numeric_limits<double>::quiet_NaN();
  if (ok == 0) {
    p.mean = p.sigma = p.expected_gain = p.utility = nan;
    return p;
  }
  p.mean = mean;
  p.sigma = ok > 1 ? std::sqrt(m2 / static_cast<double>(ok - 1)) : std::abs(mean);
  const double incumbent = progress_.best.value_or(mean);
  if (p.sigma > 0) {
    // Boost.Math's standard normal; a NaN (never expected) gives NaN, not a throw.
    using quiet = boost::math::policies::policy<
        boost::math::policies::domain_error<boost::math::policies::ignore_error>>;
    const boost::math::normal_distribution<double, quiet> standard_normal;
    const double z = (incumbent - mean) / p.sigma;
    p.expected_gain = p.p_feasible * ((incumbent - mean) * cdf(standard_normal, z) +
                                      p.sigma * pdf(standard_normal, z));
  } else {
    p.expected_gain = p.p_feasible * std::max(0.0, incumbent - mean);
  }
  p.utility = p.expected_gain / std::pow(p.cost_s, cost_alpha());
  return p;
}

}  // namespace tessel
