// cpu_backend.cpp: compile -> gate -> time, per config, on the host
// (tessel/cpu.hpp, docs/cpu.md). Builds go through toolchain.hpp, kernel
// runs through the loader (loader_client.hpp), the gate through
// gated/file_gate.hpp: a kernel only ever runs in a process of its own.
#include "cpu/builtins.hpp"
#include "cpu/embedded.hpp"
#include "cpu/kernel_unit.hpp"
#include "cpu/loader_client.hpp"
#include "cpu/toolchain.hpp"
#include "gated/file_gate.hpp"
#include "gated/npy.hpp"

#include <tessel/backends.hpp>
#include <tessel/cpu.hpp>
#include <tessel/error.hpp>
#include <tessel/files.hpp>
#include <tessel/racing.hpp>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <filesystem>
#include <mutex>
#include <sstream>
#include <thread>
#include <utility>

#ifdef __linux__
#include <sched.h>
#endif

namespace tessel {
namespace fs = std::filesystem;
namespace {

/// The CPUs this process may run on.
std::vector<int> allowed_cpus() {
  std::vector<int> out;
#ifdef __linux__
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof set, &set) == 0)
    for (int c = 0; c < CPU_SETSIZE; ++c)
      if (CPU_ISSET(c, &set)) out.push_back(c);
#endif
  if (out.empty())
    for (unsigned c = 0; c < std::max(1u, std::thread::hardware_concurrency()); ++c)
      out.push_back(static_cast<int>(c));
  return out;
}

/// "2", "2,3", "0-3" -> the CPUs; throws options_error.
std::vector<int> parse_cpu_list(const std::string& text) {
  std::vector<int> out;
  std::stringstream in(text);
  for (std::string piece; std::getline(in, piece, ',');) {
    const auto dash = piece.find('-');
    try {
      std::size_t used = 0;
      const int first = std::stoi(piece.substr(0, dash), &used);
      const int last = dash == std::string::npos ? first : std::stoi(piece.substr(dash + 1));
      if (first < 0 || last < first) throw std::invalid_argument("range");
      for (int c = first; c <= last; ++c) out.push_back(c);
    } catch (const std::exception&) {
      throw options_error(
          "cpu_options::cpus",
          fmt::format("'{}' is not auto, all, off or a CPU list such as 3, 2,3 or 0-3", text));
    }
  }
  if (out.empty()) throw options_error("cpu_options::cpus", "the CPU list is empty");
  return out;
}

/// Checks that `path`, a kernel or reference source, is a regular file the
/// compiler can read: a missing one, a folder, a dangling link or a pipe is
/// an error naming it and the cause (tessel/files.hpp), never a hang.
void regular_source(const fs::path& path, std::string_view what, std::string_view given) {
  try {
    check_path(path, file_use::read);
  } catch (const error& e) {
    throw error(fmt::format("backend cpu: {} file (from '{}'): {}", what, given, e.what()));
  }
  if (!fs::is_regular_file(path))
    throw error(
        fmt::format("backend cpu: {} file '{}' (from '{}') is not a regular file; the "
                    "compiler reads it as a source file",
                    what, path.string(), given));
}

/// What a built-in kernel must compute, for the gate: tessel's own fp64
/// reference at the probes.
class builtin_spec final : public gate_spec {
 public:
  builtin_spec(const detail::builtin_kernel& k, detail::kernel_constants c,
               std::vector<tensor_spec> in, std::vector<tensor_spec> out)
      : kernel_(k),
        constants_(std::move(c)),
        inputs_(std::move(in)),
        outputs_(std::move(out)),
        flops_(k.flops(constants_)) {}
  [[nodiscard]] std::vector<tensor_spec> inputs() const override { return inputs_; }
  [[nodiscard]] std::vector<tensor_spec> outputs() const override { return outputs_; }
  [[nodiscard]] probe_values reference(std::span<const input_tensor> in,
                                       const probe_points& where) const override {
    detail::input_values values;
    for (const auto& t : in) values.push_back(t.values());
    return kernel_.reference(values, constants_, where);
  }
  [[nodiscard]] double flops() const override { return flops_; }

