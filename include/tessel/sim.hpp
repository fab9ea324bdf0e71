// tessel/sim.hpp: the NeuronCore simulator backend (docs/simulator.md). A
// workload (matmul, ...) and a config lower to per-engine instruction
// streams; an event-driven model times them from the target's constants and
// the calibrated cost rules, and reports latency, engine busy fractions, bytes
// moved, the roofline bound and the bottleneck. Link tessel::backends; the
// registry makes it as `make_backend("sim")` or `make_backend("sim:matmul")`.
#pragma once

#include <tessel/backend.hpp>
#include <tessel/config.hpp>
#include <tessel/gate.hpp>
#include <tessel/measurement.hpp>
#include <tessel/space.hpp>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace tessel {

/// The simulator's timing models (sim_options::model; registry setting
/// `model=event|analytic`).
enum class sim_model : std::uint8_t {
  event,     ///< lower the config and time the program event by event
  analytic,  ///< the workload's steady-state closed-form estimate from its plan
};

struct sim_options {
  /// The workload to lower ("matmul"). Empty: the space's symbol constant
  /// `const workload = NAME`, else the space's name when it names a workload.
  std::string workload;
  /// The target to time on ("trn1", "trn2"). Empty: the space's target.
  std::string target;
  /// Model constants by name, in the target's units: any target constant
  /// ("dma_fixed_latency_ns") or entry of the simulator's table
  /// ("dma_issue_ns"); docs/simulator.md lists them.
  std::map<std::string, double, std::less<>> overrides;
  /// Evaluations that may run at once; 0: the hardware threads.
  std::size_t concurrency = 0;
  /// Check every config that compiles with the equivalence gate before its
  /// time counts: the workload's functional mode executes the schedule on
  /// the gate's hidden inputs and the gate compares it with the fp64
  /// reference (docs/simulator.md, "Functional mode"; docs/gate.md). The
  /// gate's CPU time goes to cost.gate_s. false skips it (the CLI's
  /// --no-gate); a workload without a functional mode gets only the
  /// roofline check either way.
  bool gate = true;
  /// The gate's options: its input suite, hidden seed, tolerance scale, checks.
  tessel::gate_options gate_options;
  /// Test only: a mistake the functional executor makes so tests can show
  /// the gate catches wrong schedules through the whole backend; the timing
  /// is unchanged. "" (none), "drop_tail" (a partial last tile is not
  /// computed), "skip_accumulation" (the last accumulation into each output
  /// is lost), "truncate_output" (outputs rounded to a narrower type),
  /// "constant_output" (every output 0.5), "ignore_input" (the last input is
  /// replaced by a fixed tensor).
  std::string fault;
  /// The timing model: event (the default: lower the config to its
  /// instruction program and time it event by event) or analytic (the
  /// workload's steady-state closed-form estimate from its plan, without
  /// lowering: far more candidates per CPU second, for screening;
  /// docs/simulator.md, "Speed"). Workloads without an analytic model use the
  /// event model either way; explain() and traces always use it. With
  /// analytic the gate runs only its time check (the roofline): the
  /// functional check costs ~50x the estimate, so it is left to the
  /// fidelity that times the configs that count.
  sim_model model = sim_model::event;

  /// Throws options_error naming a bad field (an unknown workload, target or
  /// fault; bad gate options).
  void validate() const;
};

/// What explain() says about one config, as data.
struct sim_explanation {
  std::string workload, target;
  double latency_s = 0;
  double roofline_s = 0;               ///< max(compute at peak, minimal HBM bytes at peak DMA rate)
  std::string roofline_bound;          ///< "compute" or "memory"
  std::string bottleneck;              ///< "DMA-bound: 71% of time waiting on HBM loads of B"
  std::map<std::string, double> busy;  ///< "tensor", "vector", "scalar", "gpsimd", "dma": fractions
  std::vector<std::pair<std::string, double>> critical_path;  ///< "dma data (load B)" -> fraction
  /// Ranked, best first; each moves a knob the space has (or none).
  std::vector<std::string> suggestions;
  /// (parameter, suggestion): what a space change would unlock, a suggestion
  /// that moves a knob the space lacks (a const, or a name it does not have).
  std::vector<std::pair<std::string, std::string>> outside_space;
  /// The full plain-words rendering.
  [[nodiscard]] std::string text() const;
};

