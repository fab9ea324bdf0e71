// runner_client.cpp: one runner call (runner_client.hpp).
#include "trainium/runner_client.hpp"

#include "command/process.hpp"
#include "command/protocol.hpp"

#include <tessel/backends.hpp>

#include <fmt/format.h>

#include <cstdlib>

extern "C" char** environ;  // NOLINT: POSIX

namespace tessel::detail {
namespace {

/// The last line of `text` that parses as a JSON object.
std::optional<nlohmann::json> last_json_object(const std::string& text) {
  std::size_t end = text.size();
  while (end > 0) {
    const auto start = text.rfind('\n', end - 1);
    const auto from = start == std::string::npos ? 0 : start + 1;
    const auto line = text.substr(from, end - from);
    if (!line.empty() && line.front() == '{') {
      auto j = nlohmann::json::parse(line, nullptr, false);
      if (j.is_object()) return j;
    }
    if (start == std::string::npos) break;
    end = start;
  }
  return std::nullopt;
}

std::string text_field(const nlohmann::json& j, const char* key, const char* otherwise) {
  const auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get_ref<const std::string&>()
                                          : std::string(otherwise);
}

std::string stderr_tail(const process_result& r) { return tail_of(r.errors, 12, 1500); }

}  // namespace

runner_reply call_runner(const runner_location& where, const std::string& host, int core,
                         const nlohmann::json& request, double timeout_s,
                         std::size_t max_answer_bytes) {
  process_request p;
  std::map<std::string, std::string> variables = where.environment;
  if (core >= 0) variables["NEURON_RT_VISIBLE_CORES"] = std::to_string(core);
  if (host.empty()) {
    for (char** e = environ; e != nullptr && *e != nullptr; ++e) p.environment.emplace_back(*e);
    const char* path = std::getenv("PYTHONPATH");  // NOLINT(concurrency-mt-unsafe): read-only
    variables.try_emplace(
        "PYTHONPATH", where.runner_dir + (path != nullptr && *path != 0 ? ":" + std::string(path)
                                                                        : std::string()));
    for (const auto& [name, value] : variables) {
      const std::string prefix = name + "=";  // clang 14 cannot capture a structured binding
      std::erase_if(p.environment,
                    [&prefix](const std::string& e) { return e.rfind(prefix, 0) == 0; });
      p.environment.push_back(prefix + value);
    }
    p.arguments = {where.python, "-m", "tessel_trainium.runner"};
  } else {
    for (char** e = environ; e != nullptr && *e != nullptr; ++e) p.environment.emplace_back(*e);
    variables.try_emplace("PYTHONPATH", where.runner_dir);
    std::string line =
        where.remote_dir.empty() ? "" : "cd " + shell_quote(where.remote_dir) + " && ";
    line += "env";
    for (const auto& [name, value] : variables) line += " " + shell_quote(name + "=" + value);
    line += " " + shell_quote(where.python) + " -m tessel_trainium.runner";
    p.arguments = {where.ssh, host, line};
  }
  p.input = request.dump();
  p.timeout_s = timeout_s;
  p.kill_grace_s = where.kill_grace_s;
  p.max_output_bytes = max_answer_bytes;
  const process_result r = run_process(p);

  runner_reply reply;
  reply.wall_s = r.wall_s;
  const std::string on = host.empty() ? std::string() : " on " + host;
  if (!r.started) {
    reply.status = status::runtime_error;
    reply.message =
        fmt::format("the runner did not start{}: {} ({})", on, r.start_error, p.arguments[0]);
    return reply;
  }
  if (r.timed_out) {
    reply.status = status::timeout;
    const bool compiling = request.value("op", "") == "compile";
    reply.message = fmt::format(
        "the runner{} ran past {} s and was killed (the {} limit; change it with --backend-set "
        "{}=S or trainium_options::{})",
        on, timeout_s, compiling ? "compile" : "run", compiling ? "compile_timeout" : "timeout",
        compiling ? "compile_timeout_s" : "run_timeout_s");
    return reply;
  }
  auto answer = r.output_truncated ? std::nullopt : last_json_object(r.output);
  if (!answer) {
    reply.status = status::runtime_error;
    if (!host.empty() && r.exit_code == 255) {
      reply.host_lost = true;
      reply.message = fmt::format("host {} lost (ssh exited 255): {}", host, stderr_tail(r));
    } else if (r.signal != 0) {
      reply.message = fmt::format("the kernel process crashed{} ({}): {}", on,
                                  signal_name(r.signal), stderr_tail(r));
    } else if (r.output_truncated) {
      reply.message =
          fmt::format("the runner's answer{} is larger than {} bytes", on, max_answer_bytes);
    } else {
      reply.message = fmt::format("the runner exited{} with code {} without an answer: {}", on,
                                  r.exit_code, stderr_tail(r));
    }
    return reply;
  }
  reply.body = std::move(*answer);
  const auto s = text_field(reply.body, "status", "runtime_error");
  reply.message = text_field(reply.body, "message", "");
  if (s == "ok") {
    reply.status = status::ok;
  } else if (s == "compile_error") {
    reply.status = status::compile_error;
  } else if (s == "out_of_memory") {
    reply.status = status::runtime_error;
    reply.message = "out of memory: " + reply.message;
  } else {
    reply.status = status::runtime_error;
  }
  return reply;
}

}  // namespace tessel::detail
