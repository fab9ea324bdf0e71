// trainium_backend.cpp: compile -> gate -> time, per config, through the
// Python runner (runner_client.cpp), scheduled over hosts and NeuronCores
// (host_pool.hpp). The gate is tessel's (gated/file_gate.hpp): the runner
// only ever sees the kernel and the inputs.
#include "gated/file_gate.hpp"
#include "gated/npy.hpp"
#include "trainium/host_pool.hpp"
#include "trainium/runner_client.hpp"

#include <tessel/error.hpp>
#include <tessel/racing.hpp>
#include <tessel/trainium.hpp>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <optional>
#include <thread>

#include <unistd.h>

namespace tessel {
namespace fs = std::filesystem;
namespace {

/// A config's values as the kernel's keyword arguments (inactive ones left out).
nlohmann::json constants_of(const space& s, const config& c) {
  nlohmann::json j = nlohmann::json::object();
  for (std::size_t p = 0; p < s.size(); ++p) {
    const value v = s.value_of(c, p);
    if (!v.active) continue;
    const auto& name = s.parameters()[p].name;
    switch (v.kind) {
      case param_kind::integer: j[name] = v.integer; break;
      case param_kind::boolean: j[name] = v.integer != 0; break;
      case param_kind::symbol: j[name] = v.symbol; break;
      case param_kind::permutation: j[name] = v.order; break;
    }
  }
  return j;
}

std::string read_file(const fs::path& path, std::uintmax_t limit) {
  std::error_code ec;
  const auto size = fs::file_size(path, ec);
  if (ec) throw error(fmt::format("output file {} is missing", path.string()));
  if (size > limit)
    throw error(fmt::format("output file {} has {} bytes, more than the {} its shape allows",
                            path.filename().string(), size, limit));
  std::string bytes(static_cast<std::size_t>(size), '\0');
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) throw error(fmt::format("cannot open output file {}", path.string()));
  const auto got = std::fread(bytes.data(), 1, bytes.size(), f);
  std::fclose(f);
  bytes.resize(got);
  return bytes;
}

std::string find_runner_dir(const std::string& given) {
  if (!given.empty()) return given;
  if (const char* env = std::getenv("TESSEL_RUNNER_DIR"); env != nullptr && *env != 0)  // NOLINT
    return env;
  std::error_code ec;
  const auto exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const auto installed = exe.parent_path().parent_path() / "share" / "tessel" / "python";
    if (fs::exists(installed / "tessel_trainium" / "runner.py")) return installed.string();
  }
#ifdef TESSEL_PYTHON_SOURCE_DIR
  if (fs::exists(fs::path(TESSEL_PYTHON_SOURCE_DIR) / "tessel_trainium" / "runner.py"))
    return TESSEL_PYTHON_SOURCE_DIR;
#endif
  return {};
}

std::string text_field(const nlohmann::json& j, const char* key) {
  const auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get_ref<const std::string&>() : std::string("?");
}

std::vector<double> samples_field(const nlohmann::json& j) {
  std::vector<double> out;
  const auto it = j.find("samples_s");
  if (it == j.end() || !it->is_array()) return out;
  for (const auto& v : *it) out.push_back(v.is_number() ? v.get<double>() : std::nan(""));
  return out;
}

std::size_t output_bytes_limit(const std::vector<tensor_spec>& outputs) {
  std::size_t total = 0;
  for (const auto& o : outputs) total += static_cast<std::size_t>(o.elements()) * 8 + 4096;
  return total;
}

}  // namespace

void trainium_options::validate() const {
  if (kernel.find(':') == std::string::npos)
    throw options_error("trainium_options::kernel", "must be FILE.py:FUNCTION");
  if (reference.find(':') == std::string::npos)
    throw options_error("trainium_options::reference", "must be FILE.py:FUNCTION");
  if (inputs.empty())
    throw options_error("trainium_options::inputs", "must name the kernel's inputs");
  if (outputs.empty())
    throw options_error("trainium_options::outputs", "must name the kernel's outputs");
  if (cores_per_host == 0) throw options_error("trainium_options::cores_per_host", "must be >= 1");
  tessel::validate(racing, "trainium_options::racing");
  if (iters_per_sample == 0)
    throw options_error("trainium_options::iters_per_sample", "must be >= 1");
  if (!(run_timeout_s > 0) || !(compile_timeout_s > 0))
    throw options_error("trainium_options", "run_timeout_s and compile_timeout_s must be > 0");
  gate_settings.validate();
}

