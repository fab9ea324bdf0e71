// tessel/loop_rule.hpp: how a timing loop changes its inputs between calls,
// so that no call of the loop is given inputs an earlier call was given
// (docs/gate.md, "Round seven"), and so that every call's changes reach
// every row and column of every input (docs/gate.md, "Round ten (b)").
// Before every call after the loop's first, each input of n >= 2 elements
// changes by exchanges of its elements, at positions drawn from a seed the
// gate passes:
//
// - The step: a pair whose values differ (up to `random_tries` random
//   pairs, then the first element after the second position, cyclically,
//   that differs from the first position's), so an input that is not one
//   value everywhere changes at every step; never the pair the input's
//   previous step exchanged (that would undo it and give a call the inputs
//   of the call before last), unless the scan finds no other.
// - The sweep: for an input of extents d_0..d_{r-1}, the m = max(d_i)
//   positions of a diagonal (k + o_0, ..., k + o_{r-1}), each index modulo
//   its extent, k = 0..m-1, its offsets o_i drawn per call, so every index
//   of every axis is on it; each exchanged with a partner whose value
//   differs (up to `random_tries` draws in its own last-axis row, then a
//   scan of that row from a random position, then `random_tries` draws
//   anywhere; none found: left alone), a partner off the diagonal and off
//   the step's pair. Every position of the diagonal and the step's
//   pair is exchanged once in the call, so each one's value changes: a
//   kernel that keeps its previous inputs and outputs and recomputes only
//   the rows or columns its changed elements reach recomputes them all. A
//   rank-1 input of n elements (axes of extent 1 do not count) is swept as
//   a (ceil(n / w), w) matrix, w = ceil(sqrt(n)): one change in each run of
//   w elements.
//
// An exchange keeps an input's values (int32 labels stay in their range)
// and costs two loads and two stores; a call costs about m + 1 of them per
// input.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace tessel::loop_rule {

/// Random pairs drawn before the fallback scan.
inline constexpr int random_tries = 8;

/// splitmix64 (Steele, Lea and Flood, 2014): the positions' stream.
class stream {
 public:
  explicit stream(std::uint64_t seed) noexcept : state_(seed) {}
  std::uint64_t next() noexcept {
    std::uint64_t z = state_ += 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }

 private:
  std::uint64_t state_;
};

/// One step of the rule on one input of `n` elements: sets `a` and `b` to
/// the positions to exchange and returns true, or returns false (a = b = 0)
/// when every element holds the same value (or n < 2). `differ(a, b)`:
/// whether the elements at a and b hold different values. The pair
/// (`last_a`, `last_b`) (equal: none) is taken only when the scan finds no
/// other: exchanging it again would undo the previous step.
template <class Differ>
bool pick(stream& s, std::uint64_t n, Differ&& differ, std::uint64_t& a, std::uint64_t& b,
          std::uint64_t last_a = 0, std::uint64_t last_b = 0) {
  a = b = 0;
  if (n < 2) return false;
  const auto undoes = [last_a, last_b](std::uint64_t x, std::uint64_t y) {
    return last_a != last_b && ((x == last_a && y == last_b) || (x == last_b && y == last_a));
  };
  for (int t = 0; t < random_tries; ++t) {
    const std::uint64_t x = s.next() % n, y = s.next() % n;
    if (x != y && !undoes(x, y) && differ(x, y)) {
      a = x;
      b = y;
      return true;
    }
  }
  // Few values (a mask, sparse labels) or nearly constant: scan from a
  // random position for one that differs from another random one.
  const std::uint64_t x = s.next() % n, start = s.next() % n;
  bool undo = false;
  for (std::uint64_t k = 0; k < n; ++k) {
    const std::uint64_t y = (start + k) % n;
    if (y != x && differ(x, y)) {
      if (undoes(x, y)) {
        undo = true;
        continue;
      }
      a = x;
      b = y;
      return true;
    }
  }
  if (!undo) return false;
  a = last_a;
  b = last_b;
  return true;
}

/// The sweep's working state for one input, kept across calls so that a
/// call allocates nothing: the matrix's extents and strides (made on the
/// first call), the diagonal (each position and its row's first), and a
/// byte per element, set during a call on the diagonal's positions and the
/// step's pair and cleared at the call's end.
struct sweep_scratch {
  std::uint64_t n = 0, m = 0;
  std::vector<std::uint64_t> ext, stride, at, diagonal, row_start;
  std::vector<std::uint8_t> mark;
};

