// src/cli/model_setup.hpp: what `tessel model` and `tessel tune-model` share
// (docs/models.md): the model file read for a target, each kernel's backend
// and study (one study file per kernel, in a folder named by the model), and
// the step as text and JSON.
#pragma once

#include "study_setup.hpp"

#include <tessel/model.hpp>

#include <nlohmann/json.hpp>

#include <filesystem>
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
};

/// Adds the options above to `command`.
void add_model_options(CLI::App& command, model_options& options);

/// The model of `o` read and checked for `target`. Throws space_error.
[[nodiscard]] model_definition load_model_for(const model_options& o, const std::string& target);

/// A fresh backend of `o` for one kernel (one per kernel: a simulator
/// backend caches its workload and machine).
[[nodiscard]] std::shared_ptr<backend> kernel_backend(const model_options& o);

/// One measurement per kernel of a model, in its order, and notes on how
/// they were made.
struct timed_kernels {
  std::vector<measurement> results;
  std::vector<std::string> notes;
};

/// Each kernel's default config measured on the backend (its space's first
/// valid config, with a note, when the default is not valid at its shapes).
[[nodiscard]] timed_kernels time_defaults(const model_definition& m, const model_options& o);

/// step_of() for the model's kernels and their measurements.
[[nodiscard]] step_breakdown step_for(const model_definition& m, const timed_kernels& timed);

/// What tune-model opens each kernel's study with.
struct model_study_setup {
  std::string strategy = "auto";
  std::uint64_t seed = 0;
  std::string db_dir;  ///< "" = <model>.tessel; with several targets, a folder per target in it
  bool resume = false;
  bool overwrite = false;
  bool no_db = false;
  std::string scheduler = "utility";
  std::size_t budget_hint = 0;  ///< per kernel: the evaluation budget the cost weight cools over
  model_study_options allocator;
};

/// The folder of the kernels' study files of `m` (for its target): `db_dir`
/// ("" = <model>.tessel), with several targets a folder per target in it.
[[nodiscard]] std::filesystem::path model_db_dir(const model_definition& m,
                                                 const std::string& db_dir, bool several_targets);

/// A distinct kernel's name: its instances' names joined by '+'.
[[nodiscard]] std::string member_name(const model_definition& m,
                                      const std::vector<std::size_t>& instances);

/// One study per distinct kernel (distinct_kernels: instances of one space
/// with equal consts share a study, their calls added), study file
/// <dir>/<name>.tessel.db recording the space file, sets and target so
/// `tessel show` reads it, under one model_study. Throws tessel::error as `tune` does (a study file
/// with trials and no --resume, ...).
[[nodiscard]] model_study open_model_study(const model_definition& m, const model_options& o,
                                           const model_study_setup& s,
                                           const std::filesystem::path& dir);

/// The best ok config of each kernel's study file in `dir`, re-measured on
/// the backend (for the category split the search's screen may not have).
/// A kernel without a study file or an ok trial gets a failure.
[[nodiscard]] timed_kernels time_bests(const model_definition& m, const model_options& o,
                                       const std::filesystem::path& dir);

/// The step as a table: per kernel, by category, by group, and the roofline.
/// `timed` are the measurements `step` was made from (for why a kernel has
/// no time, and the notes).
[[nodiscard]] std::string step_text(const model_definition& m, const step_breakdown& step,
                                    const timed_kernels& timed);
/// The same as JSON.
[[nodiscard]] nlohmann::json step_json(const model_definition& m, const step_breakdown& step);

/// Physical cores per logical core of the model's target (`target.lnc`).
[[nodiscard]] std::int64_t physical_cores(const model_definition& m);

/// One target's step, for compare_text.
struct target_step {
  std::string target;
  double step_s = 0;
  std::int64_t cores = 1;  ///< physical cores one step occupies
};

/// Which target gives the shorter step and by how much, and which gives
/// more steps per chip (step time x physical cores).
[[nodiscard]] std::string compare_text(const std::vector<target_step>& steps);

}  // namespace tessel::cli
