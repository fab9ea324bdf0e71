// gate/keyed.hpp: the gate's secret and the seeds it derives from it. Every
// seed (of an input, the probes, a check's plan, a re-check) is the first 64
// bits of HMAC-SHA256 keyed by a 256-bit key, over a purpose and the words that
// name it: knowing some seeds (a candidate that reads its inputs well enough
// to recover their seed) tells nothing of the key or of any other seed.
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <string_view>

namespace tessel::detail {

class gate_key {
 public:
  /// 256 bits from OpenSSL's CSPRNG (seeded by the operating system). Throws
  /// tessel::error when it cannot be drawn.
  [[nodiscard]] static gate_key drawn();
  /// SHA-256 of a fixed label and `secret`: reproducible, for tests.
  [[nodiscard]] static gate_key from_secret(std::uint64_t secret);

  gate_key(const gate_key&) = default;
  gate_key& operator=(const gate_key&) = default;
  ~gate_key();  ///< wipes the key (OPENSSL_cleanse)

  /// The first 64 bits (little-endian) of HMAC-SHA256(key, purpose, 0,
  /// words as 8 little-endian bytes each).
  [[nodiscard]] std::uint64_t derive(std::string_view purpose,
                                     std::initializer_list<std::uint64_t> words) const;

 private:
  gate_key() = default;
  std::array<unsigned char, 32> bytes_{};
};

}  // namespace tessel::detail
