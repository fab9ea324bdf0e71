// Private: the genetic algorithm's variation operators, separate from its
// population bookkeeping so tests can check them directly. Not installed.
#pragma once

#include <tessel/config.hpp>
#include <tessel/random.hpp>
#include <tessel/space.hpp>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace tessel::detail {

/// The lexicographic rank of an element order (a permutation of 0..n-1):
/// the inverse of domain::permutation, so the domain index of that order.
[[nodiscard]] std::uint32_t permutation_rank(const std::vector<std::size_t>& order);

/// Order crossover OX1 (Davis, "Applying adaptive algorithms to epistatic
/// domains", IJCAI 1985): the child keeps first[lo..hi] in place; the other
/// positions, from hi+1 wrapping around, take the elements of `second` not
/// yet placed, in second's order starting from position hi+1. Requires
/// first and second to be permutations of 0..n-1 and lo <= hi < n; the
/// child is always a permutation of 0..n-1.
[[nodiscard]] std::vector<std::size_t> order_crossover(const std::vector<std::size_t>& first,
                                                       const std::vector<std::size_t>& second,
                                                       std::size_t lo, std::size_t hi);

/// A child of `a` and `b` (configs of `s`): each non-permutation parameter
/// from either parent with probability 1/2 (uniform crossover); each
/// permutation by OX1 with uniformly drawn cut points when active in both
/// parents, else from either parent. The child may be invalid.
[[nodiscard]] config crossover(const space& s, const config& a, const config& b, rng& random);

/// A valid config as close to `child` as a greedy pass finds: start from
/// `parent` (which must be valid) and adopt child's value of each differing
/// parameter, in random order, whenever the result stays valid; then try the
/// still-differing parameters in pairs (a `when` condition and the
/// parameter it switches must change together). Returns parent unchanged
/// when no adoption keeps the config valid.
[[nodiscard]] config repair_toward(const space& s, const config& child, const config& parent,
                                   rng& random);

}  // namespace tessel::detail
