// The gate must not judge an honest schedule incorrect in any type its
// workload offers: every simulator example space, at reduced shapes, with
// each choice of its `dtype` knob (fp16 and fp8 saturate at 65504 and 448,
// where a gate drawing O(1) weights overflowed swiglu's h and y), a few
// configs each, passes every suite (docs/gate.md, "Input magnitudes").
#include "helpers.hpp"

#include <tessel/dsl.hpp>
#include <tessel/error.hpp>
#include <tessel/gate.hpp>

#include <doctest/doctest.h>

#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

using namespace tessel;
using namespace tessel::sim;
using namespace tessel::sim::testing;

namespace {

using sets = std::map<std::string, std::string, std::less<>>;

/// The examples the simulator takes, at shapes that keep a check short
/// (tests/nki/emit_test.cpp's reduced_shapes(), with tails).
const std::vector<std::pair<const char*, sets>>& examples() {
  static const std::vector<std::pair<const char*, sets>> table{
      {"sim_matmul", {{"M", "256"}, {"N", "1024"}, {"K", "512"}}},
      {"sim_fp8_matmul", {{"M", "256"}, {"N", "1024"}, {"K", "512"}}},
      {"sim_rmsnorm", {{"rows", "512"}, {"hidden", "1024"}}},
      {"sim_softmax", {{"rows", "512"}, {"cols", "1024"}}},
      {"sim_layernorm", {{"rows", "512"}, {"hidden", "1024"}}},
      {"sim_attention", {{"seq", "512"}}},
      {"swiglu", {{"tokens", "256"}, {"d_model", "512"}, {"d_ff", "640"}}},
      {"cross_entropy", {{"tokens", "256"}, {"d_model", "256"}, {"vocab", "1000"}}},
      {"moe", {{"tokens", "48"}, {"d_in", "256"}, {"d_out", "768"}, {"experts", "8"}}},
      {"sim_newton_schulz", {{"rows", "192"}, {"cols", "640"}}},
      // on trn2, one rank: the base workload's kernel of the whole problem
      {"sharded_matmul", {{"M", "256"}, {"N", "1024"}, {"K", "512"}}},
      {"sharded_attention", {{"seq", "256"}, {"heads", "2"}}},
      {"sharded_moe", {{"tokens", "48"}, {"d_in", "256"}, {"d_out", "768"}, {"experts", "8"}}},
  };
  return table;
}

/// The example at `shape` with `const dtype = DTYPE` (declared after the
/// `space NAME {` line when the example leaves it to its workload's default).
space load_example(const char* name, const sets& shape, const std::string& dtype) {
  const std::string path = std::string(TESSEL_SOURCE_DIR) + "/examples/" + name + ".tsl";
  std::ostringstream read;
  read << std::ifstream(path).rdbuf();
  std::string text = read.str();
  parse_options options;
  options.target = "trn2";
  options.file = path;
  options.overrides = shape;
  if (text.find("const dtype") == std::string::npos)
    text.insert(text.find('\n', text.find("\nspace ") + 1) + 1, "  const dtype = bf16\n");
  options.overrides["dtype"] = dtype;
  return parse_space(text, options);
}

}  // namespace

TEST_CASE("narrow dtypes: honest configs pass the gate in every type their workload offers") {
  int checked = 0;
  for (const auto& [name, shape] : examples()) {
    const space probe = load_example(name, shape, "bf16");
    const auto w = workload_for_space(probe, "");
    REQUIRE(w);
    const knob* dtype = w->knobs().find("dtype");
    REQUIRE(dtype != nullptr);
    for (const std::string& type : dtype->choices) {
      const space s = load_example(name, shape, type);
      rng random(17);
      std::vector<config> configs{*s.default_config()};
      for (int i = 0; i < 2; ++i) configs.push_back(s.sample(random));
      for (const config& c : configs) {
        std::unique_ptr<functional_kernel> kernel;
        try {
          kernel = w->functional(s, c, machine_for("trn2"));
        } catch (const error&) {
          continue;  // a config the workload refuses (a compile error), not the gate's case
        }
        if (!kernel) continue;  // does not plan
        gate g(gate_options{.secret = 3});
        const verdict v = g.check(*kernel, *kernel, s.key(c));
        INFO(name, " dtype=", type, " ", s.to_json(c), " max_error ", v.max_error, ": ", v.message);
        CHECK(v.ok());
        ++checked;
      }
    }
  }
  CHECK(checked >= 40);
}
