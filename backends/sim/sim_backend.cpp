// sim_backend.cpp: tessel::sim_backend (tessel/sim.hpp): picks the workload
// and the model constants, lowers and times configs, and turns the timing
// into a measurement, an explanation and a trace.
#include <tessel/error.hpp>
#include <tessel/files.hpp>
#include <tessel/sim.hpp>
#include <tessel/target.hpp>

#include "analysis.hpp"
#include "functional.hpp"
#include "machine.hpp"
#include "program.hpp"
#include "timing.hpp"
#include "workload.hpp"

#include <fmt/compile.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <iterator>
#include <map>
#include <mutex>
#include <optional>
#include <thread>

namespace tessel {

using namespace tessel::sim;

void sim_options::validate() const {
  if (!workload.empty() && !find_workload(workload))
    throw options_error("sim_options.workload",
                        fmt::format("unknown workload '{}' (known: {})", workload,
                                    fmt::join(workload_names(), ", ")));
  if (!target.empty() && !builtin_target(target))
    throw options_error("sim_options.target",
                        fmt::format("unknown target '{}' (built-in: {})", target,
                                    fmt::join(builtin_target_names(), ", ")));
  if (!parse_fault(fault))
    throw options_error("sim_options.fault",
                        fmt::format("unknown fault '{}' (drop_tail, skip_accumulation, "
                                    "truncate_output, constant_output, ignore_input, or empty)",
                                    fault));
  if (model != sim_model::event && model != sim_model::analytic)
    throw options_error("sim_options.model", "not a timing model (event, analytic)");
  if (gate) gate_options.validate();
}

std::vector<std::string> sim_workloads() { return workload_names(); }

namespace {

/// The measurement of an analytic estimate: the objective, the modelled
/// cost and the metrics the event model reports that the estimate knows.
/// The fastest physical core's time over the slowest's (1: balanced).
double core_balance(const std::vector<double>& core_ns) {
  return *std::min_element(core_ns.begin(), core_ns.end()) /
         *std::max_element(core_ns.begin(), core_ns.end());
}

/// The metrics of an analytic measurement, in key order.
constexpr const char* analytic_metric_names[] = {
    "analytic",           "dma_busy",          "flops",
    "gpsimd_busy",        "hbm_read_bytes",    "hbm_write_bytes",
    "instructions",       "latency_s",         "roofline_compute_s",
    "roofline_fraction",  "roofline_memory_s", "roofline_s",
    "scalar_busy",        "tensor_busy",       "time_collective_s",
    "time_elementwise_s", "time_hbm_s",        "time_matmul_s",
    "time_stall_s",       "vector_busy",
};

measurement analytic_measurement(const steady_estimate& e, const machine& m) {
  const double latency_s = e.latency_ns * 1e-9;
  cost paid;
  paid.compile_s = m.compile_base_s + m.compile_per_instruction_s * e.instructions;
  paid.run_s = latency_s;
  measurement out = measurement::success(latency_s, paid);
  out.samples = {latency_s};
  const roofline_parts r = roofline_of(e.totals, m);
  const double lat = std::max(e.latency_ns, 1e-12), roof = std::max(r.compute_ns, r.memory_ns);
  // The estimate has no critical path: the resource that bounds it is on the
  // path for its busy time, the rest is waiting (docs/simulator.md, "Speed").
  const std::string_view bound = e.bound;
  const double bound_ns =
      std::min(e.latency_ns, bound == "tensor"                                    ? e.busy_ns[0]
                             : bound == "vector"                                  ? e.busy_ns[1]
                             : bound == "scalar"                                  ? e.busy_ns[2]
                             : bound == "gpsimd"                                  ? e.busy_ns[3]
                             : bound.starts_with("dma") && bound != "dma latency" ? e.dma_data_ns
                                                                                  : 0.0);
  const std::string_view category = bound == "tensor"          ? "time_matmul_s"
                                    : bound.starts_with("dma") ? "time_hbm_s"
                                    : bound.empty()            ? "time_stall_s"
                                                               : "time_elementwise_s";
  const auto split = [&](std::string_view name) {
    return name == category ? bound_ns * 1e-9 : 0.0;
  };
  double stall_s = split("time_stall_s");
  stall_s += (e.latency_ns - bound_ns) * 1e-9;
  // the values in the order of analytic_metric_names (the keys' order)
  const double values[] = {
      1.0,                          // analytic
      e.dma_data_ns / lat,          // dma_busy
      e.totals.flops,               // flops
      e.busy_ns[3] / lat,           // gpsimd_busy
      e.hbm_read_bytes,             // hbm_read_bytes
      e.hbm_write_bytes,            // hbm_write_bytes
      e.instructions,               // instructions
      latency_s,                    // latency_s
      r.compute_ns * 1e-9,          // roofline_compute_s
      roof / lat,                   // roofline_fraction
      r.memory_ns * 1e-9,           // roofline_memory_s
      roof * 1e-9,                  // roofline_s
      e.busy_ns[2] / lat,           // scalar_busy
      e.busy_ns[0] / lat,           // tensor_busy
      split("time_collective_s"),   // time_collective_s
      split("time_elementwise_s"),  // time_elementwise_s
      split("time_hbm_s"),          // time_hbm_s
      split("time_matmul_s"),       // time_matmul_s
      stall_s,                      // time_stall_s
      e.busy_ns[1] / lat,           // vector_busy
  };
  // a copy of the keys' tree (no search, no rebalancing, no key built from
  // text), then each value in key order
  static const std::map<std::string, double> keys = [] {
    std::map<std::string, double> k;
    for (const char* name : analytic_metric_names) k.emplace(name, 0.0);
    auto at = k.begin();
    for (const char* name : analytic_metric_names)
      if ((at++)->first != name) throw error("sim: analytic_metric_names is not in key order");
    return k;
  }();
  static_assert(std::size(analytic_metric_names) == std::size(values));
  out.metrics = keys;
  auto at = out.metrics.begin();
  for (const double value : values) (at++)->second = value;
  out.message =
      fmt::format(FMT_COMPILE("analytic estimate: {}-bound ({}); {:.0f}% of the roofline bound"),
                  e.bound, e.tag, 100.0 * roof / lat);
  return out;
}

/// Adds a plan's collectives (workload::communicate, docs/topology.md) to
/// the measurement of its per-rank compute: the latency grows by what the
/// compute does not hide, time_collective_s holds that part, and the
/// message names the collective when it takes longer than the compute.
void add_communication(measurement& out, const workload& w, const workload_plan& plan) {
  const double compute_ns = out.objective * 1e9;
  const auto comm = w.communicate(plan, compute_ns);
  if (!comm) return;
  const double latency_s = out.objective + comm->exposed_ns * 1e-9;
  out.objective = latency_s;
  out.samples = {latency_s};
  out.cost.run_s = latency_s;
  out.metrics["latency_s"] = latency_s;
  out.metrics["compute_s"] = compute_ns * 1e-9;
  out.metrics["collective_s"] = comm->ns * 1e-9;
  out.metrics["time_collective_s"] = comm->exposed_ns * 1e-9;
  out.message = comm->ns > compute_ns
                    ? fmt::format(
                          "collective-bound: {} takes {:.1f} us, the per-rank compute "
                          "{:.1f} us; compute: {}",
                          comm->what, comm->ns * 1e-3, compute_ns * 1e-3, out.message)
                    : fmt::format("{}; then {}: {:.1f} us ({:.1f} us exposed)", out.message,
                                  comm->what, comm->ns * 1e-3, comm->exposed_ns * 1e-3);
}

}  // namespace

struct sim_backend::impl {
  sim_options options;
  std::mutex mutex;
  // the last resolved (target -> machine), shared by evaluations
  std::shared_ptr<const machine> machine_cache;
  target cached_target;
  std::optional<space> cached_space;  ///< the space of the last machine_for (kept alive)
  std::string prepared_workload;

