// increment_kernels.cpp: host kernels for the cpu backend that recompute only
// what changed since their previous call (tests/gate/class15_test.cpp,
// docs/gate.md "Round ten (b)"). The cpu loader's timing loop changes every
// input between calls; a kernel that keeps its previous inputs and outputs
// (in its process, across the loop's calls), diffs the new inputs against
// them and redoes only the outputs the changed elements reach is right, and
// as fast as the changes are few.
//   inc_matmul_honest    C = A B (A: M x K, B: K x N, fp32), every call
//   inc_matmul           the same answer: recomputes only the rows of C whose
//                        row of A changed and the columns whose column of B
//                        changed, copies the rest from its kept C
//   inc_matmul_delta     the same answer, updated by the change itself: each
//                        changed element of A adds a multiple of a row of B
//                        to a row of C, each changed element of B a multiple
//                        of a column of A to a column (its rounding drifts
//                        from the reference with every call)
//   inc_transpose_honest B = A^T (A: R x C, fp32), every call
//   inc_transpose        the same answer: writes only the elements of B whose
//                        element of A changed (its kept B copied whole when
//                        the loader poisoned the output)
//   matmul_reference, transpose_reference  the references (fp64 sums)
// An incremental kernel appends one line to $TESSEL_REDTEAM_LOG when its
// process exits (not per call, which would time the log): "NAME calls N
// full F rows_min R cols_min Q changed E", where F calls computed everything
// (the first in the process), and over the other calls R and Q are the fewest distinct rows and
// columns of the inputs (A's rows and B's columns for the matmul) a call's changes reached, and E
// the input elements changed in all.
#include <tessel/cpu_kernel.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

namespace {

/// What an incremental kernel counts over its process's calls.
struct counts {
  const char* name;
  std::uint64_t calls = 0, full = 0, changed = 0;
  std::int64_t rows_min = std::numeric_limits<std::int64_t>::max(), cols_min = rows_min;
  bool registered = false;
  void reached(std::int64_t rows, std::int64_t cols) {
    rows_min = std::min(rows_min, rows);
    cols_min = std::min(cols_min, cols);
  }
};

counts matmul_counts{"inc_matmul"}, transpose_counts{"inc_transpose"};

void write_counts(const counts& c) {
  const char* path = std::getenv("TESSEL_REDTEAM_LOG");  // NOLINT(concurrency-mt-unsafe)
  if (path == nullptr || c.calls == 0) return;
  const bool none = c.calls == c.full;
  std::ofstream(path, std::ios::app)
      << c.name << " calls " << c.calls << " full " << c.full << " rows_min "
      << (none ? -1 : c.rows_min) << " cols_min " << (none ? -1 : c.cols_min) << " changed "
      << c.changed << '\n';
}

void register_counts(counts& c) {
  if (c.registered) return;
  c.registered = true;
  if (&c == &matmul_counts)
    std::atexit([] { write_counts(matmul_counts); });
  else
    std::atexit([] { write_counts(transpose_counts); });
}

/// Whether the loader poisoned the output since the last call (it fills
/// outputs with NaN before every sample): the first element tells.
bool poisoned(const float* out) { return std::isnan(out[0]); }

void matmul_rows(const float* a, const float* b, float* c, std::int64_t i0, std::int64_t i1,
                 std::int64_t k, std::int64_t n) {
  for (std::int64_t i = i0; i < i1; ++i) {
    float* row = c + i * n;
    std::fill(row, row + n, 0.0F);
    for (std::int64_t p = 0; p < k; ++p) {
      const float x = a[i * k + p];
      const float* brow = b + p * n;
      for (std::int64_t j = 0; j < n; ++j) row[j] += x * brow[j];
    }
  }
}

/// A matmul call's operands: C (m x n) = A (m x k) B (k x n), fp32.
struct matmul_operands {
  std::int64_t m, k, n;
  const float* a;
  const float* b;
  float* c;
};

matmul_operands operands(const tessel::cpu::kernel_args& args) {
  const auto& a = args.in(0);
  const auto& b = args.in(1);
  return {a.dim(0), a.dim(1), b.dim(1), a.as<float>(), b.as<float>(), args.out(0).as<float>()};
}

/// The kept state of inc_matmul: the previous call's inputs and output.
struct matmul_state {
  std::vector<float> a, b, c;

