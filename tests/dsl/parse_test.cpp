// Parse results: the lowered definition of whole files.
#include "helpers.hpp"

#include <tessel/dsl.hpp>

using namespace tessel;
using tessel::testing::definition_of;
using tessel::testing::options;
using tessel::testing::show_constraint;
using tessel::testing::show_let;

namespace {

constexpr std::string_view matmul = R"(# matmul.tsl: the DESIGN.md sketch
space matmul {
  const M = 4096   const N = 4096   const K = 4096     # overridable: --set M=8192

  param tile_m : {128, 256, 512, 1024, 2048}
  param tile_n : pow2(128 .. 2048)
  param tile_k : 128 .. 4096 step 128
  param order  : perm(m, n, k)                       # loop order, outermost first
  param a_home : {sbuf, hbm}                         # where the A block lives
  param bufs   : 1 .. 4 = 2                          # DMA multi-buffering depth
  param evict  : {vector, scalar, gpsimd}            # engine that drains PSUM

  let a_block = tile_m * tile_k * 2
  let b_block = tile_k * tile_n * 2
  require M % tile_m == 0 and N % tile_n == 0 and K % tile_k == 0
  require bufs * (a_block + b_block) / target.partitions
          <= target.sbuf_bytes_per_partition          "blocks must fit in SBUF"
  when a_home == hbm { param prefetch : bool }
}
)";

}  // namespace

TEST_CASE("parse: the design sketch lowers to the expected definition") {
  auto def = definition_of(matmul);
  CHECK(def.name == "matmul");
  CHECK(def.file == "test.tsl");
  CHECK(def.source == matmul);
  CHECK(def.target.name == "trn2");

  REQUIRE(def.constants.size() == 3);
  CHECK(def.constants[0].name == "M");
  CHECK(def.constants[0].value == 4096);
  CHECK(def.constants[0].type == value_type::integer);

  CHECK(def.symbols ==
        std::vector<std::string>{"m", "n", "k", "sbuf", "hbm", "vector", "scalar", "gpsimd"});

  REQUIRE(def.parameters.size() == 8);
  const auto& tile_m = def.parameters[0];
  CHECK(tile_m.name == "tile_m");
  CHECK(tile_m.line == 5);
  CHECK(tile_m.dom.kind == param_kind::integer);
  CHECK(tile_m.dom.values == std::vector<std::int64_t>{128, 256, 512, 1024, 2048});
  CHECK(tile_m.when == nullptr);
  CHECK(!tile_m.default_index);

  CHECK(def.parameters[1].dom.values == std::vector<std::int64_t>{128, 256, 512, 1024, 2048});
  CHECK(def.parameters[1].dom.log_scale);
  CHECK(def.parameters[2].dom.size() == 32);
  CHECK(def.parameters[2].dom.values.back() == 4096);

  const auto& order = def.parameters[3];
  CHECK(order.dom.kind == param_kind::permutation);
  CHECK(order.dom.labels == std::vector<std::string>{"m", "n", "k"});
  CHECK(order.dom.element_ids == std::vector<std::int64_t>{0, 1, 2});
  CHECK(order.dom.size() == 6);

  const auto& a_home = def.parameters[4];
  CHECK(a_home.dom.kind == param_kind::symbol);
  CHECK(a_home.dom.labels == std::vector<std::string>{"sbuf", "hbm"});
  CHECK(a_home.dom.values == std::vector<std::int64_t>{3, 4});

  CHECK(def.parameters[5].default_index == std::optional<std::size_t>(1));

  const auto& prefetch = def.parameters[7];
  CHECK(prefetch.name == "prefetch");
  CHECK(prefetch.dom.kind == param_kind::boolean);
  CHECK(prefetch.dom.values == std::vector<std::int64_t>{0, 1});
  CHECK(tessel::testing::show(prefetch.when, def) == "(== a_home hbm)");

  REQUIRE(def.lets.size() == 2);
  CHECK(show_let(def, "a_block") == "(* (* tile_m tile_k) 2)");
  CHECK(def.lets[0].line == 13);

  REQUIRE(def.constraints.size() == 2);
  CHECK(show_constraint(def, 0) ==
        "(and (and (== (% 4096 tile_m) 0) (== (% 4096 tile_n) 0)) (== (% 4096 tile_k) 0))");
  CHECK(def.constraints[0].text == "M % tile_m == 0 and N % tile_n == 0 and K % tile_k == 0");
  CHECK(def.constraints[0].message.empty());
  CHECK(def.constraints[1].text ==
        "bufs * (a_block + b_block) / target.partitions <= target.sbuf_bytes_per_partition");
  CHECK(def.constraints[1].message == "blocks must fit in SBUF");
  CHECK(def.constraints[1].line == 16);
  auto partitions = std::to_string(*def.target.find("partitions"));
  auto sbuf = std::to_string(*def.target.find("sbuf_bytes_per_partition"));
  CHECK(show_constraint(def, 1) ==
        "(<= (/ (* bufs (+ a_block b_block)) " + partitions + ") " + sbuf + ")");
}

TEST_CASE("parse: several spaces in one file, in order") {
  auto defs = parse_definitions("space a { param x : {1} }\n# between\nspace b { param y : bool }",
                                options());
  REQUIRE(defs.size() == 2);
  CHECK(defs[0].name == "a");
  CHECK(defs[1].name == "b");
  CHECK(defs[1].parameters[0].name == "y");
  CHECK(defs[1].source == defs[0].source);
}