class sim_backend : public backend {
 public:
  using options = sim_options;
  explicit sim_backend(sim_options opts = {});
  ~sim_backend() override;
  sim_backend(const sim_backend&) = delete;
  sim_backend& operator=(const sim_backend&) = delete;

  /// "sim:matmul@trn2" (the workload and target once known).
  [[nodiscard]] std::string name() const override;
  /// Resolves the workload and the target's model constants and reviews the
  /// space against the workload's knobs (docs/simulator.md, "Workloads"):
  /// throws tessel::error listing each required name missing, name misspelt
  /// (did you mean), name of the wrong kind or symbol value it does not know.
  void prepare(const space& s) override;
  /// The workload's defaults that apply to `s` ("default mm_k = ...": knobs
  /// the space does not set) and the names of `s` it does not read.
  [[nodiscard]] std::vector<std::string> notes(const space& s) const override;
  /// Lowers and times `c`: objective = latency in seconds; resource
  /// overflows are compile_error with the compiler's kind of message; cost =
  /// the modelled compile (grows with the instruction count) and the run.
  /// With options.gate, a config that compiles is then checked by the gate
  /// (incorrect / suspicious with the gate's message when it fails; the
  /// gate's CPU seconds in cost.gate_s; verdicts cached per space::key).
  [[nodiscard]] measurement evaluate(const space& s, const config& c) override;
  [[nodiscard]] std::size_t concurrency() const override;
  /// The modelled compile cost of `c` (from an instruction-count estimate) plus a run.
  [[nodiscard]] double estimated_cost(const space& s, const config& c) const override;

  /// The bottleneck, engine busy fractions and ranked suggestions of `c`.
  /// Throws tessel::error when `c` does not compile (the message says why).
  [[nodiscard]] sim_explanation analyse(const space& s, const config& c) const;
  /// analyse(s, c).text().
  [[nodiscard]] std::string explain(const space& s, const config& c) const;
  /// Writes the timeline of `c` as Chrome/Perfetto trace JSON (one track per
  /// engine and DMA queue). Throws tessel::error when it cannot write or `c`
  /// does not compile.
  void write_trace(const space& s, const config& c, const std::filesystem::path& path) const;
  /// The same trace as a string.
  [[nodiscard]] std::string trace_json(const space& s, const config& c) const;

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

/// The workloads the simulator can lower, sorted.
[[nodiscard]] std::vector<std::string> sim_workloads();

/// What emit_nki writes (docs/nki.md).
struct nki_options {
  /// The workload ("matmul"). Empty: as sim_options.workload.
  std::string workload;
  /// The target the plan is made for ("trn1", "trn2"). Empty: the space's target.
  std::string target;
  /// The space's file, recorded in the header comment ("" leaves it out).
  std::string source;
  /// Test only: a deliberately broken emission, so tests can show the
  /// interpreter check catches wrong kernels. "" (none), "drop_tail" (the
  /// last iteration of the outermost tile loop is dropped) or
  /// "skip_accumulation" (the last contraction step of each output is not
  /// accumulated) or "drop_collective" (the last collective that joins the
  /// ranks is not called: sharded_moe with ep > 1).
  std::string fault;
};

/// The NKI kernel (Python source, the public `nki.language` / `nki.isa` API)
/// that implements the simulator's plan of (s, c): tile sizes, loop order,
/// residency, buffering, PSUM use, eviction engine and dtypes, with a header
/// comment (space, config, target, tessel version), the config values as
/// named constants and a numpy reference function. Throws tessel::error when
/// the workload has no emitter, the config does not compile, or the plan
/// uses something the emitter does not write (the message names it).
[[nodiscard]] std::string emit_nki(const space& s, const config& c, const nki_options& o = {});

}  // namespace tessel