/// The sweep of one call on an input of extents `dims` (any container of
/// integers; their product is the input's element count) after the step
/// exchanged (a, b) (a = b: none): calls `exchange(p, q)` for each pair, in
/// order, after `differ(p, q)` said their values differ (on the values
/// after the exchanges before it). Returns how many pairs it exchanged.
template <class Dims, class Differ, class Exchange>
std::uint64_t sweep(stream& s, const Dims& dims, std::uint64_t a, std::uint64_t b, Differ&& differ,
                    Exchange&& exchange, sweep_scratch& scratch) {
  std::uint64_t n = 1;
  for (const auto d : dims) n *= static_cast<std::uint64_t>(d);
  if (n < 2) return 0;
  // Named references, not a structured binding: the lambda below reads
  // `mark`, and clang before 16 cannot capture a binding.
  auto& n_kept = scratch.n;
  auto& m = scratch.m;
  auto& ext = scratch.ext;
  auto& stride = scratch.stride;
  auto& at = scratch.at;
  auto& diagonal = scratch.diagonal;
  auto& row_start = scratch.row_start;
  auto& mark = scratch.mark;
  if (n_kept != n) {  // the matrix the diagonal runs on: the extents, or a vector as rows of w
    n_kept = n;
    ext.clear();
    for (const auto d : dims)  // an axis of extent 1 has one index: none to sweep
      if (d > 1) ext.push_back(static_cast<std::uint64_t>(d));
    if (ext.size() == 1) {
      auto w = static_cast<std::uint64_t>(std::ceil(std::sqrt(static_cast<double>(n))));
      while (w * w < n) ++w;
      while (w > 1 && (w - 1) * (w - 1) >= n) --w;
      ext.assign({(n + w - 1) / w, w});
    }
    stride.assign(ext.size(), 1);
    for (std::size_t d = ext.size() - 1; d > 0; --d) stride[d - 1] = stride[d] * ext[d];
    at.resize(ext.size());
    m = *std::max_element(ext.begin(), ext.end());
    mark.assign(n, 0);
  }
  const std::size_t r = ext.size();
  for (std::size_t d = 0; d < r; ++d)
    at[d] = s.next() % ext[d];  // the diagonal's offset on axis d: its index at k = 0
  // The diagonal's positions (k = 0..m-1), marked with the step's pair: no
  // partner is taken among them, so each is exchanged once in the call.
  diagonal.clear();
  row_start.clear();
  // In runs: until an axis wraps, the diagonal steps by the sum of the
  // strides and its row's first position by that less one.
  std::uint64_t pos = 0, step = 0;
  for (std::size_t d = 0; d < r; ++d) {
    pos += at[d] * stride[d];
    step += stride[d];
  }
  for (std::uint64_t k = 0; k < m;) {
    std::uint64_t run = m - k;
    for (std::size_t d = 0; d < r; ++d) run = std::min(run, ext[d] - at[d]);
    std::uint64_t first = pos - at[r - 1];
    for (std::uint64_t j = 0; j < run; ++j, pos += step, first += step - 1)
      if (pos < n) {
        diagonal.push_back(pos);
        row_start.push_back(first);
        mark[pos] = 1;
      }
    k += run;
    for (std::size_t d = 0; d < r; ++d)
      if ((at[d] += run) == ext[d]) {
        at[d] = 0;
        pos -= ext[d] * stride[d];
      }
  }
  if (a != b) mark[a] = mark[b] = 1;
  const std::uint64_t row = ext[r - 1];
  const auto free = [&](std::uint64_t p, std::uint64_t q) {
    return q < n && mark[q] == 0 && differ(p, q);
  };
  std::uint64_t exchanged = 0;
  for (std::size_t j = 0; j < diagonal.size(); ++j) {
    const std::uint64_t p = diagonal[j], first = row_start[j];
    if (a != b && (p == a || p == b)) continue;
    bool found = false;
    std::uint64_t q = 0;
    for (int t = 0; t < random_tries && row >= 2 && !found; ++t) {
      q = first + s.next() % row;
      found = free(p, q);
    }
    if (!found && row >= 2) {  // few values: its row from a random position
      const std::uint64_t start = s.next() % row;
      for (std::uint64_t i = 0; i < row && !found; ++i) {
        q = first + (start + i) % row;
        found = free(p, q);
      }
    }
    for (int t = 0; t < random_tries && !found; ++t) {  // a row of one value
      q = s.next() % n;
      found = free(p, q);
    }
    if (!found) continue;
    exchange(p, q);
    ++exchanged;
  }
  for (const std::uint64_t p : diagonal) mark[p] = 0;
  if (a != b) mark[a] = mark[b] = 0;
  return exchanged;
}

/// The rule over a loop's inputs: one stream for all of them, in input
/// order; an input found to hold one value everywhere is left alone from
/// then on (an exchange cannot change it) and draws nothing more.
class walk {
 public:
  walk(std::uint64_t seed, std::size_t inputs)
      : stream_(seed), constant_(inputs, false), last_(inputs, {0, 0}), scratch_(inputs) {}
  /// The exchange before the next call on input `i` of `n` elements (call
  /// it for every input in order, once per step); false: none.
  template <class Differ>
  bool step(std::size_t i, std::uint64_t n, Differ&& differ, std::uint64_t& a, std::uint64_t& b) {
    a = b = 0;
    if (constant_[i]) return false;
    if (pick(stream_, n, differ, a, b, last_[i].first, last_[i].second)) {
      last_[i] = {a, b};
      return true;
    }
    constant_[i] = true;
    return false;
  }
  /// Every change before the next call on input `i` of extents `dims`: the
  /// step, then the sweep (call it for every input in order, once per call).
  /// `exchange(p, q)` is called for each pair, in order: it must exchange
  /// them in what `differ` reads. Returns how many pairs it exchanged (0:
  /// the input holds one value everywhere).
  template <class Dims, class Differ, class Exchange>
  std::uint64_t call(std::size_t i, const Dims& dims, Differ&& differ, Exchange&& exchange) {
    std::uint64_t n = 1;
    for (const auto d : dims) n *= static_cast<std::uint64_t>(d);
    std::uint64_t a = 0, b = 0;
    if (!step(i, n, differ, a, b)) return 0;
    exchange(a, b);
    return 1 + sweep(stream_, dims, a, b, differ, exchange, scratch_[i]);
  }

 private:
  stream stream_;
  std::vector<bool> constant_;
  std::vector<std::pair<std::uint64_t, std::uint64_t>> last_;  ///< per input: its last exchange
  std::vector<sweep_scratch> scratch_;                         ///< per input
};

}  // namespace tessel::loop_rule