  std::optional<target> option_target;    ///< options.target resolved once
  std::unique_ptr<tessel::gate> checker;  ///< the equivalence gate (options.gate)
  fault injected = fault::none;           ///< options.fault, parsed

  /// The target a space is timed on.
  [[nodiscard]] const target& target_for(const space& s) const {
    return option_target ? *option_target : s.def().target;
  }

  std::shared_ptr<const machine> machine_for(const space& s) {
    const std::lock_guard lock(mutex);
    // The space of the last call (or the options' target, fixed): its
    // definition compared by address, a few ns where the target's ~50
    // constants cost microseconds. The address names the space because
    // cached_space keeps that space alive: no other can be allocated there
    // while it is cached (a copy shares the definition, so a copy of the
    // same space is found too).
    if (machine_cache && (option_target || (cached_space && &cached_space->def() == &s.def())))
      return machine_cache;
    const target& t = target_for(s);
    // another space: its target compared, not copied
    if (!machine_cache || cached_target.name != t.name || cached_target.constants != t.constants) {
      machine_cache = std::make_shared<const machine>(resolve_machine(t, options.overrides));
      cached_target = t;
    }
    cached_space = s;
    return machine_cache;
  }

  [[nodiscard]] const workload& workload_for(const space& s) const {
    return *workload_for_space(s, options.workload);
  }

