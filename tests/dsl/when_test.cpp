// when blocks: conditional parameters, guarded requires, scoping rules.
#include "helpers.hpp"

using namespace tessel;
using tessel::testing::definition_of;
using tessel::testing::messages_of;
using tessel::testing::show;
using tessel::testing::show_constraint;

TEST_CASE("when: parameters get the conjunction of the enclosing conditions") {
  auto def = definition_of(R"(space s {
  param home : {sbuf, hbm}
  param bufs : 1 .. 4
  when home == hbm {
    param prefetch : bool
    when prefetch and bufs > 1 {
      param depth : 1 .. 3
    }
  }
  param after : {1, 2}
})");
  REQUIRE(def.parameters.size() == 5);
  CHECK(def.parameters[0].when == nullptr);
  CHECK(show(def.parameters[2].when, def) == "(== home hbm)");
  CHECK(show(def.parameters[3].when, def) == "(and (== home hbm) (and prefetch (> bufs 1)))");
  CHECK(def.parameters[4].when == nullptr);
}

TEST_CASE("when: requires inside become `not cond or req`") {
  auto def = definition_of(R"(space s {
  param home : {sbuf, hbm}
  param bufs : 1 .. 4
  when home == hbm {
    param prefetch : bool
    require not prefetch or bufs >= 2  "prefetching needs a second buffer"
    when prefetch { require bufs > 2 }
  }
  require bufs < 4
})");
  REQUIRE(def.constraints.size() == 3);
  CHECK(show_constraint(def, 0) == "(or (not (== home hbm)) (or (not prefetch) (>= bufs 2)))");
  CHECK(def.constraints[0].text == "not prefetch or bufs >= 2");
  CHECK(def.constraints[0].message == "prefetching needs a second buffer");
  CHECK(show_constraint(def, 1) == "(or (not (and (== home hbm) prefetch)) (> bufs 2))");
  CHECK(show_constraint(def, 2) == "(< bufs 4)");
}

TEST_CASE("when: lets inside are visible in the block and nested blocks only") {
  auto def = definition_of(R"(space s {
  param f : bool
  when f {
    param n : 1 .. 4
    let twice = n * 2
    when twice > 2 { require twice < 8 }
  }
})");
  CHECK(def.lets.size() == 1);
  CHECK(show_constraint(def, 0) == "(or (not (and f (> twice 2))) (< twice 8))");
  CHECK(
      messages_of(R"(space s {
  param f : bool
  when f { param n : 1 .. 4  let twice = n * 2 }
  when f { require n > 1 }
  let x = twice
})") ==
      "param 'n' is declared inside the 'when' block at line 3 and can only be used inside it\n"
      "let 'twice' is declared inside the 'when' block at line 3 and can only be used inside it\n");
}

TEST_CASE("when: a constant condition still guards") {
  auto def = definition_of(
      "space s { const big = true\n param x : 1 .. 2\n when big { param y : bool } }");
  CHECK(show(def.parameters[1].when, def) == "true");
}

TEST_CASE("when: errors in and around when blocks") {
  CHECK(messages_of("space s { param x : 1 .. 4  when x { param y : bool } }") ==
        "a 'when' condition must be a condition (a boolean), but this is an integer\n");
  CHECK(messages_of("space s { param f : bool  when f { const C = 1 } }") ==
        "const 'C' is declared inside a 'when' block\n");
  CHECK(messages_of("space s { when g { param y : bool } }") == "unknown name 'g'\n");
}
