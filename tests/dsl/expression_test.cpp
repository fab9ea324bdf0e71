// Expressions: precedence, folding, functions, permutation queries, `in`.
#include "helpers.hpp"

using namespace tessel;
using tessel::testing::definition_of;
using tessel::testing::messages_of;
using tessel::testing::show_let;

namespace {

/// The lowered form of `e` in a space with a few parameters.
std::string lowered(std::string_view e) {
  auto def = definition_of(R"(space s {
  const M = 4096
  param a : 1 .. 8
  param b : {2, 4}
  param f : bool
  param h : {sbuf, hbm}
  param o : perm(m, n, k)
  let e = )" + std::string(e) +
                           "\n}");
  return show_let(def, "e");
}

}  // namespace

TEST_CASE(
    "expression: precedence, loosest first: or, and, not, comparison, additive, multiplicative, "
    "unary") {
  CHECK(lowered("a + b * 2") == "(+ a (* b 2))");
  CHECK(lowered("(a + b) * 2") == "(* (+ a b) 2)");
  CHECK(lowered("a - b - 1") == "(- (- a b) 1)");
  CHECK(lowered("a / b % 3") == "(% (/ a b) 3)");
  CHECK(lowered("-a * b") == "(* (neg a) b)");
  CHECK(lowered("a + 1 < b * 2") == "(< (+ a 1) (* b 2))");
  CHECK(lowered("f or a > 1 and b < 4") == "(or f (and (> a 1) (< b 4)))");
  CHECK(lowered("not f and f") == "(and (not f) f)");
  CHECK(lowered("not a == 1") == "(not (== a 1))");
  CHECK(lowered("f and f or f and f") == "(or (and f f) (and f f))");
}

TEST_CASE("expression: constants fold, floor division and Python modulo") {
  CHECK(lowered("M / 3") == "1365");
  CHECK(lowered("-7 / 2") == "-4");
  CHECK(lowered("7 / -2") == "-4");
  CHECK(lowered("-7 % 3") == "2");
  CHECK(lowered("7 % -3") == "-2");
  CHECK(lowered("ceil_div(7, 2)") == "4");
  CHECK(lowered("ceil_div(-7, 2)") == "-3");
  CHECK(lowered("log2(M)") == "12");
  CHECK(lowered("log2(1000)") == "9");
  CHECK(lowered("pow2(10)") == "1024");
  CHECK(lowered("is_pow2(M)") == "true");
  CHECK(lowered("is_pow2(0)") == "false");
  CHECK(lowered("min(3, M, 1, 2)") == "1");
  CHECK(lowered("max(3, 9)") == "9");
  CHECK(lowered("M > 1 and not (M < 1)") == "true");
  CHECK(lowered("a * (M / 1024)") == "(* a 4)");
  CHECK(lowered("target.partitions") == "128");
  CHECK(lowered("true or false") == "true");
}

TEST_CASE("expression: functions on parameters") {
  CHECK(lowered("min(a, b, 3)") == "(min a b 3)");
  CHECK(lowered("ceil_div(M, a)") == "(ceil_div 4096 a)");
  CHECK(lowered("log2(a) + pow2(b)") == "(+ (log2 a) (pow2 b))");
  CHECK(lowered("is_pow2(a)") == "(is_pow2 a)");
}

TEST_CASE("expression: symbols and membership") {
  CHECK(lowered("h == hbm") == "(== h hbm)");
  CHECK(lowered("h != sbuf") == "(!= h sbuf)");
  CHECK(lowered("a in {1, 2, M / 1024}") == "(in a {1 2 4})");
  CHECK(lowered("h in {hbm}") == "(in h {hbm})");
  CHECK(lowered("2 in {1, 2}") == "true");
  CHECK(lowered("f == true") == "(== f true)");
}

TEST_CASE("expression: permutation queries") {
  CHECK(lowered("pos(o, k)") == "(pos o k)");
  CHECK(lowered("before(o, m, k)") == "(before o m k)");
  CHECK(lowered("o[0] == k") == "(== (at o 0) k)");
  CHECK(lowered("o[a - 1] in {m, n}") == "(in (at o (- a 1)) {m n})");
  auto def = definition_of("space s { param o : perm(x, y)\n let e = o[1] }");
  CHECK(def.lets[0].value->type == value_type::symbol);
  CHECK(def.lets[0].value->op == expr_op::element_at);
  CHECK(def.lets[0].value->args[1]->value == 1);
}

