// runner_client.hpp: one call of the Python runner (python/tessel_trainium/
// runner.py) on the local machine or a remote host over ssh, through the
// command backend's process handling (timeouts, process groups, output
// caps). Private to the trainium backend.
#pragma once

#include <tessel/measurement.hpp>

#include <nlohmann/json.hpp>

#include <map>
#include <string>

namespace tessel::detail {

struct runner_location {
  std::string python = "python3";
  std::string runner_dir;  ///< on PYTHONPATH
  std::string remote_dir;  ///< remote hosts: cd here first ("": ssh's default)
  std::string ssh = "ssh";
  std::map<std::string, std::string> environment;
  double kill_grace_s = 2;
};

struct runner_reply {
  tessel::status status = tessel::status::ok;
  bool host_lost = false;  ///< ssh itself failed (exit 255 without an answer): re-queue elsewhere
  std::string message;
  nlohmann::json body;  ///< the runner's answer (when it gave one)
  double wall_s = 0;
};

/// Sends `request` to the runner on `host` ("" = local), with
/// NEURON_RT_VISIBLE_CORES=core when core >= 0. `max_answer_bytes` caps the
/// answer (inline outputs count). Never throws for the runner's behaviour:
/// a timeout is status timeout, a signal or an exit without an answer is
/// runtime_error (with the signal and stderr's tail), the runner's own
/// statuses map to tessel's (out_of_memory -> runtime_error, "out of memory: ...").
[[nodiscard]] runner_reply call_runner(const runner_location& where, const std::string& host,
                                       int core, const nlohmann::json& request, double timeout_s,
                                       std::size_t max_answer_bytes);

}  // namespace tessel::detail