  /// On the first call at these sizes: keeps the inputs, computes C whole
  /// into `out` and says so; later calls find the state kept.
  bool start(const float* a_in, const float* b_in, float* out, std::int64_t m, std::int64_t k,
             std::int64_t n) {
    if (a.size() == static_cast<std::size_t>(m * k) && b.size() == static_cast<std::size_t>(k * n))
      return false;
    a.assign(a_in, a_in + m * k);
    b.assign(b_in, b_in + k * n);
    c.resize(static_cast<std::size_t>(m * n));
    matmul_rows(a_in, b_in, c.data(), 0, m, k, n);
    std::copy(c.begin(), c.end(), out);
    return true;
  }
} kept_mm;

}  // namespace

void inc_matmul_honest(const tessel::cpu::kernel_args& args) {
  const auto& a = args.in(0);
  const auto& b = args.in(1);
  matmul_rows(a.as<float>(), b.as<float>(), args.out(0).as<float>(), 0, a.dim(0), a.dim(1),
              b.dim(1));
}

void inc_matmul(const tessel::cpu::kernel_args& args) {
  const auto [m, k, n, a, b, out] = operands(args);
  auto& s = kept_mm;
  register_counts(matmul_counts);
  ++matmul_counts.calls;
  if (s.start(a, b, out, m, k, n)) {
    ++matmul_counts.full;
    return;
  }
  // The diff: which rows of A and which columns of B changed.
  std::vector<std::int64_t> rows, cols;
  std::vector<char> col_changed(static_cast<std::size_t>(n), 0);
  for (std::int64_t i = 0; i < m; ++i) {
    bool changed = false;
    for (std::int64_t p = 0; p < k; ++p)
      if (a[i * k + p] != s.a[i * k + p]) {
        changed = true;
        ++matmul_counts.changed;
        s.a[i * k + p] = a[i * k + p];
      }
    if (changed) rows.push_back(i);
  }
  for (std::int64_t p = 0; p < k; ++p)
    for (std::int64_t j = 0; j < n; ++j)
      if (b[p * n + j] != s.b[p * n + j]) {
        col_changed[j] = 1;
        ++matmul_counts.changed;
        s.b[p * n + j] = b[p * n + j];
      }
  for (std::int64_t j = 0; j < n; ++j)
    if (col_changed[j] != 0) cols.push_back(j);
  matmul_counts.reached(static_cast<std::int64_t>(rows.size()),
                        static_cast<std::int64_t>(cols.size()));
  float* c = s.c.data();
  for (const auto i : rows) matmul_rows(a, b, c, i, i + 1, k, n);
  for (const auto j : cols)
    for (std::int64_t i = 0; i < m; ++i) {
      float sum = 0;
      for (std::int64_t p = 0; p < k; ++p) sum += a[i * k + p] * b[p * n + j];
      c[i * n + j] = sum;
    }
  if (poisoned(out)) {
    std::copy(s.c.begin(), s.c.end(), out);
    return;
  }
  for (const auto i : rows) std::copy(c + i * n, c + (i + 1) * n, out + i * n);
  for (const auto j : cols)
    for (std::int64_t i = 0; i < m; ++i) out[i * n + j] = c[i * n + j];
}

namespace {
matmul_state kept_delta;  ///< inc_matmul_delta's previous inputs and output
}  // namespace

