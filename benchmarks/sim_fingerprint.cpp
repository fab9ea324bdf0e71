// bench_sim_fingerprint: everything the event model says about random configs
// of every simulator example space, as exact text (hex floats), so that two
// builds of the simulator can be compared bit for bit with `diff` (issue 28
// item 2: the event model made faster without changing any timing). Per
// (target, example) it samples --configs configs with a fixed seed and prints
// one line per config: the status, the objective, the modelled cost and
// every metric (busy fractions, bytes, critical-path shares), or the message
// of a config that does not compile. With --compare FILE (the output of
// another build, same options) it prints nothing but the lines that differ,
// then the largest relative difference of any number (the objective, the
// cost, a metric), and exits 1 if any line differs by more than
// --tolerance (relative; default 0: bit for bit). A line whose words differ
// otherwise (status, names, messages) counts as an infinite difference.
//
//   bench_sim_fingerprint [--configs N] [--seed S] [--targets trn2,trn1,trn2_lnc2]
//                         [--files sim_matmul.tsl,...] [--compare FILE [--tolerance R]]
#include "common.hpp"

#include <tessel/dsl.hpp>
#include <tessel/error.hpp>
#include <tessel/random.hpp>
#include <tessel/sim.hpp>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <sstream>
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

/// A number printed by fingerprint() (a hex float, possibly after "name="):
/// its name and value; false for other words.
bool number(const std::string& word, std::string& name, double& value) {
  const auto eq = word.find('=');
  name = eq == std::string::npos ? "" : word.substr(0, eq);
  const std::string text = eq == std::string::npos ? word : word.substr(eq + 1);
  if (text.find("0x") == std::string::npos) return false;
  char* end = nullptr;
  value = std::strtod(text.c_str(), &end);
  return end != nullptr && *end == '\0';
}

/// The largest relative difference between the numbers of two lines
/// (|a - b| / max(|a|, |b|)), with the word where it is; infinity where the
/// lines differ in anything but their numbers.
std::pair<double, std::string> relative_difference(const std::string& a, const std::string& b) {
  std::istringstream in_a(a), in_b(b);
  std::string wa, wb, na, nb;
  double worst = 0, va = 0, vb = 0;
  std::string where;
  for (;;) {
    const bool more_a = static_cast<bool>(in_a >> wa), more_b = static_cast<bool>(in_b >> wb);
    if (more_a != more_b) return {std::numeric_limits<double>::infinity(), "(words)"};
    if (!more_a) return {worst, where};
    if (wa == wb) continue;
    if (!number(wa, na, va) || !number(wb, nb, vb) || na != nb)
      return {std::numeric_limits<double>::infinity(), wb};
    const double scale = std::max(std::abs(va), std::abs(vb));
    const double d = scale > 0 ? std::abs(va - vb) / scale : 0;
    if (d > worst) {
      worst = d;
      where = na.empty() ? "(objective or cost)" : na;
    }
  }
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
  double tolerance = 0;
  app.add_option("--tolerance", tolerance,
                 "with --compare: the largest relative difference that passes");
  CLI11_PARSE(app, argc, argv);

  std::ifstream before(compare);
  std::size_t lines = 0, differ = 0, beyond = 0;
  double largest = 0;
  std::string largest_at;
  const auto emit = [&](const std::string& line) {
    ++lines;
    if (compare.empty()) return fmt::print("{}\n", line);
    std::string expected;
    if (!std::getline(before, expected)) expected = "(missing)";
    if (expected == line) return;
    ++differ;
    const auto [d, word] = relative_difference(expected, line);
    if (d > tolerance || tolerance == 0) ++beyond;  // 0: bit for bit
    if (d >= largest) {
      largest = d;
      largest_at = fmt::format("line {}, {}", lines, word);
    }
    fmt::print("line {} (relative difference {:.3g} in {}):\n  before: {}\n  now:    {}\n", lines,
               d, word, expected, line);
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
    ++beyond;
    largest = std::numeric_limits<double>::infinity();
    largest_at = "the line count";
    fmt::print("{} has more lines than this run (other options?)\n", compare);
  }
  fmt::print("{} of {} configs differ from {}", differ, lines, compare);
  if (differ > 0) fmt::print("; largest relative difference {:.3g} ({})", largest, largest_at);
  fmt::print("; {} beyond the tolerance {:g}\n", beyond, tolerance);
  return beyond == 0 ? 0 : 1;
}
