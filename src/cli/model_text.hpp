// src/cli/model_text.hpp: what `tessel model` and `tessel tune-model` share
// (docs/models.md): their options, read into a model_spec per target, and the
// step as tables. Opening, timing and tuning a model is the driver's
// (tessel/model_driver.hpp).
#pragma once

#include <tessel/model_driver.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace tessel::cli {

/// `FILE [--model NAME] [--target T]... [--set K=V]... [--backend SPEC] ...`
struct model_options {
  std::string file;
  std::string model;  ///< "" selects the first model of FILE
  std::vector<std::string> targets{"trn2"};
  std::vector<std::string> sets;  ///< the model's consts, "NAME=VALUE"
  std::string backend = "sim";
  std::vector<std::string> backend_settings;  ///< "KEY=VALUE"
  bool gate = true;
  bool json = false;

  /// The model part of a model_spec for one of the targets. Throws
  /// tessel::error for an assignment without '='.
  [[nodiscard]] model_spec spec_for(const std::string& target) const;
};

/// Adds the options above to `command`.
void add_model_options(CLI::App& command, model_options& options);

/// The step as a table: per kernel, by category, by group, and the roofline.
/// `timed` are the measurements `step` was made from (for why a kernel has
/// no time, and the notes).
[[nodiscard]] std::string step_text(const model_definition& m, const step_breakdown& step,
                                    const timed_kernels& timed);

/// One target's step, for compare_text.
struct target_step {
  std::string target;
  double step_s = 0;
  std::int64_t cores = 1;  ///< physical cores one step occupies
};

/// Which target gives the shorter step and by how much, and which gives
/// more steps per chip (step time x physical cores); "" for one target.
[[nodiscard]] std::string compare_text(const std::vector<target_step>& steps);

}  // namespace tessel::cli
