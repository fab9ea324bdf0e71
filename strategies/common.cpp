#include "strategies/common.hpp"

#include <tessel/error.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>

namespace tessel::detail {

double score_of(const trial& t) noexcept {
  if (!t.result.ok() || std::isnan(t.result.objective))
    return std::numeric_limits<double>::infinity();
  return t.result.objective;
}

void options_failure(std::string_view where, std::string_view field, const std::string& rule) {
  throw options_error(std::string(where) + "." + std::string(field), rule);
}

std::string got(double value) {
  std::ostringstream out;
  out << " (got " << value << ")";
  return out.str();
}

std::string got(std::size_t value) { return " (got " + std::to_string(value) + ")"; }

std::size_t cost_draws(const search_context& context, std::size_t max_draws) {
  const double alpha = std::clamp(context.cost_alpha(), 0.0, 1.0);
  if (max_draws <= 1) return 1;
  return 1 + static_cast<std::size_t>(std::lround(static_cast<double>(max_draws - 1) * alpha));
}

std::optional<std::uint64_t> batch::add(const config& c) {
  if (full()) return std::nullopt;
  const auto key = context_.space().key(c);
  if (!fresh(key)) return std::nullopt;
  keys_.insert(key);
  configs_.push_back(c);
  return key;
}

std::vector<std::uint64_t> fill_uniform(batch& b, std::size_t n, rng& random,
                                        std::size_t attempts) {
  std::vector<std::uint64_t> added;
  const auto& s = b.space();
  bool scan = false;
  while (added.size() < n && !b.full() && !scan) {
    scan = true;
    for (std::size_t attempt = 0; attempt < attempts; ++attempt) {
      if (auto key = b.add(s.sample(random))) {
        added.push_back(*key);
        scan = false;
        break;
      }
    }
  }
  if (!scan) return added;
  // Nearly exhausted: every remaining fresh config lies somewhere on the ring of ranks.
  const std::uint64_t count = s.count();
  const std::uint64_t start = random.uniform(count);
  for (std::uint64_t step = 0; step < count && added.size() < n && !b.full(); ++step) {
    const std::uint64_t rank = step < count - start ? start + step : step - (count - start);
    if (auto key = b.add(s.at(rank))) added.push_back(*key);
  }
  return added;
}

std::vector<std::uint64_t> fill_cheapest(batch& b, std::size_t n, std::size_t draws, rng& random,
                                         std::size_t attempts) {
  if (draws <= 1) return fill_uniform(b, n, random, attempts);
  const auto& s = b.space();
  auto draw = [&]() -> std::optional<config> {
    for (std::size_t attempt = 0; attempt < attempts; ++attempt) {
      auto c = s.sample(random);
      if (b.fresh(s.key(c))) return c;
    }
    return std::nullopt;
  };
  std::vector<std::uint64_t> added;
  while (added.size() < n && !b.full()) {
    const auto cheapest = cheapest_of(b, draws, draw);
    if (!cheapest) {  // nearly exhausted: the uniform fill scans for what is left
      for (auto key : fill_uniform(b, n - added.size(), random, attempts)) added.push_back(key);
      break;
    }
    added.push_back(*b.add(*cheapest));
  }
  return added;
}

}  // namespace tessel::detail
