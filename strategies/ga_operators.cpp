#include "strategies/ga_operators.hpp"

#include "strategies/common.hpp"

namespace tessel::detail {

std::uint32_t permutation_rank(const std::vector<std::size_t>& order) {
  // Lehmer code digits times factorials (the factorial number system).
  std::uint32_t rank = 0;
  for (std::size_t i = 0; i < order.size(); ++i) {
    std::uint32_t smaller_after = 0;
    for (std::size_t j = i + 1; j < order.size(); ++j) smaller_after += order[j] < order[i] ? 1 : 0;
    rank = rank * static_cast<std::uint32_t>(order.size() - i) + smaller_after;
  }
  return rank;
}

std::vector<std::size_t> order_crossover(const std::vector<std::size_t>& first,
                                         const std::vector<std::size_t>& second, std::size_t lo,
                                         std::size_t hi) {
  const std::size_t n = first.size();
  std::vector<std::size_t> child(n);
  std::vector<bool> placed(n, false);
  for (std::size_t i = lo; i <= hi; ++i) {
    child[i] = first[i];
    placed[first[i]] = true;
  }
  std::size_t write = (hi + 1) % n;
  for (std::size_t step = 0; step < n; ++step) {
    const std::size_t element = second[(hi + 1 + step) % n];
    if (placed[element]) continue;
    child[write] = element;
    placed[element] = true;
    write = (write + 1) % n;
  }
  return child;
}

namespace {

config::index_type permutation_child(const domain& d, config::index_type a, config::index_type b,
                                     rng& random) {
  const auto first = d.permutation(a);
  const auto n = first.size();
  if (n < 2) return a;
  std::size_t lo = random.uniform(n), hi = random.uniform(n);
  if (lo > hi) std::swap(lo, hi);
  return permutation_rank(order_crossover(first, d.permutation(b), lo, hi));
}

}  // namespace

config crossover(const space& s, const config& a, const config& b, rng& random) {
  config child = a;
  for (std::size_t p = 0; p < s.size(); ++p) {
    const auto& d = s.parameters()[p].dom;
    const bool both_active = a[p] != config::inactive && b[p] != config::inactive;
    if (d.kind == param_kind::permutation && both_active) {
      child[p] = permutation_child(d, a[p], b[p], random);
    } else if (random.uniform(2) == 1) {
      child[p] = b[p];
    }
  }
  return child;
}

config repair_toward(const space& s, const config& child, const config& parent, rng& random) {
  config current = parent;
  std::vector<std::size_t> differing;
  for (std::size_t p = 0; p < s.size(); ++p)
    if (child[p] != parent[p]) differing.push_back(p);
  shuffle(differing, random);
  std::vector<std::size_t> left;
  for (auto p : differing) {
    current[p] = child[p];
    if (!s.is_valid(current)) {
      current[p] = parent[p];
      left.push_back(p);
    }
  }
  for (std::size_t i = 0; i < left.size(); ++i) {
    for (std::size_t j = i + 1; j < left.size(); ++j) {
      const auto p = left[i], q = left[j];
      if (current[p] == child[p] || current[q] == child[q]) continue;
      const auto old_p = current[p], old_q = current[q];
      current[p] = child[p];
      current[q] = child[q];
      if (!s.is_valid(current)) {
        current[p] = old_p;
        current[q] = old_q;
      }
    }
  }
  return current;
}

}  // namespace tessel::detail
