#include "strategies/common.hpp"

#include <tessel/error.hpp>

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
  throw options_error(std::string(where) + "." + std::string(field) + ": " + rule);
}

std::string got(double value) {
  std::ostringstream out;
  out << " (got " << value << ")";
  return out.str();
}

std::string got(std::size_t value) { return " (got " + std::to_string(value) + ")"; }

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

}  // namespace tessel::detail
