// `bo`: Bayesian optimization over the discrete valid space
// (tessel/bayesian.hpp, docs/bayesian.md). The acquisition is maximised over
// a pool of fresh uniform samples and incumbents' neighbours, then refined by
// hill-climbing valid neighbours; batches fantasise pending proposals. When
// the study weighs cost, the log acquisition is less alpha * ln(predicted
// cost): expected improvement per second^alpha, maximised over the whole
// pool (Snoek et al. 2012; Lee et al. 2020); with the study's cost rule
// gittins, the lowest Pandora's-box Gittins index of the price of a success
// instead (search_context::gittins_rate). Learned rules cap P(feasible)
// (tessel/constraints.hpp), but now and then, less often each time, one
// proposal ignores them, so a rule too broad for its failures is tested
// rather than obeyed for good (bo_options::rule_test_after).
#include "strategies/bayesian/acquisition.hpp"
#include "strategies/bayesian/model.hpp"
#include "strategies/common.hpp"

#include <tessel/bayesian.hpp>

#include <tbb/parallel_for.h>
#include <range/v3/range/conversion.hpp>
#include <range/v3/view/chunk.hpp>
#include <range/v3/view/filter.hpp>
#include <range/v3/view/iota.hpp>
#include <range/v3/view/join.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numbers>
#include <optional>
#include <unordered_set>

namespace tessel {
namespace {

namespace rv = ranges::views;

constexpr std::size_t sample_attempts = 64;
/// Own proposals awaiting results that are fantasised, at most.
constexpr std::size_t max_pending = 256;
/// Candidates scored per kernel product and solve (bounds the n x m temporaries).
constexpr std::size_t screen_chunk = 64;
/// Candidates whose exact variance is solved for at once, in order of their
/// acquisition's bound: small enough that few are solved past the k-th best.
constexpr std::size_t exact_batch = 16;
/// Candidates of one joint Thompson draw at most.
constexpr std::size_t thompson_candidates = 128;

/// Candidates under consideration during one propose() call.
struct pool {
  std::vector<config> configs;
  std::vector<std::uint64_t> keys;
  std::vector<Eigen::VectorXd> features;
  /// Predicted seconds of a success and of a failure, read when the study
  /// weighs cost (search_context::cost_alpha() > 0).
  std::vector<cost_forecast> costs;
  std::vector<bool> taken;
  std::unordered_set<std::uint64_t> seen;  ///< every key examined, fresh or not
  double alpha = 0;                        ///< the study's cost exponent during this propose()
  /// search_context::gittins_rate() during this propose(); > 0: the
  /// acquisition is minus the Gittins index (not with Thompson sampling).
  double gittins_rate = 0;
  bool testing_rules = false;  ///< the pick being made ignores the learned rules

  /// Adds `c` when it is fresh and new to the pool; returns its index.
  std::optional<std::size_t> add(const config& c, const detail::batch& b, const bayes::model& m) {
    const auto key = m.space().key(c);
    if (!seen.insert(key).second || !b.fresh(key)) return std::nullopt;
    configs.push_back(c);
    keys.push_back(key);
    features.push_back(m.features(c));
    costs.push_back(alpha > 0 ? b.context().predicted_costs(c) : cost_forecast{});
    taken.push_back(false);
    return configs.size() - 1;
  }
  /// Members not yet taken and still fresh for `b`, by index.
  [[nodiscard]] std::vector<std::size_t> open(const detail::batch& b) const {
    return rv::iota(std::size_t{0}, configs.size()) |
           rv::filter([&](std::size_t i) { return !taken[i] && b.fresh(keys[i]); }) |
           ranges::to<std::vector>();
  }
  /// alpha * ln(the price of a success of member i), subtracted from the log
  /// acquisition: expected improvement per second^alpha of success.
  [[nodiscard]] double cost_penalty(std::size_t i, double p_feasible) const {
    if (alpha == 0) return 0.0;
    return alpha * std::log(price_per_success(p_feasible, costs[i].ok_s, costs[i].failed_s));
  }
  [[nodiscard]] Eigen::MatrixXd raw(const std::vector<std::size_t>& which) const {
    Eigen::MatrixXd out(features.front().size(), static_cast<Eigen::Index>(which.size()));
    for (std::size_t i = 0; i < which.size(); ++i)
      out.col(static_cast<Eigen::Index>(i)) = features[which[i]];
    return out;
  }
};

struct scored {
  double value = -std::numeric_limits<double>::infinity();
  std::size_t index = 0;  ///< into the pool
};

/// A standard normal draw (Box-Muller), portable across standard libraries.
double normal(rng& random) {
  const double u = 1.0 - random.uniform01();
  return std::sqrt(-2 * std::log(u)) * std::cos(2 * std::numbers::pi * random.uniform01());
}

class bo_search final : public strategy {
 public:
  explicit bo_search(bo_options o) : options_(std::move(o)) {}
  [[nodiscard]] std::string name() const override { return "bo"; }

