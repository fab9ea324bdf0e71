// matmul_kernel.cpp: the tiled matmul of the gate's corpus. Built with
// optimization even in Debug (tests/gate/CMakeLists.txt) so a full check
// (ten candidate runs and nine references of a 200x300x260 product) stays
// in tens of milliseconds.
#include "matmul_kernel.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <stdexcept>

namespace tessel::testing {

std::string_view to_string(flaw f) {
  switch (f) {
    case flaw::none: return "none";
    case flaw::tail_tiles_dropped: return "tail_tiles_dropped";
    case flaw::k_tile_skipped: return "k_tile_skipped";
    case flaw::output_as_bf16: return "output_as_bf16";
    case flaw::output_as_fp8: return "output_as_fp8";
    case flaw::constant: return "constant";
    case flaw::zeros: return "zeros";
    case flaw::ignores_b: return "ignores_b";
    case flaw::nondeterministic: return "nondeterministic";
    case flaw::arrival_order: return "arrival_order";
    case flaw::unstable: return "unstable";
    case flaw::nan_element: return "nan_element";
    case flaw::inf_element: return "inf_element";
    case flaw::hard_coded: return "hard_coded";
    case flaw::throws: return "throws";
  }
  return "?";
}

std::vector<tensor_spec> matmul_spec::inputs() const {
  return {{"A", {s_.m, s_.k}, s_.in, 0}, {"B", {s_.k, s_.n}, s_.in, 0}};
}

std::vector<tensor_spec> matmul_spec::outputs() const { return {{"C", {s_.m, s_.n}, s_.out, 0}}; }

probe_values matmul_spec::reference(std::span<const input_tensor> in,
                                    const probe_points& where) const {
  // Rows of A and columns of B are drawn once per call.
  std::vector<std::vector<double>> rows(static_cast<std::size_t>(s_.m));
  std::vector<std::vector<double>> cols(static_cast<std::size_t>(s_.n));
  probe_values out(1);
  out[0].reserve(where.at(0).size());
  for (const std::int64_t flat : where.at(0)) {
    const std::int64_t i = flat / s_.n, j = flat % s_.n;
    auto& a = rows[static_cast<std::size_t>(i)];
    if (a.empty())
      for (std::int64_t t = 0; t < s_.k; ++t) a.push_back(in[0].at(i, t));
    auto& b = cols[static_cast<std::size_t>(j)];
    if (b.empty())
      for (std::int64_t t = 0; t < s_.k; ++t) b.push_back(in[1].at(t, j));
    double sum = 0;
    for (std::size_t t = 0; t < a.size(); ++t) sum += a[t] * b[t];
    out[0].push_back(sum);
  }
  return out;
}

std::vector<float> floats_of(const hidden_input& t) {
  std::vector<float> v(static_cast<std::size_t>(t.spec().elements()));
  for (std::size_t i = 0; i < v.size(); ++i)
    v[i] = static_cast<float>(t.at(static_cast<std::int64_t>(i)));
  return v;
}

std::vector<double> tiled_matmul::compute(const std::vector<float>& a_values,
                                          const std::vector<float>& b_values) const {
  const std::vector<float> ones(b_values.size(), 1.0f);
  const float* a = a_values.data();
  const float* b = flaw_ == flaw::ignores_b ? ones.data() : b_values.data();
  const std::int64_t m = s_.m, n = s_.n, k = s_.k;
  const bool drop_tails = flaw_ == flaw::tail_tiles_dropped;
  std::vector<float> acc(static_cast<std::size_t>(m * n), 0.0f);
  std::vector<float> partial(static_cast<std::size_t>(s_.tile_n));
  std::vector<std::int64_t> k_tiles;
  for (std::int64_t k0 = 0; k0 < k; k0 += s_.tile_k) k_tiles.push_back(k0);
  if (flaw_ == flaw::arrival_order) {  // the order the partial sums arrive in, new every run
    std::mt19937_64 order{std::random_device{}()};
    std::shuffle(k_tiles.begin(), k_tiles.end(), order);
  }
  for (std::int64_t i0 = 0; i0 < m; i0 += s_.tile_m) {
    const std::int64_t i1 = std::min(i0 + s_.tile_m, m);
    if (drop_tails && i1 - i0 < s_.tile_m) continue;
    for (std::int64_t j0 = 0; j0 < n; j0 += s_.tile_n) {
      const std::int64_t j1 = std::min(j0 + s_.tile_n, n);
      if (drop_tails && j1 - j0 < s_.tile_n) continue;
      for (const std::int64_t k0 : k_tiles) {
        const std::int64_t k1 = std::min(k0 + s_.tile_k, k);
        if (flaw_ == flaw::k_tile_skipped && k1 == k) continue;
        for (std::int64_t i = i0; i < i1; ++i) {  // one K tile's partial sums, then PSUM +=
          std::fill(partial.begin(), partial.end(), 0.0f);
          for (std::int64_t kk = k0; kk < k1; ++kk) {
            const float aik = a[i * k + kk];
            const float* brow = b + kk * n;
            for (std::int64_t j = j0; j < j1; ++j) partial[j - j0] += aik * brow[j];
          }
          for (std::int64_t j = j0; j < j1; ++j) acc[i * n + j] += partial[j - j0];
        }
      }
    }
  }
  element_type stored = s_.out;
  if (flaw_ == flaw::output_as_bf16) stored = element_type::bf16;
  if (flaw_ == flaw::output_as_fp8) stored = element_type::fp8_e4m3;
  std::vector<double> c(acc.size());
  for (std::size_t i = 0; i < c.size(); ++i) c[i] = round_to(s_.out, round_to(stored, acc[i]));
  return c;
}

output_values tiled_matmul::run(std::span<const hidden_input> in) const {
  const int call = runs_++;
  if (flaw_ == flaw::throws) throw std::runtime_error("PSUM bank 9 does not exist");
  if (flaw_ == flaw::hard_coded) {
    const std::lock_guard lock(memo_mutex_);
    if (!memo_.empty()) return memo_;
  }
  std::vector<double> c = compute(floats_of(in[0]), floats_of(in[1]));
  switch (flaw_) {
    case flaw::constant: std::fill(c.begin(), c.end(), 1.0); break;
    case flaw::zeros: std::fill(c.begin(), c.end(), 0.0); break;
    case flaw::nan_element: c[123 * s_.n + 45] = std::numeric_limits<double>::quiet_NaN(); break;
    case flaw::inf_element: c[7 * s_.n + 299] = std::numeric_limits<double>::infinity(); break;
    case flaw::nondeterministic:
      if (call % 2 == 1) c[5] = std::nextafter(static_cast<float>(c[5]), 1e30f);
      break;
    case flaw::unstable:  // the largest element of row 0, 1% off
      if (call % 2 == 1) {
        const auto top = std::max_element(c.begin(), c.begin() + s_.n, [](double x, double y) {
          return std::abs(x) < std::abs(y);
        });
        *top *= 1.01;
      }
      break;
    default: break;
  }
  output_values out{std::move(c)};
  if (flaw_ == flaw::hard_coded) {
    const std::lock_guard lock(memo_mutex_);
    memo_ = out;
  }
  return out;
}

output_values reference_product(const std::vector<std::vector<double>>& in, const matmul_shape& s) {
  std::vector<double> c(static_cast<std::size_t>(s.m * s.n), 0.0);
  for (std::int64_t i = 0; i < s.m; ++i)
    for (std::int64_t t = 0; t < s.k; ++t)
      for (std::int64_t j = 0; j < s.n; ++j)
        c[static_cast<std::size_t>(i * s.n + j)] += in[0][static_cast<std::size_t>(i * s.k + t)] *
                                                    in[1][static_cast<std::size_t>(t * s.n + j)];
  return {c};
}

std::vector<honest_control> honest_controls(matmul_shape s) {
  matmul_shape bf16 = s;
  bf16.out = element_type::bf16;
  return {{"plain", s, flaw::none},
          {"split-K", s, flaw::nondeterministic},
          {"atomics in arrival order", s, flaw::arrival_order},
          {"bf16 outputs", bf16, flaw::none}};
}

}  // namespace tessel::testing
