// workload.hpp: a parameterized kernel template the simulator can lower.
// A workload reads its constants and parameters from a space by the names its
// knob table declares (knobs.hpp, docs/simulator.md), checks resources like a
// compiler, and emits a program (program.hpp). Workloads are stateless and
// thread-safe; typed_workload.hpp is the base each of them derives from.
#pragma once

#include "functional.hpp"
#include "knobs.hpp"
#include "machine.hpp"
#include "program.hpp"

#include <tessel/config.hpp>
#include <tessel/space.hpp>

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace tessel::sim {

namespace nki {
struct context;
struct kernel_file;
}  // namespace nki

/// What the explanation knows about a bottleneck, for a workload's hints.
struct bottleneck {
  std::string
      phase;  ///< "tensor", "vector", "scalar", "gpsimd", "dma issue", "dma data", "dma latency"
  std::string tag;   ///< the label of the instructions on the critical path ("load B")
  double share = 0;  ///< of the latency
  /// For a DMA bottleneck: the parts of `share` spent issuing, moving data,
  /// and waiting on the completion latency.
  double issue_share = 0, data_share = 0, latency_share = 0;
};

/// A closed-form estimate of a plan's latency (workload::steady_plan): the
/// fast model that screens candidates without lowering them. Busy times and
/// bytes are the model's totals, so the measurement reports the same kind
/// of metrics as the event-driven model.
struct steady_estimate {
  double latency_ns = 0;
  std::array<double, 4> busy_ns{};  ///< TensorE, VectorE, ScalarE, GpSimdE
  double dma_data_ns = 0;           ///< data-phase work on the busiest DMA engine
  double hbm_read_bytes = 0, hbm_write_bytes = 0;
  double instructions = 0;  ///< what the lowering would issue (the modelled compile)
  workload_totals totals;   ///< FLOPs, minimal HBM bytes, compute type (the roofline)
  const char* bound = "";   ///< "tensor", "vector", ..., "dma data", "dma issue", "dma latency"
  const char* tag = "";     ///< the instructions that bound it ("load B", "matmul")
  /// When the core reaches its core barrier (timing_result::barrier_ns); -1: none.
  double barrier_ns = -1;
};

/// The collectives a plan adds to its per-rank compute (workload::communicate,
/// docs/topology.md).
struct communication {
  std::string what;       ///< "all-gather of C (ring over 8 ranks, 8.0 MiB)"
  double ns = 0;          ///< the collectives alone
  double exposed_ns = 0;  ///< what they add to the compute's latency (less with overlap)
};

/// A workload's plan of one config (workload::plan_config).
class workload_plan {
 public:
  virtual ~workload_plan() = default;
  std::string error;  ///< "" or why the config does not compile
  /// Set by plan_cores() on a share planned from the same space and config
  /// as the share before it (an even split): the same plan, so its steady
  /// estimate and its event-model timing are that share's.
  bool same_as_previous = false;
  /// A copy (the plan of the same space and config, not read again), or
  /// nullptr when the plan cannot be copied (every workload's plan can: the
  /// sharded ones copy the plan they own).
  [[nodiscard]] virtual std::unique_ptr<workload_plan> clone() const = 0;
};

/// A plan of the workload's own type P (typed_workload<P> reads it back,
/// checked: a plan of another type is a tessel::error).
template <class P>
class plan_of final : public workload_plan {
 public:
  template <class... A>
  explicit plan_of(A&&... a) : value(std::forward<A>(a)...) {}
  [[nodiscard]] std::unique_ptr<workload_plan> clone() const override {
    if constexpr (std::is_copy_constructible_v<P>)
      return std::make_unique<plan_of>(*this);
    else
      return nullptr;
  }
  P value;
};

/// The P a plan_of<P> holds; std::bad_cast when `p` holds another type.
template <class P>
[[nodiscard]] const P& value_of(const workload_plan& p) {
  return dynamic_cast<const plan_of<P>&>(p).value;
}
template <class P>
[[nodiscard]] P& value_of(workload_plan& p) {
  return dynamic_cast<plan_of<P>&>(p).value;
}

class workload {
 public:
  virtual ~workload() = default;
  [[nodiscard]] virtual std::string_view name() const = 0;
  /// One line: what it computes.
  [[nodiscard]] virtual std::string_view summary() const = 0;
  /// Every constant and parameter it reads, in documentation order.
  [[nodiscard]] virtual const knob_table& knobs() const = 0;
  /// Throws tessel::error listing every problem knobs().review(s) finds: a
  /// required name missing, a name misspelt (did you mean), a name of the
  /// wrong kind, a symbol value it does not know (sim_backend::prepare).
  void check_space(const space& s) const;
  /// The plan of (s, c) on `m`: the config's values read once into the
  /// workload's typed plan, which the lowering (timing), the functional
  /// executor (gate) and the NKI emitter all read, so what is timed, checked
  /// and emitted is one schedule. `error` is set when the config does not
  /// compile at planning time.
  [[nodiscard]] virtual std::unique_ptr<workload_plan> plan_config(const space& s, const config& c,
                                                                   const machine& m) const = 0;
  /// The plans of (s, c) for each physical core of a logical core
  /// (machine::cores > 1, e.g. trn2_lnc2): each core's share of the work,
  /// lowered and timed as its own program; the logical core takes as long as
  /// the slowest. The default (cores.cpp) re-plans with the workload's
  /// split dimension (core_split_dimension) cut in two; a workload that
  /// splits otherwise overrides this. `whole`, when the caller has it, is
  /// plan_config(s, c, m): a share that is the whole problem (one core runs
  /// it all) or a share derived from it is copied from it, not planned again.
  [[nodiscard]] virtual std::vector<std::unique_ptr<workload_plan>> plan_cores(
      const space& s, const config& c, const machine& m,
      const workload_plan* whole = nullptr) const;
  /// The sizes the default plan_cores() gives each core of the split
  /// dimension, in order: one size when the work does not split (one core
  /// runs it all), none when the space has no such constant.
  [[nodiscard]] std::vector<std::int64_t> core_shares(const space& s, const machine& m) const;
  /// The integer constant plan_cores() cuts between the cores ("M", "rows"),
  /// or "" when the work does not split (one core runs it, the other idles).
  [[nodiscard]] virtual std::string core_split_dimension() const = 0;
  /// Lowers a plan without error into `out` (cleared first). Returns "" on
  /// success, else a compile error message ("SBUF overflow: ...").
  [[nodiscard]] virtual std::string lower_plan(const workload_plan& p, const machine& m,
                                               program& out) const = 0;
  /// The functional executor of a plan without error (functional.hpp): the
  /// schedule lower_plan() times, executed on the gate's inputs; nullptr when
  /// the workload has no functional mode.
  [[nodiscard]] virtual std::unique_ptr<functional_kernel> functional_plan(
      const workload_plan& p, const machine& m) const = 0;
  /// Writes the NKI kernel of a plan that lowers (nki/nki.hpp, docs/nki.md)
  /// into `out`. Returns "" or why it cannot.
  [[nodiscard]] virtual std::string emit_nki_plan(const workload_plan& p, const nki::context& ctx,
                                                  std::string& out) const = 0;
  /// The steady-state analytic estimate of a plan without error, or nullopt
  /// when the workload has none: sim_backend then falls back to lowering and
  /// the event-driven model (docs/simulator.md, "Speed").
  [[nodiscard]] virtual std::optional<steady_estimate> steady_plan(const workload_plan& p,
                                                                   const machine& m) const = 0;
  /// The collectives of a plan without error whose per-rank compute takes
  /// `compute_ns`, or nullopt (the default): one rank, no communication.
  [[nodiscard]] virtual std::optional<communication> communicate(const workload_plan& p,
                                                                 double compute_ns) const;
  /// About how many instructions lower(s, c) would issue, without lowering
  /// (the modelled compile cost of sim_backend::estimated_cost).
  [[nodiscard]] virtual double estimated_instructions(const space& s, const config& c,
                                                      const machine& m) const;

  /// plan_config, then lower_plan: "" or the compile error (`out` cleared first).
  [[nodiscard]] std::string lower(const space& s, const config& c, const machine& m,
                                  program& out) const;
  /// plan_config, then functional_plan; nullptr when (s, c) does not plan.
  [[nodiscard]] std::unique_ptr<functional_kernel> functional(const space& s, const config& c,
                                                              const machine& m) const;
  /// plan_config, a check that the plan lowers, then emit_nki_plan: "" or why not.
  /// With more than one physical core (machine::cores) and an emitter that
  /// declares its HBM tensors (nki::kernel_file::inputs), an SPMD kernel:
  /// each share of the default split (plan_cores) lowered, counted and
  /// emitted as its program (nki::assemble_spmd).
  [[nodiscard]] std::string emit_nki(const space& s, const config& c, const nki::context& ctx,
                                     std::string& out) const;
  /// Ranked suggestions (best first) for a bottleneck, in plain words that
  /// name this workload's parameters.
  [[nodiscard]] virtual std::vector<std::string> suggest(const bottleneck& b, const space& s,
                                                         const config& c) const;

 private:
  /// emit_nki for more than one physical core: `whole` is the whole problem's
  /// file; each share of plan_cores() is lowered, counted and emitted as a program.
  [[nodiscard]] std::string emit_spmd(const space& s, const config& c, const nki::context& ctx,
                                      const nki::kernel_file& whole, std::string& out) const;
};

/// `s` with its integer constant `name` set to `value` and no constraints
/// (a share of the problem need not meet the whole's requires): kept while in
/// use and cached, so planning a share reads it like any space (cores.cpp).
[[nodiscard]] std::shared_ptr<const space> space_with_constant(const space& s,
                                                               const std::string& name,
                                                               std::int64_t value);

/// Each physical core's wait at the core barrier (program::barrier), from when
/// each reaches it on its own (`barrier_ns`, timing_result::barrier_ns): no
/// core passes it before the last arrives, so each waits for that one and
/// everything after its barrier ends that much later (cores.cpp). All zero
/// unless every core has a barrier.
[[nodiscard]] std::vector<double> wait_at_barrier(const std::vector<double>& barrier_ns);

/// Each core's latency (`latency_ns`, alone) plus its wait at the core barrier
/// (wait_at_barrier of `barrier_ns`) appended to `core_ns`; returns the index
/// of the slowest core (the first of equals).
std::size_t slowest_after_barrier(const std::vector<double>& latency_ns,
                                  const std::vector<double>& barrier_ns,
                                  std::vector<double>& core_ns);

/// The workload named `name` ("matmul"), or nullptr.
[[nodiscard]] const workload* find_workload(std::string_view name);
/// The workload of space `s`: `name` when not empty, else the space's symbol
/// constant `workload`, else the space's name when it names a workload.
/// Throws tessel::error when there is none or it is unknown.
[[nodiscard]] const workload* workload_for_space(const space& s, std::string_view name);
/// Every workload's name, sorted.
[[nodiscard]] std::vector<std::string> workload_names();

// Factories, one per workload: the table in workloads/workloads.def.
#define TESSEL_SIM_WORKLOAD(name) [[nodiscard]] const workload& name##_workload();
#include "workloads/workloads.def"
#undef TESSEL_SIM_WORKLOAD

}  // namespace tessel::sim
