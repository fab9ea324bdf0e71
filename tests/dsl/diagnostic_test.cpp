// Golden error messages: the exact rendering of each kind of error, and
// several errors of one file reported together.
#include "helpers.hpp"

using tessel::testing::errors_of;
using tessel::testing::options;

TEST_CASE("diagnostic: rendering with and without a location") {
  tessel::diagnostic d;
  d.file = "m.tsl";
  d.line = 3;
  d.column = 5;
  d.message = "unknown name 'tile_q'";
  d.source_line = "\tx = tile_q";
  d.hint = "did you mean 'tile_k'?";
  CHECK(d.render() ==
        "m.tsl:3:5: error: unknown name 'tile_q'\n\tx = tile_q\n\t   ^\n  hint: did you mean "
        "'tile_k'?");
  tessel::diagnostic bare;
  bare.file = "m.tsl";
  bare.message = "unknown target 'trn3'";
  CHECK(bare.render() == "m.tsl: error: unknown target 'trn3'");
  tessel::space_error e({d, bare});
  CHECK(std::string(e.what()) == d.render() + "\n" + bare.render());
  CHECK(e.diagnostics().size() == 2);
}

TEST_CASE("diagnostic: syntax errors say what was expected") {
  CHECK(errors_of("space s { param x {1} }") ==
        "test.tsl:1:19: error: expected ':', found '{'\n"
        "space s { param x {1} }\n"
        "                  ^");
  CHECK(errors_of("space s { parm x : {1} }") ==
        "test.tsl:1:11: error: expected a statement (param, const, let, require, when) or '}', "
        "found 'parm'\n"
        "space s { parm x : {1} }\n"
        "          ^\n"
        "  hint: did you mean 'param'?");
  CHECK(errors_of("spce s { }") ==
        "test.tsl:1:1: error: expected 'space', 'target' or 'model', found 'spce'\n"
        "spce s { }\n"
        "^\n"
        "  hint: did you mean 'space'?");
  CHECK(errors_of("space s {\n  param x : {1, 2\n\n") ==
        "test.tsl:2:18: error: expected '}', found end of input\n"
        "  param x : {1, 2\n"
        "                 ^");
  CHECK(errors_of("space s { param x : }") ==
        "test.tsl:1:21: error: expected domain ({...}, lo .. hi, pow2(lo .. hi), bool or "
        "perm(...)), found '}'\n"
        "space s { param x : }\n"
        "                    ^");
  CHECK(errors_of("space s { param o : prm(m, n) }") ==
        "test.tsl:1:21: error: expected domain ({...}, lo .. hi, pow2(lo .. hi), bool or "
        "perm(...)), found 'prm'\n"
        "space s { param o : prm(m, n) }\n"
        "                    ^\n"
        "  hint: did you mean 'perm'?");
  CHECK(errors_of("space s { param f : boool }").ends_with("  hint: did you mean 'bool'?"));
  CHECK(errors_of("space s { let y = 1 + }") ==
        "test.tsl:1:23: error: expected expression, found '}'\n"
        "space s { let y = 1 + }\n"
        "                      ^");
}

TEST_CASE("diagnostic: a string without its closing quote is named where it opens") {
  // It was "expected ''', found 'when'", at the first word of the next line.
  CHECK(errors_of("space s {\n  require 1 > 0 \"a message\n  when true { }\n}") ==
        "test.tsl:2:17: error: unterminated string: expected '\"' before the end of the line\n"
        "  require 1 > 0 \"a message\n"
        "                ^\n"
        "  hint: a string (a require message, a kernel's space file) is on one line");
  CHECK(errors_of("space s { require 1 > 0 \"open") ==
        "test.tsl:1:25: error: unterminated string: expected '\"' before the end of the line\n"
        "space s { require 1 > 0 \"open\n"
        "                        ^\n"
        "  hint: a string (a require message, a kernel's space file) is on one line");
}

TEST_CASE("diagnostic: one syntax error per block, the parser resumes after it") {
  CHECK(errors_of("space a { param x : }\nspace b { let = 1 }\nspace c { param y : {1} }") ==
        "test.tsl:1:21: error: expected domain ({...}, lo .. hi, pow2(lo .. hi), bool or "
        "perm(...)), found '}'\n"
        "space a { param x : }\n"
        "                    ^\n"
        "test.tsl:2:15: error: expected name, found '='\n"
        "space b { let = 1 }\n"
        "              ^");
}

