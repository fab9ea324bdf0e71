// factory.cpp: builds a sim_backend from a registry spec (factory.hpp).
#include "factory.hpp"

#include <tessel/error.hpp>
#include <tessel/sim.hpp>

#include <fmt/format.h>

#include <cerrno>
#include <cstdlib>
#include <string>

namespace tessel::sim {
namespace {

double number(const std::string& key, const std::string& text) {
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size() || errno == ERANGE)
    throw error(fmt::format("backend sim: setting {} must be a number, got '{}'", key, text));
  return v;
}

}  // namespace

std::shared_ptr<backend> make_sim_backend(std::string_view argument,
                                          const backend_settings& settings) {
  sim_options options;
  options.workload = std::string(argument);
  for (const auto& [key, value] : settings) {
    if (key == "workload") {
      options.workload = value;
    } else if (key == "target") {
      options.target = value;
    } else if (key == "concurrency") {
      const double n = number(key, value);
      if (n < 1 || n != static_cast<double>(static_cast<std::size_t>(n)))
        throw error(fmt::format(
            "backend sim: setting concurrency must be a whole number >= 1, got {}", value));
      options.concurrency = static_cast<std::size_t>(n);
    } else if (key == "gate") {
      if (value != "true" && value != "false" && value != "on" && value != "off" && value != "1" &&
          value != "0")
        throw error(
            fmt::format("backend sim: setting gate must be true or false, got '{}'", value));
      options.gate = value == "true" || value == "on" || value == "1";
    } else if (key == "model") {
      if (value != "event" && value != "analytic")
        throw error(
            fmt::format("backend sim: setting model must be event or analytic, got '{}'", value));
      options.model = value == "analytic" ? sim_model::analytic : sim_model::event;
    } else if (key == "fault") {
      options.fault = value;
    } else if (key.rfind("set.", 0) == 0 && key.size() > 4) {
      options.overrides[key.substr(4)] = number(key, value);
    } else {
      throw error(
          fmt::format("backend sim: unknown setting '{}' (settings: workload, target, concurrency, "
                      "gate, model, fault, set.NAME for a model constant)",
                      key));
    }
  }
  return std::make_shared<sim_backend>(std::move(options));
}

}  // namespace tessel::sim