struct trainium_backend::impl {
  options o;
  detail::runner_location where;
  std::vector<tensor_spec> inputs, outputs;
  std::unique_ptr<detail::host_pool> hosts;
  std::unique_ptr<tessel::gate> gate;
  detail::file_program reference;
  std::unique_ptr<racer> timer;  ///< the racing rule and the incumbent (best median so far)

  /// Compile, gate, time; `full`: every max_repeats sample, no racing (remeasure).
  measurement evaluate(const space& s, const config& c, bool full);

  [[nodiscard]] nlohmann::json base_request(const char* op, const nlohmann::json& constants,
                                            std::uint64_t key) const {
    return {{"op", op},
            {"kernel", o.kernel},
            {"constants", constants},
            {"config_key", fmt::format("{:016x}", key)},
            {"cache_dir", o.cache_dir}};
  }

  /// Sends `request` with `files` (.npy bytes, one per input) to the runner
  /// on (host, core) and reads back the outputs it wrote, when it wrote any.
  detail::file_run send(nlohmann::json request, int host, int core,
                        const std::vector<std::string>& files, double timeout_s, bool* lost,
                        nlohmann::json* body = nullptr) {
    const bool remote = !hosts->destination(host).empty();
    detail::scratch_dir dir("tessel-trainium");
    request["inputs"] = nlohmann::json::array();
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      nlohmann::json t{{"name", inputs[i].name}, {"dtype", to_string(inputs[i].type)}};
      if (remote) {
        t["npy_base64"] = detail::base64_encode(files[i]);
      } else {
        const auto path = dir.path() / (inputs[i].name + ".npy");
        std::ofstream(path, std::ios::binary)
            .write(files[i].data(), static_cast<std::streamsize>(files[i].size()));
        t["path"] = path.string();
      }
      request["inputs"].push_back(t);
    }
    request["outputs"] = nlohmann::json::array();
    for (const auto& out : outputs)
      request["outputs"].push_back(
          {{"name", out.name},
           {"shape", out.shape},
           {"path", (dir.path() / ("out_" + out.name + ".npy")).string()}});
    request["inline"] = remote;
    const auto reply = detail::call_runner(where, hosts->destination(host), core, request,
                                           timeout_s, 2 * output_bytes_limit(outputs) + (1u << 20));
    detail::file_run r{reply.status, reply.message, {}, reply.wall_s};
    if (lost != nullptr && reply.host_lost) *lost = true;
    if (body != nullptr) *body = reply.body;
    if (r.status != status::ok || !reply.body.contains("outputs")) return r;
    try {
      for (const auto& out : reply.body.at("outputs"))
        r.outputs.push_back(
            remote ? detail::base64_decode(out.at("npy_base64").get<std::string>())
                   : read_file(out.at("path").get<std::string>(), output_bytes_limit(outputs)));
    } catch (const std::exception& e) {
      r.status = status::runtime_error;
      r.message = fmt::format("reading the outputs: {}", e.what());
    }
    return r;
  }

  /// Inputs for compiling (shapes only), and for timing when the gate is off: a fixed normal draw.
  [[nodiscard]] std::vector<std::string> timing_inputs() const {
    std::vector<std::string> files;
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      const input_tensor t(inputs[i], distribution::normal, 0x7e55e1 + i);
      std::vector<double> v(static_cast<std::size_t>(inputs[i].elements()));
      for (std::size_t e = 0; e < v.size(); ++e) v[e] = t.at(static_cast<std::int64_t>(e));
      files.push_back(detail::npy_encode(inputs[i].shape, inputs[i].type, v));
    }
    return files;
  }

  detail::file_run reference_run(const std::vector<std::string>& files) {
    nlohmann::json request{{"op", "reference"}, {"reference", o.reference}};
    // The reference always runs here, in its own process, never on a device host.
    return send(std::move(request), detail::host_pool::local, -1, files, o.run_timeout_s, nullptr);
  }
};