  struct run {
    const workload* w = nullptr;
    std::shared_ptr<const machine> m;
    std::unique_ptr<workload_plan> plan;  ///< built once: timed, gated and explained
    std::string error;
    timing_result timing;
    std::vector<double> core_ns;  ///< each physical core's latency (machine::cores > 1)
  };

  /// Plans (s, c) once and lowers and times that plan. On a logical core
  /// of several physical cores (machine::cores), each core's share is
  /// lowered and timed as its own program and `prog` and the timing are the
  /// slowest core's; the plan kept for the gate is the whole problem's.
  run simulate(const space& s, const config& c, program& prog, bool record) {
    run r;
    r.w = &workload_for(s);
    r.m = machine_for(s);
    r.plan = r.w->plan_config(s, c, *r.m);
    lower_and_time(r, s, c, prog, record);
    return r;
  }

  /// The event model on a planned run.
  static void lower_and_time(run& r, const space& s, const config& c, program& prog, bool record) {
    prog.clear();
    if (r.m->cores > 1 && r.plan->error.empty()) return time_cores(r, s, c, prog, record);
    r.error = r.plan->error.empty() ? r.w->lower_plan(*r.plan, *r.m, prog) : r.plan->error;
    if (r.error.empty()) r.timing = time_program(prog, *r.m, timing_options{.record = record});
  }

  /// The analytic estimate of a planned run without error: on a logical
  /// core (machine::cores > 1) the slowest physical core's share, each
  /// share's latency in `core_ns`, with its wait at a core barrier for the
  /// others (wait_at_barrier). nullopt when the workload has no analytic
  /// model (or a share does not compile): the event model then.
  static std::optional<steady_estimate> steady(const run& r, const space& s, const config& c,
                                               std::vector<double>& core_ns) {
    if (r.m->cores <= 1) return r.w->steady_plan(*r.plan, *r.m);
    std::vector<steady_estimate> shares;
    std::vector<std::size_t> of_core;  // the estimate of each core (an even split: the same)
    for (const auto& share : r.w->plan_cores(s, c, *r.m, r.plan.get())) {
      if (share->same_as_previous && !shares.empty()) {  // an even split: the same estimate
        of_core.push_back(of_core.back());
        continue;
      }
      // a share that does not compile: the event model reports it
      auto e = share->error.empty() ? r.w->steady_plan(*share, *r.m) : std::nullopt;
      if (!e) return std::nullopt;
      shares.push_back(std::move(*e));
      of_core.push_back(shares.size() - 1);
    }
    std::vector<double> latency_ns, barrier_ns;
    for (const auto i : of_core) {
      latency_ns.push_back(shares[i].latency_ns);
      barrier_ns.push_back(shares[i].barrier_ns);
    }
    const std::size_t slowest = slowest_after_barrier(latency_ns, barrier_ns, core_ns);
    steady_estimate out = shares[of_core[slowest]];
    out.latency_ns = core_ns[slowest];
    return out;
  }

