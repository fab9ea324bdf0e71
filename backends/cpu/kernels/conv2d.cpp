// conv2d.cpp: the cpu backend's built-in 2-D convolution (a stencil), fp32,
// "valid": y[i, j] = sum over r < R, s < S of x[i + r, j + s] w[r, s], with
// x of (H + R - 1) x (W + S - 1) and y of H x W. Output tiles of tile_h x
// tile_w (cache blocking), `rows` output rows computed together (each input
// row loaded once for all of them), `vec` output columns per vector, the
// filter loops in either order, threads over the tile rows.
#include <tessel/cpu_kernel.hpp>

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <thread>
#include <vector>

#ifndef TESSEL_VEC
#define TESSEL_VEC 8  // output columns per vector
#endif
#ifndef TESSEL_ROWS
#define TESSEL_ROWS 1  // output rows computed together
#endif
#ifndef TESSEL_TILE_H
#define TESSEL_TILE_H 32
#endif
#ifndef TESSEL_TILE_W
#define TESSEL_TILE_W 256
#endif
#ifndef TESSEL_FILTER_R  // filter loop order, outermost first (default: r, s)
#define TESSEL_FILTER_R 0
#define TESSEL_FILTER_S 1
#endif
#ifndef TESSEL_THREADS
#define TESSEL_THREADS 1
#endif

namespace tessel_conv2d {

constexpr int vec = TESSEL_VEC, rows_at_once = TESSEL_ROWS;
constexpr long tile_h = TESSEL_TILE_H, tile_w = TESSEL_TILE_W;
constexpr bool r_outer = TESSEL_FILTER_R < TESSEL_FILTER_S;
typedef float vfloat __attribute__((vector_size(vec * sizeof(float))));

inline vfloat loadv(const float* p) {
  vfloat v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

struct problem {
  const float* x;
  const float* w;
  float* y;
  long h, wd, r, s, xw;  // output rows, output columns, filter, input row length
};

/// Output rows [i, i + n) (n <= rows_at_once), columns [j, j + vec).
inline void vectors(const problem& p, long i, long n, long j) {
  vfloat acc[rows_at_once] = {};
  const auto tap = [&](long r, long s) {
    const float wv = p.w[r * p.s + s];
    for (int q = 0; q < rows_at_once; ++q)
      if (q < n) acc[q] += loadv(p.x + (i + q + r) * p.xw + j + s) * wv;
  };
  if constexpr (r_outer) {
    for (long r = 0; r < p.r; ++r)
      for (long s = 0; s < p.s; ++s) tap(r, s);
  } else {
    for (long s = 0; s < p.s; ++s)
      for (long r = 0; r < p.r; ++r) tap(r, s);
  }
  for (long q = 0; q < n; ++q) std::memcpy(p.y + (i + q) * p.wd + j, &acc[q], sizeof(vfloat));
}

inline void scalar(const problem& p, long i, long j) {
  float sum = 0;
  for (long r = 0; r < p.r; ++r)
    for (long s = 0; s < p.s; ++s) sum += p.x[(i + r) * p.xw + j + s] * p.w[r * p.s + s];
  p.y[i * p.wd + j] = sum;
}

void tiles(const problem& p, long row0, long row1) {
  for (long ti = row0; ti < row1; ti += tile_h)
    for (long tj = 0; tj < p.wd; tj += tile_w) {
      const long i_end = std::min(ti + tile_h, row1), j_end = std::min(tj + tile_w, p.wd);
      for (long i = ti; i < i_end; i += rows_at_once) {
        const long n = std::min<long>(rows_at_once, i_end - i);
        long j = tj;
        for (; j + vec <= j_end; j += vec) vectors(p, i, n, j);
        for (; j < j_end; ++j)
          for (long q = 0; q < n; ++q) scalar(p, i + q, j);
      }
    }
}

}  // namespace tessel_conv2d

void conv2d(const tessel::cpu::kernel_args& args) {
  using namespace tessel_conv2d;
  const auto& x = args.in(0);
  const auto& w = args.in(1);
  const auto& y = args.out(0);
  if (x.type != tessel::cpu::dtype::fp32 || w.type != tessel::cpu::dtype::fp32)
    throw std::runtime_error("conv2d: fp32 inputs only");
  const problem p{x.as<float>(), w.as<float>(), y.as<float>(), y.dim(0),
                  y.dim(1),      w.dim(0),      w.dim(1),      x.dim(1)};
  if (x.dim(0) != p.h + p.r - 1 || p.xw != p.wd + p.s - 1)
    throw std::runtime_error("conv2d: x must be (H + R - 1) x (W + S - 1)");
  const long threads =
      std::max<long>(1, std::min<long>(TESSEL_THREADS, (p.h + tile_h - 1) / tile_h));
  const long blocks = (p.h + tile_h - 1) / tile_h;
  std::vector<std::thread> pool;
  const auto range = [&](long t) { return std::min(p.h, blocks * t / threads * tile_h); };
  for (long t = 1; t < threads; ++t) pool.emplace_back(tiles, std::cref(p), range(t), range(t + 1));
  tiles(p, 0, range(1));
  for (auto& t : pool) t.join();
}