 private:
  const detail::builtin_kernel& kernel_;
  detail::kernel_constants constants_;
  std::vector<tensor_spec> inputs_, outputs_;
  double flops_;
};

/// At most `n` holders at once.
class slots {
 public:
  explicit slots(std::size_t n) : free_(n) {}
  void acquire() {
    std::unique_lock lock(mutex_);
    freed_.wait(lock, [this] { return free_ > 0; });
    --free_;
  }
  void release() {
    {
      const std::lock_guard lock(mutex_);
      ++free_;
    }
    freed_.notify_one();
  }

 private:
  std::mutex mutex_;
  std::condition_variable freed_;
  std::size_t free_;
};

struct slot_lease {
  explicit slot_lease(slots& s) : s_(s) { s_.acquire(); }
  ~slot_lease() { s_.release(); }
  slot_lease(const slot_lease&) = delete;
  slot_lease& operator=(const slot_lease&) = delete;
  slots& s_;
};

/// One timing at a time in this process, whatever backend asks (the two
/// fidelities of a multi-fidelity study are two backends): a timed kernel
/// never shares its CPUs with another.
std::mutex& timing_lock() {
  static std::mutex m;
  return m;
}

std::int64_t bytes_of(const std::vector<tensor_spec>& tensors) {
  std::int64_t total = 0;
  for (const auto& t : tensors) total += t.elements() * tessel::bytes_of(t.type);
  return total;
}

/// A loader run's message in a verdict on the candidate. A run that broke a
/// rule of the call (the loader's input check, the guard of tessel's own
/// files) reads like the gate's own verdicts, "suspicious: " and what
/// happened (docs/gate.md, "Statuses and messages"); the run says only what
/// happened, which the user reference's wrapper words as the reference's fault.
std::string verdict_text(const detail::file_run& r) {
  return r.status == status::suspicious ? "suspicious: " + r.message : r.message;
}

}  // namespace

void cpu_options::validate() const {
  if (!kernel.empty() && kernel.find(':') == std::string::npos)
    throw options_error("cpu_options::kernel", "must be FILE.cpp:FUNCTION");
  if (!reference.empty() && reference.find(':') == std::string::npos)
    throw options_error("cpu_options::reference", "must be FILE.cpp:FUNCTION");
  if (!kernel.empty() && !builtin.empty())
    throw options_error("cpu_options", "give a built-in kernel or a kernel file, not both");
  if (!kernel.empty() && (inputs.empty() || outputs.empty()))
    throw options_error("cpu_options",
                        "a kernel file needs inputs and outputs (NAME:DIMS[:TYPE],...)");
  if (!kernel.empty() && gate && reference.empty())
    throw options_error(
        "cpu_options",
        "a kernel file needs a reference=FILE.cpp:FUNCTION for the gate (or gate=false)");
  if (warmup == 0) throw options_error("cpu_options::warmup", "must be >= 1");
  if (kernel_user.empty())
    throw options_error("cpu_options::kernel_user",
                        "must name a user (nobody, a name, UID or UID:GID), or root");
  if (!(cache_limit_mb >= 0) || !std::isfinite(cache_limit_mb))
    throw options_error("cpu_options::cache_limit_mb",
                        "must be a number of MiB >= 0 (0: no limit)");
  if (!(min_sample_s > 0) || !(run_timeout_s > 0) || !(compile_timeout_s > 0) ||
      !(kill_grace_s >= 0))
    throw options_error(
        "cpu_options",
        "min_sample_s, run_timeout_s and compile_timeout_s must be > 0, kill_grace_s >= 0");
  tessel::validate(racing, "cpu_options::racing");
  if (cpus != "auto" && cpus != "all" && cpus != "off") (void)parse_cpu_list(cpus);
  gate_settings.validate();
}

