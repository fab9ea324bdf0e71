// The event model's latencies, pinned: sampled configs of every example space
// on trn2, trn1 and trn2_lnc2, each with its latency as a hex float
// (tests/sim/golden/event_latencies.txt, recorded at 8508425 before the
// event model was made faster). Any change to the lowering or the timing
// that moves one bit of one of them fails here; TESSEL_UPDATE_GOLDEN=1
// rewrites the file (a deliberate change of the model: say so in the commit).
#include "helpers.hpp"

#include <tessel/dsl.hpp>
#include <tessel/random.hpp>
#include <tessel/sim.hpp>

#include <doctest/doctest.h>
#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

using namespace tessel;

namespace {

const std::string golden_path =
    std::string(TESSEL_SOURCE_DIR) + "/tests/sim/golden/event_latencies.txt";

space example_on(const std::string& file, const std::string& target) {
  parse_options o;
  o.target = target;
  return load_space(std::string(TESSEL_SOURCE_DIR) + "/examples/" + file, o);
}

sim_backend event_model() {
  sim_options o;
  o.gate = false;
  return sim_backend(o);
}

/// The file the golden holds: 5 compiling configs per (example, target), seed 17.
std::string record() {
  std::string out;
  for (const char* target : {"trn2", "trn1", "trn2_lnc2"})
    for (const char* file :
         {"sim_matmul.tsl", "matmul.tsl", "sim_rmsnorm.tsl", "sim_softmax.tsl", "sim_layernorm.tsl",
          "sim_attention.tsl", "swiglu.tsl", "cross_entropy.tsl", "moe.tsl"}) {
      const space s = example_on(file, target);
      sim_backend b = event_model();
      b.prepare(s);
      rng random(17);
      int found = 0;
      for (int i = 0; i < 400 && found < 5; ++i) {
        const auto c = s.sample(random);
        const auto m = b.evaluate(s, c);
        if (!m.ok()) continue;
        ++found;
        out += fmt::format("{} {} {:a} {}\n", file, target, m.objective, s.to_json(c));
      }
    }
  return out;
}

}  // namespace

TEST_CASE("event model: the latencies of sampled example configs are pinned to the bit") {
  if (std::getenv("TESSEL_UPDATE_GOLDEN")) {
    std::ofstream(golden_path) << record();
    MESSAGE("rewrote ", golden_path);
  }
  std::ifstream in(golden_path);
  REQUIRE(in);
  std::map<std::string, space> spaces;
  std::string line;
  int checked = 0;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string file, target, hex;
    fields >> file >> target >> hex;
    std::string json;
    std::getline(fields, json);
    const std::string key = file + " " + target;
    auto it = spaces.find(key);
    if (it == spaces.end()) it = spaces.emplace(key, example_on(file, target)).first;
    const space& s = it->second;
    sim_backend b = event_model();
    const auto m = b.evaluate(s, s.from_json(json));
    INFO(line);
    REQUIRE(m.ok());
    const double expected = std::strtod(hex.c_str(), nullptr);
    CHECK(fmt::format("{:a}", m.objective) == fmt::format("{:a}", expected));
    ++checked;
  }
  CHECK(checked == 135);
}
