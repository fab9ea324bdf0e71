// "Did you mean" hints by edit distance (include/tessel/did_you_mean.hpp).
#include <tessel/did_you_mean.hpp>

#include <algorithm>
#include <cstddef>

namespace tessel {

namespace {

/// Optimal-string-alignment distance (Levenshtein plus adjacent swaps).
std::size_t edit_distance(std::string_view a, std::string_view b) {
  const std::size_t n = a.size();
  const std::size_t m = b.size();
  std::vector<std::vector<std::size_t>> d(n + 1, std::vector<std::size_t>(m + 1, 0));
  for (std::size_t i = 0; i <= n; ++i) d[i][0] = i;
  for (std::size_t j = 0; j <= m; ++j) d[0][j] = j;
  for (std::size_t i = 1; i <= n; ++i) {
    for (std::size_t j = 1; j <= m; ++j) {
      std::size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
  }
  return d[n][m];
}

}  // namespace

std::string closest_name(std::string_view name, const std::vector<std::string>& candidates) {
  const std::size_t limit = name.size() <= 4 ? 1 : 2;
  std::string best;
  std::size_t best_distance = limit + 1;
  for (const auto& candidate : candidates) {
    if (candidate == name) continue;
    auto distance = edit_distance(name, candidate);
    if (distance < best_distance && distance < name.size()) {
      best = candidate;
      best_distance = distance;
    }
  }
  return best;
}

std::string did_you_mean(std::string_view name, const std::vector<std::string>& candidates) {
  auto best = closest_name(name, candidates);
  return best.empty() ? std::string() : "did you mean '" + best + "'?";
}

}  // namespace tessel