TEST_CASE("diagnostic: unknown names with did-you-mean") {
  CHECK(errors_of("space s {\n  param tile_k : {128}\n  require tile_q > 1\n}") ==
        "test.tsl:3:11: error: unknown name 'tile_q'\n"
        "  require tile_q > 1\n"
        "          ^\n"
        "  hint: did you mean 'tile_k'?");
  CHECK(errors_of("space s { param h : {sbuf, hbm}  require h == hmb }") ==
        "test.tsl:1:47: error: unknown name 'hmb'\n"
        "space s { param h : {sbuf, hbm}  require h == hmb }\n"
        "                                              ^\n"
        "  hint: did you mean 'hbm'?");
  CHECK(errors_of("space s { param x : {1}  require mx(x, 2) > 1 }") ==
        "test.tsl:1:34: error: unknown function 'mx'\n"
        "space s { param x : {1}  require mx(x, 2) > 1 }\n"
        "                                 ^\n"
        "  hint: did you mean 'max'?");
  CHECK(errors_of("space s { param x : {1}  require x <= target.partitons }") ==
        "test.tsl:1:39: error: target 'trn2' has no field 'partitons'\n"
        "space s { param x : {1}  require x <= target.partitons }\n"
        "                                      ^\n"
        "  hint: did you mean 'partitions'?");
}

TEST_CASE("diagnostic: type errors") {
  CHECK(errors_of("space s { param h : {sbuf, hbm}  require h + 1 > 0 }") ==
        "test.tsl:1:42: error: '+' expects an integer, but 'h' is a symbol\n"
        "space s { param h : {sbuf, hbm}  require h + 1 > 0 }\n"
        "                                         ^");
  CHECK(errors_of("space s { param h : {sbuf, hbm}  require h == 1 }") ==
        "test.tsl:1:44: error: cannot compare a symbol with an integer using '=='\n"
        "space s { param h : {sbuf, hbm}  require h == 1 }\n"
        "                                           ^");
  CHECK(errors_of("space s { param x : 1 .. 4  require x }") ==
        "test.tsl:1:37: error: a requirement must be a condition (a boolean), but this is an "
        "integer\n"
        "space s { param x : 1 .. 4  require x }\n"
        "                                    ^");
  CHECK(errors_of("space s { param b : bool  require b * 2 > 1 }") ==
        "test.tsl:1:35: error: '*' expects an integer, but 'b' is a boolean\n"
        "space s { param b : bool  require b * 2 > 1 }\n"
        "                                  ^");
  CHECK(errors_of("space s { param o : perm(m, n)  require o < 1 }") ==
        "test.tsl:1:41: error: '<' expects an integer, but 'o' is a permutation\n"
        "space s { param o : perm(m, n)  require o < 1 }\n"
        "                                        ^\n"
        "  hint: use pos(o, x), before(o, x, y) or o[i]");
  CHECK(errors_of("space s { param h : {sbuf, hbm}  param e : {vec, act}  require h == vec }") ==
        "test.tsl:1:69: error: 'vec' is not a value of 'h' {sbuf, hbm}\n"
        "space s { param h : {sbuf, hbm}  param e : {vec, act}  require h == vec }\n"
        "                                                                    ^");
}

TEST_CASE("diagnostic: duplicates and empty domains") {
  CHECK(errors_of("space s {\n  param x : {1}\n  let x = 2\n}") ==
        "test.tsl:3:7: error: 'x' is already declared (param at line 2)\n"
        "  let x = 2\n"
        "      ^");
  CHECK(errors_of("space s { param v : {1, 2, 1} }") ==
        "test.tsl:1:28: error: duplicate value 1 in the domain of 'v'\n"
        "space s { param v : {1, 2, 1} }\n"
        "                           ^");
  CHECK(errors_of("space s { param y : 8 .. 4 }") ==
        "test.tsl:1:21: error: the domain of 'y' is empty: 8 .. 4 has no values\n"
        "space s { param y : 8 .. 4 }\n"
        "                    ^\n"
        "  hint: a range lo .. hi needs lo <= hi");
  CHECK(errors_of("space s { param z : 1 .. 10 step 0 }") ==
        "test.tsl:1:34: error: the step of the domain of 'z' must be positive, but it is 0\n"
        "space s { param z : 1 .. 10 step 0 }\n"
        "                                 ^");
  CHECK(errors_of("space s { param w : pow2(100 .. 120) }") ==
        "test.tsl:1:21: error: the domain of 'w' is empty: pow2(100 .. 120) holds no power of two\n"
        "space s { param w : pow2(100 .. 120) }\n"
        "                    ^");
  CHECK(errors_of("space s { param p : perm(a, b, c, d, e, f, g, h, i) }") ==
        "test.tsl:1:21: error: perm of 9 elements in the domain of 'p'; at most 8 are supported\n"
        "space s { param p : perm(a, b, c, d, e, f, g, h, i) }\n"
        "                    ^\n"
        "  hint: 8 elements already make 8! = 40320 orders");
}

