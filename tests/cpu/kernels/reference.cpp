// The reference of tests/cpu/kernels/kernels.cpp: y = 2 x (in fp64).
#include <tessel/cpu_kernel.hpp>

#include <cstdint>

void twice_reference(const tessel::cpu::kernel_args& a) {
  const float* x = a.in(0).as<float>();
  float* y = a.out(0).as<float>();
  for (std::int64_t i = 0; i < a.in(0).elements(); ++i)
    y[i] = static_cast<float>(2.0 * static_cast<double>(x[i]));
}
