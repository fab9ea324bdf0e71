// tessel/loop_rule.hpp: how a timing loop changes its inputs between calls,
// so that no call of the loop is given inputs an earlier call was given
// (docs/gate.md, "Round seven"), and so that every call's changes reach
// every row and column of every input (docs/gate.md, "Round ten (b)"), and
// so that nearly every element of an input differs from the call before's
// (docs/gate.md, "Round eleven").
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
// - The turn: what the call is given is the input so exchanged (its base)
//   with each row (the last axis of the sweep's matrix: a vector's rows of
//   w) rotated by its own offset, drawn afresh per call, row and input from
//   the seed, the call's index and the input's (not from the turns before:
//   replaying a loop turns only its last call), with the parity of the
//   call's index, so a row's offset always differs from the call before's:
//   every element of a row that holds more than one value is likely to
//   change, and the offsets of different rows are unrelated, so no kernel
//   can turn a kept output as a whole.
//
// An exchange and a turn keep an input's values (int32 labels stay in their
// range, masks stay 0 or 1, magnitudes stay as drawn); an exchange costs two
// loads and two stores, about m + 1 of them per input and call, and the turn
// (made in place, from each row's offset in the call before) a few copies
// of each row within the cache.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

namespace tessel::loop_rule {

/// Random pairs drawn before the fallback scan.
inline constexpr int random_tries = 8;

/// splitmix64's output function (Steele, Lea and Flood, 2014).
inline std::uint64_t mix(std::uint64_t z) noexcept {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

/// splitmix64: the positions' stream.
class stream {
 public:
  explicit stream(std::uint64_t seed) noexcept : state_(seed) {}
  std::uint64_t next() noexcept { return mix(state_ += 0x9e3779b97f4a7c15ULL); }

 private:
  std::uint64_t state_;
};

/// The element count of an input of extents `dims` (any container of integers).
template <class Dims>
std::uint64_t elements(const Dims& dims) {
  std::uint64_t n = 1;
  for (const auto d : dims) n *= static_cast<std::uint64_t>(d);
  return n;
}

/// The rows of w elements a vector of n elements is swept and turned as:
/// w = ceil(sqrt(n)).
inline std::uint64_t vector_width(std::uint64_t n) {
  auto w = static_cast<std::uint64_t>(std::ceil(std::sqrt(static_cast<double>(n))));
  while (w * w < n) ++w;
  while (w > 1 && (w - 1) * (w - 1) >= n) --w;
  return w;
}

/// The length of the rows the sweep's matrix of an input of extents `dims`
/// and `n` = elements(dims) elements has: its last extent above 1, or a
/// vector's vector_width; n (0 or 1) for an input of fewer than 2 elements.
template <class Dims>
std::uint64_t row_length(const Dims& dims, std::uint64_t n) {
  if (n < 2) return n;
  std::uint64_t last = 1;
  int axes = 0;
  for (const auto d : dims)
    if (d > 1) {
      last = static_cast<std::uint64_t>(d);
      ++axes;
    }
  return axes > 1 ? last : vector_width(n);
}

/// row_length(dims, n) of an input whose element count is not at hand.
template <class Dims>
std::uint64_t row_length(const Dims& dims) {
  return row_length(dims, elements(dims));
}

/// The turn of call `call` (the loop's calls counted from 0; call 0 is not
/// turned) on input `input` of `n` elements in rows of `length`: calls
/// `turn(start, len, offset)` for every row in order (the last may be
/// shorter), offset in [0, len): the call is given, at (row, j), its base's
/// (row, (j - offset) mod len). A row's offset is drawn from the seed, the
/// call and the input alone, among those of the call's parity (a row of 2:
/// 0, 1, 0, 1, ...).
template <class Turn>
void turns(std::uint64_t seed, std::uint64_t call, std::size_t input, std::uint64_t n,
           std::uint64_t length, Turn&& turn) {
  stream s(mix(mix(mix(seed + 0x7475726e73ULL) + call) + input));
  const std::uint64_t parity = call & 1;
  for (std::uint64_t start = 0; start < n; start += length) {
    const std::uint64_t len = std::min(length, n - start);
    std::uint64_t offset = 0;
    if (call > 0 && len >= 2) offset = parity + 2 * (s.next() % ((len + 1 - parity) / 2));
    turn(start, len, offset);
  }
}

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
  const std::uint64_t n = elements(dims);
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
      const std::uint64_t w = vector_width(n);
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

/// Exchanges the elements at x and y of `data`, of T.
template <class T>
void swap_as(void* data, std::size_t x, std::size_t y) {
  T* p = static_cast<T*>(data);
  const T t = p[x];
  p[x] = p[y];
  p[y] = t;
}

/// Exchanges the elements at x and y of `data`, of `size` bytes each (2 or 4).
inline void swap_elements(void* data, std::size_t size, std::size_t x, std::size_t y) {
  if (size == 2)
    swap_as<std::uint16_t>(data, x, y);
  else
    swap_as<std::uint32_t>(data, x, y);
}

/// Rotates each row of `data` (n elements of `size` bytes in rows of
/// `length`, the last maybe shorter: loop_rule::turns) in place by its
/// offset (`offsets`, one a row): (row, j) takes (row, (j - offset) mod
/// len). `scratch`: at least `length` elements. Three copies a row, whose
/// sizes follow the offset: for rows long enough that a mispredicted branch
/// is small beside the copy (a timing loop turns short rows from a
/// `doubled` base).
inline void turn_in_place(void* data, std::size_t size, std::uint64_t n, std::uint64_t length,
                          const std::uint32_t* offsets, void* scratch) {
  auto* p = static_cast<unsigned char*>(data);
  for (std::uint64_t start = 0; start < n; start += length, ++offsets) {
    const std::uint64_t len = std::min(length, n - start), offset = *offsets;
    if (offset == 0) continue;
    unsigned char* row = p + start * size;
    std::memcpy(scratch, row + (len - offset) * size, offset * size);
    std::memmove(row + offset * size, row, (len - offset) * size);
    std::memcpy(row, scratch, offset * size);
  }
}

/// An input's base (the exchanges made, before the turn) with each row held
/// twice, for a timing loop that gives calls their inputs turned: row r, of
/// `len` elements (the last may be shorter than `length`), at
/// [2 r length + length - len, ... + len), then again, so the row rotated by
/// any offset is one copy of `len` elements, from 2 r length + length -
/// offset, in a loop of a fixed length (copies of sizes drawn per call cost
/// a mispredicted branch each, several times a short row's copy).
class doubled {
 public:
  /// An exchange on the doubled base: the elements at a and b, and their
  /// second copies at a2 and b2.
  struct exchange {
    std::size_t a = 0, b = 0, a2 = 0, b2 = 0;
  };
  /// `data`: the base, n elements of `size` bytes (2 or 4); `length`: its
  /// rows' (row_length).
  doubled(const void* data, std::uint64_t n, std::size_t size, std::uint64_t length)
      : n_(n),
        length_(length),
        size_(size),
        bytes_(length == 0 ? 0 : (n + length - 1) / length * 2 * length * size) {
    const auto* from = static_cast<const unsigned char*>(data);
    for (std::uint64_t start = 0; start < n_; start += length_) {
      const std::uint64_t len = std::min(length_, n_ - start);
      unsigned char* first = bytes_.data() + at(start).first * size_;
      std::memcpy(first, from + start * size_, len * size_);
      std::memcpy(first + len * size_, from + start * size_, len * size_);
    }
  }
  /// The exchange of flat positions x and y.
  [[nodiscard]] exchange exchange_of(std::uint64_t x, std::uint64_t y) const {
    const auto [a, a2] = at(x);
    const auto [b, b2] = at(y);
    return {a, b, a2, b2};
  }
  void apply(const exchange& e) {
    swap_elements(bytes_.data(), size_, e.a, e.b);
    swap_elements(bytes_.data(), size_, e.a2, e.b2);
  }
  /// Writes the input to `to`, each row rotated by its offset (`offsets`,
  /// one a row, in order: loop_rule::turns).
  void write(void* to, const std::uint32_t* offsets) const {
    if (size_ == 2)
      write_as<std::uint16_t>(to, offsets);
    else
      write_as<std::uint32_t>(to, offsets);
  }

 private:
  /// Where flat position p's element is held: its first copy and its second.
  [[nodiscard]] std::pair<std::size_t, std::size_t> at(std::uint64_t p) const {
    const std::uint64_t start = p / length_ * length_, len = std::min(length_, n_ - start);
    const std::uint64_t first = 2 * start + length_ - len + (p - start);
    return {static_cast<std::size_t>(first), static_cast<std::size_t>(first + len)};
  }
  template <class T>
  void write_as(void* to, const std::uint32_t* offsets) const {
    T* dst = static_cast<T*>(to);
    const T* src = reinterpret_cast<const T*>(bytes_.data());
    for (std::uint64_t start = 0; start < n_; start += length_, ++offsets) {
      const std::uint64_t len = std::min(length_, n_ - start);
      const T* from = src + 2 * start + length_ - *offsets;
      for (std::uint64_t k = 0; k < len; ++k) dst[start + k] = from[k];
    }
  }
  std::uint64_t n_, length_;
  std::size_t size_;
  std::vector<unsigned char> bytes_;
};

/// The rule over a loop's inputs: one stream for all of them, in input
/// order; an input found to hold one value everywhere is left alone from
/// then on (an exchange cannot change it) and draws nothing more. `call`
/// changes an input's base; `turn` says what a call is given from it.
class walk {
 public:
  walk(std::uint64_t seed, std::size_t inputs)
      : seed_(seed),
        stream_(seed),
        constant_(inputs, false),
        last_(inputs, {0, 0}),
        scratch_(inputs) {}
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
    const std::uint64_t n = elements(dims);
    std::uint64_t a = 0, b = 0;
    if (!step(i, n, differ, a, b)) return 0;
    exchange(a, b);
    return 1 + sweep(stream_, dims, a, b, differ, exchange, scratch_[i]);
  }
  /// The turn of call `call` on input `i` of extents `dims` (loop_rule::turns):
  /// `turn(start, length, offset)` for each row. Independent of the
  /// exchanges: drawn from the seed, not from the walk's stream.
  template <class Dims, class Turn>
  void turn(std::uint64_t call, std::size_t i, const Dims& dims, Turn&& turn) const {
    const std::uint64_t n = elements(dims);
    turns(seed_, call, i, n, row_length(dims, n), turn);
  }
  /// `values`, input i's base (the exchanges made), made into what call
  /// `call` is given: each row rotated by its offset.
  template <class Dims, class Values>
  void turn_values(std::uint64_t call, std::size_t i, const Dims& dims, Values& values) const {
    turn(call, i, dims, [&values](std::uint64_t start, std::uint64_t len, std::uint64_t offset) {
      const auto first = values.begin() + static_cast<std::ptrdiff_t>(start);
      const auto end = first + static_cast<std::ptrdiff_t>(len);
      if (offset > 0) std::rotate(first, end - static_cast<std::ptrdiff_t>(offset), end);
    });
  }

 private:
  std::uint64_t seed_;
  stream stream_;
  std::vector<bool> constant_;
  std::vector<std::pair<std::uint64_t, std::uint64_t>> last_;  ///< per input: its last exchange
  std::vector<sweep_scratch> scratch_;                         ///< per input
};

}  // namespace tessel::loop_rule
