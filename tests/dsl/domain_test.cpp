// Domains: every kind, its values, order, labels and flags.
#include "helpers.hpp"

using namespace tessel;
using tessel::testing::definition_of;
using tessel::testing::messages_of;

namespace {

domain domain_of(std::string_view declaration) {
  auto def =
      definition_of("space s {\n  const M = 1024\n  param p : " + std::string(declaration) + "\n}");
  REQUIRE(def.parameters.size() == 1);
  return def.parameters[0].dom;
}

using values = std::vector<std::int64_t>;

}  // namespace

TEST_CASE("domain: integer sets are sorted and may use constant expressions") {
  auto d = domain_of("{512, 128, M / 4, -1}");
  CHECK(d.kind == param_kind::integer);
  CHECK(d.values == values{-1, 128, 256, 512});
  CHECK(d.labels.empty());
  CHECK(!d.log_scale);
}

TEST_CASE("domain: ranges with and without step") {
  CHECK(domain_of("1 .. 4").values == values{1, 2, 3, 4});
  CHECK(domain_of("128 .. 640 step 128").values == values{128, 256, 384, 512, 640});
  CHECK(domain_of("0 .. 10 step 4").values == values{0, 4, 8});
  CHECK(domain_of("-2 .. 2").values == values{-2, -1, 0, 1, 2});
  CHECK(domain_of("M / 512 .. M / 256").values == values{2, 3, 4});
  CHECK(domain_of("5 .. 5").values == values{5});
}

TEST_CASE("domain: pow2 ranges are on a log scale") {
  auto d = domain_of("pow2(100 .. 1100)");
  CHECK(d.values == values{128, 256, 512, 1024});
  CHECK(d.log_scale);
  CHECK(domain_of("pow2(1 .. 1)").values == values{1});
  CHECK(domain_of("pow2(-5 .. 2)").values == values{1, 2});
}

TEST_CASE("domain: symbol sets keep declared order and intern their symbols") {
  auto def = definition_of("space s { param a : {hbm, sbuf}\n param b : {sbuf, psum} }");
  CHECK(def.symbols == std::vector<std::string>{"hbm", "sbuf", "psum"});
  CHECK(def.parameters[0].dom.kind == param_kind::symbol);
  CHECK(def.parameters[0].dom.labels == std::vector<std::string>{"hbm", "sbuf"});
  CHECK(def.parameters[0].dom.values == values{0, 1});
  CHECK(def.parameters[1].dom.labels == std::vector<std::string>{"sbuf", "psum"});
  CHECK(def.parameters[1].dom.values == values{1, 2});
}

TEST_CASE("domain: a symbol const can be a set value") {
  auto def = definition_of("space s { const fast = vector\n param a : {fast, gpsimd} }");
  CHECK(def.parameters[0].dom.labels == std::vector<std::string>{"vector", "gpsimd"});
}

TEST_CASE("domain: bool") {
  auto d = domain_of("bool");
  CHECK(d.kind == param_kind::boolean);
  CHECK(d.values == values{0, 1});
}

TEST_CASE("domain: perm lists every order of its elements") {
  auto def = definition_of("space s { param o : perm(i, j, k, l) }");
  const auto& d = def.parameters[0].dom;
  CHECK(d.kind == param_kind::permutation);
  CHECK(d.size() == 24);
  CHECK(d.values.front() == 0);
  CHECK(d.values.back() == 23);
  CHECK(d.labels == std::vector<std::string>{"i", "j", "k", "l"});
  CHECK(d.element_ids == values{0, 1, 2, 3});
  CHECK(definition_of("space s { param o : perm(a) }").parameters[0].dom.size() == 1);
  CHECK(definition_of("space s { param o : perm(a, b, c, d, e, f, g, h) }")
            .parameters[0]
            .dom.size() == 40320);
}

TEST_CASE("domain: bad domains are reported, not built") {
  CHECK(messages_of("space s { param x : {true, false} }") ==
        "a domain value must be an integer or a symbol, but this is a boolean\n"
        "a domain value must be an integer or a symbol, but this is a boolean\n");
  CHECK(messages_of("space s { param y : 1 .. 4  param x : {y, 2} }") ==
        "a domain value must be a constant expression\n");
  CHECK(messages_of("space s { param x : {sbuf} .. 4 }") != "");
  CHECK(messages_of("space s { param x : 1 .. 2000000 }") ==
        "the domain of 'x' has 2000000 values; at most 1000000 are allowed\n");
  CHECK(messages_of("space s { param o : perm(m, n, m) }") ==
        "duplicate element 'm' in the domain of 'o'\n");
  CHECK(messages_of("space s { param x : 1 .. 4 step -1 }") ==
        "the step of the domain of 'x' must be positive, but it is -1\n");
  CHECK(messages_of("space s { param x : {a, b} .. 3 }") != "");
  CHECK(messages_of("space s { param o : perm(m, n) = 1 }") ==
        "perm parameter 'o' takes no default\n");
  CHECK(messages_of("space s { param x : {1, 2} = hbm  param h : {hbm} }") ==
        "the default of 'x' is a symbol, but 'x' is an integer\n");
}