std::vector<std::string> cpu_kernels() { return detail::builtin_names(); }

struct cpu_backend::impl {
  options o;
  std::unique_ptr<racer> timer;
  std::unique_ptr<tessel::gate> checker;
  std::unique_ptr<detail::toolchain> tools;
  const detail::builtin_kernel* builtin = nullptr;
  std::shared_ptr<builtin_spec> builtin_reference;  ///< a built-in kernel's gate spec
  detail::file_program user_reference;              ///< a user kernel's, run by the loader
  fs::path kernel_file;
  std::string function, kernel_text;  ///< kernel_text: the kernel's source, hashed into builds
  detail::loader_setup setup;
  std::vector<std::string> timing_inputs;  ///< .npy bytes, a fixed normal draw: the gate off
  std::vector<int> timing_cpus, other_cpus;
  std::unique_ptr<slots> compile_slots;
  /// What the cache mended while preparing (the loader's and the
  /// reference's lookups): told in the next trial's message, once.
  std::string prepare_notes;
  std::mutex notes_mutex;
  double flops = 0;
  std::int64_t bytes = 0;

  void pick_cpus(const space& s);
  void pick_kernel(const space& s, detail::kernel_constants& constants);
  /// What config `c` must compute: the built-in's spec, or the user's
  /// reference with the flops and min_bytes settings for `c`.
  [[nodiscard]] std::shared_ptr<const gate_spec> spec_for(const space& s, const config& c) const;
  measurement evaluate(const space& s, const config& c, bool full);
  /// Compiles `c` (one compile slot): nullopt and `built` set, or the
  /// failure. `note`: what the cache mended.
  std::optional<measurement> build(const space& s, const config& c, cost& paid,
                                   detail::build_result& built, measurement& notes,
                                   std::string& note);
  /// evaluate() without the cache's notes.
  measurement measure(const space& s, const config& c, bool full, std::string& note);
  /// Runs the session's gate calls on the compile CPUs, judging each, and
  /// gives the verdict on them: nullopt when it passed, else the failure.
  std::optional<measurement> gate_calls(gate_session& session, detail::session_files& files,
                                        const detail::sealed_file& library, cost& paid);
  /// Times `library` on `inputs` (racing unless `full`), one timing at a
  /// time, the inputs changed between calls by the loop rule from `loop_seed`.
  detail::loader_run time(const detail::sealed_file& library,
                          const std::vector<std::string>& inputs, bool full,
                          std::uint64_t loop_seed, std::uint64_t judged_seed) const;
};

cpu_backend::cpu_backend(options o) : impl_(std::make_unique<impl>()) {
  o.validate();
  impl_->o = std::move(o);
  impl_->timer = std::make_unique<racer>(impl_->o.racing);
  impl_->checker = std::make_unique<tessel::gate>(impl_->o.gate_settings);
}

cpu_backend::~cpu_backend() = default;

std::string cpu_backend::name() const {
  const auto& o = impl_->o;
  if (!o.kernel.empty()) return "cpu:" + o.kernel;
  if (impl_->builtin != nullptr) return "cpu:" + std::string(impl_->builtin->name);
  return o.builtin.empty() ? "cpu" : "cpu:" + o.builtin;
}

std::optional<std::string> cpu_backend::hardware() const {
  const auto model = detail::host_cpu_model();
  return model.empty() ? std::string("cpu") : "cpu (" + model + ")";
}

std::size_t cpu_backend::concurrency() const {
  return impl_->compile_slots ? impl_->o.compile_jobs + 1 : 1;
}

double cpu_backend::estimated_cost(const space& s, const config& c) const {
  (void)s;
  (void)c;
  return impl_->o.estimated_cost_s;
}