TEST_CASE("expression: types of lets follow their values") {
  auto def = definition_of(
      "space s { param a : 1 .. 4\n let big = a > 2\n let twice = a * 2\n require big }");
  CHECK(def.lets[0].value->type == value_type::boolean);
  CHECK(def.lets[1].value->type == value_type::integer);
}

TEST_CASE("expression: bad calls and operands") {
  auto in_space = [](std::string_view e) {
    return messages_of(
        "space s { param a : 1 .. 8\n param o : perm(m, n)\n param h : {sbuf, hbm}\n let e = " +
        std::string(e) + " }");
  };
  CHECK(in_space("min(a)") == "'min' takes at least 2 arguments, got 1\n");
  CHECK(in_space("ceil_div(a, 1, 2)") == "'ceil_div' takes 2 arguments, got 3\n");
  CHECK(in_space("pos(a, m)") == "'pos' needs a permutation parameter, but 'a' is an integer\n");
  CHECK(in_space("pos(o + 1, m)") == "'pos' needs a permutation parameter as its first argument\n");
  CHECK(in_space("before(o, m, z)") == "'before': 'z' is not an element of 'o' (m, n)\n");
  CHECK(in_space("o[-1]") == "index -1 is out of range for 'o' (2 elements, indices 0 .. 1)\n");
  CHECK(in_space("a[0]") ==
        "indexing with [ ] needs a permutation parameter, but 'a' is an integer\n");
  CHECK(in_space("{1, 2}") == "a set {...} is only allowed after 'in'\n");
  CHECK(in_space("a in {1, hbm}") ==
        "this set element is a symbol, but the value tested is an integer\n");
  CHECK(in_space("a in {1, a}") ==
        "an element of a set after 'in' must be a constant expression\n");
  CHECK(in_space("o") == "let 'e' cannot hold a permutation\n");
  CHECK(in_space("o == o") == "'==' expects an integer, but 'o' is a permutation\n");
  CHECK(in_space("not a") == "'not' expects a boolean, but 'a' is an integer\n");
  CHECK(in_space("-h") == "unary '-' expects an integer, but 'h' is a symbol\n");
  CHECK(in_space("h in {sbuf, psum}") == "unknown name 'psum'\n");
  CHECK(in_space("log2(h)") == "'log2' expects an integer, but 'h' is a symbol\n");
  CHECK(in_space("a < 2 < 3") == "'<' expects an integer, but this operand is a boolean\n");
}

TEST_CASE("expression: after a failed left operand, the right one is still checked once") {
  CHECK(messages_of("space s { param h : {a, b}\n require q in {a, z} }") ==
        "unknown name 'q'\nunknown name 'z'\n");
  CHECK(messages_of("space s { param h : {a, b}\n require q + r > 1 }") ==
        "unknown name 'q'\nunknown name 'r'\n");
}

TEST_CASE("expression: folding a constant and evaluating a parameter agree, failures included") {
  // The same expression over x, once with x a const (folded when the file is
  // checked) and once with x a parameter (evaluated by the space engine).
  const std::vector<std::string> values = {
      "-9223372036854775807 - 1", "-7", "-1", "0", "1", "2", "5", "62", "63", "4096",
      "9223372036854775807"};
  const std::vector<std::string> expressions = {"7 / x",
                                                "-7 / x",
                                                "x / -2",
                                                "x % 3",
                                                "x % -3",
                                                "ceil_div(x, 2)",
                                                "ceil_div(x, -2)",
                                                "ceil_div(7, x)",
                                                "log2(x)",
                                                "pow2(x)",
                                                "x * x",
                                                "x + 1",
                                                "x - 1",
                                                "-x",
                                                "min(x, 3, -1)",
                                                "max(x, 3)",
                                                "x / -1",
                                                "x % -1",
                                                "is_pow2(x)",
                                                "x in {0, 5, 63}",
                                                "not (x < 2) or x > 60",
                                                "x >= 2 and x != 5"};
  for (const auto& value : values)
    for (const auto& e : expressions) {
      INFO(e, " with x = ", value);
      std::optional<std::int64_t> folded;
      try {
        const auto defs = parse_definitions("space s { const x = " + value +
                                            "\n param p : {1}\n let e = " + e + " }");
        const auto& let = defs.front().lets.front().value;
        REQUIRE(let->op == expr_op::literal);
        folded = let->value;
      } catch (const space_error& err) {  // a failing constant is an error of the file
        const std::string what = err.what();
        CHECK((what.find("in a constant expression") != std::string::npos ||
               what.find("by 0 always fails") != std::string::npos));
      }
      const space s(definition_of("space s { param x : {" + value + "}\n let e = " + e + " }"));
      CHECK(s.evaluate(s.at(0), "e") == folded);
    }
}
