// transpose.cpp: your own kernel for the cpu backend (docs/cpu.md, "Your own
// kernel"): B = A^T for a rows x cols fp32 matrix, in tile x tile blocks so
// that both the reads and the writes stay in cache. The knobs arrive as
// macros (TESSEL_TILE, TESSEL_INNER_...); the shape at run time.
//   tessel tune examples/cpu/transpose.tsl --budget 20 --backend \
//     "cpu:kernel=examples/cpu/transpose.cpp:transpose,reference=examples/cpu/transpose.cpp:transpose_reference,inputs=A:ROWSxCOLS,outputs=B:COLSxROWS"
#include <tessel/cpu_kernel.hpp>

#include <algorithm>
#include <cstdint>

#ifndef TESSEL_TILE
#define TESSEL_TILE 32  // block edge, in elements
#endif
#ifndef TESSEL_INNER_ROWS  // which index the innermost loop walks (perm(rows, cols))
#define TESSEL_INNER_ROWS 1
#define TESSEL_INNER_COLS 0
#endif

void transpose(const tessel::cpu::kernel_args& args) {
  const auto& a = args.in(0);
  const std::int64_t rows = a.dim(0), cols = a.dim(1), tile = TESSEL_TILE;
  const float* in = a.as<float>();
  float* out = args.out(0).as<float>();
  for (std::int64_t i0 = 0; i0 < rows; i0 += tile)
    for (std::int64_t j0 = 0; j0 < cols; j0 += tile) {
      const std::int64_t i1 = std::min(i0 + tile, rows), j1 = std::min(j0 + tile, cols);
      if constexpr (TESSEL_INNER_COLS > TESSEL_INNER_ROWS) {  // contiguous reads
        for (std::int64_t i = i0; i < i1; ++i)
          for (std::int64_t j = j0; j < j1; ++j) out[j * rows + i] = in[i * cols + j];
      } else {  // contiguous writes
        for (std::int64_t j = j0; j < j1; ++j)
          for (std::int64_t i = i0; i < i1; ++i) out[j * rows + i] = in[i * cols + j];
      }
    }
}

/// The reference: the plain loop, no tiles (run by tessel in a process of its own).
void transpose_reference(const tessel::cpu::kernel_args& args) {
  const auto& a = args.in(0);
  const float* in = a.as<float>();
  float* out = args.out(0).as<float>();
  for (std::int64_t i = 0; i < a.dim(0); ++i)
    for (std::int64_t j = 0; j < a.dim(1); ++j) out[j * a.dim(0) + i] = in[i * a.dim(1) + j];
}