void cpu_backend::impl::pick_cpus(const space& s) {
  const auto allowed = allowed_cpus();
  if (o.cpus == "off") {
    timing_cpus.clear();
    other_cpus.clear();
  } else {
    if (o.cpus == "all" || (o.cpus == "auto" && s.parameter_index("threads")))
      timing_cpus = allowed;
    else if (o.cpus == "auto")
      timing_cpus = {allowed.back()};
    else
      timing_cpus = parse_cpu_list(o.cpus);
    other_cpus.clear();
    for (const int c : allowed)
      if (std::find(timing_cpus.begin(), timing_cpus.end(), c) == timing_cpus.end())
        other_cpus.push_back(c);
  }
  if (o.compile_jobs == 0) o.compile_jobs = std::max<std::size_t>(1, other_cpus.size());
  compile_slots = std::make_unique<slots>(o.compile_jobs);
}

void cpu_backend::impl::pick_kernel(const space& s, detail::kernel_constants& constants) {
  const auto constant = [&constants](std::string_view name) -> std::optional<std::int64_t> {
    const auto it = constants.integers.find(name);
    return it == constants.integers.end() ? std::nullopt : std::optional(it->second);
  };
  if (!o.kernel.empty()) {
    const auto colon = o.kernel.rfind(':');
    kernel_file = fs::absolute(o.kernel.substr(0, colon));
    function = o.kernel.substr(colon + 1);
    if (kernel_file.string().find_first_of("\"\\\n") != std::string::npos)
      throw error(
          fmt::format("backend cpu: the kernel's path {} holds a quote, a backslash or a "
                      "newline; move the file",
                      kernel_file.string()));
    regular_source(kernel_file, "kernel", o.kernel);
    kernel_text = read_file(kernel_file);
    setup.inputs = detail::parse_tensor_specs(o.inputs, "backend cpu: inputs", constant);
    setup.outputs = detail::parse_tensor_specs(o.outputs, "backend cpu: outputs", constant);
    return;
  }
  std::string name = o.builtin.empty() ? constants.symbol_or("kernel", "") : o.builtin;
  builtin = detail::find_builtin(name);
  if (builtin == nullptr)
    throw error(fmt::format(
        "backend cpu: {} (built-in kernels: {}; or give your own with "
        "cpu:kernel=FILE.cpp:FUNCTION,reference=FILE.cpp:FUNCTION,inputs=...,outputs=...)",
        name.empty() ? fmt::format("space '{}' names no kernel (`const kernel = gemm`)", s.name())
                     : fmt::format("no built-in kernel '{}'", name),
        fmt::join(detail::builtin_names(), ", ")));
  constants.kernel = std::string(builtin->name);
  setup.inputs = builtin->inputs(constants);
  setup.outputs = builtin->outputs(constants);
  flops = builtin->flops(constants);
  function = std::string(builtin->function);
  kernel_text = std::string(detail::cpu_embedded_text(builtin->file));
  kernel_file = tools->write_file(std::string(builtin->file), kernel_text);
  builtin_reference =
      std::make_shared<builtin_spec>(*builtin, constants, setup.inputs, setup.outputs);
}

