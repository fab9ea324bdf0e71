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
#include <tessel/racing.hpp>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>
#include <thread>

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
      throw options_error(fmt::format(
          "cpu_options::cpus: '{}' is not auto, all, off or a CPU list such as 3, 2,3 or 0-3",
          text));
    }
  }
  if (out.empty()) throw options_error("cpu_options::cpus: the CPU list is empty");
  return out;
}

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

/// Every element of `t`, row-major.
std::vector<double> materialize(const input_tensor& t) {
  std::vector<double> v(static_cast<std::size_t>(t.spec().elements()));
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = t.at(static_cast<std::int64_t>(i));
  return v;
}

/// What a built-in kernel must compute, for the gate: tessel's own fp64
/// reference at the probes.
class builtin_spec final : public gate_spec {
 public:
  builtin_spec(const detail::builtin_kernel& k, detail::kernel_constants c,
               std::vector<tensor_spec> in, std::vector<tensor_spec> out)
      : kernel_(k), constants_(std::move(c)), inputs_(std::move(in)), outputs_(std::move(out)) {}
  [[nodiscard]] std::vector<tensor_spec> inputs() const override { return inputs_; }
  [[nodiscard]] std::vector<tensor_spec> outputs() const override { return outputs_; }
  [[nodiscard]] probe_values reference(std::span<const input_tensor> in,
                                       const probe_points& where) const override {
    detail::input_values values;
    for (const auto& t : in) values.push_back(materialize(t));
    return kernel_.reference(values, constants_, where);
  }
  /// Whole outputs of the reference on .npy inputs (the timed run's check).
  [[nodiscard]] detail::file_run whole(const std::vector<std::string>& files) const {
    detail::input_values values;
    for (std::size_t i = 0; i < files.size(); ++i)
      values.push_back(detail::npy_decode(files[i], inputs_[i].elements()).values);
    probe_points all(outputs_.size());
    for (std::size_t o = 0; o < outputs_.size(); ++o)
      for (std::int64_t e = 0; e < outputs_[o].elements(); ++e) all[o].push_back(e);
    const auto got = kernel_.reference(values, constants_, all);
    detail::file_run r;
    for (std::size_t o = 0; o < outputs_.size(); ++o)
      r.outputs.push_back(detail::npy_encode(outputs_[o].shape, outputs_[o].type, got[o]));
    return r;
  }

 private:
  const detail::builtin_kernel& kernel_;
  detail::kernel_constants constants_;
  std::vector<tensor_spec> inputs_, outputs_;
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

}  // namespace

void cpu_options::validate() const {
  if (!kernel.empty() && kernel.find(':') == std::string::npos)
    throw options_error("cpu_options::kernel must be FILE.cpp:FUNCTION");
  if (!reference.empty() && reference.find(':') == std::string::npos)
    throw options_error("cpu_options::reference must be FILE.cpp:FUNCTION");
  if (!kernel.empty() && !builtin.empty())
    throw options_error("cpu_options: give a built-in kernel or a kernel file, not both");
  if (!kernel.empty() && (inputs.empty() || outputs.empty()))
    throw options_error(
        "cpu_options: a kernel file needs inputs and outputs (NAME:DIMS[:TYPE],...)");
  if (!kernel.empty() && gate && reference.empty())
    throw options_error(
        "cpu_options: a kernel file needs a reference=FILE.cpp:FUNCTION for the gate (or "
        "gate=false)");
  if (warmup == 0) throw options_error("cpu_options::warmup must be >= 1");
  if (!(min_sample_s > 0) || !(run_timeout_s > 0) || !(compile_timeout_s > 0) ||
      !(kill_grace_s >= 0))
    throw options_error(
        "cpu_options: min_sample_s, run_timeout_s and compile_timeout_s must be > 0, kill_grace_s "
        ">= 0");
  if (const char* p = racing.problem())
    throw options_error(fmt::format("cpu_options::racing: {}", p));
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
  std::shared_ptr<builtin_spec> spec;  ///< a built-in kernel's gate spec
  fs::path kernel_file;
  std::string function, kernel_text;  ///< kernel_text: a user kernel's source, hashed into builds
  detail::loader_setup setup;
  std::shared_ptr<detail::reference_store> references;
  std::vector<std::string> timing_inputs;  ///< .npy bytes: a fixed normal draw
  std::vector<int> timing_cpus, other_cpus;
  std::unique_ptr<slots> compile_slots;
  double flops = 0;
  std::int64_t bytes = 0;

  void pick_cpus(const space& s);
  void pick_kernel(const space& s, detail::kernel_constants& constants);
  measurement evaluate(const space& s, const config& c, bool full);
  std::optional<measurement> build_and_gate(const space& s, const config& c, cost& paid,
                                            fs::path& library, measurement& notes);
  measurement time(const fs::path& library, bool full, cost paid, measurement notes);
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
    if (!fs::is_regular_file(kernel_file))
      throw error(fmt::format("backend cpu: kernel file {} does not exist (from '{}')",
                              kernel_file.string(), o.kernel));
    kernel_text = read_text(kernel_file);
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
  kernel_file =
      tools->write_file(std::string(builtin->file), detail::cpu_embedded_text(builtin->file));
  spec = std::make_shared<builtin_spec>(*builtin, constants, setup.inputs, setup.outputs);
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
  x.setup.loader = x.tools->loader();
  x.setup.constants.clear();
  for (const auto& [name, value] : constants.integers)
    x.setup.constants.push_back(fmt::format("{}={}", name, value));
  x.setup.environment = x.o.environment;
  x.setup.timeout_s = x.o.run_timeout_s;
  x.setup.kill_grace_s = x.o.kill_grace_s;
  x.pick_cpus(s);
  x.timing_inputs.clear();
  for (std::size_t i = 0; i < x.setup.inputs.size(); ++i)
    x.timing_inputs.push_back(detail::npy_encode(
        x.setup.inputs[i].shape, x.setup.inputs[i].type,
        materialize(input_tensor(x.setup.inputs[i], distribution::normal, 0x7e55e1 + i))));
  if (x.builtin != nullptr) {
    x.references = std::make_shared<detail::reference_store>(
        [spec = x.spec](const std::vector<std::string>& files) { return spec->whole(files); });
  } else if (!x.o.reference.empty()) {
    const auto colon = x.o.reference.rfind(':');
    const auto file = fs::absolute(x.o.reference.substr(0, colon));
    if (!fs::is_regular_file(file))
      throw error(fmt::format("backend cpu: reference file {} does not exist", file.string()));
    const auto built =
        x.tools->build(detail::kernel_unit(s, nullptr, file, x.o.reference.substr(colon + 1)),
                       {read_text(file)}, {});
    if (built.status != status::ok)
      throw error(fmt::format("backend cpu: the reference {} does not build:\n{}", x.o.reference,
                              built.message));
    x.references = std::make_shared<detail::reference_store>(
        [&x, library = built.library](const std::vector<std::string>& files) {
          auto r = detail::run_loader(x.setup, library, files, x.other_cpus, std::nullopt).run;
          if (r.status != status::ok) r.message = "the reference " + r.message;
          return r;
        });
  }
}

