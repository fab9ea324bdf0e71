// naive_gemm.cpp: the textbook triple loop, C = A B (fp32), as a user kernel
// of the cpu backend: the baseline of bench_cpu_gemm, and the gate's
// reference for the OpenBLAS arm. Compiled with the same flags as tessel's
// kernel (-O3 -march=native).
#include <tessel/cpu_kernel.hpp>

#include <cstdint>

void naive_gemm(const tessel::cpu::kernel_args& args) {
  const auto& a = args.in(0);
  const auto& b = args.in(1);
  const std::int64_t m = a.dim(0), k = a.dim(1), n = b.dim(1);
  const float* x = a.as<float>();
  const float* y = b.as<float>();
  float* c = args.out(0).as<float>();
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t j = 0; j < n; ++j) {
      float sum = 0;
      for (std::int64_t p = 0; p < k; ++p) sum += x[i * k + p] * y[p * n + j];
      c[i * n + j] = sum;
    }
}
