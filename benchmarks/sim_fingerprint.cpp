// bench_sim_fingerprint: everything the event model says about random configs
// of every simulator example space, as exact text (hex floats), so that two
// builds of the simulator can be compared bit for bit with `diff` (issue 28
// item 2: the event model made faster without changing any timing). Per
// (target, example) it samples --configs configs with a fixed seed and prints
// one line per config: the status, the objective, the modelled cost and
// every metric (busy fractions, bytes, critical-path shares), or the message
// of a config that does not compile. With --compare FILE (the output of
// another build, same options) it prints nothing but the lines that differ
// and exits 1 if any does.
//
//   bench_sim_fingerprint [--configs N] [--seed S] [--targets trn2,trn1,trn2_lnc2]
//                         [--files sim_matmul.tsl,...] [--compare FILE]
#include "common.hpp"

#include <tessel/dsl.hpp>
#include <tessel/error.hpp>
#include <tessel/random.hpp>
#include <tessel/sim.hpp>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <fstream>
#include <string>
#include <vector>

namespace {

/// The example spaces the simulator backend times (the cpu_* ones run on the host).
const char* const default_files =
    "sim_matmul.tsl,matmul.tsl,sim_rmsnorm.tsl,sim_softmax.tsl,sim_layernorm.tsl,"
    "sim_attention.tsl,swiglu.tsl,cross_entropy.tsl,moe.tsl,sim_newton_schulz.tsl";

std::string fingerprint(const tessel::measurement& m) {
  std::string out = fmt::format("{} {:a} {:a} {:a}", static_cast<int>(m.status), m.objective,
                                m.cost.compile_s, m.cost.run_s);
  for (const auto& [name, value] : m.metrics) out += fmt::format(" {}={:a}", name, value);
  if (!m.ok()) out += " | " + m.message;
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"the event model's outputs on random example configs, bit for bit"};
  int configs = 200;
  std::uint64_t seed = 5;
  std::string targets = "trn2,trn1,trn2_lnc2", files = default_files;
  app.add_option("--configs", configs, "configs sampled per (target, example)");
  app.add_option("--seed", seed, "sampling seed");
  app.add_option("--targets", targets, "comma-separated targets");
  app.add_option("--files", files, "comma-separated example files (examples/)");
  std::string compare;
  app.add_option("--compare", compare,
                 "a fingerprint of another build: print the lines that differ")
      ->check(CLI::ExistingFile);
  CLI11_PARSE(app, argc, argv);

  std::ifstream before(compare);
  std::size_t lines = 0, differ = 0;
  const auto emit = [&](const std::string& line) {
    ++lines;
    if (compare.empty()) return fmt::print("{}\n", line);
    std::string expected;
    if (!std::getline(before, expected)) expected = "(missing)";
    if (expected == line) return;
    ++differ;
    fmt::print("line {}:\n  before: {}\n  now:    {}\n", lines, expected, line);
  };

  for (const auto& target : tessel::bench::split(targets))
    for (const auto& file : tessel::bench::split(files)) {
      tessel::parse_options po;
      po.target = target;
      const tessel::space s =
          tessel::load_space(std::string(TESSEL_SOURCE_DIR) + "/examples/" + file, po);
      tessel::sim_options o;
      o.gate = false;
      tessel::sim_backend b(o);
      b.prepare(s);
      tessel::rng random(seed);
      for (int i = 0; i < configs; ++i) {
        const auto c = s.sample(random);
        emit(fmt::format("{} {} {} {}", file, target, s.to_json(c), fingerprint(b.evaluate(s, c))));
      }
    }
  if (compare.empty()) return 0;
  if (std::string extra; std::getline(before, extra)) {
    ++differ;
    fmt::print("{} has more lines than this run (other options?)\n", compare);
  }
  fmt::print("{} of {} configs differ from {}\n", differ, lines, compare);
  return differ == 0 ? 0 : 1;
}
