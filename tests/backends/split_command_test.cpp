#include <tessel/backends.hpp>
#include <tessel/error.hpp>

#include <doctest/doctest.h>

#include <cstdio>
#include <string>
#include <vector>

using namespace tessel;
using words = std::vector<std::string>;

TEST_CASE("split_command: blanks separate; quotes and backslashes group") {
  CHECK(split_command("./bench --tile {tile_m}") == words{"./bench", "--tile", "{tile_m}"});
  CHECK(split_command("  a\t b \n c  ") == words{"a", "b", "c"});
  CHECK(split_command("a 'b c' \"d \\\"e\\\" $x\" f\\ g") ==
        words{"a", "b c", "d \"e\" $x", "f g"});
  CHECK(split_command("'' x") == words{"", "x"});
  CHECK(split_command("pre'mid'\"post\"") == words{"premidpost"});
  CHECK(split_command("'a\\b'") == words{"a\\b"});
  CHECK(split_command("\"a\\b\"") == words{"a\\b"});
  CHECK(split_command("sh -c 'echo {tile_m} | cat'") == words{"sh", "-c", "echo {tile_m} | cat"});
  CHECK(split_command("").empty());
}

TEST_CASE("split_command: unbalanced quotes are errors") {
  CHECK_THROWS_WITH_AS(split_command("a 'b"), "unbalanced ' in command: a 'b", error);
  CHECK_THROWS_WITH_AS(split_command("a \"b"), "unbalanced \" in command: a \"b", error);
  CHECK_THROWS_AS(split_command("a \\"), error);
}

namespace {

/// What /bin/sh reads `word` back as: printf %s of shell_quote(word), run by popen.
std::string through_sh(const std::string& word) {
  const std::string line = "printf %s " + shell_quote(word);
  FILE* pipe = ::popen(line.c_str(), "r");  // NOLINT(cert-env33-c): the point of the test
  REQUIRE(pipe != nullptr);
  std::string out;
  char buffer[256];
  while (const std::size_t n = std::fread(buffer, 1, sizeof buffer, pipe)) out.append(buffer, n);
  CHECK(::pclose(pipe) == 0);
  return out;
}

}  // namespace

TEST_CASE("shell_quote: plain words as is, the rest in single quotes") {
  CHECK(shell_quote("./bench") == "./bench");
  CHECK(shell_quote("--tile=64,a@b:c%d+e") == "--tile=64,a@b:c%d+e");
  CHECK(shell_quote("") == "''");
  CHECK(shell_quote("a b") == "'a b'");
  CHECK(shell_quote("it's") == "'it'\\''s'");
  CHECK(shell_quote("$HOME") == "'$HOME'");
  CHECK(shell_quote("*.tsl") == "'*.tsl'");
  CHECK(shell_quote("{tile_m}") == "'{tile_m}'");
  CHECK(shell_quote("\xce\xbb") == "'\xce\xbb'");  // not ASCII: quoted
}

TEST_CASE("shell_quote: /bin/sh and split_command read every word back") {
  const words tricky = {"",          "plain",        "a b",   "it's", "''",     "$HOME",
                        "$(echo x)", "`echo x`",     "*",     "a\\b", "\"q\"",  "a\nb",
                        "-n",        "\xce\xbb\xff", "x;y|z", "~",    "!event", "a\tb"};
  for (const auto& w : tricky) {
    CAPTURE(w);
    CHECK(through_sh(w) == w);
    CHECK(split_command(shell_quote(w)) == words{w});
  }
}
