// The workloads' knob tables (backends/sim/knobs.hpp, typed_workload.hpp): a
// space is reviewed against the names a workload reads at prepare time
// (misspelt names, wrong kinds, unknown values are errors with golden
// messages; defaults that apply are listed), reads are checked, plans are
// typed, and every registered workload reads only what it declares.
#include "helpers.hpp"
#include "sim/analysis.hpp"
#include "sim/typed_workload.hpp"

#include <tessel/dsl.hpp>
#include <tessel/error.hpp>
#include <tessel/sim.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

using namespace tessel;
using namespace tessel::sim;
using namespace tessel::sim::testing;

namespace {

/// A matmul space on trn2 with `body` after its shape.
space matmul_space(const std::string& body) {
  return parse_space(
      "space typo {\n  const workload = matmul\n  const M = 1024 const N = 1024 "
      "const K = 1024\n  param tile_m : {128, 256}\n" +
      body + "\n}\n");
}

/// What sim_backend::prepare says about `s` ("" when it accepts it).
std::string prepare_error(const space& s) {
  sim_options o;
  o.target = "trn2";
  sim_backend b(o);
  try {
    b.prepare(s);
  } catch (const tessel::error& e) {
    return e.what();
  }
  return "";
}

const char* header = "sim workload 'matmul' cannot read space 'typo':\n  ";

}  // namespace

TEST_CASE("knobs: a misspelt knob is an error at prepare, with the name it is close to") {
  CHECK(prepare_error(matmul_space("param a_buf : {1, 2}")) ==
        std::string(header) +
            "parameter 'a_buf' is not a name the workload reads: did you mean 'a_bufs'?");
  CHECK(prepare_error(matmul_space("const evcit = vector")) ==
        std::string(header) +
            "const 'evcit' is not a name the workload reads: did you mean 'evict'?");
  // far from every knob: not an error, listed as not read
  CHECK(prepare_error(matmul_space("param unroll : {1, 2}")).empty());
}

TEST_CASE("knobs: a knob of the wrong kind, or with a value the workload does not know") {
  CHECK(prepare_error(matmul_space("param bufs : {two, three}")) ==
        std::string(header) +
            "parameter 'bufs' is a symbol; the workload reads it as integer >= 1");
  CHECK(prepare_error(matmul_space("const coalesce = 1")) ==
        std::string(header) + "const coalesce is an integer; the workload reads it as bool");
  CHECK(prepare_error(matmul_space("param evict : {vector, tensor}")) ==
        std::string(header) +
            "parameter 'evict' takes 'tensor', which the workload does not know (vector | scalar "
            "| gpsimd)");
  CHECK(prepare_error(matmul_space("const dtype = int8")) ==
        std::string(header) +
            "const dtype = int8, which the workload does not know (bf16 | fp16 | fp8 | "
            "fp8_e4m3 | fp8_e5m2 | fp32)");
  CHECK(prepare_error(matmul_space("param order : perm(m, k, x)")) ==
        std::string(header) +
            "parameter 'order' permutes (m, k, x); the workload reads perm(m, n, k)");
}

TEST_CASE("knobs: every problem of a space is listed at once, a missing shape among them") {
  const space s = parse_space(
      "space typo {\n const workload = matmul\n const M = 1024 const N = 1024\n"
      " param tile_m : {128, 256}\n param tile_nn : {512, 1024}\n param prefetch : {yes, no}\n}\n");
  CHECK(prepare_error(s) ==
        std::string(header) +
            "parameter 'tile_nn' is not a name the workload reads: did you mean 'tile_n'?\n"
            "  parameter 'prefetch' is a symbol; the workload reads it as bool\n"
            "  needs 'K' as a constant or parameter: the contraction");
}

TEST_CASE("knobs: the defaults that apply are listed, and the names the workload does not read") {
  const space s = matmul_space("param unroll : {1, 2}\n  const a_layout = km");
  sim_backend b;
  b.prepare(s);
  const auto notes = b.notes(s);
  const auto has = [&](const std::string& line) {
    return std::find(notes.begin(), notes.end(), line) != notes.end();
  };
  CHECK(has("default bufs = 2"));
  CHECK(has("default tile_n = mm_n"));
  CHECK(has("default order = (m, n, k)"));
  CHECK(has("default coalesce = true"));
  CHECK(has("not read: unroll (sim workload matmul does not read it)"));
  CHECK_FALSE(has("default a_layout = km"));  // the space sets it
  CHECK_FALSE(has("default tile_m = mm_m"));
  // one line per knob the space leaves out, and one per name it does not read
  CHECK(notes.size() == matmul_workload().knobs().all().size() - 5 + 1);
}