  /// Each core's share lowered and timed alone; a core that reaches a core
  /// barrier (program::barrier) before the others waits there, so its
  /// latency grows by the wait (wait_at_barrier), which the slowest core's
  /// critical path shows as "core barrier". `prog` and the timing are the
  /// slowest core's.
  static void time_cores(run& r, const space& s, const config& c, program& prog, bool record) {
    std::vector<program> others;  // the shares after the first (which `prog` holds)
    std::vector<timing_result> timed;
    std::vector<std::size_t> of_core;  // the timing of each core (an even split: the same)
    const auto shares = r.w->plan_cores(s, c, *r.m, r.plan.get());
    others.reserve(shares.size());
    for (const auto& share : shares) {
      if (share->same_as_previous && !timed.empty()) {  // an even split: the same timing
        of_core.push_back(of_core.back());
        continue;
      }
      program& target_prog = timed.empty() ? prog : others.emplace_back();
      r.error = share->error.empty() ? r.w->lower_plan(*share, *r.m, target_prog) : share->error;
      if (!r.error.empty()) return;
      timed.push_back(time_program(target_prog, *r.m, timing_options{.record = record}));
      of_core.push_back(timed.size() - 1);
    }
    std::vector<double> latency_ns, barrier_ns;
    for (const auto i : of_core) {
      latency_ns.push_back(timed[i].latency_ns);
      barrier_ns.push_back(timed[i].barrier_ns);
    }
    const std::size_t slowest = slowest_after_barrier(latency_ns, barrier_ns, r.core_ns);
    const std::size_t i = of_core[slowest];
    if (i > 0) std::swap(prog, others[i - 1]);
    r.timing = std::move(timed[i]);
    if (const double wait = r.core_ns[slowest] - r.timing.latency_ns; wait > 0) {
      r.timing.latency_ns = r.core_ns[slowest];
      r.timing.critical_path.push_back({"core barrier", "wait for the other core", wait});
      std::stable_sort(r.timing.critical_path.begin(), r.timing.critical_path.end(),
                       [](const path_share& a, const path_share& b) { return a.ns > b.ns; });
    }
  }
};

sim_backend::sim_backend(sim_options opts) : impl_(std::make_unique<impl>()) {
  opts.validate();
  impl_->options = std::move(opts);
  if (!impl_->options.target.empty()) impl_->option_target = builtin_target(impl_->options.target);
  impl_->injected = *parse_fault(impl_->options.fault);
  if (impl_->options.gate) impl_->checker = std::make_unique<gate>(impl_->options.gate_options);
}

sim_backend::~sim_backend() = default;

std::string sim_backend::name() const {
  const std::lock_guard lock(impl_->mutex);
  std::string n = "sim";
  const std::string w =
      impl_->prepared_workload.empty() ? impl_->options.workload : impl_->prepared_workload;
  if (!w.empty()) n += ":" + w;
  const std::string t =
      impl_->machine_cache ? impl_->machine_cache->target_name : impl_->options.target;
  if (!t.empty()) n += "@" + t;
  return n;
}

void sim_backend::prepare(const space& s) {
  const auto& w = impl_->workload_for(s);
  w.check_space(s);
  (void)impl_->machine_for(s);
  const std::lock_guard lock(impl_->mutex);
  impl_->prepared_workload = std::string(w.name());
}

std::vector<std::string> sim_backend::notes(const space& s) const {
  const auto& w = impl_->workload_for(s);
  const knob_review r = w.knobs().review(s);
  std::vector<std::string> out;
  for (const knob* k : r.defaulted)
    out.push_back(fmt::format("default {} = {}", k->name, k->default_text()));
  for (const auto& name : r.unread)
    out.push_back(fmt::format("not read: {} (sim workload {} does not read it)", name, w.name()));
  return out;
}

std::size_t sim_backend::concurrency() const {
  if (impl_->options.concurrency > 0) return impl_->options.concurrency;
  return std::max(1u, std::thread::hardware_concurrency());
}

measurement sim_backend::evaluate(const space& s, const config& c) {
  thread_local program prog;
  impl::run r;
  try {
    if (impl_->options.model == sim_model::analytic) {
      r.w = &impl_->workload_for(s);
      r.m = impl_->machine_for(s);
      r.plan = r.w->plan_config(s, c, *r.m);
      if (!r.plan->error.empty())
        return measurement::failure(status::compile_error, r.plan->error,
                                    cost{.compile_s = r.m->compile_base_s});
      std::vector<double> core_ns;
      if (const auto estimate = impl::steady(r, s, c, core_ns)) {
        measurement out = analytic_measurement(*estimate, *r.m);
        if (core_ns.size() > 1) out.metrics["core_balance"] = core_balance(core_ns);
        add_communication(out, *r.w, *r.plan);
        if (impl_->checker) impl_->checker->apply_time(out);
        return out;
      }
      impl::lower_and_time(r, s, c, prog, false);  // no analytic model: the event model
    } else {
      r = impl_->simulate(s, c, prog, false);
    }
  } catch (const error& e) {
    return measurement::failure(status::invalid, e.what());
  }
  const machine& m = *r.m;
  cost paid;
  // the timing counted the issued instructions already (the same sum)
  const std::uint64_t issued = r.error.empty() ? r.timing.instructions : prog.issued_count();
  paid.compile_s = m.compile_base_s + m.compile_per_instruction_s * static_cast<double>(issued);
  if (!r.error.empty()) return measurement::failure(status::compile_error, r.error, paid);
  const double latency_s = r.timing.latency_ns * 1e-9;
  paid.run_s = latency_s;
  measurement out = measurement::success(latency_s, paid);
  out.samples = {latency_s};
  const analysis a = analyse_run(prog, r.timing, m);
  out.metrics = a.metrics();
  out.message = a.headline();
  if (r.core_ns.size() > 1) out.metrics["core_balance"] = core_balance(r.core_ns);
  add_communication(out, *r.w, *r.plan);
  if (impl_->checker) {
    auto kernel = r.w->functional_plan(*r.plan, m);  // the plan that was timed
    if (kernel) {
      kernel->inject(impl_->injected);
      impl_->checker->apply(out, *kernel, *kernel, s.key(c));
    } else {
      impl_->checker->apply_time(out);
    }
  }
  return out;
}

double sim_backend::estimated_cost(const space& s, const config& c) const {
  try {
    const auto& w = impl_->workload_for(s);
    const auto m = impl_->machine_for(s);
    const double instructions = w.estimated_instructions(s, c, *m);
    return m->compile_base_s + m->compile_per_instruction_s * instructions + 1e-3;
  } catch (const error&) {
    return 1e-3;
  }
}

sim_explanation sim_backend::analyse(const space& s, const config& c) const {
  program prog;
  auto r = impl_->simulate(s, c, prog, false);
  if (!r.error.empty()) throw error(fmt::format("sim: the config does not compile: {}", r.error));
  const analysis a = analyse_run(prog, r.timing, *r.m);
  sim_explanation e = a.explanation();
  e.workload = std::string(r.w->name());
  e.target = r.m->target_name;
  bottleneck b = a.bottleneck_info();
  if (const auto comm = r.w->communicate(*r.plan, r.timing.latency_ns)) {
    e.latency_s += comm->exposed_ns * 1e-9;
    const std::string parts = fmt::format("{:.1f} us against {:.1f} us of per-rank compute",
                                          comm->ns * 1e-3, r.timing.latency_ns * 1e-3);
    if (comm->ns > r.timing.latency_ns) {
      e.bottleneck = fmt::format("collective-bound: {} takes {}", comm->what, parts);
      b.phase = "collective";
      b.tag = comm->what;
      b.share = comm->exposed_ns / (r.timing.latency_ns + comm->exposed_ns);
    } else {
      e.bottleneck += fmt::format("; then {}: {}", comm->what, parts);
    }
  }
  auto all = r.w->suggest(b, s, c);
  for (auto& extra : a.generic_suggestions()) all.push_back(std::move(extra));
  // only knobs the space has are suggested; the others say what a space
  // change would unlock
  for (auto& text : all) {
    const std::string knob = suggestion_knob(text);
    if (knob.empty() || s.parameter_index(knob))
      e.suggestions.push_back(std::move(text));
    else
      e.outside_space.emplace_back(knob, std::move(text));
  }
  return e;
}

std::string sim_backend::explain(const space& s, const config& c) const {
  return analyse(s, c).text();
}

std::string sim_backend::trace_json(const space& s, const config& c) const {
  program prog;
  auto r = impl_->simulate(s, c, prog, true);
  if (!r.error.empty()) throw error(fmt::format("sim: the config does not compile: {}", r.error));
  return sim::trace_json(prog, r.timing, std::string(r.w->name()) + "@" + r.m->target_name);
}

void sim_backend::write_trace(const space& s, const config& c,
                              const std::filesystem::path& path) const {
  const std::string json = trace_json(s, c);
  try {
    write_file(path, json);  // a FIFO nothing reads from is refused, never waited on
  } catch (const error& e) {
    throw error(fmt::format("sim: the trace: {}", e.what()));
  }
}

}  // namespace tessel