  void start(const space& s, std::uint64_t seed) override {
    random_.reseed(seed);
    model_.emplace(s, options_.model, random_());
    pending_.clear();
    observed_ = 0;
    rule_tests_.clear();
    tests_made_ = 0;
    phases_ = phases_for(std::nullopt);
  }

  std::vector<config> propose(std::size_t n, const search_context& context) override;

  /// Every finished trial teaches the model; its own proposals stop being pending.
  void observe(const trial& t) override {
    ++observed_;
    std::erase_if(pending_, [&](const auto& p) { return p.first == t.key; });
    rule_tests_.erase(t.key);
    if (model_) model_->observe(t);
  }

  /// A proposal that ignored the learned rules and lies where one rejects:
  /// "bo/rule-test", so a study's records show what each test cost.
  [[nodiscard]] std::string source_of(std::uint64_t key) const override {
    return rule_tests_.contains(key) ? "bo/rule-test" : name();
  }

  /// Its proposals where a rule rejects are deliberate tests, not oversights.
  [[nodiscard]] bool weighs_learned_constraints() const override {
    return options_.model.learn_constraints;
  }

 private:
  void fill_initial(detail::batch& b, std::size_t n);
  void propose_from_model(detail::batch& b);
  [[nodiscard]] pool make_pool(const detail::batch& b);
  [[nodiscard]] std::optional<std::size_t> maximize(pool& p, const detail::batch& b);
  [[nodiscard]] std::vector<scored> best_of(
      const pool& p, const std::vector<std::size_t>& which, std::size_t k,
      double floor = -std::numeric_limits<double>::infinity()) const;
  [[nodiscard]] std::optional<std::size_t> thompson(const pool& p, const detail::batch& b);
  void climb(pool& p, const detail::batch& b, scored at, scored& best);
  [[nodiscard]] double value(double mean, double variance, double p_feasible) const;
  [[nodiscard]] double acquire(const pool& p, const bayes::candidates_view& v, std::size_t j,
                               std::size_t index, double variance) const;
  /// Whether the acquisition is UCB now: chosen, or log EI past ucb_after trials.
  [[nodiscard]] bool ucb_now() const {
    return options_.acquisition == acquisition_kind::ucb ||
           (options_.acquisition == acquisition_kind::log_ei && observed_ >= phases_.ucb_after);
  }
  [[nodiscard]] double lie(const Eigen::VectorXd& features) const;
  /// P(feasible) of pool member `i` from the feasibility GP, capped by the
  /// learned rules unless the pick being made tests them.
  [[nodiscard]] double capped(const pool& p, std::size_t i, double p_feasible) const {
    return p.testing_rules ? p_feasible
                           : std::min(p_feasible, model_->rule_p_feasible(p.configs[i]));
  }
  /// Whether this pick ignores the rules: some rule is held, and the trial
  /// count has reached the next test's (the first test's, then each test
  /// doubles the gap to the next) and not the last's.
  [[nodiscard]] bool rule_test_due() const {
    const auto* rules = model_->rules();
    return phases_.first_rule_test != 0 && rules && !rules->rules().empty() &&
           observed_ >= next_rule_test() && observed_ <= phases_.last_rule_test;
  }
  [[nodiscard]] std::size_t next_rule_test() const {
    return tests_made_ == 0 ? phases_.first_rule_test : next_rule_test_;
  }