std::optional<measurement> cpu_backend::impl::build_and_gate(const space& s, const config& c,
                                                             cost& paid, fs::path& library,
                                                             measurement& notes) {
  const slot_lease lease(*compile_slots);
  const auto built = tools->build(
      detail::kernel_unit(s, &c, kernel_file, function),
      kernel_text.empty() ? std::vector<std::string>{} : std::vector<std::string>{kernel_text},
      other_cpus);
  paid.compile_s += built.seconds;
  notes.metrics["compile_cached"] = built.cached ? 1 : 0;
  notes.metrics["compiler_s"] = built.seconds;
  if (built.status != status::ok) {
    auto m = measurement::failure(built.status, "the compiler said:\n" + built.message, paid);
    m.metrics = notes.metrics;
    return m;
  }
  library = built.library;
  if (!o.gate) return std::nullopt;
  const detail::file_gated_kernel candidate(
      setup.inputs, setup.outputs,
      [&](const std::vector<std::string>& files) {
        return detail::run_loader(setup, library, files, other_cpus, std::nullopt).run;
      },
      references);
  const gate_spec& judge = spec ? static_cast<const gate_spec&>(*spec) : candidate;
  auto failed = detail::gate_through_files(*checker, judge, candidate, s.key(c), paid);
  paid.gate_s += candidate.candidate_seconds();
  if (failed) {
    failed->cost = paid;
    for (const auto& [k, v] : notes.metrics) failed->metrics.emplace(k, v);
  }
  return failed;
}

measurement cpu_backend::impl::time(const fs::path& library, bool full, cost paid,
                                    measurement notes) {
  detail::loader_timing t;
  t.warmup = o.warmup;
  t.min_sample_s = o.min_sample_s;
  t.racing = full ? timer->full_options() : o.racing;
  t.incumbent_s = full ? 0 : timer->incumbent();
  detail::loader_run timed;
  {
    const std::lock_guard lock(timing_lock());
    timed = detail::run_loader(setup, library, timing_inputs, timing_cpus, t);
  }
  paid.run_s += timed.run.seconds;
  const auto fail = [&](status st, std::string message) {
    auto m = measurement::failure(st, std::move(message), paid);
    m.metrics = notes.metrics;
    return m;
  };
  if (timed.run.status != status::ok) return fail(timed.run.status, timed.run.message);
  if (o.gate && references)
    if (auto lie = detail::timed_outputs_differ(timed.run.outputs, timing_inputs, setup.outputs,
                                                *references, o.gate_settings.tolerance_scale))
      return fail(status::suspicious, *lie);
  if (timed.samples.empty() || std::any_of(timed.samples.begin(), timed.samples.end(),
                                           [](double v) { return !std::isfinite(v) || v <= 0; }))
    return fail(status::suspicious, "suspicious: the loader timed no, or non-positive, samples");
  measurement m = notes;
  m.status = status::ok;
  m.cost = paid;
  record_race(m, {timed.samples, timed.stopped});
  m.metrics["iters_per_sample"] = static_cast<double>(timed.iters);
  m.metrics["pinned_cpu"] = timing_cpus.size() == 1 ? timing_cpus.front() : -1;
  if (flops > 0) m.metrics["gflops"] = flops / m.objective * 1e-9;
  m.metrics["gbytes_per_s"] = static_cast<double>(bytes) / m.objective * 1e-9;
  if (o.gate) checker->apply_time(m, spec ? checker->time_bound(*spec) : 0.0);
  if (!full && m.ok()) timer->offer(m.objective);
  return m;
}

measurement cpu_backend::impl::evaluate(const space& s, const config& c, bool full) {
  if (!tools) throw error("backend cpu: prepare() was not called");
  cost paid;
  fs::path library;
  measurement notes;
  if (auto failed = build_and_gate(s, c, paid, library, notes)) return *failed;
  return time(library, full, paid, std::move(notes));
}

measurement cpu_backend::evaluate(const space& s, const config& c) {
  return impl_->evaluate(s, c, false);
}

std::optional<measurement> cpu_backend::remeasure(const space& s, const config& c) {
  return impl_->evaluate(s, c, true);
}

}  // namespace tessel
