// Bad input of every kind gives diagnostics, never a crash or another
// exception: garbage, truncations and mutations of a real file, deep nesting.
#include "helpers.hpp"

#include <tessel/random.hpp>

using namespace tessel;
using tessel::testing::options;
using tessel::testing::read_example;

namespace {

/// parse_definitions either succeeds or throws space_error with at least one
/// located or unlocated diagnostic; anything else fails the test.
void parses_or_reports(std::string_view text) {
  try {
    (void)parse_definitions(text, options());
  } catch (const space_error& e) {
    CHECK(!e.diagnostics().empty());
    for (const auto& d : e.diagnostics()) CHECK(!d.message.empty());
  }
}

}  // namespace

TEST_CASE("robustness: garbage and odd inputs") {
  for (std::string_view text : {
           "",
           " ",
           "\n\n",
           "#",
           "# only a comment",
           "{",
           "}",
           "space",
           "space {",
           "space s",
           "space s {",
           "space s { param",
           "space s { param x",
           "space s { param x :",
           "space s { param x : {",
           "space s { param x : 1 ..",
           "space s { param x : 1 .. 2 step",
           "space s { require",
           "space s { require \"unterminated",
           "space s { when",
           "space s { when true {",
           "target",
           "target t :",
           "target t : trn2 {",
           "target t : trn2 { x = }",
           "\"\"\"",
           "space s { param x : {1} } }",
           "space 1 { }",
           "space s { param 1 : {1} }",
           "@#$%^&*",
           "space s { param x : perm() }",
           "space s { param x : pow2() }",
           "space s { let = }",
           "space s { require 1 +* 2 }",
           "space s { param x : {1,} }",
           "space s { param x : {,} }",
           "\xff\xfe\x00\x01",
           "space s { param x : {1} require x < 99999999999999999999999 }",
           "space s { param x : {1} require x == -9223372036854775807 - 1 }",
           "space s { param x : {1} require x < 9223372036854775807 + 1 }",
       }) {
    CAPTURE(text);
    parses_or_reports(text);
  }
  parses_or_reports(std::string("space s { param x : {1} }\0 trailing", 36));
}

TEST_CASE("robustness: deep nesting is an error, not a stack overflow") {
  std::string deep = "space s { param x : {1} require " + std::string(5000, '(') + "x > 0" +
                     std::string(5000, ')') + " }";
  CHECK(tessel::testing::messages_of(deep) == "expression nested more than 64 levels deep\n");
  std::string negations = "space s { param x : {1} require ";
  for (int i = 0; i < 5000; ++i) negations += "- ";
  CHECK(tessel::testing::messages_of(negations + "x < 0 }") ==
        "expression nested more than 64 levels deep\n");
  std::string nots = "space s { param x : {1} require ";
  for (int i = 0; i < 5000; ++i) nots += "not ";
  CHECK(tessel::testing::messages_of(nots + "x < 0 }") ==
        "expression nested more than 64 levels deep\n");
  std::string whens = "space s { param f : bool ";
  for (int i = 0; i < 100; ++i) whens += "when f { ";
  CHECK(tessel::testing::messages_of(whens) == "expression nested more than 64 levels deep\n");
  std::string chain = "space s { param x : {1} require x";
  for (int i = 0; i < 20000; ++i) chain += " + x";
  CHECK(tessel::testing::messages_of(chain + " > 0 }") == "expression longer than 16384 bytes\n");
  std::string ok = "space s { param x : {1} require " + std::string(60, '(') + "x > 0" +
                   std::string(60, ')') + " }";
  CHECK(tessel::testing::messages_of(ok).empty());
}

TEST_CASE("robustness: every prefix of a real file") {
  auto text = read_example("attention.tsl");
  REQUIRE(text.size() > 500);
  for (std::size_t n = 0; n <= text.size(); ++n)
    parses_or_reports(std::string_view(text).substr(0, n));
}

TEST_CASE("robustness: random mutations of a real file") {
  auto text = read_example("matmul.tsl");
  REQUIRE(!text.empty());
  const std::string alphabet = "(){}[]<>=!+-*/%.,:;#\"_ \nabcxyz0129";
  rng random(20261129);
  for (int round = 0; round < 400; ++round) {
    std::string mutated = text;
    for (int edits = 0; edits < 1 + static_cast<int>(random() % 4); ++edits) {
      auto at = static_cast<std::size_t>(random() % (mutated.size() + 1));
      auto c = alphabet[static_cast<std::size_t>(random() % alphabet.size())];
      switch (random() % 3) {
        case 0: mutated.insert(at, 1, c); break;
        case 1:
          if (at < mutated.size()) mutated.erase(at, 1);
          break;
        default:
          if (at < mutated.size()) mutated[at] = c;
          break;
      }
    }
    CAPTURE(mutated);
    parses_or_reports(mutated);
  }
}
