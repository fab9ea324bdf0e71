// The trainium runner's racing rule (python/tessel_trainium/runner.py) is a
// port of tessel's (include/tessel/race_rule.hpp): on the same samples,
// incumbent and options, the two must stop at the same point, for the same
// reason.
#include <tessel/race_rule.hpp>

#include "temp_folder.hpp"

#include <doctest/doctest.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>

namespace {

const std::string source_dir = TESSEL_SOURCE_DIR;
const std::string test_python = TESSEL_TEST_PYTHON;

}  // namespace

TEST_CASE("racing: the trainium runner's rule agrees with tessel's on 600 random races") {
  if (test_python.empty()) {
    MESSAGE("no python3: racing agreement skipped");
    return;
  }
  std::mt19937_64 engine(29);
  std::uniform_int_distribution<int> repeats(1, 12), length(0, 30);
  std::uniform_real_distribution<double> unit(0, 1);
  nlohmann::json cases = nlohmann::json::array();
  std::vector<std::string> expected;
  for (int i = 0; i < 600; ++i) {
    tessel::race_options o;
    o.min_repeats = static_cast<std::size_t>(repeats(engine));
    o.max_repeats = o.min_repeats + static_cast<std::size_t>(repeats(engine)) - 1;
    o.margin = unit(engine) < 0.5 ? 0.0 : 0.1 * unit(engine);
    o.target_relative_ci = 0.2 * unit(engine);
    const double spread = 0.3 * unit(engine);
    std::vector<double> samples;
    const int n = length(engine);
    for (int k = 0; k < n; ++k) samples.push_back(1.0 + spread * (unit(engine) - 0.5));
    const double incumbent = unit(engine) < 0.3 ? 0.0 : 0.8 + 0.4 * unit(engine);
    expected.emplace_back(tessel::to_string(tessel::race_decision(samples, incumbent, o)));
    cases.push_back({{"samples", samples},
                     {"incumbent", incumbent > 0 ? nlohmann::json(incumbent) : nlohmann::json()},
                     {"options",
                      {{"min_repeats", o.min_repeats},
                       {"max_repeats", o.max_repeats},
                       {"margin", o.margin},
                       {"target_relative_ci", o.target_relative_ci}}}});
  }
  const tessel::testing::temp_folder folder;
  const auto& dir = folder.path();
  std::ofstream(dir / "cases.json") << cases.dump();
  std::ofstream(dir / "agree.py") << R"(import json, sys
sys.path.insert(0, sys.argv[1])
from tessel_trainium.runner import race_decision
cases = json.load(open(sys.argv[2]))
print(json.dumps([race_decision(c["samples"], c["incumbent"], c["options"]) for c in cases]))
)";
  const auto command =
      fmt::format("'{}' '{}' '{}/python' '{}' > '{}'", test_python, (dir / "agree.py").string(),
                  source_dir, (dir / "cases.json").string(), (dir / "out.json").string());
  REQUIRE(std::system(command.c_str()) == 0);  // NOLINT(concurrency-mt-unsafe)
  std::ifstream in(dir / "out.json");
  std::stringstream text;
  text << in.rdbuf();
  const auto got = nlohmann::json::parse(text.str()).get<std::vector<std::string>>();
  REQUIRE(got.size() == expected.size());
  int agree = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    INFO("case ", i, ": ", cases[i].dump());
    CHECK(got[i] == expected[i]);
    agree += got[i] == expected[i];
  }
  CHECK(agree == 600);
}
