// Targets: built-ins, declarations, target.NAME folding, re-targeting.
#include "helpers.hpp"

using namespace tessel;
using tessel::testing::definition_of;
using tessel::testing::messages_of;
using tessel::testing::options;

namespace {

constexpr std::string_view sbuf_space = R"(space s {
  param rows : pow2(1 .. 1048576)
  require rows <= target.sbuf_bytes_per_partition
})";

}  // namespace

TEST_CASE("target: target.NAME folds to the selected target's value") {
  for (const char* chip : {"trn1", "trn2"}) {
    CAPTURE(chip);
    auto def = definition_of(sbuf_space, options(chip));
    auto limit = *builtin_target(chip)->find("sbuf_bytes_per_partition");
    CHECK(def.target.name == chip);
    CHECK(tessel::testing::show_constraint(def, 0) == "(<= rows " + std::to_string(limit) + ")");
  }
}

TEST_CASE("target: a declared target refines its base") {
  auto o = options("half");
  auto def = definition_of(
      "target half : trn2 { sbuf_bytes_per_partition = target.sbuf_bytes_per_partition / 2 }\n" +
          std::string(sbuf_space),
      o);
  auto limit = *builtin_target("trn2")->find("sbuf_bytes_per_partition") / 2;
  CHECK(def.target.name == "half");
  CHECK(def.target.base == "trn2");
  CHECK(tessel::testing::show_constraint(def, 0) == "(<= rows " + std::to_string(limit) + ")");
  CHECK(def.target.constants.size() == builtin_target("trn2")->constants.size());
}

TEST_CASE("target: declarations without spaces, and their errors") {
  CHECK(parse_targets("target a : cpu { }", options()).size() == 1);
  CHECK(parse_targets("# none\n", options()).empty());
  CHECK_THROWS_AS((void)parse_targets("target a : b { }", options()), space_error);
  CHECK(messages_of(
            "target a : trn2 { partitions = 1  partitions = 2 }\nspace s { param x : {1} }") ==
        "field 'partitions' is assigned twice in target 'a'\n");
  CHECK(messages_of("target a : trn2 { partitions = hbm }\nspace s { param x : {1} }") ==
        "unknown name 'hbm'\n");
  CHECK(messages_of("target a : trn2 { partitions = 1 > 0 }\nspace s { param x : {1} }") ==
        "the value of 'partitions' must be an integer, but this is a boolean\n");
  CHECK(messages_of("target a : trn2 { }\ntarget a : trn1 { }\nspace s { param x : {1} }") ==
        "target 'a' is already defined\n");
}
