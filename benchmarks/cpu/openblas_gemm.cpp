// openblas_gemm.cpp: C = A B through the BLAS Debian ships (OpenBLAS,
// libopenblas-dev), as a user kernel of the cpu backend: what a user would
// call instead of tuning. Threads: OPENBLAS_NUM_THREADS in its environment.
#include <tessel/cpu_kernel.hpp>

#include <cblas.h>

void openblas_gemm(const tessel::cpu::kernel_args& args) {
  const auto& a = args.in(0);
  const auto& b = args.in(1);
  const auto m = static_cast<int>(a.dim(0)), k = static_cast<int>(a.dim(1)),
             n = static_cast<int>(b.dim(1));
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1.0f, a.as<float>(), k,
              b.as<float>(), n, 0.0f, args.out(0).as<float>(), n);
}
