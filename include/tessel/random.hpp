// tessel/random.hpp: the one random engine every stochastic choice in tessel
// draws from. xoshiro256** (Blackman & Vigna, 2018) seeded through splitmix64,
// with bounded draws by Lemire's multiply-shift rejection (2019), so a seed
// reproduces the same stream on every platform and standard library.
#pragma once

#include <tessel/hash.hpp>

#include <array>
#include <cstdint>
#include <limits>

namespace tessel {

class rng {
 public:
  using result_type = std::uint64_t;

  explicit rng(std::uint64_t seed = 0) noexcept { reseed(seed); }

  void reseed(std::uint64_t seed) noexcept {
    for (auto& word : state_) word = splitmix64(seed);
  }

  /// A uniform 64-bit word.
  result_type operator()() noexcept {
    const std::uint64_t result = rotl(state_[1] * 5, 7) * 9;
    const std::uint64_t t = state_[1] << 17;
    state_[2] ^= state_[0];
    state_[3] ^= state_[1];
    state_[1] ^= state_[2];
    state_[0] ^= state_[3];
    state_[2] ^= t;
    state_[3] = rotl(state_[3], 45);
    return result;
  }

  /// Uniform integer in [0, bound); bound must be > 0.
  std::uint64_t uniform(std::uint64_t bound) noexcept {
    u128 m = static_cast<u128>((*this)()) * bound;
    auto low = static_cast<std::uint64_t>(m);
    if (low < bound) {
      const std::uint64_t threshold = (0 - bound) % bound;
      while (low < threshold) {
        m = static_cast<u128>((*this)()) * bound;
        low = static_cast<std::uint64_t>(m);
      }
    }
    return static_cast<std::uint64_t>(m >> 64);
  }

  /// Uniform double in [0, 1) with 53 random bits.
  double uniform01() noexcept { return static_cast<double>((*this)() >> 11) * 0x1.0p-53; }

  /// A new, independent engine derived from this one (for per-strategy streams).
  rng split() noexcept { return rng((*this)()); }

  static constexpr result_type min() noexcept { return 0; }
  static constexpr result_type max() noexcept { return std::numeric_limits<result_type>::max(); }

 private:
  __extension__ using u128 = unsigned __int128;
  static std::uint64_t rotl(std::uint64_t x, int k) noexcept { return (x << k) | (x >> (64 - k)); }
  std::array<std::uint64_t, 4> state_{};
};

}  // namespace tessel
