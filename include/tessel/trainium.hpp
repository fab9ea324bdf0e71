// tessel/trainium.hpp: the `trainium` backend (docs/trainium.md). Tunes a
// user's own NKI kernel on NeuronCores: a Python runner installed with tessel
// compiles each config (in parallel, cached by config key and source hash),
// runs it on hidden inputs tessel writes as .npy, and times it with warm-up
// and racing repeats; tessel's gate compares the kernel's outputs with the
// reference, run in a separate process. Hosts: the local machine or remote
// hosts over ssh, one candidate per NeuronCore at a time. Link tessel::backends.
#pragma once

#include <tessel/backend.hpp>
#include <tessel/gate.hpp>

#include <cstddef>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace tessel {

/// Options of trainium_backend. Times are wall seconds.
struct trainium_options {
  std::string
      kernel;  ///< "FILE.py:FUNCTION": the NKI kernel; config values are its keyword arguments
  std::string reference;  ///< "FILE.py:FUNCTION": numpy reference, run by tessel in its own process
  std::string inputs;     ///< "A:512x256:bf16,B:256x512:bf16" (dims: integers or space constants)
  std::string outputs;    ///< "C:512x512:fp32"
  std::vector<std::string> hosts;  ///< empty: the local machine; else ssh destinations
  std::size_t cores_per_host = 1;  ///< NeuronCores per host; each runs one candidate at a time
  std::size_t compile_jobs = 0;    ///< compiles at once per host; 0: the local CPU count
  std::string python = "python3";  ///< the interpreter that runs the runner (on every host)
  std::string runner_dir;          ///< the folder holding tessel_trainium/; "": found (docs)
  std::string remote_dir;          ///< working folder on remote hosts; "": ssh's default
  std::string ssh = "ssh";         ///< the ssh program (tests pass a fake one)
  std::string cache_dir;  ///< compiled-kernel cache; "": .tessel-neff-cache in the working folder
  std::map<std::string, std::string> environment;  ///< added to the runner's environment
  double compile_timeout_s = 900;                  ///< per compile
  double run_timeout_s = 300;  ///< per device call (one gate run, or one timing)
  double kill_grace_s = 2;
  std::size_t warmup = 3;             ///< iterations before timing
  std::size_t iters_per_sample = 10;  ///< iterations behind one latency sample
  std::size_t min_repeats = 5;        ///< samples before racing may stop
  std::size_t max_repeats = 30;       ///< samples at most
  double race_margin = 0.0;  ///< stop when the median's CI lies above incumbent x (1 + margin)
  double target_relative_ci = 0.02;  ///< without an incumbent: stop once the CI is this tight
  bool gate = true;  ///< check outputs of every gate and timed run (off: no time is trusted)
  /// Suites, tolerance scale, secret; `machine` unknown: the space's
  /// target's peaks (a NeuronCore's TensorE peak and its chip's HBM rate).
  gate_options gate_settings;
  /// The FLOPs one kernel call performs and the bytes it must move at least
  /// (a number, or a `let`/`const` of the space), for the time floor; "":
  /// unknown FLOPs, and every input and output once.
  std::string flops, min_bytes;
  double estimated_cost_s = 30;  ///< backend::estimated_cost of every config

  /// Throws options_error naming the field and the rule.
  void validate() const;
};

/// Thread-safe; concurrency() = compile slots over all hosts, so compiles
/// overlap device runs while each NeuronCore runs one candidate at a time.
class trainium_backend : public backend {
 public:
  using options = trainium_options;
  explicit trainium_backend(options o);
  ~trainium_backend() override;

  [[nodiscard]] std::string name() const override;
  [[nodiscard]] std::optional<std::string> hardware() const override;
  /// Resolves tensor shapes against the space's constants, checks the kernel
  /// and reference files exist and the runner can be found.
  void prepare(const space& s) override;
  /// Compile, gate, time: the gate's calls on hidden inputs, then the timing
  /// on one of the same hidden input sets (drawn from the secret), whose
  /// outputs are judged too; every sample must be above the time floor. A
  /// config that fails the gate never gets a time.
  /// The objective is the median device latency in seconds; samples holds
  /// every sample; metrics: ci_low_s, ci_high_s (95% CI of the median),
  /// iqr_s, repeats, compile_cached, host (index), requeued.
  [[nodiscard]] measurement evaluate(const space& s, const config& c) override;
  [[nodiscard]] std::size_t concurrency() const override;
  [[nodiscard]] double estimated_cost(const space& s, const config& c) const override;
  /// Re-times `c` (compile cached; gated again on fresh inputs) with max_repeats samples
  /// and no racing: what `tessel tune` reports for the best config. Call it
  /// after the search, not while evaluate() runs on other threads.
  [[nodiscard]] std::optional<measurement> remeasure(const space& s, const config& c) override;
  /// Hosts found lost so far (their trials were re-queued on others).
  [[nodiscard]] std::vector<std::string> lost_hosts() const;

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

/// The median of `samples` and its distribution-free ~95% confidence interval
/// (order statistics n/2 -+ 1.96 sqrt(n)/2; Conover, Practical Nonparametric
/// Statistics, 3rd ed., sec. 3.2): {median, low, high}. Empty: zeros.
struct median_interval {
  double median = 0, low = 0, high = 0;
};
[[nodiscard]] median_interval median_with_interval(std::vector<double> samples);

}  // namespace tessel