trainium_backend::trainium_backend(options o) : impl_(std::make_unique<impl>()) {
  o.validate();
  if (o.compile_jobs == 0) o.compile_jobs = std::max(1u, std::thread::hardware_concurrency());
  impl_->o = std::move(o);
  auto& x = *impl_;
  x.where = {x.o.python,      find_runner_dir(x.o.runner_dir),
             x.o.remote_dir,  x.o.ssh,
             x.o.environment, x.o.kill_grace_s};
  x.hosts = std::make_unique<detail::host_pool>(x.o.hosts, x.o.cores_per_host, x.o.compile_jobs);
  x.gate = std::make_unique<tessel::gate>(x.o.gate_settings);
  x.timer = std::make_unique<racer>(x.o.racing);
  x.reference = [&x](const std::vector<std::string>& files) { return x.reference_run(files); };
}

trainium_backend::~trainium_backend() = default;

std::string trainium_backend::name() const { return "trainium:" + impl_->o.kernel; }

std::optional<std::string> trainium_backend::hardware() const {
  return impl_->o.hosts.empty() ? std::string("trainium (local)")
                                : fmt::format("trainium ({})", fmt::join(impl_->o.hosts, ","));
}

void trainium_backend::prepare(const space& s) {
  auto& x = *impl_;
  x.inputs = detail::parse_tensor_specs(x.o.inputs, "backend trainium: inputs", s);
  x.outputs = detail::parse_tensor_specs(x.o.outputs, "backend trainium: outputs", s);
  detail::check_count_setting(x.o.flops, "backend trainium: flops", s);
  detail::check_count_setting(x.o.min_bytes, "backend trainium: min_bytes", s);
  x.gate = std::make_unique<tessel::gate>(detail::on_target(x.o.gate_settings, s));
  for (const auto* spec : {&x.o.kernel, &x.o.reference}) {
    const auto file = spec->substr(0, spec->rfind(':'));
    if (x.o.hosts.empty() && !fs::exists(file))
      throw error(fmt::format("backend trainium: {} does not exist (from '{}')", file, *spec));
  }
  if (x.where.runner_dir.empty())
    throw error(
        "backend trainium: cannot find the runner (tessel_trainium/runner.py); set runner_dir= "
        "or TESSEL_RUNNER_DIR to the folder that holds tessel_trainium/");
}

std::size_t trainium_backend::concurrency() const {
  return impl_->hosts->size() * (impl_->o.compile_jobs + impl_->o.cores_per_host);
}

double trainium_backend::estimated_cost(const space& s, const config& c) const {
  (void)s;
  (void)c;
  return impl_->o.estimated_cost_s;
}

std::vector<std::string> trainium_backend::lost_hosts() const { return impl_->hosts->lost(); }

measurement trainium_backend::evaluate(const space& s, const config& c) {
  return impl_->evaluate(s, c, false);
}

std::optional<measurement> trainium_backend::remeasure(const space& s, const config& c) {
  return impl_->evaluate(s, c, true);
}

