// tessel/model_driver.hpp: a model opened, timed and tuned from a spec
// (docs/models.md), the outer layer over tessel/model.hpp as
// tessel/driver.hpp is over tessel/study.hpp. A model_spec says which model
// of which file, for which target, on which backend, and how its kernels are
// tuned; time_defaults / time_bests time its step, open_model_tuning runs
// one budget across its kernels, one study file per kernel in a folder named
// by the model. `tessel model`, `tessel tune-model`, the `model` and
// `tune_model` agent ops and Python's tessel.Model are front-ends over it.
// Part of the driver module: link tessel::driver.
#pragma once

#include <tessel/driver.hpp>
#include <tessel/model.hpp>

#include <nlohmann/json_fwd.hpp>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace tessel {

/// Everything a model's step and its tuning are made of, for one target.
/// Field by field, the options of `tessel model` / `tessel tune-model`.
struct model_spec {
  // --- the model ---------------------------------------------------------------------
  std::string file;
  std::string model;  ///< "" selects the first model of `file`
  std::string target = "trn2";
  std::map<std::string, std::string, std::less<>> sets;  ///< the model's consts (--set)
  std::string backend = "sim";                           ///< what times each kernel
  settings_map backend_settings;                         ///< for every kernel's backend
  bool gate = true;  ///< false: simulator backends skip the equivalence gate

  // --- its tuning (tune_model) -------------------------------------------------------
  std::string strategy = "auto";  ///< each kernel study's
  std::uint64_t seed = 0;         ///< kernel i's study uses seed + i
  std::string scheduler = "utility";
  /// The folder of the kernels' study files; "" = <model>.tessel.
  std::string db_dir;
  bool no_db = false;                  ///< keep nothing on disk
  open_mode mode = open_mode::create;  ///< what to do with study files holding trials
  std::size_t budget = 0;              ///< evaluations over all kernels (resumed ones count)
  double cost_budget_s = 0;            ///< seconds of summed evaluation cost (0: none)
  allocation policy = allocation::utility;
  /// With open_mode::resume: each kernel study's open_options::resuming
  /// (its recorded seed is this seed + i), returning the notes that say what
  /// it took (resume_notes); the first kernel study's that has any are
  /// model_tuning::notes.
  std::function<std::vector<std::string>(study_spec& spec, const study_spec& recorded)> resuming;

  /// Throws options_error naming the field and the rule.
  void validate() const;
  /// Reads the JSON form the agent ops and Python give (docs/models.md):
  /// file, model, target, set {NAME: VALUE}, backend, backend_set {KEY: VALUE},
  /// gate, strategy, seed, scheduler, db_dir, no_db, resume, overwrite,
  /// budget, cost_budget, allocate. Throws tessel::error naming a field of
  /// the wrong type, or an unknown field.
  [[nodiscard]] static model_spec from_json(const nlohmann::json& j);
};

/// The model of `spec` read and checked for spec.target. Throws space_error.
[[nodiscard]] model_definition read_model(const model_spec& spec);

/// A fresh backend of `spec` for one kernel (one per kernel: a simulator
/// backend caches its workload and machine).
[[nodiscard]] std::shared_ptr<backend> kernel_backend(const model_spec& spec);

/// One measurement per kernel of a model, in its order, and notes on how
/// they were made.
struct timed_kernels {
  std::vector<measurement> results;
  std::vector<std::string> notes;
};

/// Each kernel's default config measured on the backend (its space's first
/// valid config, with a note, when the default is not valid at its shapes).
[[nodiscard]] timed_kernels time_defaults(const model_definition& m, const model_spec& spec);

/// The best ok config of each kernel's study file in `dir`, re-measured on
/// the backend (for the category split the search's screen may not have).
/// A kernel without a study file or an ok trial gets a failure.
[[nodiscard]] timed_kernels time_bests(const model_definition& m, const model_spec& spec,
                                       const std::filesystem::path& dir);

/// step_of() for the model's kernels and their measurements.
[[nodiscard]] step_breakdown step_for(const model_definition& m, const timed_kernels& timed);

/// Each group's step seconds, largest first; kernels without a group are
/// "(no group)". Empty when no kernel has one.
[[nodiscard]] std::vector<std::pair<std::string, double>> groups_of(const model_definition& m,
                                                                    const step_breakdown& step);

/// The step as JSON (`tessel model --json`, the `model` op): per kernel, by
/// category and group, FLOPs, bytes and the roofline.
[[nodiscard]] nlohmann::json step_json(const model_definition& m, const step_breakdown& step);

