// tessel/cpu.hpp: the `cpu` backend (docs/cpu.md). Tunes C++ kernels on the
// host: each config is compiled with the system compiler (its knobs as
// macros), in parallel and off the clock, cached by config and source; the
// gate runs it on hidden inputs in a process of its own and compares its
// whole outputs with a reference; then a loader process pinned to its own
// CPUs times it with warm-up and racing repeats (tessel/racing.hpp). A
// kernel that fails to build is compile_error with the compiler's message,
// one that crashes is runtime_error, one that hangs is timeout: none takes
// the tuner down. Built-in kernels (GEMM fp32/bf16, RMSNorm, softmax, 2-D
// convolution) or a user's own file. Link tessel::backends.
#pragma once

#include <tessel/backend.hpp>
#include <tessel/gate.hpp>
#include <tessel/race_rule.hpp>

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace tessel {

/// Options of cpu_backend. Times are wall seconds.
struct cpu_options {
  /// A built-in kernel by name ("gemm"); "": the space's `const kernel = NAME`,
  /// unless `kernel` names a file.
  std::string builtin;
  /// "FILE.cpp:FUNCTION": the user's kernel, `void FUNCTION(const
  /// tessel::cpu::kernel_args&)`; "": a built-in kernel.
  std::string kernel;
  std::string reference;  ///< "FILE.cpp:FUNCTION": the user kernel's reference (same signature)
  std::string inputs;     ///< user kernel: "A:MxK,B:KxN:bf16" (dims: integers or space constants)
  std::string outputs;    ///< user kernel: "C:MxN"
  std::string compiler;   ///< "": $CXX, else the first of c++, g++, clang++ in PATH
  std::string flags = "-O3 -march=native";  ///< compiler flags (split shell-style)
  std::string libraries;                    ///< link flags after the source ("-lopenblas")
  std::string cache_dir;  ///< compiled kernels; "": .tessel-cpu-cache in the working folder
  /// MiB the cache's builds (cache_dir/build) are kept under: after a
  /// compile, the least recently used builds go first, never one a run of
  /// any process holds (docs/cpu.md, "The cache's size"); 0: no limit.
  double cache_limit_mb = 1024;
  /// CPUs the timed process is pinned to: "auto" (the last CPU this process
  /// may use; all of them when the space has a parameter `threads`), "all",
  /// "off" (no pinning), or a list "3" / "2,3" / "0-3". Compiles and gate
  /// runs are pinned to the other CPUs, when there are any.
  std::string cpus = "auto";
  std::size_t compile_jobs = 0;  ///< compiles (and gate runs) at once; 0: the CPUs not timing, >= 1
  std::map<std::string, std::string> environment;  ///< added to the kernel processes' environment
  /// Who the kernel's process runs as where tessel runs as root
  /// (docs/cpu.md, "The kernel's user"): "nobody" (65534:65534 where the
  /// system has no such user), a user name, "UID" (its group the same
  /// number) or "UID:GID"; "root" (or "0") keeps uid 0, which is weaker: the
  /// kernel then owns root's files (the study, the cache). Ignored where
  /// tessel is not root: the kernel is then tessel's user already.
  std::string kernel_user = "nobody";
  double compile_timeout_s = 120;  ///< per compile
  double run_timeout_s = 60;       ///< per kernel process (one gate run, or one timing)
  double kill_grace_s = 1;
  std::size_t warmup = 2;                      ///< calls before timing (at least one)
  double min_sample_s = 1e-3;                  ///< one sample times enough calls to last this long
  race_options racing{5, 20, 0.0, 0.02, 2.0};  ///< repeats: min, max, margin, target CI, seconds
  /// Judge the outputs of every gate run and of the timing (off: nothing
  /// says a time is of a correct kernel).
  bool gate = true;
  /// Suites, tolerance scale, secret; `machine` unknown: the host's measured
  /// peaks (roofline.hpp), the physical floor every sample must be above.
  gate_options gate_settings;
  /// User kernel: the FLOPs one call performs and the bytes it must move at
  /// least (a number, or a `let`/`const` of the space), for the floor; "":
  /// unknown FLOPs, and every input and output once. Built-in kernels know
  /// their own.
  std::string flops, min_bytes;
  /// Integer constants changed for the run (`set.M=128`): tensor shapes and
  /// what the kernel reads, not the space. A cheap fidelity's smaller shape.
  std::map<std::string, std::int64_t> overrides;
  double estimated_cost_s = 2;  ///< backend::estimated_cost of every config

  /// Throws options_error naming the field and the rule.
  void validate() const;
};

/// Thread-safe; concurrency() = compile_jobs + 1: compiles and gate runs
/// proceed while one candidate is timed, and only one kernel is timed at a
/// time in the whole process (by any cpu_backend).
class cpu_backend : public backend {
 public:
  using options = cpu_options;
  explicit cpu_backend(options o = {});
  ~cpu_backend() override;

  /// "cpu:gemm" or "cpu:FILE.cpp:FUNCTION".
  [[nodiscard]] std::string name() const override;
  /// "cpu (MODEL NAME)", from /proc/cpuinfo where there is one.
  [[nodiscard]] std::optional<std::string> hardware() const override;
  /// Picks the kernel, resolves the tensors against the space's constants,
  /// finds the compiler, builds the loader (and a user reference) once.
  /// Throws tessel::error with a message a person can act on.
  void prepare(const space& s) override;
  /// Compile (cached), gate (a gate session's calls, each in a loader
  /// process of its own), then time on one of the session's hidden input
  /// sets, drawn from the secret, and judge the timed calls' outputs too.
  /// The objective is the median seconds per
  /// call; samples holds every sample; metrics: ci_low_s, ci_high_s, iqr_s,
  /// repeats, iters_per_sample, compile_cached, compiler_s, pinned_cpu, and
  /// for built-in kernels gflops and gbytes_per_s (at the median).
  [[nodiscard]] measurement evaluate(const space& s, const config& c) override;
  /// Times `c` again with every max_repeats sample, no racing.
  [[nodiscard]] std::optional<measurement> remeasure(const space& s, const config& c) override;
  [[nodiscard]] std::size_t concurrency() const override;
  [[nodiscard]] double estimated_cost(const space& s, const config& c) const override;

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

/// The built-in kernels' names ("conv2d", "gemm", "rmsnorm", "softmax").
[[nodiscard]] std::vector<std::string> cpu_kernels();

}  // namespace tessel
