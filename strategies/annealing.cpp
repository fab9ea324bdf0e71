// `annealing`: simulated annealing over valid neighbours (Kirkpatrick,
// Gelatt & Vecchi, "Optimization by simulated annealing", Science 220, 1983)
// with the Metropolis acceptance rule (Metropolis et al., J. Chem. Phys.
// 21, 1953) on the log objective, geometric cooling, and restarts.
#include "strategies/walk.hpp"

#include <tessel/strategies.hpp>

#include <algorithm>
#include <cmath>
#include <limits>

namespace tessel {

void annealing_options::validate() const {
  constexpr std::string_view where = "annealing_options";
  using detail::got;
  if (!(initial_temperature > 0) || !std::isfinite(initial_temperature))
    detail::options_failure(where, "initial_temperature",
                            "must be finite and > 0" + got(initial_temperature));
  if (!(cooling > 0 && cooling < 1))
    detail::options_failure(where, "cooling", "must be in (0, 1)" + got(cooling));
  if (!(min_temperature > 0 && min_temperature < initial_temperature))
    detail::options_failure(where, "min_temperature",
                            "must be in (0, initial_temperature)" + got(min_temperature));
  if (!(restart_from_best >= 0 && restart_from_best <= 1))
    detail::options_failure(where, "restart_from_best",
                            "must be in [0, 1]" + got(restart_from_best));
  if (sample_attempts == 0)
    detail::options_failure(where, "sample_attempts", "must be at least 1" + got(sample_attempts));
}

namespace {

/// The energy change of moving from objective `from` to `to` (both finite):
/// ln(to / from) when both are positive, else the relative change
/// (to - from) / max(|from|, |to|), which agrees with it to first order.
double energy_change(double from, double to) {
  if (from > 0 && to > 0) return std::log(to / from);
  const double scale = std::max({std::abs(from), std::abs(to), std::numeric_limits<double>::min()});
  return (to - from) / scale;
}

class annealing_search final : public strategy {
 public:
  explicit annealing_search(const annealing_options& o) : options_(o) {}
  [[nodiscard]] std::string name() const override { return "annealing"; }

  void start(const space& s, std::uint64_t seed) override {
    space_ = &s;
    random_.reseed(seed);
    walk_.reset();
    temperature_ = options_.initial_temperature;
    best_.reset();
  }

  /// Unvisited neighbours of the current state in random order; uniform
  /// samples while there is no state or the last neighbours await results.
  /// Restarts (reheating) when the temperature fell below min_temperature
  /// or the state has no neighbour left: from the best observed config with
  /// probability restart_from_best (once per call), else from samples.
  std::vector<config> propose(std::size_t n, const search_context& context) override {
    detail::batch b(context, n);
    bool may_use_best = true;
    while (!b.full()) {
      if (walk_.exhausted() || (walk_.has_centre() && temperature_ < options_.min_temperature)) {
        restart(may_use_best);
        may_use_best = false;
      }
      if (walk_.propose_neighbour(b)) continue;
      if (walk_.exhausted()) continue;  // restart at the top of the loop
      if (!walk_.propose_start(b, random_, options_.sample_attempts)) break;
    }
    return b.take();
  }

  /// A result for a neighbour of the current state is accepted by
  /// Metropolis at the current temperature, which then cools once. Without
  /// a state, the first ok restart point becomes it. Every ok result (any
  /// source) updates the best, the restart point.
  void observe(const trial& t) override {
    const double score = detail::score_of(t);
    if (std::isfinite(score) && (!best_ || score < best_->second)) best_ = {t.config, score};
    const auto origin = walk_.take(t.key);
    if (origin == detail::walk::origin::neighbour) {
      if (accept(walk_.centre_score(), score)) walk_.move_to(*space_, t.config, score, random_);
      temperature_ *= options_.cooling;
    } else if (origin == detail::walk::origin::start && std::isfinite(score)) {
      if (!walk_.has_centre()) {
        walk_.move_to(*space_, t.config, score, random_);
        temperature_ = options_.initial_temperature;
      } else {
        walk_.add_spare(t.config, score);
      }
    }
  }

 private:
  bool accept(double current, double candidate) {
    if (candidate <= current) return true;
    if (!std::isfinite(candidate)) return false;
    return random_.uniform01() < std::exp(-energy_change(current, candidate) / temperature_);
  }
  void restart(bool may_use_best) {
    walk_.clear();
    temperature_ = options_.initial_temperature;
    if (may_use_best && best_ && random_.uniform01() < options_.restart_from_best) {
      walk_.move_to(*space_, best_->first, best_->second, random_);
    } else if (auto spare = walk_.pop_spare()) {
      walk_.move_to(*space_, spare->first, spare->second, random_);
    }
  }

  annealing_options options_;
  const space* space_ = nullptr;
  rng random_;
  detail::walk walk_;
  double temperature_ = 0;
  std::optional<std::pair<config, double>> best_;
};

}  // namespace

std::unique_ptr<strategy> make_annealing_strategy(const annealing_options& options) {
  options.validate();
  return std::make_unique<annealing_search>(options);
}

}  // namespace tessel
