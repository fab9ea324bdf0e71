// file_gate.hpp: the gate for kernels that run in another process. tessel
// keeps the reference and the hidden inputs: for each input set the gate
// draws, the inputs are written as .npy and handed to the candidate program,
// which answers with its whole outputs as .npy; the reference runs in a
// separate program (never the candidate's process) on the same bytes, once
// per input set for the whole study; the gate compares. Shared by the
// trainium backend and the gated `command:` path (docs/backends.md, "Gated
// commands"). Private to the backends.
#pragma once

#include "gated/npy.hpp"

#include <tessel/error.hpp>
#include <tessel/gate.hpp>
#include <tessel/measurement.hpp>

#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tessel::detail {

/// A private folder (mode 0700) under the temporary directory for one
/// run's files, removed with everything in it on destruction.
class scratch_dir {
 public:
  /// Named PREFIX-PID-N.
  explicit scratch_dir(std::string_view prefix);
  ~scratch_dir();
  scratch_dir(const scratch_dir&) = delete;
  scratch_dir& operator=(const scratch_dir&) = delete;
  [[nodiscard]] const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

/// One run of a program on one input set.
struct file_run {
  tessel::status status =
      tessel::status::ok;  ///< ok, or why it failed (timeout, runtime_error, ...)
  std::string message;
  std::vector<std::string> outputs;  ///< .npy bytes, one per declared output
  double seconds = 0;                ///< wall seconds of the program
};
/// Runs a program on .npy inputs (bytes, in declaration order).
using file_program = std::function<file_run(const std::vector<std::string>& inputs)>;

/// Thrown out of file_gated_kernel::run() when the candidate program fails,
/// so the gate stops; the kernel keeps the status.
struct program_failed : error {
  using error::error;
};

/// The reference's outputs per input set (keyed by a hash of the inputs'
/// bytes), computed once and shared by every config. Thread-safe.
class reference_store {
 public:
  explicit reference_store(file_program reference) : reference_(std::move(reference)) {}
  /// The decoded outputs for `inputs`; throws tessel::error when the reference fails.
  [[nodiscard]] std::shared_ptr<const std::vector<npy_array>> outputs(
      const std::vector<std::string>& inputs, const std::vector<tensor_spec>& specs);
  /// Reference runs done (not answered from the store).
  [[nodiscard]] std::size_t runs() const;

 private:
  file_program reference_;
  mutable std::mutex mutex_;
  std::map<std::uint64_t, std::shared_ptr<const std::vector<npy_array>>> done_;
  std::size_t runs_ = 0;
};

/// A candidate that is another process, and the spec it is judged by. The
/// spec side (shapes, tolerances, probes, the reference program's outputs) is
/// tessel's, from the backend's settings; the candidate side writes the
/// hidden inputs as .npy, runs the candidate program and returns its whole
/// outputs. The program sees only the inputs' bytes, never the spec.
class file_gated_kernel final : public gate_spec, public gated_kernel {
 public:
  file_gated_kernel(std::vector<tensor_spec> inputs, std::vector<tensor_spec> outputs,
                    file_program candidate, std::shared_ptr<reference_store> reference);

  [[nodiscard]] std::vector<tensor_spec> inputs() const override { return inputs_; }
  [[nodiscard]] std::vector<tensor_spec> outputs() const override { return outputs_; }
  [[nodiscard]] probe_values reference(std::span<const input_tensor> in,
                                       const probe_points& where) const override;
  [[nodiscard]] output_values run(std::span<const hidden_input> in) const override;

  /// The candidate program's first failure, when it failed.
  [[nodiscard]] std::optional<file_run> failure() const;
  /// Wall seconds the candidate program ran, summed over runs.
  [[nodiscard]] double candidate_seconds() const;

 private:
  std::vector<tensor_spec> inputs_, outputs_;
  file_program candidate_;
  std::shared_ptr<reference_store> reference_;
  mutable std::mutex mutex_;
  mutable std::optional<file_run> failure_;
  mutable double seconds_ = 0;
};

/// Decodes `outputs` (.npy bytes) against `specs`: count, shape and size
/// must match. Throws tessel::error naming the output.
[[nodiscard]] std::vector<npy_array> decode_outputs(const std::vector<std::string>& outputs,
                                                    const std::vector<tensor_spec>& specs,
                                                    std::string_view who);

/// Checks `k` with `g` under `key`. nullopt: passed (the gate's seconds are
/// added to `paid`); otherwise the failed measurement, whose status is the
/// candidate program's own failure (timeout, runtime_error, ...) when it
/// failed, else the gate's verdict. A failed candidate never gets a time.
[[nodiscard]] std::optional<measurement> gate_through_files(gate& g, const file_gated_kernel& k,
                                                            std::uint64_t key, tessel::cost& paid);
/// The same with another spec (a backend's own reference, shapes and
/// probes); `k` is then only the candidate.
[[nodiscard]] std::optional<measurement> gate_through_files(gate& g, const gate_spec& spec,
                                                            const file_gated_kernel& k,
                                                            std::uint64_t key, tessel::cost& paid);

/// Why the outputs a timed run produced (.npy bytes, on `inputs`) are not
/// the reference's within the gate's default tolerance x `tolerance_scale`
/// (|got - ref| <= tol x (|ref| + rms) per element), or nullopt. Catches a
/// kernel that is correct in the gate and skips work when it is timed; any
/// failure to read them is a reason too.
[[nodiscard]] std::optional<std::string> timed_outputs_differ(
    const std::vector<std::string>& produced, const std::vector<std::string>& inputs,
    const std::vector<tensor_spec>& specs, reference_store& references, double tolerance_scale);

/// Parses "A:512x256:bf16,B:256x512" (name:dims[:type], dims 'x'-separated,
/// each an integer or a name `constant` resolves; type default fp32; int32
/// inputs may add ":labels=N"). `what` names the setting in errors.
[[nodiscard]] std::vector<tensor_spec> parse_tensor_specs(
    std::string_view text, std::string_view what,
    const std::function<std::optional<std::int64_t>(std::string_view)>& constant);

}  // namespace tessel::detail
