// registry.cpp: backends by scheme. A table of factories that other modules
// extend with register_backend (the simulator adds "sim"); the built-in
// schemes (replay, command) are registered on first use.
#include <tessel/backends.hpp>
#include <tessel/cpu.hpp>
#include <tessel/error.hpp>
#include <tessel/trainium.hpp>

#include "sim/factory.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

namespace tessel {
namespace {

/// The racing fields the settings set, relative to the options that hold
/// them (validate(race_options, owner)): one list for every timing backend.
/// min_repeats is missing: read.count rejects 0, its only bad value.
constexpr typed_name racing_names[] = {
    {"racing.max_repeats", "max_repeats"},
    {"racing.margin", "race_margin"},
    {"racing.target_relative_ci", "target_ci"},
    {"racing.max_seconds", "race_seconds"},
};

/// The racing settings every timing backend shares (docs/backends.md,
/// "Racing"): min_repeats, max_repeats, race_margin, target_ci, race_seconds.
void read_racing(settings_reader& read, race_options& o) {
  read.also_names(racing_names);
  o.min_repeats = read.count("min_repeats", 1).value_or(o.min_repeats);
  o.max_repeats = read.count("max_repeats", 1).value_or(o.max_repeats);
  o.margin = read.number("race_margin").value_or(o.margin);
  o.target_relative_ci = read.number("target_ci").value_or(o.target_relative_ci);
  o.max_seconds = read.number("race_seconds").value_or(o.max_seconds);
}

/// The gate settings every gated backend shares: tolerance_scale, gate_secret.
void read_gate(settings_reader& read, gate_options& o) {
  o.tolerance_scale = read.number("tolerance_scale").value_or(o.tolerance_scale);
  o.secret = read.count("gate_secret").value_or(o.secret);  // whole: every 64-bit key
}

/// The kernel, its reference and their inputs and outputs, as the backends
/// that build and check a user's kernel (trainium, cpu) read them.
template <class Options>
void read_kernel_files(settings_reader& read, Options& o) {
  o.kernel = read.text("kernel").value_or("");
  o.reference = read.text("reference").value_or("");
  o.inputs = read.text("inputs").value_or("");
  o.outputs = read.text("outputs").value_or("");
}

/// Their time limits and warm-up: compile_timeout, timeout, kill_grace, warmup.
template <class Options>
void read_limits(settings_reader& read, Options& o) {
  o.compile_timeout_s = read.number("compile_timeout").value_or(o.compile_timeout_s);
  o.run_timeout_s = read.number("timeout").value_or(o.run_timeout_s);
  o.kill_grace_s = read.number("kill_grace").value_or(o.kill_grace_s);
  o.warmup = read.count("warmup", 1).value_or(o.warmup);
}

/// Their racing, gate, work counts (flops, min_bytes), estimated_cost and
/// the environment of the kernel's runs (env.NAME).
template <class Options>
void read_run_settings(settings_reader& read, Options& o) {
  read_racing(read, o.racing);
  o.gate = read.flag("gate").value_or(o.gate);
  read_gate(read, o.gate_settings);
  o.flops = read.text("flops").value_or("");
  o.min_bytes = read.text("min_bytes").value_or("");
  o.estimated_cost_s = read.number("estimated_cost").value_or(o.estimated_cost_s);
  for (auto& [name, value] : read.prefixed("env.")) o.environment[name] = value;
}

std::shared_ptr<backend> make_replay(std::string_view argument, const backend_settings& settings) {
  if (argument.empty()) throw error("backend replay: give the table's path, as replay:PATH");
  settings_reader read("backend replay", settings);
  replay_options options;
  options.concurrency = read.count("concurrency", 1).value_or(options.concurrency);
  options.count_framework_time =
      read.flag("count_framework_time").value_or(options.count_framework_time);
  options.exact_cost_estimate =
      read.flag("exact_cost_estimate").value_or(options.exact_cost_estimate);
  read.finish();
  return std::make_shared<replay_backend>(std::filesystem::path(std::string(argument)), options);
}

std::shared_ptr<backend> make_command(std::string_view argument, const backend_settings& settings) {
  if (argument.empty()) throw error("backend command: give the command, as command:CMD");
  settings_reader read("backend command", settings);
  command_options options;
  options.timeout_s = read.number("timeout");  // unset: command_options::default_timeout_s
  options.kill_grace_s = read.number("kill_grace").value_or(options.kill_grace_s);
  options.working_directory = read.text("workdir").value_or("");
  options.concurrency = read.count("concurrency", 1).value_or(options.concurrency);
  options.estimated_cost_s = read.number("estimated_cost").value_or(options.estimated_cost_s);
  for (auto& [name, value] : read.prefixed("env.")) options.environment[name] = value;
  options.gate_inputs = read.text("gate_inputs").value_or("");
  options.gate_outputs = read.text("gate_outputs").value_or("");
  options.gate_reference = read.text("gate_reference").value_or("");
  options.gate_flops = read.text("gate_flops").value_or("");
  options.gate_min_bytes = read.text("gate_min_bytes").value_or("");
  read_gate(read, options.gate);
  read_racing(read, options.racing);
  read.finish();
  return read.validated(
      {{"command_options::timeout_s", "timeout"}, {"command_options::kill_grace_s", "kill_grace"}},
      [&] { return std::make_shared<command_backend>(argument, options); });
}

/// "kernel=k.py:f,reference=r.py:g,host=a,b" -> settings: pairs split at
/// commas, and a piece without '=' continues the previous value (so lists
/// such as host=a,b,c and inputs=A:64x64,B:64x64 need no quoting).
backend_settings argument_settings(std::string_view scheme, std::string_view argument) {
  backend_settings out;
  std::string last;
  std::size_t start = 0;
  while (start < argument.size()) {
    const auto end = std::min(argument.find(',', start), argument.size());
    const auto piece = argument.substr(start, end - start);
    start = end + 1;
    const auto eq = piece.find('=');
    if (eq == std::string_view::npos) {
      if (last.empty())
        throw error(fmt::format("backend {}: '{}' is not KEY=VALUE", scheme, piece));
      out[last] += "," + std::string(piece);
      continue;
    }
    last = std::string(piece.substr(0, eq));
    if (out.contains(last))
      throw error(fmt::format("backend {}: setting {} given twice", scheme, last));
    out[last] = std::string(piece.substr(eq + 1));
  }
  return out;
}

/// argument_settings(scheme, argument) with the --backend-set ones added; a
/// key given in both is an error.
backend_settings merged_settings(std::string_view scheme, std::string_view argument,
                                 const backend_settings& given) {
  auto settings = argument_settings(scheme, argument);
  for (const auto& [key, value] : given) {
    if (settings.contains(key))
      throw error(fmt::format("backend {}: setting {} given twice", scheme, key));
    settings[key] = value;
  }
  return settings;
}

std::vector<std::string> comma_list(const std::string& text) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start <= text.size()) {
    const auto end = std::min(text.find(',', start), text.size());
    if (end > start) out.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

std::shared_ptr<backend> make_trainium(std::string_view argument, const backend_settings& given) {
  const auto settings = merged_settings("trainium", argument, given);
  settings_reader read("backend trainium", settings);
  trainium_options o;
  read_kernel_files(read, o);
  if (auto hosts = read.text("host")) o.hosts = comma_list(*hosts);
  o.cores_per_host = read.count("cores", 1).value_or(o.cores_per_host);
  o.compile_jobs = read.count("compile_jobs", 1).value_or(o.compile_jobs);
  o.python = read.text("python").value_or(o.python);
  o.runner_dir = read.text("runner_dir").value_or(o.runner_dir);
  o.remote_dir = read.text("remote_dir").value_or(o.remote_dir);
  o.ssh = read.text("ssh").value_or(o.ssh);
  o.cache_dir = read.text("cache_dir").value_or(o.cache_dir);
  read_limits(read, o);
  o.iters_per_sample = read.count("iters", 1).value_or(o.iters_per_sample);
  read_run_settings(read, o);
  read.finish();
  if (o.kernel.empty() || o.reference.empty() || o.inputs.empty() || o.outputs.empty())
    throw error(
        "backend trainium: give kernel=FILE.py:FUNC, reference=FILE.py:FUNC, "
        "inputs=NAME:DIMS[:TYPE],... "
        "and outputs=NAME:DIMS[:TYPE],... (docs/trainium.md)");
  return read.validated({{"trainium_options::kernel", "kernel"},
                         {"trainium_options::reference", "reference"},
                         {"gate_options::tolerance_scale", "tolerance_scale"}},
                        [&] { return std::make_shared<trainium_backend>(std::move(o)); });
}

/// "cpu", "cpu:gemm", "cpu:kernel=k.cpp:f,reference=r.cpp:g,inputs=...,..." (docs/cpu.md).
std::shared_ptr<backend> make_cpu(std::string_view argument, const backend_settings& given) {
  cpu_options o;
  const auto first = argument.substr(0, argument.find(','));
  if (!first.empty() && first.find('=') == std::string_view::npos) {
    o.builtin = std::string(first);
    argument = argument.substr(std::min(argument.size(), first.size() + 1));
  }
  const auto settings = merged_settings("cpu", argument, given);
  settings_reader read("backend cpu", settings);
  read_kernel_files(read, o);
  o.compiler = read.text("compiler").value_or("");
  o.flags = read.text("flags").value_or(o.flags);
  o.libraries = read.text("libs").value_or("");
  o.cache_dir = read.text("cache_dir").value_or("");
  o.cache_limit_mb = read.number("cache_limit").value_or(o.cache_limit_mb);
  o.cpus = read.text("cpus").value_or(o.cpus);
  o.kernel_user = read.text("kernel_user").value_or(o.kernel_user);
  o.compile_jobs = read.count("compile_jobs", 1).value_or(0);
  read_limits(read, o);
  o.min_sample_s = read.number("min_sample").value_or(o.min_sample_s);
  read_run_settings(read, o);
  for (auto& [name, value] : read.prefixed("set.")) {
    char* end = nullptr;
    const long long v = std::strtoll(value.c_str(), &end, 10);
    if (value.empty() || *end != 0)
      throw error(
          fmt::format("backend cpu: setting set.{} must be an integer, got '{}'", name, value));
    o.overrides[name] = v;
  }
  read.finish();
  return read.validated({{"cpu_options::cpus", "cpus"},
                         {"cpu_options::kernel", "kernel"},
                         {"cpu_options::reference", "reference"},
                         {"cpu_options::cache_limit_mb", "cache_limit"},
                         {"cpu_options::kernel_user", "kernel_user"},
                         {"gate_options::tolerance_scale", "tolerance_scale"}},
                        [&] { return std::make_shared<cpu_backend>(std::move(o)); });
}

/// "sim", "sim:matmul", "sim:target=trn2,set.dma_issue_ns=978" (what
/// `tessel calibrate` prints), "sim:matmul,model=analytic": a first piece
/// without '=' names the workload, the rest are settings, as for cpu (the
/// whole argument was taken as the workload's name).
std::shared_ptr<backend> make_sim(std::string_view argument, const backend_settings& given) {
  const auto first = argument.substr(0, argument.find(','));
  std::string_view workload;
  if (first.find('=') == std::string_view::npos) {
    workload = first;
    argument = argument.substr(std::min(argument.size(), first.size() + 1));
  }
  return sim::make_sim_backend(workload, merged_settings("sim", argument, given));
}

struct registry {
  std::mutex mutex;
  std::map<std::string, backend_factory, std::less<>> factories{
      {"replay", make_replay},     {"command", make_command}, {"sim", make_sim},
      {"trainium", make_trainium}, {"cpu", make_cpu},
  };
};

registry& the_registry() {
  static registry r;
  return r;
}

}  // namespace

void register_backend(std::string scheme, backend_factory factory) {
  if (scheme.empty() || scheme.find(':') != std::string::npos)
    throw error(fmt::format("register_backend: bad scheme '{}' (non-empty, no ':')", scheme));
  if (!factory) throw error(fmt::format("register_backend: empty factory for scheme '{}'", scheme));
  auto& r = the_registry();
  const std::lock_guard lock(r.mutex);
  r.factories[std::move(scheme)] = std::move(factory);
}

std::vector<std::string> backend_schemes() {
  auto& r = the_registry();
  const std::lock_guard lock(r.mutex);
  std::vector<std::string> names;
  for (const auto& [name, factory] : r.factories) names.push_back(name);
  return names;
}

std::shared_ptr<backend> make_backend(std::string_view spec, const backend_settings& settings) {
  const auto colon = spec.find(':');
  const auto scheme = spec.substr(0, colon);
  const auto argument =
      colon == std::string_view::npos ? std::string_view() : spec.substr(colon + 1);
  backend_factory factory;
  {
    auto& r = the_registry();
    const std::lock_guard lock(r.mutex);
    if (const auto it = r.factories.find(scheme); it != r.factories.end()) factory = it->second;
  }
  if (!factory)
    throw error(
        fmt::format("unknown backend '{}' in '{}' (known: {}; write SCHEME:ARGUMENT, e.g. "
                    "replay:table.json.gz or command:./bench)",
                    scheme, spec, fmt::join(backend_schemes(), ", ")));
  return factory(argument, settings);
}

}  // namespace tessel
