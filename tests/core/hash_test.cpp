// The one FNV-1a and splitmix64 (tessel/hash.hpp) against published values,
// and the stored hashes built on them against values computed before they
// were folded into it (study files store them: they must never change).
#include <tessel/config.hpp>
#include <tessel/hash.hpp>

#include <doctest/doctest.h>

TEST_CASE("fnv1a: the published 64-bit test vectors, and chaining equals concatenation") {
  CHECK(tessel::fnv1a("") == 0xcbf29ce484222325ULL);
  CHECK(tessel::fnv1a("a") == 0xaf63dc4c8601ec8cULL);
  CHECK(tessel::fnv1a("foobar") == 0x85944171f73967e8ULL);
  CHECK(tessel::fnv1a("bar", tessel::fnv1a("foo")) == tessel::fnv1a("foobar"));
  static_assert(tessel::fnv1a("a") == 0xaf63dc4c8601ec8cULL);
}

TEST_CASE("splitmix64: the reference generator's first outputs from state 0") {
  std::uint64_t state = 0;
  CHECK(tessel::splitmix64(state) == 0xe220a8397b1dcdafULL);
  CHECK(tessel::splitmix64(state) == 0x6e789e6aa1b965f4ULL);
  CHECK(state == 2 * 0x9e3779b97f4a7c15ULL);
  CHECK(tessel::splitmix64_mix(0x9e3779b97f4a7c15ULL) == 0xe220a8397b1dcdafULL);
}

TEST_CASE("config_hash keeps its value: FNV-1a steps over whole indices") {
  CHECK(tessel::config_hash{}(tessel::config({1, 2, 3})) == 0xd0aa6218672cf5abULL);
}
