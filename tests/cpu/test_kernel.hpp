// test_kernel.hpp: the cpu_options every test of a user's kernel starts from
// (cpu_test.cpp, loop_test.cpp): y = f(x) over N elements, one shared compile
// cache, no pinning, quick racing. A test sets what it is about on top.
#pragma once

#include <tessel/cpu.hpp>

#include "work_dir.hpp"

#include <string>

namespace tessel::testing {

/// `kernel` and `reference` as FILE.cpp:FUNCTION, on inputs "x:N", outputs
/// "y:N", built with -O1 into TESSEL_CPU_TEST_CACHE (work_dir.hpp).
inline cpu_options kernel_options(const std::string& kernel, const std::string& reference) {
  cpu_options o;
  o.kernel = kernel;
  o.reference = reference;
  o.inputs = "x:N";
  o.outputs = "y:N";
  o.flags = "-O1";
  o.cache_dir = test_dirs::work_dir(TESSEL_CPU_TEST_CACHE);
  o.cpus = "off";  // a test machine is shared: pinning would only add contention
  o.racing = {3, 8, 0.0, 0.02, 2.0};
  o.min_sample_s = 2e-4;
  o.run_timeout_s = 20;
  return o;
}

}  // namespace tessel::testing
