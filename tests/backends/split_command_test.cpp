#include <tessel/backends.hpp>
#include <tessel/error.hpp>

#include <doctest/doctest.h>

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