void cpu_backend::prepare(const space& s) {
  auto& x = *impl_;
  detail::kernel_constants constants;
  for (const auto& k : s.def().constants) {
    if (k.type == value_type::integer) constants.integers[k.name] = k.value;
    if (k.type == value_type::symbol && k.value >= 0 &&
        static_cast<std::size_t>(k.value) < s.def().symbols.size())
      constants.symbols[k.name] = s.def().symbols[static_cast<std::size_t>(k.value)];
  }
  for (const auto& [name, value] : x.o.overrides) {
    if (!constants.integers.contains(name))
      throw error(fmt::format("backend cpu: set.{}: space '{}' has no integer constant {}", name,
                              s.name(), name));
    constants.integers[name] = value;
  }
  detail::toolchain_options t;
  t.compiler = x.o.compiler;
  t.flags = split_command(x.o.flags);
  t.libraries = split_command(x.o.libraries);
  t.cache_dir = fs::absolute(x.o.cache_dir.empty() ? ".tessel-cpu-cache" : x.o.cache_dir);
  t.timeout_s = x.o.compile_timeout_s;
  t.cache_limit_bytes = static_cast<std::uintmax_t>(x.o.cache_limit_mb * 1024 * 1024);
  t.kill_grace_s = x.o.kill_grace_s;
  x.tools = std::make_unique<detail::toolchain>(std::move(t));
  x.pick_kernel(s, constants);
  for (const auto& spec : {x.setup.inputs, x.setup.outputs})
    for (const auto& tensor : spec)
      if (tensor.type != element_type::fp32 && tensor.type != element_type::bf16 &&
          tensor.type != element_type::int32)
        throw error(
            fmt::format("backend cpu: tensor {} is {}; the cpu backend takes fp32, bf16 "
                        "and int32 tensors",
                        tensor.name, to_string(tensor.type)));
  x.bytes = bytes_of(x.setup.inputs) + bytes_of(x.setup.outputs);
  // Runs exec the loader's sealed copy; the guard watches its build in the
  // cache, which a run must not change either.
  x.setup.loader = x.tools->loader();
  auto guard = std::make_shared<detail::file_guard>();
  guard->add(x.tools->loader_file());
  std::vector<std::string> notes;
  if (!x.tools->loader_note().empty()) notes.push_back(x.tools->loader_note());
  x.setup.constants.clear();
  for (const auto& [name, value] : constants.integers)
    x.setup.constants.push_back(fmt::format("{}={}", name, value));
  x.setup.environment = x.o.environment;
  x.setup.kernel_user = detail::kernel_user_ids(x.o.kernel_user);
  x.setup.timeout_s = x.o.run_timeout_s;
  x.setup.kill_grace_s = x.o.kill_grace_s;
  x.pick_cpus(s);
  x.timing_inputs.clear();
  for (std::size_t i = 0; !x.o.gate && i < x.setup.inputs.size(); ++i)
    x.timing_inputs.push_back(detail::npy_encode(
        x.setup.inputs[i].shape, x.setup.inputs[i].type,
        input_tensor(x.setup.inputs[i], distribution::normal, 0x7e55e1 + i).values()));
  x.checker = std::make_unique<tessel::gate>(detail::on_target(x.o.gate_settings, s));
  detail::check_count_setting(x.o.flops, "backend cpu: flops", s);
  detail::check_count_setting(x.o.min_bytes, "backend cpu: min_bytes", s);
  if (x.builtin == nullptr && !x.o.reference.empty()) {
    const auto colon = x.o.reference.rfind(':');
    const auto file = fs::absolute(x.o.reference.substr(0, colon));
    regular_source(file, "reference", x.o.reference);
    const auto built =
        x.tools->build(detail::kernel_unit(s, nullptr, file, x.o.reference.substr(colon + 1)),
                       {read_file(file)}, {});
    if (built.status != status::ok)
      throw error(fmt::format("backend cpu: the reference {} does not build:\n{}", x.o.reference,
                              built.message));
    if (!built.note.empty()) notes.push_back(built.note);
    // Locked like its sealed copy's source: the cache's size limit never
    // removes it, nor the build the guard puts back in its place.
    guard->add(built.library, detail::file_guard::hold::shared_lock);
    x.user_reference = [&x, library = built.sealed](const std::vector<std::string>& files) {
      auto r = detail::run_loader(x.setup, *library, files, x.other_cpus, std::nullopt).run;
      if (r.status == status::suspicious)  // a rule of the call broken: the user's fault
        r.message = "the reference broke a rule every kernel keeps: " + r.message;
      else if (r.status != status::ok)
        r.message = "the reference " + r.message;
      return r;
    };
  }
  x.setup.guard = std::move(guard);
  const std::lock_guard lock(x.notes_mutex);
  x.prepare_notes = fmt::format("{}", fmt::join(notes, "; "));
}

