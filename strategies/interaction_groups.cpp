// The `groups` arm of `auto` (strategies/interaction_groups.hpp): coordinate
// search where parameters act alone, joint search where they interact.
#include "strategies/interaction_groups.hpp"

#include "strategies/common.hpp"

#include <tessel/bayesian.hpp>
#include <tessel/interactions.hpp>

#include <algorithm>
#include <cmath>
#include <numeric>

namespace tessel::detail {

std::vector<std::vector<std::size_t>> interaction_groups(const space& s, const config& centre,
                                                         const surrogate& model, rng& random,
                                                         std::size_t draws, double threshold) {
  const std::size_t d = s.size();
  std::vector<double> sum(d * d, 0.0);  // |cascading - standalone gains|, pair (p, q) at p*d+q
  std::vector<std::size_t> seen(d * d, 0);
  for (std::size_t draw = 0; draw < draws; ++draw) {
    const auto r = analyse_interactions(s, centre, s.sample(random), {}, &model, 0);
    const auto& p = r.parameters;
    std::size_t pair = 0;  // r.pairs holds (0,1), (0,2), ..., (1,2), ...
    for (std::size_t i = 0; i < p.size(); ++i)
      for (std::size_t j = i + 1; j < p.size(); ++j, ++pair) {
        const auto both = r.gain(r.pairs[pair]), a = r.gain(r.alone[i]), b = r.gain(r.alone[j]);
        if (!both || !a || !b) continue;  // a constraint ruled a point out
        sum[p[i] * d + p[j]] += std::abs(*both - *a - *b);
        ++seen[p[i] * d + p[j]];
      }
  }
  std::vector<std::size_t> root(d);
  std::iota(root.begin(), root.end(), 0);
  auto find = [&](std::size_t x) {
    while (root[x] != x) x = root[x] = root[root[x]];
    return x;
  };
  for (std::size_t p = 0; p < d; ++p)
    for (std::size_t q = p + 1; q < d; ++q)
      if (seen[p * d + q] > 0 && sum[p * d + q] / static_cast<double>(seen[p * d + q]) > threshold)
        root[find(q)] = find(p);
  std::vector<std::vector<std::size_t>> groups;
  std::vector<std::size_t> group_of(d, d);
  for (std::size_t p = 0; p < d; ++p) {
    auto& g = group_of[find(p)];
    if (g == d) {
      g = groups.size();
      groups.emplace_back();
    }
    groups[g].push_back(p);
  }
  return groups;
}

namespace {

constexpr std::size_t sample_attempts = 64;  // per uniform sample, as `random`'s default

class interaction_search final : public strategy {
 public:
  interaction_search(double threshold, std::size_t regroup_every, std::size_t draws,
                     std::size_t joint_draws)
      : threshold_(threshold),
        regroup_every_(regroup_every),
        draws_(draws),
        joint_draws_(joint_draws) {}
  [[nodiscard]] std::string name() const override { return "groups"; }

  void start(const space& s, std::uint64_t seed) override {
    space_ = &s;
    random_.reseed(seed);
    gp_options o;
    o.seed = random_();
    model_ = make_gp_surrogate(s, o);
    groups_.clear();
    grouped_at_ = observed_ = next_ = 0;
  }

  std::vector<config> propose(std::size_t n, const search_context& context) override {
    batch b(context, n);
    const trial* best = context.best();
    if (!best || !model_->ready()) {
      fill_uniform(b, n, random_, sample_attempts);
      return b.take();
    }
    if (groups_.empty() || observed_ >= grouped_at_ + regroup_every_) {
      groups_ = interaction_groups(*space_, best->config, *model_, random_, draws_, threshold_);
      grouped_at_ = observed_;
    }
    for (std::size_t dry = 0; !b.full() && dry < groups_.size(); ++next_) {
      const auto c = best_in(groups_[next_ % groups_.size()], *best, b);
      dry = c && b.add(*c) ? 0 : dry + 1;
    }
    return b.take();
  }

  void observe(const trial& t) override {
    model_->observe(t);
    ++observed_;
  }

 private:
  /// The candidate of `group` around `best` with the highest expected gain
  /// (per cost^alpha), fresh and valid; nullopt when there is none.
  std::optional<config> best_in(const std::vector<std::size_t>& group, const trial& best,
                                const batch& b) {
    const auto& params = space_->parameters();
    std::vector<config> candidates;
    for (const auto p : group) {  // one at a time
      if (best.config[p] == config::inactive) continue;
      const auto size = params[p].dom.size();
      for (std::size_t k = 0; k < std::min(size, joint_draws_); ++k) {  // a large domain: draws
        const auto v =
            static_cast<config::index_type>(size <= joint_draws_ ? k : random_.uniform(size));
        if (v == best.config[p]) continue;
        candidates.push_back(best.config);
        candidates.back()[p] = v;
      }
    }
    for (std::size_t k = 0; group.size() > 1 && k < joint_draws_; ++k) {  // jointly
      config c = best.config;
      for (const auto p : group)
        if (c[p] != config::inactive)
          c[p] = static_cast<config::index_type>(random_.uniform(params[p].dom.size()));
      candidates.push_back(std::move(c));
    }
    const double alpha = b.context().cost_alpha();
    std::optional<config> chosen;
    double top = -1;
    for (auto& c : candidates) {
      if (!space_->is_valid(c) || !b.fresh(space_->key(c))) continue;
      double gain = model_->score(c, best.result.objective).expected_gain;
      if (alpha > 0) gain /= std::pow(b.context().predicted_cost(c), alpha);
      if (gain > top) {
        top = gain;
        chosen = std::move(c);
      }
    }
    return chosen;
  }

  double threshold_;
  std::size_t regroup_every_, draws_, joint_draws_;
  const space* space_ = nullptr;
  rng random_;
  std::unique_ptr<surrogate> model_;
  std::vector<std::vector<std::size_t>> groups_;
  std::size_t grouped_at_ = 0;  ///< observations when groups_ were estimated
  std::size_t observed_ = 0;
  std::size_t next_ = 0;  ///< the group the next slot tries first (round robin)
};

}  // namespace

std::unique_ptr<strategy> make_interaction_search(double threshold, std::size_t regroup_every,
                                                  std::size_t draws, std::size_t joint_draws) {
  return std::make_unique<interaction_search>(threshold, regroup_every, draws, joint_draws);
}

}  // namespace tessel::detail