TEST_CASE("diagnostic: lets that refer forward or to themselves") {
  CHECK(errors_of("space s {\n  let a = b + 1\n  let b = 2\n  let c = c\n}") ==
        "test.tsl:2:11: error: let 'b' is used before its declaration at line 3\n"
        "  let a = b + 1\n"
        "          ^\n"
        "  hint: declare names before using them\n"
        "test.tsl:4:11: error: let 'c' refers to itself\n"
        "  let c = c\n"
        "          ^");
}

TEST_CASE("diagnostic: constant division by zero and other failing constants") {
  CHECK(errors_of("space s { const Z = 0  param x : {1}  let y = 10 / Z }") ==
        "test.tsl:1:50: error: division by zero: '/' by 0 always fails\n"
        "space s { const Z = 0  param x : {1}  let y = 10 / Z }\n"
        "                                                 ^");
  CHECK(errors_of("space s { param x : {1, 2}  require x % 0 == 0 }") ==
        "test.tsl:1:39: error: division by zero: '%' by 0 always fails\n"
        "space s { param x : {1, 2}  require x % 0 == 0 }\n"
        "                                      ^");
  CHECK(errors_of("space s { const A = log2(0)  param x : {A} }") ==
        "test.tsl:1:21: error: log2 of a value <= 0 in a constant expression\n"
        "space s { const A = log2(0)  param x : {A} }\n"
        "                    ^");
  CHECK(errors_of("space s { param x : {1}  require x < pow2(62) * 2 }") ==
        "test.tsl:1:47: error: integer overflow in a constant expression\n"
        "space s { param x : {1}  require x < pow2(62) * 2 }\n"
        "                                              ^");
  CHECK(errors_of("space s { param x : {99999999999999999999} }") ==
        "test.tsl:1:22: error: integer literal 99999999999999999999 is too large\n"
        "space s { param x : {99999999999999999999} }\n"
        "                     ^\n"
        "  hint: integers are 64-bit: at most 9223372036854775807");
}

TEST_CASE("diagnostic: targets, spaces and overrides") {
  CHECK(errors_of("space s { param x : {1} }", options("trn3")) ==
        "test.tsl: error: unknown target 'trn3'\n  hint: did you mean 'trn1'?");
  CHECK(errors_of("target big : trn9 { }\nspace s { param x : {1} }") ==
        "test.tsl:1:14: error: unknown target 'trn9'\n"
        "target big : trn9 { }\n"
        "             ^\n"
        "  hint: did you mean 'trn1'?");
  CHECK(errors_of("target big : trn2 { sbuf_bytes_per_partitio = 1 }\nspace s { param x : {1} }") ==
        "test.tsl:1:21: error: target 'trn2' has no field 'sbuf_bytes_per_partitio'\n"
        "target big : trn2 { sbuf_bytes_per_partitio = 1 }\n"
        "                    ^\n"
        "  hint: did you mean 'sbuf_bytes_per_partition'?");
  CHECK(errors_of("space s { param x : {1} }\nspace s { param y : {1} }") ==
        "test.tsl:2:7: error: space 's' is already defined at line 1\n"
        "space s { param y : {1} }\n"
        "      ^");
  auto o = options();
  o.overrides["tile"] = "5";
  o.overrides["x"] = "5";
  o.overrides["M"] = "big";
  CHECK(errors_of("space s {\n  const M = 4\n  const tiles = 2\n  param x : {1}\n}", o) ==
        "test.tsl: error: --set tile=5: no space declares a const 'tile'\n"
        "  hint: did you mean 'tiles'?\n"
        "test.tsl: error: --set x=5: 'x' is not a const\n"
        "  hint: only consts can be set\n"
        "test.tsl:2:9: error: --set M=big: const 'M' is an integer, but 'big' is a symbol\n"
        "  const M = 4\n"
        "        ^");
}

TEST_CASE("diagnostic: conditional parameters outside their when block") {
  CHECK(errors_of(R"(space s {
  param home : {sbuf, hbm}
  when home == hbm { param prefetch : bool }
  require prefetch
})") == "test.tsl:4:11: error: param 'prefetch' is declared inside the 'when' block at line 3 and "
        "can only be used inside it\n"
        "  require prefetch\n"
        "          ^\n"
        "  hint: use it only inside that block or in a block nested in it");
}

TEST_CASE("diagnostic: every error of a file is reported at once") {
  auto text = R"(space s {
  param tile_k : {128, 256, 128}
  param order : perm(m, n, k)
  let bytes = tile_k * tile_z
  require order > 1
  require pos(order, q) == 0
}
space t {
  param y : 4 .. 1
})";
  CHECK(tessel::testing::messages_of(text) ==
        "duplicate value 128 in the domain of 'tile_k'\n"
        "unknown name 'tile_z'\n"
        "'>' expects an integer, but 'order' is a permutation\n"
        "'pos': 'q' is not an element of 'order' (m, n, k)\n"
        "the domain of 'y' is empty: 4 .. 1 has no values\n");
}
