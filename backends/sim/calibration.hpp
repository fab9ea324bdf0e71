// calibration.hpp: the published NeuronCore measurements of
// data/calibration/ replayed on the simulator: each case expressed as a
// config (the matmul tutorial's stages) or as a program (TensorE tile shapes,
// DMA descriptor sizes), predicted beside published. Used by the calibration
// tests (tests/sim/) and report (benchmarks/calibration.cpp).
#pragma once

#include <tessel/config.hpp>
#include <tessel/space.hpp>

#include <filesystem>
#include <map>
#include <string>
#include <tuple>
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
  /// Not used to fit any constant (docs/simulator.md says which are): a
  /// prediction, reported apart from the fitted cases.
  bool held_out = false;
  [[nodiscard]] double error() const {
    return published != 0 ? (predicted - published) / published : 0;
  }
};

/// Rank agreement between published and predicted over the rows of one
/// file (its stages or cases): both orders compared, ties counted as 0.
struct rank_agreement {
  std::string file;
  int cases = 0;
  double spearman = 0, kendall = 0;
  bool held_out = false;  ///< every row of the file is held out
};

/// Spearman's rho and Kendall's tau per file of `rows` with 3 or more rows
/// of one quantity, in file order.
[[nodiscard]] std::vector<rank_agreement> rank_agreements(const std::vector<calibration_row>& rows);

/// A ratio of two simulated configs that issue 16 names (no published value:
/// the model's answer, for comparing models side by side).
struct structure_ratio {
  std::string name;  ///< "row loads over tile loads"
  double ratio = 0;  ///< time of the first config over the second
  std::string how;
};

/// The structures of issue 16 on trn2 at 2048^3: coarse [128 x 1024] row
/// loads against [128 x 512] tile loads, and 4 queues per stream against 1.
[[nodiscard]] std::vector<structure_ratio> structure_ratios(
    const std::map<std::string, double, std::less<>>& overrides = {});

/// Which cases run_calibration replays.
struct calibration_selection {
  bool skip_missing = false;  ///< a missing file is skipped, not an error
  std::string target;         ///< only the files timed on this target ("": all)
};

/// Every case of the files under `dir` (data/calibration). Throws
/// tessel::error when a file is missing (unless skipped) or malformed, or a
/// stage is unknown. `overrides` are model constants (sim_options::overrides).
[[nodiscard]] std::vector<calibration_row> run_calibration(
    const std::filesystem::path& dir,
    const std::map<std::string, double, std::less<>>& overrides = {},
    const calibration_selection& selection = {});

/// The tutorial's stages as one-config spaces of the matmul workload on
/// trn1 (name, space, config), in file order: what a backend can run.
[[nodiscard]] std::vector<std::tuple<std::string, space, config>> tutorial_configs(
    const std::filesystem::path& dir);

/// The three files run_calibration reads, in its order, with the built-in
/// target each is timed on ({"nki_matmul_tutorial_trn1.json", "trn1"}, ...).
[[nodiscard]] std::vector<std::pair<std::string, std::string>> calibration_files();

}  // namespace tessel::sim
