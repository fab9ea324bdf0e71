// loader_client.hpp: one run of the loader process (loader.cpp) on a
// compiled kernel: the inputs written as .npy into a private folder, the
// process started pinned to its CPUs with a time limit, its answer line and
// output files read back. A crash, a hang or a kernel error is a status,
// never an exception. Private to the cpu backend.
#pragma once

#include "cpu/cache_files.hpp"
#include "gated/file_gate.hpp"
#include "gated/file_guard.hpp"

#include <tessel/race_rule.hpp>

#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace tessel::detail {

/// What every loader run of one kernel shares.
struct loader_setup {
  /// The loader's sealed copy: exec'd as its path, its descriptor inherited.
  std::shared_ptr<const sealed_file> loader;
  /// The loader and a user reference's library, checked around every run
  /// (gated/file_guard.hpp); null: none. Shared by the kernel's runs: each
  /// run's check changes it (it is thread-safe).
  std::shared_ptr<file_guard> guard;
  std::vector<tensor_spec> inputs, outputs;
  std::vector<std::string> constants;  ///< "NAME=VALUE", the kernel's run-time constants
  std::map<std::string, std::string> environment;
  /// "UID:GID": who the kernel's process becomes where the loader is root
  /// (kernel_user_ids); "": it keeps uid 0.
  std::string kernel_user;
  double timeout_s = 60;
  double kill_grace_s = 1;
};

/// cpu_options::kernel_user as the loader's --kernel-user takes it,
/// "UID:GID" ("" for root: uid 0 kept); throws tessel::error naming the
/// setting for a user this system does not know.
std::string kernel_user_ids(const std::string& user);

/// How to time (mode "time"); absent: one call (mode "run").
struct loader_timing {
  std::size_t warmup = 2;
  double min_sample_s = 1e-3;
  race_options racing;
  double incumbent_s = 0;  ///< 0: none
  /// The seed of the rule that changes the inputs between calls
  /// (tessel/loop_rule.hpp; gate_session::loop_seed).
  std::uint64_t loop_seed = 0;
  /// The seed the loader draws the judged call from, besides the last
  /// (gate_session::judged_call_seed): given on stdin, which the kernel's
  /// process never reads.
  std::uint64_t judged_seed = 0;
};

/// One loader run: its status and outputs (file_run), and for a timing the
/// samples, why racing stopped, the calls per sample and the calls in all
/// (warm-up included: the outputs are the last call's, on the inputs after
/// calls - 1 steps of the loop rule).
struct loader_run {
  file_run run;
  std::vector<double> samples;
  race_stop stopped = race_stop::go_on;
  std::size_t iters = 0;
  std::uint64_t calls = 0;
  /// A call of the samples the loader drew after them (its number among the
  /// calls, 1 the first; 0: none, when the draw fell on the last call) and
  /// its outputs.
  std::uint64_t judged_call = 0;
  std::vector<std::string> judged_outputs;
  bool seccomp =
      false;  ///< the kernel ran under the loader's filter (docs/gate.md, round thirteen)

  /// What is wrong with a timing's samples, in words a user can act on;
  /// nullopt when every one is a positive time. A sample is its calls' time
  /// less the handoff's, so it is 0 when they took less than the handoff
  /// between the timing parent and the kernel's process (a kernel that does
  /// almost nothing per call, or answers from a cache of its own).
  [[nodiscard]] std::optional<std::string> sample_fault() const;
};

/// Runs `library` (a build's sealed copy: the loader loads its path, and the
/// run inherits its descriptor and the loader's) on `inputs` (.npy bytes,
/// one per setup.inputs) on `cpus` (empty: not pinned). Thread-safe.
[[nodiscard]] loader_run run_loader(const loader_setup& setup, const sealed_file& library,
                                    const std::vector<std::string>& inputs,
                                    const std::vector<int>& cpus,
                                    const std::optional<loader_timing>& timing);

}  // namespace tessel::detail
