// softmax.cpp: the cpu backend's built-in row softmax, y[r, :] =
// exp(x[r, :] - max) / sum(exp(x[r, :] - max)), fp32. Three passes (max,
// sum of exponentials, normalize) or two with `online` (the running max and
// rescaled sum of Milakov & Gimelshein, "Online normalizer calculation for
// softmax", 2018); exp from libm or a vectorized polynomial (`fast_exp`:
// Cody-Waite reduction and a degree-6 Taylor polynomial on |r| <= ln2/2,
// relative error ~2e-7, well inside the gate's fp32 tolerance).
#include <tessel/cpu_kernel.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <thread>
#include <vector>

#ifndef TESSEL_VEC
#define TESSEL_VEC 8  // floats per vector
#endif
#ifndef TESSEL_ACCS
#define TESSEL_ACCS 1  // independent partial sums
#endif
#ifndef TESSEL_ONLINE
#define TESSEL_ONLINE 0  // two passes (online normalizer) instead of three
#endif
#ifndef TESSEL_FAST_EXP
#define TESSEL_FAST_EXP 0  // the vectorized polynomial exp instead of libm's expf
#endif
#ifndef TESSEL_THREADS
#define TESSEL_THREADS 1
#endif

namespace tessel_softmax {

constexpr int vec = TESSEL_VEC, accs = TESSEL_ACCS;
typedef float vfloat __attribute__((vector_size(vec * sizeof(float))));
typedef std::int32_t vint __attribute__((vector_size(vec * sizeof(std::int32_t))));

inline vfloat loadv(const float* p) {
  vfloat v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
inline void storev(float* p, vfloat v) { std::memcpy(p, &v, sizeof v); }
inline vfloat splat(float f) { return vfloat{} + f; }

/// e^x per lane; x <= 0 here (inputs minus their max). Scaled by 2^(n + 64)
/// and then by 2^-64, so results below fp32's smallest normal (e^-87.3)
/// round to the subnormals the reference's would; x is clamped at -104,
/// whose e^x rounds to 0.
inline vfloat exp_v(vfloat x) {
#if TESSEL_FAST_EXP
  x = x < splat(-104.0f) ? splat(-104.0f) : x;
  // n = round(x log2 e): adding and subtracting 1.5 x 2^23 rounds to nearest
  const vfloat n = (x * 1.44269504f + 12582912.0f) - 12582912.0f;
  const vfloat r = x - n * 0.693145751953125f - n * 1.428606765330187e-06f;
  vfloat p = splat(1.0f / 720);
  p = p * r + 1.0f / 120;
  p = p * r + 1.0f / 24;
  p = p * r + 1.0f / 6;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  const vint bits = (__builtin_convertvector(n, vint) + 127 + 64) << 23;  // n >= -150
  vfloat scale;
  std::memcpy(&scale, &bits, sizeof scale);
  return (p * scale) * 0x1p-64f;
#else
  for (int l = 0; l < vec; ++l) x[l] = std::exp(x[l]);
  return x;
#endif
}

inline float hmax(vfloat v) {
  float m = v[0];
  for (int l = 1; l < vec; ++l) m = std::max(m, v[l]);
  return m;
}
inline float hsum(vfloat v) {
  float s = 0;
  for (int l = 0; l < vec; ++l) s += v[l];
  return s;
}

void row(const float* x, float* y, long n) {
  const long whole = n / (accs * vec) * (accs * vec);
  float mx = -std::numeric_limits<float>::infinity(), sum = 0;
  vfloat m[accs], s[accs];  // per lane: the running max, and the sum of exponentials
  for (int a = 0; a < accs; ++a) m[a] = splat(mx), s[a] = splat(0);
#if TESSEL_ONLINE
  // one pass: the lane's sum rescaled whenever its max grows
  for (long i = 0; i < whole; i += accs * vec)
    for (int a = 0; a < accs; ++a) {
      const vfloat v = loadv(x + i + a * vec);
      const vfloat grown = v > m[a] ? v : m[a];
      s[a] = s[a] * exp_v(m[a] - grown) + exp_v(v - grown);
      m[a] = grown;
    }
#else
  for (long i = 0; i < whole; i += accs * vec)
    for (int a = 0; a < accs; ++a) {
      const vfloat v = loadv(x + i + a * vec);
      m[a] = v > m[a] ? v : m[a];
    }
#endif
  for (int a = 0; a < accs; ++a) mx = std::max(mx, hmax(m[a]));
  for (long i = whole; i < n; ++i) mx = std::max(mx, x[i]);
#if TESSEL_ONLINE
  for (int a = 0; a < accs; ++a)  // each lane's sum brought to the row's max
    if (hmax(m[a]) > -std::numeric_limits<float>::infinity()) sum += hsum(s[a] * exp_v(m[a] - mx));
#else
  for (long i = 0; i < whole; i += accs * vec)
    for (int a = 0; a < accs; ++a) s[a] += exp_v(loadv(x + i + a * vec) - mx);
  for (int a = 0; a < accs; ++a) sum += hsum(s[a]);
#endif
  for (long i = whole; i < n; ++i) sum += std::exp(x[i] - mx);
  const float inv = 1.0f / sum;
  long i = 0;
  for (; i + vec <= n; i += vec) storev(y + i, exp_v(loadv(x + i) - mx) * inv);
  for (; i < n; ++i) y[i] = std::exp(x[i] - mx) * inv;
}

void rows(const float* x, float* y, long d, long r0, long r1) {
  for (long r = r0; r < r1; ++r) row(x + r * d, y + r * d, d);
}

}  // namespace tessel_softmax

void softmax(const tessel::cpu::kernel_args& args) {
  using namespace tessel_softmax;
  const auto& x = args.in(0);
  if (x.type != tessel::cpu::dtype::fp32) throw std::runtime_error("softmax: fp32 input only");
  const long r = x.dim(0), d = x.dim(1);
  const long threads = std::max<long>(1, std::min<long>(TESSEL_THREADS, r));
  std::vector<std::thread> pool;
  for (long t = 1; t < threads; ++t)
    pool.emplace_back(rows, x.as<float>(), args.out(0).as<float>(), d, r * t / threads,
                      r * (t + 1) / threads);
  rows(x.as<float>(), args.out(0).as<float>(), d, 0, r / threads);
  for (auto& t : pool) t.join();
}
