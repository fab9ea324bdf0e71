// `ga`: a generational genetic algorithm (Holland 1975; Goldberg, "Genetic
// Algorithms in Search, Optimization and Machine Learning", 1989) with
// tournament selection, uniform crossover, order crossover OX1 (Davis 1985)
// for permutations, neighbour mutation, repair and elitism. The space's
// constraints hold by construction: every proposal is valid.
#include "strategies/common.hpp"
#include "strategies/ga_operators.hpp"

#include <tessel/strategies.hpp>

#include <algorithm>

namespace tessel {

void ga_options::validate() const {
  constexpr std::string_view where = "ga_options";
  using detail::got;
  if (population_size < 2)
    detail::options_failure(where, "population_size", "must be at least 2" + got(population_size));
  if (tournament_size < 1 || tournament_size > population_size)
    detail::options_failure(where, "tournament_size",
                            "must be in [1, population_size]" + got(tournament_size));
  if (!(crossover_rate >= 0 && crossover_rate <= 1))
    detail::options_failure(where, "crossover_rate", "must be in [0, 1]" + got(crossover_rate));
  if (!(mutation_rate >= 0 && mutation_rate <= 1))
    detail::options_failure(where, "mutation_rate", "must be in [0, 1]" + got(mutation_rate));
  if (elite_count >= population_size)
    detail::options_failure(where, "elite_count",
                            "must be less than population_size" + got(elite_count));
  if (breed_attempts == 0)
    detail::options_failure(where, "breed_attempts", "must be at least 1" + got(breed_attempts));
  if (cost_draws == 0)
    detail::options_failure(where, "cost_draws", "must be at least 1" + got(cost_draws));
  if (sample_attempts == 0)
    detail::options_failure(where, "sample_attempts", "must be at least 1" + got(sample_attempts));
}

namespace {

struct member {
  config genes;
  std::uint64_t key = 0;
  double score = 0;  ///< objective; +inf when it failed
};

class genetic_search final : public strategy {
 public:
  explicit genetic_search(const ga_options& o) : options_(o) {}
  [[nodiscard]] std::string name() const override { return "ga"; }

  void start(const space& s, std::uint64_t seed) override {
    space_ = &s;
    random_.reseed(seed);
    population_.clear();
    forming_.clear();
  }

  /// Children of the current generation; uniform samples until the first
  /// generation is complete, and whenever breeding finds no fresh child.
  std::vector<config> propose(std::size_t n, const search_context& context) override {
    detail::batch b(context, n);
    while (!b.full()) {
      if (population_.size() >= 2) {
        const auto draws = detail::cost_draws(context, options_.cost_draws);
        if (auto child = detail::cheapest_of(b, draws, [&] { return breed(b); })) {
          b.add(*child);
          continue;
        }
      }
      if (detail::fill_uniform(b, 1, random_, options_.sample_attempts).empty()) break;
    }
    return b.take();
  }

  /// Every result joins the generation being formed (whoever proposed it:
  /// other strategies' trials are immigrants); population_size results
  /// make the next generation.
  void observe(const trial& t) override {
    forming_.push_back({t.config, t.key, detail::score_of(t)});
    if (forming_.size() >= options_.population_size) next_generation();
  }

 private:
  /// A fresh valid child, or nullopt after breed_attempts tries.
  std::optional<config> breed(const detail::batch& b) {
    const auto& s = *space_;
    for (std::size_t attempt = 0; attempt < options_.breed_attempts; ++attempt) {
      const member& mother = tournament();
      const member& father = tournament();
      config child = random_.uniform01() < options_.crossover_rate
                         ? detail::crossover(s, mother.genes, father.genes, random_)
                         : mother.genes;
      if (!s.is_valid(child)) child = detail::repair_toward(s, child, mother.genes, random_);
      if (random_.uniform01() < options_.mutation_rate) child = mutate(child);
      if (b.fresh(s.key(child))) return child;
      // Known already: one more neighbour move toward something new.
      auto moves = s.neighbours(child);
      detail::shuffle(moves, random_);
      for (auto& m : moves)
        if (b.fresh(s.key(m))) return m;
    }
    return std::nullopt;
  }

  /// A uniformly chosen valid neighbour (c itself when it has none).
  config mutate(const config& c) {
    auto moves = space_->neighbours(c);
    return moves.empty() ? c : moves[random_.uniform(moves.size())];
  }

  /// The best of tournament_size members drawn with replacement; ties go
  /// to the earlier member.
  const member& tournament() {
    std::size_t winner = random_.uniform(population_.size());
    for (std::size_t i = 1; i < options_.tournament_size; ++i) {
      const std::size_t rival = random_.uniform(population_.size());
      if (population_[rival].score < population_[winner].score ||
          (population_[rival].score == population_[winner].score && rival < winner))
        winner = rival;
    }
    return population_[winner];
  }

  /// The formed generation replaces the population, except that the best
  /// elite_count of the old one replace the worst newcomers they beat.
  void next_generation() {
    std::stable_sort(population_.begin(), population_.end(),
                     [](const member& x, const member& y) { return x.score < y.score; });
    auto next = std::move(forming_);
    forming_.clear();
    for (std::size_t e = 0; e < options_.elite_count && e < population_.size(); ++e) {
      const member& elite = population_[e];
      if (std::any_of(next.begin(), next.end(),
                      [&](const member& m) { return m.key == elite.key; }))
        continue;
      auto worst = std::max_element(next.begin(), next.end(), [](const member& x, const member& y) {
        return x.score < y.score;
      });
      if (elite.score < worst->score) *worst = elite;
    }
    population_ = std::move(next);
  }

  ga_options options_;
  const space* space_ = nullptr;
  rng random_;
  std::vector<member> population_;  ///< the breeding generation
  std::vector<member> forming_;     ///< results since it formed
};

}  // namespace

std::unique_ptr<strategy> make_ga_strategy(const ga_options& options) {
  options.validate();
  return std::make_unique<genetic_search>(options);
}

}  // namespace tessel
