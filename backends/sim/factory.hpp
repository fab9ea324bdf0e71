// factory.hpp: the registry's factory for the "sim" scheme (backends/registry.cpp).
#pragma once

#include <tessel/backends.hpp>

#include <memory>
#include <string_view>

namespace tessel::sim {

/// `sim` or `sim:WORKLOAD`. Settings: workload, target, concurrency, and
/// set.NAME=VALUE for any model constant (sim_options::overrides). Throws
/// tessel::error for an unknown setting or a bad value.
[[nodiscard]] std::shared_ptr<backend> make_sim_backend(std::string_view argument,
                                                        const backend_settings& settings);

}  // namespace tessel::sim
