// tessel/loop_rule.hpp: how a timing loop changes its inputs between calls,
// so that no call of the loop is given inputs an earlier call was given
// (docs/gate.md, "Round seven"). Before every call after the loop's first,
// each input of n >= 2 elements has two of its elements exchanged, at
// positions drawn from a seed the gate passes: a pair whose values differ
// (up to `random_tries` random pairs, then the first element after the
// second position, cyclically, that differs from the first position's), so
// an input that is not one value everywhere changes at every step; never
// the pair the input's previous step exchanged (that would undo it and give
// a call the inputs of the call before last), unless the scan finds no other.
// An exchange keeps an input's values (int32 labels stay in their range) and
// costs two loads and two stores.
//
// Self-contained on purpose (the standard library only, everything inline):
// the cpu backend compiles this very file into its loader process
// (backends/cpu/loader.cpp), which applies the rule to its buffers, and the
// gate (gate_session::perturbed_set) replays it on the timed set's values to
// know the exact inputs of the loop's last call, whose outputs it judges.
// Both sides must draw the same pairs: `differ` compares element values
// (never bits: 0 and -0 are the same value), which are exact in the input's
// type on both sides.
#pragma once

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

/// The rule over a loop's inputs: one stream for all of them, in input
/// order; an input found to hold one value everywhere is left alone from
/// then on (an exchange cannot change it) and draws nothing more.
class walk {
 public:
  walk(std::uint64_t seed, std::size_t inputs)
      : stream_(seed), constant_(inputs, false), last_(inputs, {0, 0}) {}
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

 private:
  stream stream_;
  std::vector<bool> constant_;
  std::vector<std::pair<std::uint64_t, std::uint64_t>> last_;  ///< per input: its last exchange
};

}  // namespace tessel::loop_rule
