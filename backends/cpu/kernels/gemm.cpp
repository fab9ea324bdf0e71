// gemm.cpp: the cpu backend's built-in GEMM, C[M,N] = A[M,K] B[K,N], fp32 or
// bf16 inputs (converted to fp32 as they are loaded or packed), fp32
// accumulation and output. A BLIS-style blocked kernel (Van Zee & van de
// Geijn, "BLIS: A Framework for Rapidly Instantiating BLAS Functionality",
// ACM TOMS 41(3), 2015): MC x NC x KC blocks, optionally packed into
// contiguous panels, swept by an MR x NR register tile of vector
// accumulators. Every knob is a macro from the config (docs/cpu.md);
// the defaults let the file build on its own.
#include <tessel/cpu_kernel.hpp>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <thread>
#include <utility>
#include <vector>

#ifndef TESSEL_MR
#define TESSEL_MR 4  // register tile rows
#endif
#ifndef TESSEL_NR_VECS
#define TESSEL_NR_VECS 2  // register tile columns, in vectors
#endif
#ifndef TESSEL_VEC
#define TESSEL_VEC 8  // floats per vector
#endif
#ifndef TESSEL_MC
#define TESSEL_MC 64  // block rows of A (and C)
#endif
#ifndef TESSEL_NC
#define TESSEL_NC 256  // block columns of B (and C)
#endif
#ifndef TESSEL_KC
#define TESSEL_KC 128  // block depth
#endif
#ifndef TESSEL_UNROLL
#define TESSEL_UNROLL 1  // k steps per micro-kernel iteration
#endif
#ifndef TESSEL_PREFETCH
#define TESSEL_PREFETCH 0  // k steps ahead the packed panels are prefetched (0: none)
#endif
#ifndef TESSEL_PACK_A
#define TESSEL_PACK_A 1
#endif
#ifndef TESSEL_PACK_B
#define TESSEL_PACK_B 1
#endif
#ifndef TESSEL_THREADS
#define TESSEL_THREADS 1  // row ranges of C computed at once
#endif
#if !defined(TESSEL_ORDER_M)  // block loop order, outermost first (default: n, k, m as BLIS)
#define TESSEL_ORDER_N 0
#define TESSEL_ORDER_K 1
#define TESSEL_ORDER_M 2
#endif

