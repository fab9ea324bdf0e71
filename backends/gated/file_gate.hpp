// file_gate.hpp: the gate for kernels that run in another process (a
// program, a device runner). tessel keeps the reference and the hidden
// inputs: a gate_session deals the input sets and the calls; each call's
// inputs are handed to the candidate as .npy bytes, and its whole outputs
// come back as .npy; the reference runs in a separate program (never the
// candidate's process) on the same bytes, once per input set; the session
// judges every call. Shared by the gated `command:` path and the trainium
// backend (docs/backends.md, "Gated commands"). Private to the backends.
#pragma once

#include "gated/npy.hpp"

#include <tessel/error.hpp>
#include <tessel/gate.hpp>
#include <tessel/measurement.hpp>
#include <tessel/space.hpp>

#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tessel::detail {

/// A private folder (mode 0700, mkdtemp: an unpredictable name) under the
/// temporary directory for one run's files, removed with everything in it
/// on destruction.
class scratch_dir {
 public:
  /// Named PREFIX-XXXXXX. Throws tessel::error when it cannot be made.
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

/// What a kernel that runs elsewhere must compute, from the backend's
/// settings: the declared tensors, the work a run must do (when declared),
/// and the reference program's outputs on the same bytes the candidate gets
/// (run once per input set: a session asks for each set's reference once).
class file_spec final : public gate_spec {
 public:
  /// `min_bytes` 0: gate_spec's default (every input and output once).
  file_spec(std::vector<tensor_spec> inputs, std::vector<tensor_spec> outputs,
            file_program reference, double flops = 0, double min_bytes = 0);

  [[nodiscard]] std::vector<tensor_spec> inputs() const override { return inputs_; }
  [[nodiscard]] std::vector<tensor_spec> outputs() const override { return outputs_; }
  [[nodiscard]] probe_values reference(std::span<const input_tensor> in,
                                       const probe_points& where) const override;
  [[nodiscard]] double flops() const override { return flops_; }
  [[nodiscard]] double min_bytes() const override;

 private:
  std::vector<tensor_spec> inputs_, outputs_;
  file_program reference_;
  double flops_, min_bytes_;
};

/// The .npy bytes of every input set of a session (the check's and the
/// timed ones), made at first use.
class session_files {
 public:
  explicit session_files(const gate_session& s) : session_(s) {}
  [[nodiscard]] const std::vector<std::string>& of(std::size_t set);

 private:
  const gate_session& session_;
  std::map<std::size_t, std::vector<std::string>> files_;  ///< stable references
};

/// Decodes `outputs` (.npy bytes) against `specs`: count, shape and size
/// must match. Throws tessel::error naming the output.
[[nodiscard]] std::vector<npy_array> decode_outputs(const std::vector<std::string>& outputs,
                                                    const std::vector<tensor_spec>& specs,
                                                    std::string_view who);

/// Judges one run of the candidate on `set`. nullopt: it passed so far;
/// otherwise the failed measurement: the run's own failure (timeout,
/// runtime_error, ...), outputs it did not write as declared
/// (runtime_error), or the session's verdict. `what` names the run in
/// messages ("run 3 of 17"). The wall seconds judging took are added to
/// paid.gate_s.
[[nodiscard]] std::optional<measurement> judge_run(gate_session& session, std::size_t set,
                                                   const file_run& run,
                                                   const std::vector<tensor_spec>& outputs,
                                                   std::string_view what, tessel::cost& paid);

/// The verdict of a session whose gate calls were all judged, together with
/// an ok timed run on `set` (its outputs judged like a gate call): nullopt
/// when both pass, else the failed measurement. A verdict that turns only
/// with the timed run's outputs is suspicious: the kernel computes
/// differently when it is timed. `call`, when not empty, names the timed
/// call judged ("the call 7 of 9") in that message.
[[nodiscard]] std::optional<measurement> finish_with_timed_run(
    gate_session& session, std::size_t set, const file_run& timed,
    const std::vector<tensor_spec>& outputs, tessel::cost& paid, std::string_view call = {});

/// The failed measurement of a failing verdict: its status and message, its
/// max_error as the metric "gate_max_error".
[[nodiscard]] measurement failed_verdict(const verdict& v, const tessel::cost& paid);

/// Parses "A:512x256:bf16,B:256x512" (name:dims[:type][:labels=N][:reduce=K],
/// dims 'x'-separated, each an integer or a `const` of `s`; type default
/// fp32; labels: the range int32 inputs are drawn from; reduce: the terms
/// each output element sums). `what` names the setting in errors.
[[nodiscard]] std::vector<tensor_spec> parse_tensor_specs(std::string_view text,
                                                          std::string_view what, const space& s);
/// The same with the dims' names resolved by `constant` (a backend that
/// overrides constants).
using constant_lookup = std::function<std::optional<std::int64_t>(std::string_view)>;
[[nodiscard]] std::vector<tensor_spec> parse_tensor_specs(std::string_view text,
                                                          std::string_view what,
                                                          const constant_lookup& constant);

/// `o` with its machine, when unknown, set to the peaks of `s`'s target
/// (peaks_of: a NeuronCore target's constants, the host's for `cpu`).
[[nodiscard]] gate_options on_target(gate_options o, const space& s);

/// A count setting for config `c` of `s` (gate_flops, gate_min_bytes): ""
/// is 0, else a non-negative number or the name of a `let` or `const` of
/// the space. Throws tessel::error naming `what`.
[[nodiscard]] double count_setting(std::string_view text, std::string_view what, const space& s,
                                   const config& c);
/// Checks a count setting names a number or a let/const of `s` (prepare time).
void check_count_setting(std::string_view text, std::string_view what, const space& s);

}  // namespace tessel::detail
