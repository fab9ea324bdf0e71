// parse_space / load_space: definitions the engine builds and counts.
#include "helpers.hpp"

#include <tessel/dsl.hpp>

#include <filesystem>

using namespace tessel;
using tessel::testing::options;

namespace {

/// Valid configs by brute force over the Cartesian product (small spaces only).
std::uint64_t brute_count(const space& s) {
  std::vector<std::size_t> sizes;
  for (const auto& p : s.parameters()) sizes.push_back(p.dom.size() + (p.when ? 1 : 0));
  std::uint64_t valid = 0;
  std::vector<std::size_t> at(sizes.size(), 0);
  while (true) {
    std::vector<config::index_type> indices;
    for (std::size_t i = 0; i < at.size(); ++i) {
      bool inactive = s.parameters()[i].when && at[i] == sizes[i] - 1;
      indices.push_back(inactive ? config::inactive : static_cast<config::index_type>(at[i]));
    }
    if (s.is_valid(config(indices))) ++valid;
    std::size_t i = 0;
    while (i < at.size() && ++at[i] == sizes[i]) at[i++] = 0;
    if (i == at.size()) break;
  }
  return valid;
}

}  // namespace

TEST_CASE("build: a small space counts as its brute force") {
  auto s = parse_space(R"(space s {
  param a : 1 .. 6
  param b : {1, 2, 3, 4}
  require a % b == 0
})",
                       options());
  CHECK(s.count() == brute_count(s));
  CHECK(s.count() == 6 + 3 + 2 + 1);
}

TEST_CASE("build: conditional parameters and requires inside when") {
  auto s = parse_space(R"(space s {
  param home : {sbuf, hbm}
  param bufs : 1 .. 3
  when home == hbm {
    param prefetch : bool
    when prefetch { param depth : 1 .. 4  require depth <= bufs + 1 }
    require prefetch or bufs > 1
  }
})",
                       options());
  CHECK(s.count() == brute_count(s));
  // sbuf: 3 (prefetch, depth inactive); hbm, no prefetch: bufs 2..3 -> 2;
  // hbm, prefetch: depth <= bufs + 1 -> 2 + 3 + 4 = 9.
  CHECK(s.count() == 3 + 2 + 9);
}

TEST_CASE("build: permutation queries") {
  auto s = parse_space(R"(space s {
  param order : perm(m, n, k)
  require before(order, m, k)
  require order[0] != n
})",
                       options());
  CHECK(s.count() == brute_count(s));
  CHECK(s.count() == 2);  // m k n? no: [m, n, k] and [m, k, n]; n first is excluded
}

TEST_CASE("build: parse_space picks a space by name, the first by default") {
  constexpr std::string_view text = "space a { param x : {1} }\nspace b { param x : 1 .. 5 }";
  CHECK(parse_space(text, options()).name() == "a");
  CHECK(parse_space(text, options(), "b").count() == 5);
  // Before: the names of the file's spaces were left for the user to look up.
  CHECK_THROWS_WITH_AS(parse_space(text, options(), "c"),
                       "test.tsl: error: unknown space 'c'\n"
                       "  hint: the file declares 2 spaces: a, b",
                       space_error);
  CHECK_THROWS_WITH_AS(parse_space(text, options(), "bb"),
                       "test.tsl: error: unknown space 'bb'\n  hint: did you mean 'b'?",
                       space_error);
  CHECK_THROWS_WITH_AS(
      parse_space("# nothing here\n", options()),
      "test.tsl: error: no space is defined\n  hint: declare one with: space NAME { ... }",
      space_error);
}

TEST_CASE("build: the examples are non-empty on trn2 and trn1") {
  const std::filesystem::path examples = std::filesystem::path(TESSEL_SOURCE_DIR) / "examples";
  for (const char* file : {"matmul.tsl", "attention.tsl", "rmsnorm.tsl"}) {
    for (const char* chip : {"trn2", "trn1"}) {
      CAPTURE(file);
      CAPTURE(chip);
      auto o = parse_options{};
      o.target = chip;
      auto defs = parse_definitions(tessel::testing::read_example(file), o);
      for (const auto& def : defs) {
        auto s = space(def);
        CHECK(s.count() > 0);
        CHECK(s.default_config().has_value());
      }
    }
  }
  auto s = load_space(examples / "matmul.tsl");
  CHECK(s.def().file == (examples / "matmul.tsl").string());
}

TEST_CASE("build: an empty space names the constraint that emptied it") {
  CHECK_THROWS_AS(parse_space("space s { param x : 1 .. 4  require x > 10 }", options()),
                  empty_space_error);
}
