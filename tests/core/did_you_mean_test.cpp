// Did-you-mean hints (tessel/did_you_mean.hpp): the one rule every message uses.
#include <tessel/did_you_mean.hpp>

#include <doctest/doctest.h>

#include <string_view>
#include <vector>

TEST_CASE("edit_distance: insertions, deletions, substitutions and adjacent swaps cost 1") {
  CHECK(tessel::edit_distance("", "") == 0);
  CHECK(tessel::edit_distance("", "abc") == 3);
  CHECK(tessel::edit_distance("tile_m", "tile_m") == 0);
  CHECK(tessel::edit_distance("tile_q", "tile_k") == 1);
  CHECK(tessel::edit_distance("anealing", "annealing") == 1);
  CHECK(tessel::edit_distance("initail_draws", "initial_draws") == 1);  // a swap
  CHECK(tessel::edit_distance("kitten", "sitting") == 3);
  CHECK(tessel::edit_distance("ca", "abc") == 3);  // optimal string alignment, not Damerau
}

TEST_CASE("closest: within 1 edit for short names, 2 for longer, less than the name") {
  const std::vector<std::string> names = {"tile_m", "tile_n", "tile_k", "bufs"};
  CHECK(tessel::closest_name("tile_q", names) == "tile_m");  // ties go to the earliest
  CHECK(tessel::closest_name("tlie_k", names) == "tile_k");
  CHECK(tessel::closest_name("buf", names) == "bufs");
  CHECK(tessel::closest_name("bf", names).empty());  // 2 edits on a short name
  CHECK(tessel::closest_name("tile", names).empty());
  CHECK(tessel::closest_name("tile_m", names) == "tile_n");  // the name itself is skipped
  const std::vector<std::string_view> strategies = {"random", "ga", "bo"};
  CHECK(tessel::did_you_mean("gaa", strategies) == "did you mean 'ga'?");
  CHECK(tessel::did_you_mean("b", strategies).empty());
  CHECK(tessel::did_you_mean("xyz", names).empty());
}
