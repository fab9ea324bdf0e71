// calibration.hpp: the published NeuronCore measurements of
// data/calibration/ replayed on the simulator: each case expressed as a
// config (the matmul tutorial's stages) or as a program (TensorE tile shapes,
// DMA descriptor sizes), predicted beside published. Used by the calibration
// tests (tests/sim/) and report (benchmarks/calibration.cpp).
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace tessel::sim {

struct calibration_row {
  std::string file;      ///< "nki_matmul_tutorial_trn1.json"
  std::string name;      ///< the stage or case name in the file
  std::string quantity;  ///< "latency_ms", "achieved_tflops", "achieved_gb_per_s", "latency_ns"
  double published = 0;
  double predicted = 0;
  double tolerance = 0;  ///< relative error allowed (issue 4: 25% tutorial, 15% otherwise)
  std::string how;       ///< the config or program that reproduces it
  [[nodiscard]] double error() const {
    return published != 0 ? (predicted - published) / published : 0;
  }
};

/// Every case of the three files under `dir` (data/calibration). Throws
/// tessel::error when a file is missing or malformed, or a stage is unknown.
/// `overrides` are model constants (sim_options::overrides).
[[nodiscard]] std::vector<calibration_row> run_calibration(
    const std::filesystem::path& dir,
    const std::map<std::string, double, std::less<>>& overrides = {});

}  // namespace tessel::sim
