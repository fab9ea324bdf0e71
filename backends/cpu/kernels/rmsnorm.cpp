// rmsnorm.cpp: the cpu backend's built-in RMSNorm, y[r, :] = x[r, :] /
// sqrt(mean(x[r, :]^2) + eps) * w, eps = 1e-6 (Zhang & Sennrich, "Root Mean
// Square Layer Normalization", NeurIPS 2019), fp32. Two passes over each
// row: the sum of squares in `accs` independent vector accumulators (fp32,
// or fp64 with acc_double), then the scaling; rows split over threads.
#include <tessel/cpu_kernel.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <thread>
#include <vector>

#ifndef TESSEL_VEC
#define TESSEL_VEC 8  // floats per vector
#endif
#ifndef TESSEL_ACCS
#define TESSEL_ACCS 1  // independent partial sums (hide the add latency)
#endif
#ifndef TESSEL_ACC_DOUBLE
#define TESSEL_ACC_DOUBLE 0  // sum the squares in fp64
#endif
#ifndef TESSEL_ROWS
#define TESSEL_ROWS 1  // rows whose passes are interleaved
#endif
#ifndef TESSEL_PREFETCH
#define TESSEL_PREFETCH 0  // floats ahead the next row is prefetched in the second pass (0: none)
#endif
#ifndef TESSEL_THREADS
#define TESSEL_THREADS 1
#endif

namespace tessel_rmsnorm {

constexpr int vec = TESSEL_VEC, accs = TESSEL_ACCS, rows_at_once = TESSEL_ROWS;
constexpr double eps = 1e-6;
typedef float vfloat __attribute__((vector_size(vec * sizeof(float))));
typedef double vdouble __attribute__((vector_size(vec * sizeof(double))));
#if TESSEL_ACC_DOUBLE
using vacc = vdouble;
#else
using vacc = vfloat;
#endif

inline vfloat loadv(const float* p) {
  vfloat v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

/// The sum of squares of x[0, n).
double sum_squares(const float* x, long n) {
  vacc acc[accs] = {};
  long i = 0;
  for (; i + accs * vec <= n; i += accs * vec)
    for (int a = 0; a < accs; ++a) {
      const auto v = __builtin_convertvector(loadv(x + i + a * vec), vacc);
      acc[a] += v * v;
    }
  double total = 0;
  for (int a = 0; a < accs; ++a)
    for (int l = 0; l < vec; ++l) total += acc[a][l];
  for (; i < n; ++i) total += static_cast<double>(x[i]) * x[i];
  return total;
}

void scale(const float* x, const float* w, float* y, long n, float inv, const float* next) {
  long i = 0;
  for (; i + vec <= n; i += vec) {
    if constexpr (TESSEL_PREFETCH > 0)
      if (next != nullptr) __builtin_prefetch(next + i + TESSEL_PREFETCH);
    const vfloat v = loadv(x + i) * loadv(w + i) * inv;
    std::memcpy(y + i, &v, sizeof v);
  }
  for (; i < n; ++i) y[i] = x[i] * w[i] * inv;
}

void rows(const float* x, const float* w, float* y, long d, long r0, long r1) {
  for (long r = r0; r < r1; r += rows_at_once) {
    const long here = std::min<long>(rows_at_once, r1 - r);
    float inv[rows_at_once];
    for (long q = 0; q < here; ++q)
      inv[q] = static_cast<float>(1.0 / std::sqrt(sum_squares(x + (r + q) * d, d) / d + eps));
    for (long q = 0; q < here; ++q) {
      const long row = r + q;
      scale(x + row * d, w, y + row * d, d, inv[q], row + 1 < r1 ? x + (row + 1) * d : nullptr);
    }
  }
}

}  // namespace tessel_rmsnorm

void rmsnorm(const tessel::cpu::kernel_args& args) {
  using namespace tessel_rmsnorm;
  const auto& x = args.in(0);
  if (x.type != tessel::cpu::dtype::fp32 || args.in(1).type != tessel::cpu::dtype::fp32)
    throw std::runtime_error("rmsnorm: fp32 inputs only");
  const long r = x.dim(0), d = x.dim(1);
  const long threads = std::max<long>(1, std::min<long>(TESSEL_THREADS, r));
  const float* xs = x.as<float>();
  const float* ws = args.in(1).as<float>();
  float* ys = args.out(0).as<float>();
  std::vector<std::thread> pool;
  for (long t = 1; t < threads; ++t)
    pool.emplace_back(rows, xs, ws, ys, d, r * t / threads, r * (t + 1) / threads);
  rows(xs, ws, ys, d, 0, r / threads);
  for (auto& t : pool) t.join();
}
