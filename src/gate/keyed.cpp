// keyed.cpp: the gate's key and its derivations (keyed.hpp), through OpenSSL.
#include "gate/keyed.hpp"

#include <tessel/error.hpp>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <openssl/sha.h>

#include <string>
#include <vector>

namespace tessel::detail {
namespace {

void append_word(std::vector<unsigned char>& bytes, std::uint64_t w) {
  for (int b = 0; b < 8; ++b) bytes.push_back(static_cast<unsigned char>(w >> (8 * b)));
}

}  // namespace

gate_key gate_key::drawn() {
  gate_key k;
  if (RAND_bytes(k.bytes_.data(), static_cast<int>(k.bytes_.size())) != 1)
    throw error("gate: cannot draw a secret key from the system's random source (RAND_bytes)");
  return k;
}

gate_key gate_key::from_secret(std::uint64_t secret) {
  std::vector<unsigned char> bytes;
  for (const char c : std::string_view("tessel gate secret"))
    bytes.push_back(static_cast<unsigned char>(c));
  append_word(bytes, secret);
  gate_key k;
  SHA256(bytes.data(), bytes.size(), k.bytes_.data());
  return k;
}

gate_key::~gate_key() { OPENSSL_cleanse(bytes_.data(), bytes_.size()); }

std::uint64_t gate_key::derive(std::string_view purpose,
                               std::initializer_list<std::uint64_t> words) const {
  std::vector<unsigned char> message(purpose.begin(), purpose.end());
  message.push_back(0);
  for (const std::uint64_t w : words) append_word(message, w);
  std::array<unsigned char, EVP_MAX_MD_SIZE> mac{};
  unsigned int length = 0;
  if (HMAC(EVP_sha256(), bytes_.data(), static_cast<int>(bytes_.size()), message.data(),
           message.size(), mac.data(), &length) == nullptr ||
      length < 8)
    throw error("gate: HMAC-SHA256 failed");
  std::uint64_t out = 0;
  for (int b = 7; b >= 0; --b) out = (out << 8) | mac[static_cast<std::size_t>(b)];
  return out;
}

}  // namespace tessel::detail