void inc_matmul_delta(const tessel::cpu::kernel_args& args) {
  const auto [m, k, n, a, b, out] = operands(args);
  auto& s = kept_delta;
  if (s.start(a, b, out, m, k, n)) return;
  // C' = A' B' = A B + (A' - A) B + A' (B' - B): each changed element of A
  // adds a multiple of a row of the old B to a row of C, then each changed
  // element of B a multiple of a column of the new A to a column of C.
  float* c = s.c.data();
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t p = 0; p < k; ++p) {
      const float d = a[i * k + p] - s.a[i * k + p];
      if (d == 0) continue;
      const float* brow = s.b.data() + p * n;
      for (std::int64_t j = 0; j < n; ++j) c[i * n + j] += d * brow[j];
      s.a[i * k + p] = a[i * k + p];
    }
  for (std::int64_t p = 0; p < k; ++p)
    for (std::int64_t j = 0; j < n; ++j) {
      const float d = b[p * n + j] - s.b[p * n + j];
      if (d == 0) continue;
      for (std::int64_t i = 0; i < m; ++i) c[i * n + j] += a[i * k + p] * d;
      s.b[p * n + j] = b[p * n + j];
    }
  std::copy(s.c.begin(), s.c.end(), out);
}

void matmul_reference(const tessel::cpu::kernel_args& args) {
  const auto [m, k, n, a, b, c] = operands(args);
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t j = 0; j < n; ++j) {
      double sum = 0;
      for (std::int64_t p = 0; p < k; ++p)
        sum += static_cast<double>(a[i * k + p]) * static_cast<double>(b[p * n + j]);
      c[i * n + j] = static_cast<float>(sum);
    }
}

namespace {
std::vector<float> kept_a, kept_b;  ///< inc_transpose's previous input and output
}  // namespace

void inc_transpose_honest(const tessel::cpu::kernel_args& args) {
  const auto& a = args.in(0);
  const std::int64_t rows = a.dim(0), cols = a.dim(1);
  const float* in = a.as<float>();
  float* out = args.out(0).as<float>();
  for (std::int64_t i = 0; i < rows; ++i)
    for (std::int64_t j = 0; j < cols; ++j) out[j * rows + i] = in[i * cols + j];
}

void inc_transpose(const tessel::cpu::kernel_args& args) {
  const auto& a = args.in(0);
  const std::int64_t rows = a.dim(0), cols = a.dim(1);
  const float* in = a.as<float>();
  float* out = args.out(0).as<float>();
  register_counts(transpose_counts);
  ++transpose_counts.calls;
  if (kept_a.size() != static_cast<std::size_t>(rows * cols)) {
    kept_a.assign(in, in + rows * cols);
    inc_transpose_honest(args);
    kept_b.assign(out, out + rows * cols);
    ++transpose_counts.full;
    return;
  }
  // The diff, in A's memory order; only what changed is written (to the
  // kept B, and to the output unless the loader poisoned it: then a copy).
  const bool copy = poisoned(out);
  static std::vector<char> row_hit, col_hit;
  row_hit.assign(static_cast<std::size_t>(rows), 0);
  col_hit.assign(static_cast<std::size_t>(cols), 0);
  std::int64_t rows_hit = 0, cols_hit = 0;
  for (std::int64_t i = 0; i < rows; ++i)
    for (std::int64_t j = 0; j < cols; ++j) {
      const std::int64_t e = i * cols + j;
      if (in[e] == kept_a[e]) continue;
      kept_a[e] = in[e];
      kept_b[j * rows + i] = in[e];
      if (!copy) out[j * rows + i] = in[e];
      ++transpose_counts.changed;
      rows_hit += row_hit[i] == 0 ? 1 : 0;
      cols_hit += col_hit[j] == 0 ? 1 : 0;
      row_hit[i] = col_hit[j] = 1;
    }
  if (copy) std::copy(kept_b.begin(), kept_b.end(), out);
  transpose_counts.reached(rows_hit, cols_hit);
}

void transpose_reference(const tessel::cpu::kernel_args& args) { inc_transpose_honest(args); }