measurement trainium_backend::impl::evaluate(const space& s, const config& c, bool full) {
  auto& x = *this;
  const auto constants = constants_of(s, c);
  const std::uint64_t key = s.key(c);
  tessel::cost paid;
  std::size_t requeued = 0;
  std::string lost_note;
  double compiler_s = 0, compile_cached = 0;
  for (std::size_t attempt = 0; attempt <= x.hosts->size(); ++attempt) {
    // 1. compile, on a host's CPU (overlaps other candidates' device runs)
    const int host = x.hosts->acquire_compile();
    if (host < 0) break;
    detail::runner_reply compiled;
    {
      bool lost = false;
      nlohmann::json body;
      const auto r = x.send(x.base_request("compile", constants, key), host, -1, x.timing_inputs(),
                            x.o.compile_timeout_s, &lost, &body);
      if (const auto it = body.find("compile_s"); it != body.end() && it->is_number())
        compiler_s = it->get<double>();
      if (const auto it = body.find("compile_cached"); it != body.end() && it->is_boolean())
        compile_cached = it->get<bool>() ? 1 : 0;
      x.hosts->release_compile(host);
      if (lost) {
        x.hosts->mark_lost(host);
        ++requeued;
        lost_note = r.message;
        continue;
      }
      paid.compile_s += r.seconds;
      if (r.status != status::ok) {
        auto m = measurement::failure(r.status, r.message, paid);
        m.metrics["requeued"] = static_cast<double>(requeued);
        return m;
      }
    }
    // 2. the gate and 3. the timing, on one NeuronCore of that host
    const auto lease = x.hosts->acquire_core(host);
    if (!lease) {
      ++requeued;
      continue;
    }
    bool lost = false;
    const detail::file_spec spec(
        x.inputs, x.outputs, x.reference,
        detail::count_setting(x.o.flops, "backend trainium: flops", s, c),
        detail::count_setting(x.o.min_bytes, "backend trainium: min_bytes", s, c));
    std::optional<gate_session> session;
    std::optional<detail::session_files> files;
    std::optional<measurement> failed;
    if (x.o.gate) {
      session.emplace(x.gate->session(spec, key));
      files.emplace(*session);
      const auto& calls = session->calls();
      for (std::size_t i = 0; i < calls.size() && !failed && !lost; ++i) {
        const auto r = x.send(x.base_request("run", constants, key), host, lease->core,
                              files->of(calls[i]), x.o.run_timeout_s, &lost);
        paid.run_s += r.seconds;
        if (!lost)
          failed = detail::judge_run(*session, calls[i], r, x.outputs,
                                     fmt::format("in the gate (run {} of {})", i + 1, calls.size()),
                                     paid);
      }
      if (lost) {
        x.hosts->mark_lost(host);
        ++requeued;
        continue;
      }
      if (failed) {
        failed->metrics["requeued"] = static_cast<double>(requeued);
        return *failed;
      }
    }
    // Timed on a set drawn from the secret like the gate's (one its gate
    // calls never ran): the kernel cannot tell the timed call from a gate
    // call by its inputs, and what the timed calls computed is judged like
    // any gate call.
    const std::size_t timed_set = session ? session->timed_set(0) : 0;
    auto request = x.base_request("time", constants, key);
    request["warmup"] = x.o.warmup;
    request["iters_per_sample"] = x.o.iters_per_sample;
    const race_options racing = full ? x.timer->full_options() : x.o.racing;
    request["min_repeats"] = racing.min_repeats;
    request["max_repeats"] = racing.max_repeats;
    request["margin"] = racing.margin;
    request["target_relative_ci"] = racing.target_relative_ci;
    request["max_seconds"] = racing.max_seconds;
    if (const double incumbent = x.timer->incumbent(); !full && incumbent > 0)
      request["incumbent_s"] = incumbent;
    nlohmann::json body;
    const auto timed =
        x.send(std::move(request), host, lease->core,
               files ? files->of(timed_set) : x.timing_inputs(), x.o.run_timeout_s, &lost, &body);
    if (lost) {
      x.hosts->mark_lost(host);
      ++requeued;
      lost_note = timed.message;
      continue;
    }
    paid.run_s += timed.seconds;
    if (timed.status == status::ok && session)
      if (auto judged =
              detail::finish_with_timed_run(*session, timed_set, timed, x.outputs, paid)) {
        judged->metrics["requeued"] = static_cast<double>(requeued);
        return *judged;
      }
    if (timed.status != status::ok) {
      auto m = measurement::failure(timed.status, timed.message, paid);
      m.metrics["requeued"] = static_cast<double>(requeued);
      return m;
    }
    const auto samples = samples_field(body);
    if (samples.empty() || std::any_of(samples.begin(), samples.end(),
                                       [](double v) { return !std::isfinite(v) || v <= 0; })) {
      return measurement::failure(
          status::suspicious, "suspicious: the runner reported no, or non-finite, latencies", paid);
    }
    measurement m;
    m.cost = paid;
    const auto stopped = parse_race_stop(text_field(body, "stopped"));
    if (!stopped)
      return measurement::failure(
          status::runtime_error,
          fmt::format("the runner said racing stopped for '{}', a reason tessel does not know",
                      text_field(body, "stopped")),
          paid);
    record_race(m, {samples, *stopped});
    m.metrics["host"] = host;
    m.metrics["core"] = lease->core;
    m.metrics["requeued"] = static_cast<double>(requeued);
    m.metrics["compiler_s"] = compiler_s;
    m.metrics["compile_cached"] = compile_cached;
    if (x.o.gate) {
      x.gate->apply_time(m, spec);  // every sample above the floor
      if (!m.ok()) return m;
    }
    if (!full) x.timer->offer(m.objective);
    return m;
  }
  auto m = measurement::failure(
      status::runtime_error,
      fmt::format("every host was lost (re-queued {} times); last: {}", requeued, lost_note), paid);
  m.metrics["requeued"] = static_cast<double>(requeued);
  return m;
}

}  // namespace tessel
