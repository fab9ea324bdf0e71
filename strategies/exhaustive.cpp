// `exhaustive`: every valid config once, in rank order or in a seeded
// pseudo-random order of ranks, skipping configs already known.
#include "strategies/common.hpp"

#include <tessel/hash.hpp>
#include <tessel/strategies.hpp>

#include <array>
#include <bit>

namespace tessel {

void exhaustive_options::validate() const {}

namespace {

/// A seeded bijection of [0, count): a 4-round balanced Feistel network on
/// the smallest even number of bits covering count, with cycle walking
/// (Black & Rogaway, "Ciphers with arbitrary finite domains", CT-RSA 2002).
/// The walk stays inside [0, count) because a permutation's cycle through a
/// point below count returns below count; each step lands below count with
/// probability > 1/4, so the expected cost is at most 4 rounds of 4 hashes.
class rank_permutation {
 public:
  rank_permutation() = default;
  rank_permutation(std::uint64_t count, rng& random) : count_(count) {
    const int bits = count > 1 ? static_cast<int>(std::bit_width(count - 1)) : 1;
    half_ = (bits + 1) / 2;
    mask_ = half_ >= 32 ? 0xFFFF'FFFFULL : (1ULL << half_) - 1;
    for (auto& k : keys_) k = random();
  }
  [[nodiscard]] std::uint64_t operator()(std::uint64_t index) const {
    std::uint64_t x = encrypt(index);
    while (x >= count_) x = encrypt(x);
    return x;
  }

 private:
  [[nodiscard]] std::uint64_t encrypt(std::uint64_t x) const {
    std::uint64_t left = (x >> half_) & mask_, right = x & mask_;
    for (auto key : keys_) {
      const std::uint64_t next = left ^ (splitmix64_mix(right ^ key) & mask_);
      left = right;
      right = next;
    }
    return (left << half_) | right;
  }
  std::uint64_t count_ = 0;
  int half_ = 1;
  std::uint64_t mask_ = 1;
  std::array<std::uint64_t, 4> keys_{};
};

class exhaustive_search final : public strategy {
 public:
  explicit exhaustive_search(const exhaustive_options& o) : options_(o) {}
  [[nodiscard]] std::string name() const override { return "exhaustive"; }

  void start(const space& s, std::uint64_t seed) override {
    rng random(seed);
    count_ = s.count();
    next_ = 0;
    order_ = rank_permutation(count_, random);
  }

  /// The next n unknown configs in order; fewer (finally none) once every
  /// rank has been passed. A config skipped because it was known is not
  /// revisited.
  std::vector<config> propose(std::size_t n, const search_context& context) override {
    detail::batch b(context, n);
    while (!b.full() && next_ < count_) {
      const std::uint64_t rank = options_.shuffle ? order_(next_) : next_;
      ++next_;
      b.add(context.space().at(rank));
    }
    return b.take();
  }
  void observe(const trial&) override {}

 private:
  exhaustive_options options_;
  std::uint64_t count_ = 0;
  std::uint64_t next_ = 0;
  rank_permutation order_;
};

}  // namespace

std::unique_ptr<strategy> make_exhaustive_strategy(const exhaustive_options& options) {
  options.validate();
  return std::make_unique<exhaustive_search>(options);
}

}  // namespace tessel
