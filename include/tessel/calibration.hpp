// tessel/calibration.hpp: re-fitting the NeuronCore simulator to device
// measurements (docs/simulator.md, "Calibrating to your device"). The
// simulator's calibration cases (data/calibration/: the NKI matmul
// tutorial's stages, TensorE tile shapes, DMA descriptor sizes) are timed on
// the model and compared with measurements recorded in the same JSON
// format; a derivative-free minimisation (NLopt's Nelder-Mead) over the
// model constants the cases read brings the squared log error down, and the
// result is written as a target file (`target my_trn2 : trn2 { ... }`) plus,
// for constants no target carries, the sim backend settings that set them.
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace tessel {

class backend;

struct calibration_options {
  /// A folder holding any of the calibration files, with measured values in
  /// place of the published ones (data/calibration/README.md).
  std::filesystem::path recorded;
  /// The target the written one derives from, and its name.
  std::string base = "trn2";
  std::string name = "my_trn2";
  /// The constants to fit (target fields or simulator table constants);
  /// empty: every default one the recorded cases are sensitive to.
  std::vector<std::string> constants;
  /// Model constants fixed during the fit (sim_options::overrides).
  std::map<std::string, double, std::less<>> fixed;
  /// Objective evaluations at most (each times every recorded case).
  int max_evaluations = 600;
  /// Each constant stays within [start / range, start x range].
  double range = 8;
  /// Throws tessel::options_error naming the first bad field.
  void validate() const;
};

/// One recorded case, predicted before and after the fit.
struct calibration_case {
  std::string file, name, quantity;
  double measured = 0, before = 0, after = 0;
};

struct calibration_result {
  std::map<std::string, double, std::less<>> start, fitted;  ///< the constants
  std::vector<std::string> insensitive;  ///< asked for, but no case depends on them
  std::vector<calibration_case> cases;
  double rms_log_error_before = 0, rms_log_error_after = 0;
  int evaluations = 0;
  /// `target NAME : BASE { ... }`: the fitted target fields (integers), and
  /// the fitted simulator table constants as a comment with their settings.
  std::string target_text;
  /// "set.NAME=VALUE,..." for the fitted constants no target carries (pass
  /// as sim backend settings), empty when there are none.
  std::string sim_settings;
  /// A table of every case, measured beside before and after.
  [[nodiscard]] std::string report() const;
};

/// The constants fitted when calibration_options::constants is empty.
[[nodiscard]] std::vector<std::string> default_calibration_constants();

/// The live path: runs the calibration cases a backend can run as configs
/// of a space (the matmul tutorial's four stages, timed on trn1; the TensorE
/// and DMA cases are programs, not configs) through `b`, and writes them
/// under `out` in the format of `data` (data/calibration/), each measured
/// value the measurement's objective (seconds) in the file's unit. Returns
/// how many cases it wrote. Throws tessel::error naming a case that does not
/// measure ok.
int record_calibration(backend& b, const std::filesystem::path& data,
                       const std::filesystem::path& out);

/// Fits the simulator to `o.recorded`. Throws tessel::error when no
/// calibration file is there, a file is malformed, or a constant is unknown.
[[nodiscard]] calibration_result calibrate_simulator(const calibration_options& o);

}  // namespace tessel
