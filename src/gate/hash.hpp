// gate/hash.hpp: the counter-based hash the gate draws from. Any element of
// any hidden input is a pure function of (seed, index), computed in O(1).
#pragma once

#include <cstdint>

namespace tessel::detail {

/// The splitmix64 finalizer (Steele, Lea & Flood, 2014): a bijective 64-bit mix.
constexpr std::uint64_t mix64(std::uint64_t z) noexcept {
  z += 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

/// A well-mixed word from a seed and a counter.
constexpr std::uint64_t hash(std::uint64_t seed, std::uint64_t counter) noexcept {
  return mix64(seed ^ mix64(counter + 0x632be59bd9b4e019ULL));
}

}  // namespace tessel::detail
