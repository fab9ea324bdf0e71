// swiglu.hpp: the swiglu workload's functional executor (swiglu.cpp), which
// its functional() returns; declared here so tests can inject faults into it
// directly (docs/simulator.md, swiglu).
#pragma once

#include "../machine.hpp"

#include <tessel/config.hpp>
#include <tessel/gate.hpp>
#include <tessel/space.hpp>

#include <memory>

namespace tessel::sim {

/// The executor of (s, c) on `m` following swiglu's schedule, or nullptr when
/// (s, c) does not compile. A sim::functional_kernel (faults injectable).
[[nodiscard]] std::unique_ptr<gated_kernel> swiglu_functional(const space& s, const config& c,
                                                              const machine& m);

}  // namespace tessel::sim