TEST_CASE("parse: semicolons are optional separators") {
  auto def = definition_of("space s { param x : 1 .. 3; let y = x * 2; require y > 2; }");
  CHECK(def.parameters.size() == 1);
  CHECK(def.lets.size() == 1);
  CHECK(def.constraints.size() == 1);
}

TEST_CASE("parse: consts are folded and kept, overrides replace them") {
  constexpr std::string_view text = R"(space s {
  const M = 1024
  const half = M / 2
  const layout = row_major
  param t : {M/4, half, M}
  param l : {row_major, col_major}
  require l == layout
})";
  auto def = definition_of(text);
  REQUIRE(def.constants.size() == 3);
  CHECK(def.constants[1].name == "half");
  CHECK(def.constants[1].value == 512);
  CHECK(def.constants[2].type == value_type::symbol);
  CHECK(def.symbols[static_cast<std::size_t>(def.constants[2].value)] == "row_major");
  CHECK(def.parameters[0].dom.values == std::vector<std::int64_t>{256, 512, 1024});
  CHECK(show_constraint(def, 0) == "(== l row_major)");

  auto o = options();
  o.overrides["M"] = "4096";
  o.overrides["layout"] = "col_major";
  auto big = definition_of(text, o);
  CHECK(big.constants[0].value == 4096);
  CHECK(big.constants[1].value == 2048);
  CHECK(big.parameters[0].dom.values == std::vector<std::int64_t>{1024, 2048, 4096});
  CHECK(show_constraint(big, 0) == "(== l col_major)");
}

TEST_CASE("parse: a let that folds is used as its value") {
  auto def =
      definition_of("space s { param x : 1 .. 4\n let bytes = 2 * 2\n let size = x * bytes }");
  CHECK(show_let(def, "bytes") == "4");
  CHECK(show_let(def, "size") == "(* x 4)");
}

TEST_CASE("parse: defaults of every kind of domain") {
  auto def = definition_of(R"(space s {
  param a : {512, 128, 256} = 256
  param b : {sbuf, hbm} = hbm
  param c : bool = true
  param d : pow2(1 .. 64) = 16
  param e : 0 .. 10 step 5 = 10
})");
  CHECK(def.parameters[0].dom.values == std::vector<std::int64_t>{128, 256, 512});
  CHECK(def.parameters[0].default_index == std::optional<std::size_t>(1));
  CHECK(def.parameters[1].default_index == std::optional<std::size_t>(1));
  CHECK(def.parameters[2].default_index == std::optional<std::size_t>(1));
  CHECK(def.parameters[3].default_index == std::optional<std::size_t>(4));
  CHECK(def.parameters[4].default_index == std::optional<std::size_t>(2));
}

TEST_CASE("parse_targets: declared targets derive from built-ins and earlier ones") {
  auto targets = parse_targets(R"(
target big : trn2 { sbuf_bytes_per_partition = 2 * target.sbuf_bytes_per_partition }
target bigger : big { sbuf_bytes_per_partition = target.sbuf_bytes_per_partition + 1; }
space s { param x : {1} }
)",
                               options());
  REQUIRE(targets.size() == 2);
  auto trn2 = *builtin_target("trn2");
  CHECK(targets[0].name == "big");
  CHECK(targets[0].base == "trn2");
  CHECK(*targets[0].find("sbuf_bytes_per_partition") == 2 * *trn2.find("sbuf_bytes_per_partition"));
  CHECK(*targets[0].find("partitions") == *trn2.find("partitions"));
  CHECK(targets[1].base == "big");
  CHECK(*targets[1].find("sbuf_bytes_per_partition") ==
        2 * *trn2.find("sbuf_bytes_per_partition") + 1);
}

TEST_CASE("parse: a space checks against a declared target") {
  auto o = options("tiny");
  auto def = definition_of(R"(target tiny : trn2 { partitions = 4 }
space s { param x : {1, 2} require x <= target.partitions })",
                           o);
  CHECK(def.target.name == "tiny");
  CHECK(def.target.base == "trn2");
  CHECK(tessel::testing::show_constraint(def, 0) == "(<= x 4)");
}

TEST_CASE("parse: boolean and symbol consts can be overridden") {
  constexpr std::string_view text = R"(space s {
  const causal = true
  param f : bool
  when causal { param g : bool }
})";
  CHECK(definition_of(text).parameters[1].when->value == 1);
  auto o = options();
  o.overrides["causal"] = "false";
  auto def = definition_of(text, o);
  CHECK(def.constants[0].type == value_type::boolean);
  CHECK(def.constants[0].value == 0);
  CHECK(def.parameters[1].when->value == 0);
}

TEST_CASE("parse: Windows line endings and tabs") {
  auto def = definition_of("space s {\r\n\tparam x : 1 .. 3\r\n\trequire x > 1\r\n}\r\n");
  CHECK(def.parameters[0].line == 2);
  CHECK(def.constraints[0].text == "x > 1");
  CHECK(tessel::testing::errors_of("space s {\r\n\trequire y > 1\r\n}") ==
        "test.tsl:2:10: error: unknown name 'y'\n\trequire y > 1\n\t        ^");
}

TEST_CASE("parse: a requirement that is false on constants alone is an error") {
  auto o = options();
  o.overrides["M"] = "100";
  CHECK(tessel::testing::errors_of(
            "space s {\n  const M = 128\n  param x : {1}\n  require M % 64 == 0\n}", o) ==
        "test.tsl:4:11: error: this requirement is always false: M % 64 == 0\n"
        "  require M % 64 == 0\n"
        "          ^\n"
        "  hint: it depends on constants only; check the consts and the target");
}
