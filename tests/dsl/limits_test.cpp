// Work without bounds (issue 15): every limit of docs/limits.md is checked
// early with a message that names it, and what is allowed is read in linear
// time. The times quoted are the release build's before the fix.
#include "helpers.hpp"

#include <string>

using namespace tessel;
using tessel::testing::options;

namespace {

std::string set_literal(std::size_t n, const char* prefix = "") {
  std::string text = "space s { param x : {";
  for (std::size_t i = 0; i < n; ++i) {
    if (i > 0) text += ", ";
    text += prefix + std::to_string(i);
  }
  return text + "} }\n";
}

std::string repeated(const std::string& block, std::size_t n) {
  std::string text;
  text.reserve(block.size() * n);
  for (std::size_t i = 0; i < n; ++i) text += block;
  return text;
}

const std::vector<diagnostic>& diagnostics_of(const space_error& e) { return e.diagnostics(); }

}  // namespace

TEST_CASE("limits: a set literal of 400,000 values parses in linear time") {
  // Before: 47 s (a linear search for duplicates per value).
  const auto s = parse_space(set_literal(400'000), options());
  CHECK(s.count() == 400'000);
}

TEST_CASE("limits: a symbol set of 100,000 names parses in linear time") {
  // Before: 20 s (interning each symbol searched the table).
  const auto s = parse_space(set_literal(100'000, "v"), options());
  CHECK(s.count() == 100'000);
  CHECK(s.parameters()[0].dom.label(99'999) == "v99999");
}

TEST_CASE("limits: a duplicate value in a large set is still found") {
  auto text = set_literal(1000);
  text.replace(text.find("} }"), 3, ", 500} }");
  CHECK(tessel::testing::errors_of(text).find("duplicate value 500") != std::string::npos);
}

TEST_CASE("limits: a set literal over max_domain_values is refused before it is built") {
  const auto text = set_literal(max_domain_values + 1);
  CHECK(tessel::testing::errors_of(text).find("at most 1000000 are allowed") != std::string::npos);
}

TEST_CASE("limits: one space declared 10,000 times is linear, with at most 100 diagnostics") {
  // Before: 11 s and 8.5 GB (each copy held the whole text); 20,000 copies
  // ended in std::bad_alloc.
  const std::string block = "space s {\n  param a : {1, 2, 4, 8}\n  param b : 1 .. 8\n}\n";
  try {
    (void)parse_definitions(repeated(block, 10'000), options());
    FAIL("no error");
  } catch (const space_error& e) {
    const auto& all = diagnostics_of(e);
    REQUIRE(all.size() == max_diagnostics + 1);
    CHECK(all.front().message == "space 's' is already defined at line 1");
    CHECK(all.back().message == "9899 more errors not shown (the first 100 are)");
  }
}

TEST_CASE(
    "limits: many spaces: parse_definitions bounds its copies, parse_definition copies once") {
  std::string text;
  for (int i = 0; i < 4000; ++i)  // 4000 copies of 136 kB would pass 256 MiB
    text += "space s" + std::to_string(i) + " { param a : {1, 2} }\n";
  CHECK(tessel::testing::errors_of(text).find("a copy of it for each would pass 256 MiB") !=
        std::string::npos);
  std::vector<std::string> names;
  const auto def = parse_definition(text, options(), "s3999", &names);
  CHECK(names.size() == 4000);
  CHECK(def.name == "s3999");
  CHECK(def.source.size() == text.size());
  CHECK_THROWS_WITH_AS(parse_definition(text, options(), "s4000"),
                       doctest::Contains("unknown space 's4000'"), space_error);
}

TEST_CASE("limits: a text over max_source_bytes is refused before it is parsed") {
  const std::string text(max_source_bytes + 1, ' ');
  CHECK(tessel::testing::errors_of(text).find("at most 16777216 are read") != std::string::npos);
}

TEST_CASE("limits: an error on a megabyte line does not copy the line into each diagnostic") {
  auto text = set_literal(200'000, "v");
  text.replace(text.find("v7,"), 3, "1,");  // mixes integers and symbols, far along the line
  text.replace(text.find("v9,"), 3, "true,");
  try {
    (void)parse_definitions(text, options());
    FAIL("no error");
  } catch (const space_error& e) {
    for (const auto& d : diagnostics_of(e)) {
      CHECK(d.line == 1);
      CHECK(d.source_line.empty());  // too long to show
      CHECK(d.render().find('^') == std::string::npos);
    }
  }
}

TEST_CASE("limits: construction that would take 10^12 checks is refused before it starts") {
  // Before: `x + y == 999999` over two domains of 10^6 ran past 120 s.
  CHECK_THROWS_WITH_AS(parse_space("space s { param x : 0 .. 999999\n param y : 0 .. 999999\n"
                                   " require x + y == 999999 }",
                                   options()),
                       doctest::Contains("is too costly to build"), space_error);
}