std::shared_ptr<const gate_spec> cpu_backend::impl::spec_for(const space& s,
                                                             const config& c) const {
  if (builtin_reference) return builtin_reference;
  return std::make_shared<detail::file_spec>(
      setup.inputs, setup.outputs, user_reference,
      detail::count_setting(o.flops, "backend cpu: flops", s, c),
      detail::count_setting(o.min_bytes, "backend cpu: min_bytes", s, c));
}

std::optional<measurement> cpu_backend::impl::build(const space& s, const config& c, cost& paid,
                                                    detail::build_result& built, measurement& notes,
                                                    std::string& note) {
  const slot_lease lease(*compile_slots);
  built =
      tools->build(detail::kernel_unit(s, &c, kernel_file, function), {kernel_text}, other_cpus);
  paid.compile_s += built.seconds;
  note = built.note;
  notes.metrics["compile_cached"] = built.cached ? 1 : 0;
  notes.metrics["compiler_s"] = built.seconds;
  if (built.status != status::ok) {
    auto m = measurement::failure(built.status, "the compiler said:\n" + built.message, paid);
    m.metrics = notes.metrics;
    return m;
  }
  return std::nullopt;
}

std::optional<measurement> cpu_backend::impl::gate_calls(gate_session& session,
                                                         detail::session_files& files,
                                                         const detail::sealed_file& library,
                                                         cost& paid) {
  const slot_lease lease(*compile_slots);
  const auto& calls = session.calls();
  for (std::size_t i = 0; i < calls.size(); ++i) {
    auto r = detail::run_loader(setup, library, files.of(calls[i]), other_cpus, std::nullopt);
    paid.gate_s += r.run.seconds;  // off the clock, on the compile CPUs
    r.run.message = verdict_text(r.run);
    if (auto failed =
            detail::judge_run(session, calls[i], r.run, setup.outputs,
                              fmt::format("in the gate (run {} of {})", i + 1, calls.size()), paid))
      return failed;
  }
  // The verdict before the timing: a wrong kernel is never timed.
  const verdict v = session.finish();
  if (!v.ok()) return detail::failed_verdict(v, paid);
  return std::nullopt;
}

detail::loader_run cpu_backend::impl::time(const detail::sealed_file& library,
                                           const std::vector<std::string>& inputs, bool full,
                                           std::uint64_t loop_seed,
                                           std::uint64_t judged_seed) const {
  detail::loader_timing t;
  t.loop_seed = loop_seed;
  t.judged_seed = judged_seed;
  t.warmup = o.warmup;
  t.min_sample_s = o.min_sample_s;
  t.racing = full ? timer->full_options() : o.racing;
  t.incumbent_s = full ? 0 : timer->incumbent();
  const std::lock_guard lock(timing_lock());
  return detail::run_loader(setup, library, inputs, timing_cpus, t);
}

measurement cpu_backend::impl::evaluate(const space& s, const config& c, bool full) {
  if (!tools) throw error("backend cpu: prepare() was not called");
  std::string note;
  auto m = measure(s, c, full, note);
  {
    const std::lock_guard lock(notes_mutex);
    if (!prepare_notes.empty())
      note = std::exchange(prepare_notes, "") + (note.empty() ? "" : "; " + note);
  }
  if (!note.empty()) m.message += (m.message.empty() ? "" : "\n") + ("compile cache: " + note);
  return m;
}

