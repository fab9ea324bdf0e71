// tessel/hash.hpp: the non-cryptographic hashes behind tessel's stable
// identities, one implementation that every module calls. No dependency
// provides them (Boost 1.74 has neither), so they live here.
// - FNV-1a, 64-bit (Fowler, Noll & Vo; parameters from the authors' page,
//   http://www.isthe.com/chongo/tech/comp/fnv/): config keys (space::key) and
//   study files' space_hash are FNV-1a values stored on disk, so these
//   functions must never change what they return.
// - splitmix64 (Steele, Lea & Flood, "Fast splittable pseudorandom number
//   generators", OOPSLA 2014): seeds tessel::rng and mixes seeds.
#pragma once

#include <cstdint>
#include <string_view>

namespace tessel {

inline constexpr std::uint64_t fnv1a_offset_basis = 0xcbf29ce484222325ULL;
inline constexpr std::uint64_t fnv1a_prime = 0x100000001b3ULL;

/// One FNV-1a step that folds in `word` whole: a byte for the standard hash
/// of bytes, or a wider value (config_hash folds in each 32-bit index).
[[nodiscard]] constexpr std::uint64_t fnv1a_step(std::uint64_t h, std::uint64_t word) noexcept {
  return (h ^ word) * fnv1a_prime;
}

/// FNV-1a of `bytes`, continuing from `h`: hash several pieces by chaining
/// `h = fnv1a(piece, h)`, which equals the hash of their concatenation.
[[nodiscard]] constexpr std::uint64_t fnv1a(std::string_view bytes,
                                            std::uint64_t h = fnv1a_offset_basis) noexcept {
  for (const char c : bytes) h = fnv1a_step(h, static_cast<unsigned char>(c));
  return h;
}

/// The splitmix64 finaliser: a bijective mix of the 64 bits of `z`.
[[nodiscard]] constexpr std::uint64_t splitmix64_mix(std::uint64_t z) noexcept {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

/// The splitmix64 generator: advances `state` by the golden-ratio increment
/// and returns the mix of the new state.
[[nodiscard]] constexpr std::uint64_t splitmix64(std::uint64_t& state) noexcept {
  state += 0x9e3779b97f4a7c15ULL;
  return splitmix64_mix(state);
}

}  // namespace tessel
