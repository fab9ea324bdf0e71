// `local`: first-improvement hill climbing over valid neighbours with
// restarts (e.g. Hoos & Stützle, "Stochastic Local Search", 2004, ch. 2).
// The tabu list is the study's: a neighbour already known (proposed or
// evaluated by anyone) is never proposed again.
#include "strategies/walk.hpp"

#include <tessel/strategies.hpp>

#include <cmath>

namespace tessel {

void local_options::validate() const {
  if (sample_attempts == 0)
    detail::options_failure("local_options", "sample_attempts",
                            "must be at least 1" + detail::got(sample_attempts));
  if (cost_draws == 0)
    detail::options_failure("local_options", "cost_draws",
                            "must be at least 1" + detail::got(cost_draws));
}

namespace {

class local_search final : public strategy {
 public:
  explicit local_search(const local_options& o) : options_(o) {}
  [[nodiscard]] std::string name() const override { return "local"; }

  void start(const space& s, std::uint64_t seed) override {
    space_ = &s;
    random_.reseed(seed);
    walk_.reset();
    misses_ = 0;
  }

  /// Unvisited neighbours of the centre in random order. Without a centre,
  /// or while the last neighbours await results, uniform samples (restart
  /// points). At a local optimum (no neighbour left, none awaiting a result)
  /// or when patience runs out: restart from the best spare sample, else
  /// from new uniform samples.
  std::vector<config> propose(std::size_t n, const search_context& context) override {
    detail::batch b(context, n);
    const auto draws = detail::cost_draws(context, options_.cost_draws);
    while (!b.full()) {
      if (walk_.exhausted() || out_of_patience()) restart();
      if (walk_.propose_neighbour(b, draws)) continue;
      if (walk_.exhausted()) continue;  // restart at the top of the loop
      if (!walk_.propose_start(b, random_, options_.sample_attempts, draws)) break;
    }
    return b.take();
  }

  /// First improvement: the first result (in observation order) of this
  /// walk's neighbours that beats the centre becomes the centre. Without a
  /// centre, the first ok restart point becomes it; later ones are spares.
  void observe(const trial& t) override {
    const double score = detail::score_of(t);
    const auto origin = walk_.take(t.key);
    if (origin == detail::walk::origin::foreign || std::isinf(score)) {
      if (origin == detail::walk::origin::neighbour) ++misses_;
      return;
    }
    if (!walk_.has_centre() || score < walk_.centre_score()) {
      if (walk_.has_centre() || origin == detail::walk::origin::start) move(t.config, score);
      return;
    }
    if (origin == detail::walk::origin::start) walk_.add_spare(t.config, score);
    if (origin == detail::walk::origin::neighbour) ++misses_;
  }

 private:
  [[nodiscard]] bool out_of_patience() const {
    return walk_.has_centre() && options_.patience > 0 && misses_ >= options_.patience;
  }
  void move(const config& c, double score) {
    walk_.move_to(*space_, c, score, random_);
    misses_ = 0;
  }
  void restart() {
    walk_.clear();
    misses_ = 0;
    if (auto spare = walk_.pop_spare()) move(spare->first, spare->second);
  }

  local_options options_;
  const space* space_ = nullptr;
  rng random_;
  detail::walk walk_;
  std::size_t misses_ = 0;  ///< neighbour results in a row that did not improve
};

}  // namespace

std::unique_ptr<strategy> make_local_strategy(const local_options& options) {
  options.validate();
  return std::make_unique<local_search>(options);
}

}  // namespace tessel