/// The step as tables (`tessel model`): per kernel, by category, by group,
/// and the roofline. `timed` are the measurements `step` was made from (for
/// why a kernel has no time, and the notes).
[[nodiscard]] std::string step_text(const model_definition& m, const step_breakdown& step,
                                    const timed_kernels& timed);

/// A model's step for one target as `tessel model` reports it.
struct model_step_report {
  model_spec spec;
  model_definition model;
  std::filesystem::path from;  ///< the study files the best configs came from; "" = defaults
  timed_kernels timed;
  step_breakdown step;

  /// step_json with "notes" (how it was timed) and "configs" ("default" or
  /// "best of DIR").
  [[nodiscard]] nlohmann::json to_json() const;
  /// A header line (model, file, target, backend, kernels, step) and step_text.
  [[nodiscard]] std::string text() const;
};

/// The step of spec's model at its kernels' default configs (time_defaults),
/// or with `from` (tune-model's db_dir) at the best configs of the study
/// files in model_db_dir(model, from, several_targets) (time_bests).
[[nodiscard]] model_step_report model_step(const model_spec& spec, const std::string& from = "",
                                           bool several_targets = false);

/// The `model` op and Python's Model.step(): model_step(spec).to_json().
[[nodiscard]] nlohmann::json default_step_json(const model_spec& spec);

/// Physical cores per logical core of the model's target (`target.lnc`).
[[nodiscard]] std::int64_t physical_cores(const model_definition& m);

/// The folder of the kernels' study files of `m`: `db_dir` ("" =
/// <model>.tessel), with several targets a folder per target in it.
[[nodiscard]] std::filesystem::path model_db_dir(const model_definition& m,
                                                 const std::string& db_dir, bool several_targets);

/// A distinct kernel's name: its instances' names joined by '+'.
[[nodiscard]] std::string member_name(const model_definition& m,
                                      const std::vector<std::size_t>& instances);

/// One study per distinct kernel (distinct_kernels: instances of one space
/// with equal consts share a study, their calls added), study file
/// <dir>/<name>.tessel.db recording the space file, sets and target so
/// `tessel show` reads it, under one model_study whose budget hint per
/// kernel is spec.budget over the kernels. Throws tessel::error as
/// open_study does (a study file with trials and open_mode::create, ...).
/// `notes`, when given, gets spec.resuming's notes for the first kernel study
/// that has any.
[[nodiscard]] model_study open_model_study(const model_definition& m, const model_spec& spec,
                                           const std::filesystem::path& dir,
                                           std::vector<std::string>* notes = nullptr);

/// Where a kernel's best stands against its roofline.
struct kernel_gap {
  double roofline_s = 0;  ///< per call, of its best config (0: not reported)
  double gap_s = 0;       ///< per step: calls x (best - roofline)
};
/// One per kernel of `sum`, in its order.
[[nodiscard]] std::vector<kernel_gap> roofline_gaps(const model_summary& sum);

/// A model's kernel studies opened for tuning, and where the run stopped.
struct model_tuning {
  model_spec spec;
  model_definition model;
  model_study study;
  model_summary summary;  ///< after run()
  std::string db_dir;     ///< the study files' folder; "" with no_db
  /// What a resume took from the study files (spec.resuming's notes for the
  /// first kernel study that has any: they all began with one model spec, seed + i).
  std::vector<std::string> notes;

  /// Runs the study under spec.budget / spec.cost_budget_s (observers added
  /// to `study` hear of each evaluation) and keeps its summary.
  const model_summary& run();
  /// The report as JSON (`tessel tune-model --json`, the `tune_model` op,
  /// Python's Model.tune): step before and after, per kernel its evaluations,
  /// first and best, best config and gap to the roofline; "notes" when a
  /// resume took options from the study files.
  [[nodiscard]] nlohmann::json to_json() const;
  /// The same report as tables (`tessel tune-model`): the step before and
  /// after, per kernel, the gap to the roofline, the best configs.
  [[nodiscard]] std::string text() const;
};

/// One target's step, for compare_text.
struct target_step {
  std::string target;
  double step_s = 0;
  std::int64_t cores = 1;  ///< physical cores one step occupies (physical_cores)
};

/// Which target gives the shorter step and by how much, and which gives
/// more steps per chip (step time x physical cores); "" for fewer than two.
[[nodiscard]] std::string compare_text(const std::vector<target_step>& steps);

/// Reads the model of `spec` and opens its kernel studies (open_model_study)
/// in model_db_dir(model, spec.db_dir, folder_per_target), with each
/// kernel's budget hint spec.budget over the kernels. Throws options_error
/// for a spec without a budget, tessel::error as open_model_study does.
[[nodiscard]] model_tuning open_model_tuning(const model_spec& spec,
                                             bool folder_per_target = false);

}  // namespace tessel
