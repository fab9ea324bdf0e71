// factory.cpp: builds a sim_backend from a registry spec (factory.hpp).
#include "factory.hpp"

#include <tessel/error.hpp>
#include <tessel/settings.hpp>
#include <tessel/sim.hpp>

#include <string>

namespace tessel::sim {

std::shared_ptr<backend> make_sim_backend(std::string_view argument,
                                          const backend_settings& settings) {
  settings_reader read("backend sim", settings);
  sim_options options;
  options.workload = read.text("workload").value_or(std::string(argument));
  options.target = read.text("target").value_or(options.target);
  options.concurrency = read.count("concurrency", 1).value_or(options.concurrency);
  options.gate = read.flag("gate").value_or(options.gate);
  // 0 (the default): a fresh key per backend, which no kernel can learn (docs/gate.md)
  options.gate_options.secret = read.count("gate_secret").value_or(options.gate_options.secret);
  if (const auto model = read.choice("model", {"event", "analytic"}))
    options.model = *model == "analytic" ? sim_model::analytic : sim_model::event;
  options.fault = read.text("fault").value_or(options.fault);
  for (const auto& [name, value] : read.prefixed("set.")) {
    const auto v = parse_number(value);
    if (!v) read.reject("set." + name, "a number", value);
    options.overrides[name] = *v;
  }
  read.finish();
  return read.validated({{"sim_options.workload", "workload"},
                         {"sim_options.target", "target"},
                         {"sim_options.fault", "fault"}},
                        [&] { return std::make_shared<sim_backend>(std::move(options)); });
}

}  // namespace tessel::sim