TEST_CASE("knobs: reads are checked against the declaration and the space") {
  const knob_table t(
      "demo", {knob::required_integer("n", "size"), knob::integer("bufs", 2, "slots", ">= 1"),
               knob::integer("tile", derived{"n"}, "tile"),
               knob::symbol("engine", {"vector", "scalar"}, "vector", "engine"),
               knob::flag("fuse", false, "fuse"), knob::order("order", {"a", "b"}, "order")});
  const space s = parse_space(
      "space demo {\n const n = 64\n param engine : {vector, scalar}\n param order : perm(a, b)\n"
      " param tile : {8, 16}\n}\n");
  const config c = *s.default_config();
  const knob_reader v(t, s, c);
  CHECK(v.integer("n") == 64);
  CHECK(v.integer("bufs") == 2);  // the declared default
  CHECK(v.integer("tile", 64) == 8);
  CHECK(v.symbol("engine") == "vector");
  CHECK_FALSE(v.flag("fuse"));
  CHECK(v.order("order") == std::vector<std::string>{"a", "b"});
  CHECK(v.has("tile"));
  CHECK_FALSE(v.has("bufs"));
  CHECK_THROWS_WITH_AS((void)v.integer("unroll"),
                       "sim workload 'demo' reads 'unroll', which it does not declare",
                       tessel::error);
  CHECK_THROWS_WITH_AS((void)v.symbol("bufs"),
                       "sim workload 'demo' reads 'bufs' as a symbol, but declares it an integer "
                       "(integer >= 1)",
                       tessel::error);
  CHECK_THROWS_WITH_AS((void)v.integer("bufs", 4),
                       "sim workload 'demo' reads 'bufs' with a fallback, but declares its default",
                       tessel::error);
  CHECK_THROWS_WITH_AS((void)v.integer("tile"),
                       "sim workload 'demo' reads 'tile' without the fallback its declaration "
                       "derives",
                       tessel::error);
  // a knob table names each knob once, and a symbol's default is one of its values
  CHECK_THROWS_AS(knob_table("demo", {knob::flag("x", true, ""), knob::flag("x", false, "")}),
                  tessel::error);
  CHECK_THROWS_AS(knob_table("demo", {knob::symbol("e", {"vector"}, "tensor", "")}), tessel::error);
}

TEST_CASE("knobs: a plan of another workload's type is an error, not a bad cast") {
  const machine m = machine_for("trn2");
  const space s = parse_space(
      "space rows {\n const workload = softmax\n const rows = 256 const cols = 512\n}\n");
  const auto plan = softmax_workload().plan_config(s, *s.default_config(), m);
  REQUIRE(plan->error.empty());
  program p;
  CHECK_THROWS_WITH_AS((void)matmul_workload().lower_plan(*plan, m, p),
                       "sim workload 'matmul' was given a plan of another type", tessel::error);
  CHECK_THROWS_AS((void)rmsnorm_workload().steady_plan(*plan, m), tessel::error);
  CHECK(softmax_workload().lower_plan(*plan, m, p).empty());
}

TEST_CASE("knobs: every example space passes every workload's review, and every read is declared") {
  // The registry and the examples: each example's workload accepts it, and
  // planning, lowering and the suggestions for every bottleneck read only
  // declared names (an undeclared read throws).
  const machine m = machine_for("trn2");
  int spaces = 0;
  for (const auto& entry :
       std::filesystem::directory_iterator(std::string(TESSEL_SOURCE_DIR) + "/examples")) {
    if (entry.path().extension() != ".tsl") continue;
    // the cpu backend's spaces (docs/cpu.md) are not the simulator's
    if (entry.path().stem().string().starts_with("cpu_")) continue;
    parse_options options;
    options.target = "trn2";
    const space s = load_space(entry.path(), options);
    const workload* w = workload_for_space(s, "");
    INFO(entry.path().filename().string());
    CHECK(prepare_error(s).empty());
    rng random(3);
    for (int i = 0; i < 3; ++i) {
      const config c = s.sample(random);
      const auto plan = w->plan_config(s, c, m);
      program p;
      if (plan->error.empty()) (void)w->lower_plan(*plan, m, p);
      (void)w->estimated_instructions(s, c, m);
      for (const char* phase : {"tensor", "vector", "scalar", "gpsimd", "dma data", "dma issue"})
        for (std::size_t t = 0; t < std::max<std::size_t>(1, p.tags().size()); ++t) {
          bottleneck b;
          b.phase = phase;
          b.tag = t < p.tags().size() ? p.tags()[t] : "";
          b.share = 1;
          b.issue_share = b.latency_share = b.data_share = 0.4;
          CHECK_NOTHROW((void)w->suggest(b, s, c));
        }
    }
    ++spaces;
  }
  CHECK(spaces >= 10);
}

TEST_CASE("knobs: docs/simulator.md names every knob of every workload") {
  std::ifstream in(std::string(TESSEL_SOURCE_DIR) + "/docs/simulator.md");
  std::ostringstream text;
  text << in.rdbuf();
  const std::string doc = text.str();
  REQUIRE(!doc.empty());
  for (const auto& name : workload_names())
    for (const auto& k : find_workload(name)->knobs().all()) {
      INFO(name, ": ", k.name);
      CHECK((doc.find("`" + k.name + "`") != std::string::npos ||
             doc.find("`const " + k.name + " ") != std::string::npos));
    }
}