namespace tessel_gemm {

using tessel::cpu::bf16;

constexpr int mr = TESSEL_MR, nv = TESSEL_NR_VECS, vec = TESSEL_VEC, nr = vec * nv;
constexpr long mc = TESSEL_MC, nc = TESSEL_NC, kc = TESSEL_KC;
constexpr int unroll = TESSEL_UNROLL, prefetch = TESSEL_PREFETCH;
constexpr bool pack_a = TESSEL_PACK_A != 0, pack_b = TESSEL_PACK_B != 0;
static_assert(mc % mr == 0 && nc % nr == 0, "blocks must hold whole register tiles");

#ifdef TESSEL_DTYPE_BF16
using input = bf16;
constexpr tessel::cpu::dtype input_type = tessel::cpu::dtype::bf16;
#else
using input = float;
constexpr tessel::cpu::dtype input_type = tessel::cpu::dtype::fp32;
#endif

typedef float vfloat __attribute__((vector_size(vec * sizeof(float))));
typedef std::uint16_t vhalf __attribute__((vector_size(vec * sizeof(std::uint16_t))));
typedef std::uint32_t vword __attribute__((vector_size(vec * sizeof(std::uint32_t))));

inline float load1(const float* p) { return *p; }
inline float load1(const bf16* p) { return tessel::cpu::to_float(*p); }

inline vfloat loadv(const float* p) {
  vfloat v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
inline vfloat loadv(const bf16* p) {  // widen: a bf16 is the top half of a float
  vhalf h;
  std::memcpy(&h, p, sizeof h);
  const vword w = __builtin_convertvector(h, vword) << 16;
  vfloat v;
  std::memcpy(&v, &w, sizeof v);
  return v;
}
inline void storev(float* p, vfloat v) { std::memcpy(p, &v, sizeof v); }

template <int N, class F>
inline void repeat(F&& f) {
  [&]<int... i>(std::integer_sequence<int, i...>) { (f(i), ...); }
  (std::make_integer_sequence<int, N>{});
}

/// C[mr x nr] (row stride ldc) += the depth-`depth` product of an A panel
/// (element (m, k) at a[m * a_m + k * a_k]) and a B panel (element (k, n) at
/// b[k * b_k + n]).
template <class TA, class TB>
inline void micro(long depth, const TA* a, long a_m, long a_k, const TB* b, long b_k, float* c,
                  long ldc) {
  vfloat acc[mr][nv] = {};
  const auto step = [&](long k) {
    vfloat bv[nv];
    repeat<nv>([&](int v) { bv[v] = loadv(b + k * b_k + v * vec); });
    repeat<mr>([&](int m) {
      const float av = load1(a + m * a_m + k * a_k);
      repeat<nv>([&](int v) { acc[m][v] += bv[v] * av; });
    });
  };
  long k = 0;
  for (; k + unroll <= depth; k += unroll) {
    if constexpr (prefetch > 0) {
      __builtin_prefetch(b + (k + prefetch) * b_k);
      if constexpr (pack_a) __builtin_prefetch(a + (k + prefetch) * a_k);
    }
    repeat<unroll>([&](int u) { step(k + u); });
  }
  for (; k < depth; ++k) step(k);
  repeat<mr>([&](int m) {
    repeat<nv>([&](int v) {
      float* p = c + m * ldc + v * vec;
      storev(p, loadv(p) + acc[m][v]);
    });
  });
}

struct problem {
  const input* a;
  const input* b;
  float* c;
  long m, n, k;
};

/// One thread's buffers (on the heap: a kernel's thread-local storage
/// should stay small): packed blocks, and the edge tile and panels.
struct workspace {
  std::vector<float> a, b, tile, a_edge, b_edge;
};

/// Packs rows [i0, i0 + rows) x depth [k0, k0 + depth) of A into panels of mr rows.
void pack_a_block(const problem& p, long i0, long rows, long k0, long depth, float* out) {
  for (long ir = 0; ir < rows; ir += mr)
    for (long k = 0; k < depth; ++k)
      for (int m = 0; m < mr; ++m)
        *out++ = ir + m < rows ? load1(p.a + (i0 + ir + m) * p.k + k0 + k) : 0.0f;
}

/// Packs depth [k0, k0 + depth) x columns [j0, j0 + cols) of B into panels of nr columns.
void pack_b_block(const problem& p, long k0, long depth, long j0, long cols, float* out) {
  for (long jr = 0; jr < cols; jr += nr)
    for (long k = 0; k < depth; ++k)
      for (int n = 0; n < nr; ++n)
        *out++ = jr + n < cols ? load1(p.b + (k0 + k) * p.n + j0 + jr + n) : 0.0f;
}

/// C block (i0, j0) += A block (i0, k0) x B block (k0, j0).
void block(const problem& p, workspace& w, long i0, long rows, long j0, long cols, long k0,
           long depth) {
  for (long jr = 0; jr < cols; jr += nr) {
    const long n_here = std::min<long>(nr, cols - jr);
    for (long ir = 0; ir < rows; ir += mr) {
      const long m_here = std::min<long>(mr, rows - ir);
      const bool whole = m_here == mr && n_here == nr;
      float* c = p.c + (i0 + ir) * p.n + j0 + jr;
      float* target = whole ? c : w.tile.data();
      const long ldc = whole ? p.n : nr;
      if (!whole) std::fill(w.tile.begin(), w.tile.end(), 0.0f);
      // Operands: the packed panel, the matrix itself, or (an unpacked
      // operand at an edge) a small padded copy of the panel.
      const auto run = [&](const auto* a, long a_m, long a_k) {
        if (pack_b) {
          micro(depth, a, a_m, a_k, w.b.data() + jr * depth, nr, target, ldc);
        } else if (n_here == nr) {
          micro(depth, a, a_m, a_k, p.b + k0 * p.n + j0 + jr, p.n, target, ldc);
        } else {
          pack_b_block(p, k0, depth, j0 + jr, n_here, w.b_edge.data());
          micro(depth, a, a_m, a_k, w.b_edge.data(), nr, target, ldc);
        }
      };
      if (pack_a) {
        run(w.a.data() + ir * depth, 1, mr);
      } else if (m_here == mr) {
        run(p.a + (i0 + ir) * p.k + k0, p.k, 1);
      } else {
        pack_a_block(p, i0 + ir, m_here, k0, depth, w.a_edge.data());
        run(static_cast<const float*>(w.a_edge.data()), 1, mr);
      }
      if (!whole)
        for (long m = 0; m < m_here; ++m)
          for (long n = 0; n < n_here; ++n) c[m * p.n + n] += w.tile[m * nr + n];
    }
  }
}

/// Rows [row0, row1) of C, every block in the configured loop order.
void rows(const problem& p, long row0, long row1) {
  thread_local workspace w;
  if (pack_a) w.a.resize(static_cast<std::size_t>(mc * kc));
  if (pack_b) w.b.resize(static_cast<std::size_t>(nc * kc));
  w.tile.resize(mr * nr);
  w.a_edge.resize(static_cast<std::size_t>(mr * kc));
  w.b_edge.resize(static_cast<std::size_t>(kc * nr));
  for (long i = row0; i < row1; ++i) std::fill(p.c + i * p.n, p.c + (i + 1) * p.n, 0.0f);
  const long extent[3] = {row1 - row0, p.n, p.k}, size[3] = {mc, nc, kc};
  int order[3];  // dimension (0 m, 1 n, 2 k) at each loop level
  order[TESSEL_ORDER_M] = 0;
  order[TESSEL_ORDER_N] = 1;
  order[TESSEL_ORDER_K] = 2;
  long packed_a[2] = {-1, -1}, packed_b[2] = {-1, -1};  // (i, k) and (k, j) of the packed blocks
  long at[3];
  for (at[order[0]] = 0; at[order[0]] < extent[order[0]]; at[order[0]] += size[order[0]])
    for (at[order[1]] = 0; at[order[1]] < extent[order[1]]; at[order[1]] += size[order[1]])
      for (at[order[2]] = 0; at[order[2]] < extent[order[2]]; at[order[2]] += size[order[2]]) {
        const long i0 = row0 + at[0], j0 = at[1], k0 = at[2];
        const long m_here = std::min(mc, row1 - i0), n_here = std::min(nc, p.n - j0),
                   k_here = std::min(kc, p.k - k0);
        if (pack_a && (packed_a[0] != i0 || packed_a[1] != k0)) {
          pack_a_block(p, i0, m_here, k0, k_here, w.a.data());
          packed_a[0] = i0;
          packed_a[1] = k0;
        }
        if (pack_b && (packed_b[0] != k0 || packed_b[1] != j0)) {
          pack_b_block(p, k0, k_here, j0, n_here, w.b.data());
          packed_b[0] = k0;
          packed_b[1] = j0;
        }
        block(p, w, i0, m_here, j0, n_here, k0, k_here);
      }
}

}  // namespace tessel_gemm

void gemm(const tessel::cpu::kernel_args& args) {
  using namespace tessel_gemm;
  const auto& a = args.in(0);
  const auto& b = args.in(1);
  const auto& c = args.out(0);
  if (a.type != input_type || b.type != input_type || c.type != tessel::cpu::dtype::fp32)
    throw std::runtime_error("gemm: A and B must be of the space's dtype, C fp32");
  const problem p{a.as<input>(), b.as<input>(), c.as<float>(), a.dim(0), b.dim(1), a.dim(1)};
  const long threads = std::max<long>(1, std::min<long>(TESSEL_THREADS, (p.m + mr - 1) / mr));
  if (threads == 1) {
    rows(p, 0, p.m);
    return;
  }
  // Contiguous row ranges of whole register tiles, one per thread.
  const long tiles = (p.m + mr - 1) / mr;
  std::vector<std::thread> pool;
  for (long t = 1; t < threads; ++t)
    pool.emplace_back(rows, std::cref(p), std::min(p.m, tiles * t / threads * mr),
                      std::min(p.m, tiles * (t + 1) / threads * mr));
  rows(p, 0, std::min(p.m, tiles / threads * mr));
  for (auto& t : pool) t.join();
}
