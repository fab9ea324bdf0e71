// "Did you mean" hints by edit distance (include/tessel/did_you_mean.hpp).
#include <tessel/did_you_mean.hpp>

#include <algorithm>

namespace tessel {

std::size_t edit_distance(std::string_view a, std::string_view b) {
  // Three rows of the dynamic programme: the swap looks two rows back.
  const std::size_t m = b.size();
  std::vector<std::size_t> before(m + 1), above(m + 1), row(m + 1);
  for (std::size_t j = 0; j <= m; ++j) above[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    row[0] = i;
    for (std::size_t j = 1; j <= m; ++j) {
      const std::size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      row[j] = std::min({above[j] + 1, row[j - 1] + 1, above[j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        row[j] = std::min(row[j], before[j - 2] + 1);
    }
    std::swap(before, above);
    std::swap(above, row);
  }
  return above[m];
}

std::string closest_name(std::string_view name, std::span<const std::string_view> candidates) {
  const std::size_t limit = name.size() <= 4 ? 1 : 2;
  std::string_view best;
  std::size_t best_distance = limit + 1;
  for (const auto candidate : candidates) {
    if (candidate == name) continue;
    const auto distance = edit_distance(name, candidate);
    if (distance < best_distance && distance < name.size()) {
      best = candidate;
      best_distance = distance;
    }
  }
  return std::string(best);
}

std::string closest_name(std::string_view name, const std::vector<std::string>& candidates) {
  const std::vector<std::string_view> views(candidates.begin(), candidates.end());
  return closest_name(name, views);
}

std::string did_you_mean(std::string_view name, std::span<const std::string_view> candidates) {
  auto best = closest_name(name, candidates);
  return best.empty() ? std::string() : "did you mean '" + best + "'?";
}

std::string did_you_mean(std::string_view name, const std::vector<std::string>& candidates) {
  const std::vector<std::string_view> views(candidates.begin(), candidates.end());
  return did_you_mean(name, views);
}

std::string unknown_name(std::string_view what, std::string_view name, std::string_view quoted,
                         const std::vector<std::string>& candidates, std::string_view rest) {
  const auto hint = did_you_mean(name, candidates);
  std::string out = "unknown " + std::string(what) + " " + std::string(quoted);
  if (hint.empty()) return out + ": " + std::string(rest);
  return out + "; " + hint + " (" + std::string(rest) + ")";
}

}  // namespace tessel