measurement cpu_backend::impl::measure(const space& s, const config& c, bool full,
                                       std::string& note) {
  cost paid;
  // The kernel's build runs from its sealed copy, like the loader and the
  // reference: the bytes the lookup checked (or the compiler wrote) are the
  // bytes every run loads (docs/cpu.md, "A poisoned cache is not trusted").
  detail::build_result built;
  measurement notes;
  const auto fail = [&](measurement m) {
    m.cost = paid;
    for (const auto& [k, v] : notes.metrics) m.metrics.emplace(k, v);
    return m;
  };
  if (auto failed = build(s, c, paid, built, notes, note)) return *failed;
  const auto& library = *built.sealed;
  const auto spec = spec_for(s, c);
  std::optional<gate_session> session;
  std::optional<detail::session_files> files;
  if (o.gate) {
    session.emplace(checker->session(*spec, s.key(c)));
    files.emplace(*session);
    if (auto failed = gate_calls(*session, *files, library, paid)) return fail(*failed);
  }
  // Timed on a set of its own, drawn from the secret like the gate's (one it
  // was never given, so a cache of earlier outputs cannot answer it): the
  // kernel cannot tell the timed calls from a gate call by their inputs, and
  // what they computed is judged like a gate call. The loader changes the
  // inputs between its calls (docs/gate.md, "Round seven"), which a
  // `constant` set does not allow: such a draw gives way to the next timed
  // set (three at most; then it is timed as drawn, its calls all alike).
  std::size_t timed_set = session ? session->timed_set(0) : 0;
  for (std::size_t i = 1; session && i < 4 && !session->perturbable(timed_set); ++i)
    if (const std::size_t next = session->timed_set(i); session->perturbable(next))
      timed_set = next;
  const auto timed = time(library, files ? files->of(timed_set) : timing_inputs, full,
                          session ? session->loop_seed(timed_set) : 0x7e55e1,
                          session ? session->judged_call_seed(timed_set) : 0);
  paid.run_s += timed.run.seconds;
  if (timed.run.status != status::ok)
    return fail(measurement::failure(timed.run.status, verdict_text(timed.run), paid));
  // The outputs are the last call's: on the timed set's inputs after the
  // loop rule's calls - 1 steps, which the session replays; and those of a
  // call of the samples the loader drew after them (docs/cpu.md, "What is
  // measured"), judged the same way on its own inputs. Both are named by
  // their number among all the timing's calls, as their sets are.
  if (session)
    if (auto failed = detail::finish_with_timed_run(
            *session, session->perturbed_set(timed_set, timed.calls), timed.run, setup.outputs,
            paid, fmt::format("the call {} of {}, the last", timed.calls, timed.calls)))
      return fail(*failed);
  if (session && timed.judged_call > 0) {
    detail::file_run judged = timed.run;
    judged.outputs = timed.judged_outputs;
    if (auto failed = detail::finish_with_timed_run(
            *session, session->perturbed_set(timed_set, timed.judged_call), judged, setup.outputs,
            paid, fmt::format("the call {} of {}, drawn", timed.judged_call, timed.calls)))
      return fail(*failed);
  }
  if (auto why = timed.sample_fault())
    return fail(measurement::failure(status::suspicious, "suspicious: " + *why, paid));
  measurement m = std::move(notes);
  m.status = status::ok;
  m.cost = paid;
  record_race(m, {timed.samples, timed.stopped});
  m.metrics["iters_per_sample"] = static_cast<double>(timed.iters);
  m.metrics["pinned_cpu"] = timing_cpus.size() == 1 ? timing_cpus.front() : -1;
  m.metrics["seccomp"] = timed.seccomp ? 1 : 0;
  if (flops > 0) m.metrics["gflops"] = flops / m.objective * 1e-9;
  m.metrics["gbytes_per_s"] = static_cast<double>(bytes) / m.objective * 1e-9;
  if (o.gate) checker->apply_time(m, *spec);  // every sample above the host's floor
  if (!full && m.ok()) timer->offer(m.objective);
  return m;
}

measurement cpu_backend::evaluate(const space& s, const config& c) {
  return impl_->evaluate(s, c, false);
}

std::optional<measurement> cpu_backend::remeasure(const space& s, const config& c) {
  return impl_->evaluate(s, c, true);
}

}  // namespace tessel
