// bench_calibration: the NeuronCore simulator against the published
// measurements of data/calibration/ (issue 4): each case predicted beside
// published, with the relative error and the tolerance the tests enforce.
//
//   bench_calibration [--data DIR] [--set NAME=VALUE ...]
//
// Exit status 1 when a case is outside its tolerance or the tutorial stages
// come out in another order than published.
#include "sim/calibration.hpp"

#include <tessel/error.hpp>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <cmath>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  CLI::App app{"NeuronCore simulator vs published measurements (data/calibration/)"};
  std::string data = TESSEL_DATA_DIR;
  std::vector<std::string> sets;
  app.add_option("--data", data, "the data/ folder");
  app.add_option("--set", sets, "override a model constant: NAME=VALUE");
  CLI11_PARSE(app, argc, argv);

  std::map<std::string, double, std::less<>> overrides;
  for (const auto& s : sets) {
    const auto eq = s.find('=');
    if (eq == std::string::npos) {
      fmt::print(stderr, "--set wants NAME=VALUE, got '{}'\n", s);
      return 2;
    }
    overrides[s.substr(0, eq)] = std::stod(s.substr(eq + 1));
  }
  std::vector<tessel::sim::calibration_row> rows;
  try {
    rows = tessel::sim::run_calibration(std::filesystem::path(data) / "calibration", overrides);
  } catch (const tessel::error& e) {
    fmt::print(stderr, "bench_calibration: {}\n", e.what());
    return 2;
  }
  bool ok = true;
  std::string file;
  fmt::print("{:<20} {:<18} {:>12} {:>12} {:>8} {:>6}  {}\n", "case", "quantity", "published",
             "predicted", "error", "tol", "how");
  for (const auto& r : rows) {
    if (r.file != file) {
      file = r.file;
      fmt::print("-- {}\n", file);
    }
    const bool pass = std::abs(r.error()) <= r.tolerance;
    ok = ok && pass;
    fmt::print("{:<20} {:<18} {:>12.4g} {:>12.4g} {:>+7.1f}% {:>5.0f}%  {}{}\n", r.name, r.quantity,
               r.published, r.predicted, 100 * r.error(), 100 * r.tolerance, r.how,
               pass ? "" : "  <-- outside tolerance");
  }
  // The tutorial's stages must come out in the published order (each faster).
  double previous = 1e300;
  bool ordered = true;
  for (const auto& r : rows)
    if (r.file == "nki_matmul_tutorial_trn1.json") {
      ordered = ordered && r.predicted < previous;
      previous = r.predicted;
    }
  fmt::print("tutorial stages in the published order: {}\n", ordered ? "yes" : "NO");
  return ok && ordered ? 0 : 1;
}