  /// Where the run's phases fall: bo_options' trial counts, or, for a study
  /// with an evaluation budget, those sized to it (initial_share,
  /// explore_runway, phase_share).
  struct phases {
    std::size_t initial = 0;          ///< uniform proposals before the model
    std::size_t ucb_after = 0;        ///< log EI turns to UCB here (size_t max: never)
    std::size_t first_rule_test = 0;  ///< 0: never
    std::size_t last_rule_test = 0;   ///< no test begins past this trial count
  };
  [[nodiscard]] phases phases_for(std::optional<std::size_t> budget) const;

  bo_options options_;
  rng random_;
  std::optional<bayes::model> model_;
  std::vector<std::pair<std::uint64_t, config>> pending_;  ///< own proposals, unobserved
  std::size_t observed_ = 0;
  double cutoff_ = 0;               ///< P(feasible) below which a candidate is a last resort
  phases phases_;                   ///< for the budget of the current propose()
  std::size_t tests_made_ = 0;      ///< rule tests proposed so far
  std::size_t next_rule_test_ = 0;  ///< after the first: trial count from which the next is due
  std::size_t rule_test_gap_ = 0;   ///< trials until the one after it
  std::unordered_set<std::uint64_t> rule_tests_;  ///< own rule tests, unobserved
};

/// Uniform samples for the initial design (or while no trial has succeeded),
/// then the model's picks; uniform samples again only when the pool finds
/// nothing fresh (a nearly exhausted space).
std::vector<config> bo_search::propose(std::size_t n, const search_context& context) {
  if (!model_) start(context.space(), 0);
  phases_ = phases_for(context.evaluation_budget());
  detail::batch b(context, n);
  const std::size_t seen = observed_ + pending_.size();
  std::size_t uniform = 0;
  if (model_->ok_count() < 2)
    uniform = n;
  else if (seen < phases_.initial)
    uniform = std::min(n, phases_.initial - seen);
  fill_initial(b, uniform);
  if (!b.full()) propose_from_model(b);
  if (!b.full()) detail::fill_uniform(b, n - b.size(), random_, sample_attempts);
  auto out = b.take();
  for (const auto& c : out) pending_.emplace_back(model_->space().key(c), c);
  // A proposal the study never reports back (cancelled) must not stay a
  // fantasy for ever: only the most recent max_pending are kept.
  if (pending_.size() > max_pending)
    pending_.erase(pending_.begin(), pending_.end() - static_cast<std::ptrdiff_t>(max_pending));
  return out;
}

bo_search::phases bo_search::phases_for(std::optional<std::size_t> budget) const {
  constexpr auto never = std::numeric_limits<std::size_t>::max();
  phases p{options_.initial_samples, options_.ucb_after, options_.rule_test_after, never};
  if (!budget) return p;
  const auto share = [&](double fraction) {
    return static_cast<std::size_t>(std::ceil(fraction * static_cast<double>(*budget)));
  };
  if (options_.initial_share > 0)
    p.initial = std::min(p.initial, std::max<std::size_t>(2, share(options_.initial_share)));
  if (options_.phase_share > 0) {
    p.ucb_after = std::min(p.ucb_after, share(options_.phase_share));
    if (p.first_rule_test != 0)
      p.first_rule_test = std::min(p.first_rule_test, share(options_.phase_share));
  }
  if (options_.explore_runway > 0) {
    const auto last = *budget - std::min(*budget, share(options_.explore_runway));
    if (p.ucb_after > last) p.ucb_after = never;
    p.last_rule_test = last;
  }
  return p;
}

/// `n` initial samples: uniform, or while the study weighs cost, each the
/// cheapest of a few fresh uniform draws (bo_options::initial_draws).
void bo_search::fill_initial(detail::batch& b, std::size_t n) {
  detail::fill_cheapest(b, n, detail::cost_draws(b.context(), options_.initial_draws), random_,
                        sample_attempts);
}

void bo_search::propose_from_model(detail::batch& b) {
  cutoff_ = options_.feasibility_cutoff * model_->success_rate();
  for (const auto& [key, c] : pending_) {
    const auto f = model_->features(c);
    model_->push_fantasy(f, lie(f));
  }
  auto p = make_pool(b);
  while (!b.full()) {
    p.testing_rules = rule_test_due();
    const auto pick =
        options_.acquisition == acquisition_kind::thompson ? thompson(p, b) : maximize(p, b);
    // A pick the rules would not have capped tests nothing: the test stays due.
    if (p.testing_rules && pick && model_->rule_p_feasible(p.configs[*pick]) < 1) {
      rule_tests_.insert(p.keys[*pick]);
      rule_test_gap_ = 2 * (tests_made_++ == 0 ? phases_.first_rule_test : rule_test_gap_);
      next_rule_test_ = observed_ + rule_test_gap_;
    }
    if (!pick) break;
    b.add(p.configs[*pick]);
    p.taken[*pick] = true;
    if (!b.full()) model_->push_fantasy(p.features[*pick], lie(p.features[*pick]));
  }
  model_->clear_fantasies();
}

/// What a pending config is pretended to have returned (model units).
double bo_search::lie(const Eigen::VectorXd& features) const {
  if (options_.batch == batch_kind::constant_liar) return model_->best();
  return model_->view(features).mean[0];
}

pool bo_search::make_pool(const detail::batch& b) {
  pool p;
  p.alpha = b.context().cost_alpha();
  if (options_.acquisition != acquisition_kind::thompson)
    p.gittins_rate = b.context().gittins_rate();
  const auto& s = model_->space();
  for (std::size_t i = 0; i < options_.pool_size; ++i) (void)p.add(s.sample(random_), b, *model_);
  auto best = model_->observed();
  const auto k = std::min(options_.incumbents, best.size());
  std::partial_sort(best.begin(), best.begin() + static_cast<std::ptrdiff_t>(k), best.end(),
                    [](const auto& x, const auto& y) { return x.first < y.first; });
  for (std::size_t i = 0; i < k; ++i)
    for (const auto& c : s.neighbours(best[i].second)) (void)p.add(c, b, *model_);
  return p;
}

/// log EI or the UCB softplus, plus log P(feasible): larger is better.
double bo_search::value(double mean, double variance, double p_feasible) const {
  const double sd = std::sqrt(variance);
  const double best = model_->best();
  const double a = ucb_now() ? bayes::log_softplus((best - mean + options_.ucb_kappa * sd) /
                                                   model_->objective().target_scale())
                             : bayes::log_ei(mean, sd, best);
  // Below the cutoff: ranked after every candidate above it.
  const double penalty = p_feasible < cutoff_ ? -1e6 : 0.0;
  return a + std::log(p_feasible) + penalty;
}

/// The k best of `which` by acquisition, above `floor`, in two passes.
/// First, in chunks: one kernel product for the candidates' means and
/// P(feasible), and each one's value at an upper bound on its variance
/// (gp::variance_bounds, O(n) a candidate; every acquisition grows with the
/// variance), so an upper bound on its value. Then, in order of bound,
/// exact values in batches (one triangular solve each, L^-1 K*, O(n^2) a
/// candidate) until the k best exceed every bound left: the result is that
/// of scoring every candidate exactly, but only those whose bound reaches
/// the k-th best pay the solve. The first pass's chunks are scored in
/// parallel (TBB), each reading the model only, with boundaries that do not
/// depend on the thread count; the second is serial; so the result is
/// bit-identical with one thread or many (benchmarks/README.md has the gain).
std::vector<scored> bo_search::best_of(const pool& p, const std::vector<std::size_t>& which,
                                       std::size_t k, double floor) const {
  const auto& gp = model_->objective();
  const auto chunks =
      which | rv::chunk(screen_chunk) | ranges::to<std::vector<std::vector<std::size_t>>>();
  std::vector<bayes::candidates_view> views(chunks.size());
  struct bounded {
    double value = 0;  ///< the acquisition at the variance's bound
    std::size_t chunk = 0, column = 0;
  };
  std::vector<std::vector<bounded>> bounds(chunks.size());
  tbb::parallel_for(std::size_t{0}, chunks.size(), [&](std::size_t c) {
    auto& v = views[c];
    v = model_->view(p.raw(chunks[c]));
    for (std::size_t j = 0; j < chunks[c].size(); ++j) {
      auto& pj = v.p[static_cast<Eigen::Index>(j)];
      pj = capped(p, chunks[c][j], pj);
    }
    const Eigen::VectorXd bound = gp.variance_bounds(v.cross);
    for (std::size_t j = 0; j < chunks[c].size(); ++j) {
      const double a = acquire(p, v, j, chunks[c][j], bound[static_cast<Eigen::Index>(j)]);
      if (a > floor) bounds[c].push_back({a, c, j});
    }
  });
  auto order = bounds | rv::join | ranges::to<std::vector>();
  const auto index = [&](const bounded& b) { return chunks[b.chunk][b.column]; };
  std::sort(order.begin(), order.end(), [&](const bounded& x, const bounded& y) {
    return x.value > y.value || (x.value == y.value && index(x) < index(y));
  });
  const auto better = [](const scored& x, const scored& y) {
    return x.value > y.value || (x.value == y.value && x.index < y.index);
  };
  std::vector<scored> best;  // the k best exact values so far, best first
  const auto rows = static_cast<Eigen::Index>(gp.total());  // of each view's cross
  for (std::size_t next = 0; next < order.size();) {
    // A bound equal to the k-th best could still tie and win on its index.
    const auto open = [&](const bounded& b) {
      return best.size() < k || b.value >= best.back().value;
    };
    if (!open(order[next])) break;
    std::vector<bounded> batch;
    for (; next < order.size() && batch.size() < exact_batch && open(order[next]); ++next)
      batch.push_back(order[next]);
    Eigen::MatrixXd cross(rows, static_cast<Eigen::Index>(batch.size()));
    for (std::size_t i = 0; i < batch.size(); ++i)
      cross.col(static_cast<Eigen::Index>(i)) =
          views[batch[i].chunk].cross.col(static_cast<Eigen::Index>(batch[i].column));
    const Eigen::VectorXd variance = gp.variances(cross);
    for (std::size_t i = 0; i < batch.size(); ++i) {
      const scored s{acquire(p, views[batch[i].chunk], batch[i].column, index(batch[i]),
                             variance[static_cast<Eigen::Index>(i)]),
                     index(batch[i])};
      if (!(s.value > floor)) continue;
      best.insert(std::upper_bound(best.begin(), best.end(), s, better), s);
      if (best.size() > k) best.pop_back();
    }
  }
  return best;
}

/// The acquisition of column j of `v`, pool member `index`, at `variance`:
/// value() less the cost penalty when the study weighs cost (the price of a
/// success: P(feasible) is the capped one, as value() reads).
double bo_search::acquire(const pool& p, const bayes::candidates_view& v, std::size_t j,
                          std::size_t index, double variance) const {
  const auto c = static_cast<Eigen::Index>(j);
  if (p.gittins_rate > 0) {
    // Minus the index of ln f (of f scaled by the incumbent when the model is
    // not of the log): it rises with the variance, as the bounds need.
    const double scale =
        model_->log_scale() || !(std::abs(model_->best()) > 0) || !std::isfinite(model_->best())
            ? 1.0
            : std::abs(model_->best());
    const double price = p.gittins_rate * scale *
                         price_per_success(v.p[c], p.costs[index].ok_s, p.costs[index].failed_s);
    const double penalty = v.p[c] < cutoff_ ? -1e6 : 0.0;
    return -gittins_index(v.mean[c], std::sqrt(std::max(0.0, variance)), price) + penalty;
  }
  return value(v.mean[c], variance, v.p[c]) - p.cost_penalty(index, v.p[c]);
}

/// The pool's best candidates, each hill-climbed through fresh neighbours;
/// the best config seen wins.
std::optional<std::size_t> bo_search::maximize(pool& p, const detail::batch& b) {
  const auto starts = best_of(p, p.open(b), std::max<std::size_t>(1, options_.local_starts));
  if (starts.empty()) return std::nullopt;
  scored best = starts.front();
  for (const auto& s : starts) climb(p, b, s, best);
  return best.index;
}

/// First-best hill-climb: move to the best fresh unseen neighbour while it
/// improves the acquisition, at most local_steps moves.
void bo_search::climb(pool& p, const detail::batch& b, scored at, scored& best) {
  for (std::size_t step = 0; step < options_.local_steps; ++step) {
    std::vector<std::size_t> added;
    for (const auto& c : model_->space().neighbours(p.configs[at.index]))
      if (auto i = p.add(c, b, *model_)) added.push_back(*i);
    const auto next = best_of(p, added, 1, at.value);
    if (next.empty()) return;
    at = next.front();
    if (at.value > best.value) best = at;
  }
}

/// Thompson sampling: one joint posterior draw over the open pool's
/// thompson_candidates most promising members (lowest mean - 2 sd; the
/// draw costs O(m^3)), and a feasibility draw per
/// candidate; the sampled-feasible candidate whose sampled improvement is
/// largest wins (any candidate when none is sampled feasible).
std::optional<std::size_t> bo_search::thompson(const pool& p, const detail::batch& b) {
  auto open = p.open(b);
  if (open.empty()) return std::nullopt;
  const auto& gp = model_->objective();
  if (open.size() > thompson_candidates) {
    const auto all = model_->view(p.raw(open));
    const Eigen::VectorXd variance = gp.variances(all.cross);
    std::vector<scored> optimism(open.size());
    for (std::size_t i = 0; i < open.size(); ++i) {
      const auto j = static_cast<Eigen::Index>(i);
      optimism[i] = {-all.mean[j] + 2 * std::sqrt(variance[j]), open[i]};
    }
    std::stable_sort(optimism.begin(), optimism.end(),
                     [](const scored& x, const scored& y) { return x.value > y.value; });
    open.resize(thompson_candidates);
    for (std::size_t i = 0; i < open.size(); ++i) open[i] = optimism[i].index;
  }
  auto v = model_->view(p.raw(open));
  for (std::size_t i = 0; i < open.size(); ++i) {
    auto& pi = v.p[static_cast<Eigen::Index>(i)];
    pi = capped(p, open[i], pi);
  }
  Eigen::MatrixXd cov = gp.covariance(gp.scaled(v.raw), v.cross);
  const double scale = gp.target_scale();
  // Pool members at or next to data have a posterior covariance that is
  // singular to rounding: jitter of 1e-6 of the target variance (a sampling
  // error of 0.1% of its scale) lets it factor, more only when that fails.
  Eigen::LLT<Eigen::MatrixXd> llt;
  for (double jitter = 1e-6; jitter < 2; jitter *= 100) {
    cov.diagonal().array() += jitter * scale * scale;
    llt.compute(cov);
    if (llt.info() == Eigen::Success) break;
  }
  Eigen::VectorXd z(v.mean.size());
  for (Eigen::Index i = 0; i < z.size(); ++i) z[i] = normal(random_);
  const Eigen::VectorXd draw = v.mean + llt.matrixL() * z;
  scored best;
  for (std::size_t i = 0; i < open.size(); ++i) {
    const auto j = static_cast<Eigen::Index>(i);
    // Feasibility is sampled too: a candidate counts as feasible in this
    // draw with probability P(feasible), as in SCBO (Eriksson & Poloczek 2021).
    const bool feasible = random_.uniform01() < v.p[j] && v.p[j] >= cutoff_;
    const double a = bayes::log_softplus((model_->best() - draw[j]) / scale) -
                     p.cost_penalty(open[i], v.p[j]) + (feasible ? 0.0 : -1e6);
    if (a > best.value) best = {a, open[i]};
  }
  return best.index;
}

}  // namespace

std::unique_ptr<strategy> make_bo_strategy(const bo_options& options) {
  options.validate();
  return std::make_unique<bo_search>(options);
}

}  // namespace tessel
