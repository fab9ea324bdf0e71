// matmul_functional.cpp: the matmul workload's functional executor. It
// follows the plan of matmul_plan.hpp element by element: products of the
// input type accumulated in fp32 per PSUM accumulation group (one
// instruction tile of mm_k rows after another, in k order), the groups of a
// C block closed per k block or held open across them as the plan's
// accumulation says, partial sums added by the evict engine in fp32 and kept
// in acc_dtype, the result cast to the output type. docs/simulator.md,
// "Functional mode".
#include "../../functional.hpp"
#include "matmul_plan.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>

namespace tessel::sim::mm {
namespace {

class matmul_kernel final : public functional_kernel {
 public:
  explicit matmul_kernel(const plan& pl) : pl_(pl), p_(pl_.p) {}

  [[nodiscard]] std::vector<tensor_spec> inputs() const override {
    const auto in = p_.in_format;
    std::vector<std::int64_t> a_shape{p_.size_k, p_.size_m};
    if (p_.a_mk) a_shape = {p_.size_m, p_.size_k};
    std::vector<tensor_spec> out{{"A", a_shape, in}, {"B", {p_.size_k, p_.size_n}, in}};
    if (p_.scaled) out.push_back({"scale", {p_.size_m, 1}, element_type::fp32});
    return out;
  }
  [[nodiscard]] std::vector<tensor_spec> outputs() const override {
    return {{"C", {p_.size_m, p_.size_n}, element_of(p_.out)}};
  }

  /// Rows and columns of C from the first, the tail and random interior
  /// blocks (pick_indices), every combination: whole blocks when K is short,
  /// a few rows x columns of them when the reduction is long (each probed
  /// row or column reads K inputs).
  [[nodiscard]] probe_points probes(rng& r) const override {
    const std::int64_t want = std::clamp<std::int64_t>(probe_budget / (2 * p_.size_k), 3, 256);
    const auto rows = pick_indices(p_.size_m, p_.tile[dim_m], want, r);
    const auto cols = pick_indices(p_.size_n, p_.tile[dim_n], want, r);
    return {grid(rows, cols, p_.size_n)};
  }

  /// The output type's default, widened by the partial sums rounded to
  /// acc_dtype once per k block (a random walk: 2 sqrt(blocks) u).
  [[nodiscard]] std::vector<double> tolerances() const override {
    double tol = default_tolerance(element_of(p_.out));
    if (pl_.acc == accumulation::sbuf)
      tol += 2 * std::sqrt(static_cast<double>(pl_.nb[dim_k])) * unit_roundoff(element_of(p_.acc));
    return {tol};
  }

  [[nodiscard]] probe_values reference(std::span<const input_tensor> in,
                                       const probe_points& where) const override {
    return evaluate(in, where,
                    [](const std::vector<float>& a, const std::vector<float>& b, double scale) {
                      return scale * exact_dot(a, b);
                    });
  }

  /// reference(), and with accumulation = sbuf over several k blocks the
  /// spread of the partial sums a correct schedule stores in acc_dtype
  /// (gate_spec::reference_with_spread): where the blocks cancel (heavy-tailed
  /// inputs), rounding a large partial moves the result by far more than
  /// u x (|reference| + scale).
  [[nodiscard]] probe_values reference_with_spread(std::span<const input_tensor> in,
                                                   const probe_points& where,
                                                   probe_values& spread) const override {
    spread.clear();
    if (pl_.acc != accumulation::sbuf || pl_.nb[dim_k] < 2) return reference(in, where);
    spread.assign(1, std::vector<double>(where.at(0).size(), 0.0));
    std::vector<std::size_t> at;  // the probes dot() is called for, in order
    for (std::size_t q = 0; q < where.at(0).size(); ++q)
      if (computed(where.at(0)[q] / p_.size_n, where.at(0)[q] % p_.size_n)) at.push_back(q);
    std::size_t call = 0;
    const std::int64_t tile_k = p_.tile[dim_k];
    return evaluate(
        in, where, [&](const std::vector<float>& a, const std::vector<float>& b, double scale) {
          double sum = 0, squares = 0;
          for (std::int64_t k0 = 0; k0 < p_.size_k; k0 += tile_k) {
            const auto n = static_cast<std::size_t>(std::min(tile_k, p_.size_k - k0));
            const auto from = static_cast<std::size_t>(k0);
            sum += scale * exact_dot(std::span(a).subspan(from, n), std::span(b).subspan(from, n));
            if (k0 + tile_k < p_.size_k) squares += sum * sum;  // stored rounded
          }
          spread[0][at.at(call++)] = std::sqrt(squares);
          return sum;
        });
  }

 protected:
  [[nodiscard]] probe_values execute(std::span<const input_tensor> in,
                                     const probe_points& where) const override {
    return evaluate(in, where,
                    [&](const std::vector<float>& a, const std::vector<float>& b, double scale) {
                      return element(a, b, static_cast<float>(scale));
                    });
  }

 private:
  /// Calls dot(A row i, B column j, scale[i] or 1) for every probed (i, j), reading each
  /// probed row of A and column of B once; (i, j) outside the blocks the
  /// schedule computes (drop_tail) stay 0.
  template <class Dot>
  probe_values evaluate(std::span<const input_tensor> in, const probe_points& where,
                        Dot dot) const {
    return memo_.with(
        in, [&](operands& read) { return evaluate(in, where, read.a_rows, read.b_cols, dot); });
  }

  template <class Dot>
  probe_values evaluate(std::span<const input_tensor> in, const probe_points& where,
                        std::map<std::int64_t, std::vector<float>>& a_rows,
                        std::map<std::int64_t, std::vector<float>>& b_cols, Dot dot) const {
    const std::int64_t n = p_.size_n, k = p_.size_k;
    probe_values out(1);
    out[0].reserve(where.at(0).size());
    for (const auto flat : where.at(0)) {
      const std::int64_t i = flat / n, j = flat % n;
      if (!computed(i, j)) {
        out[0].push_back(0);
        continue;
      }
      auto& a = a_rows[i];
      if (a.empty()) {
        a.resize(static_cast<std::size_t>(k));
        for (std::int64_t t = 0; t < k; ++t)
          a[static_cast<std::size_t>(t)] =
              static_cast<float>(p_.a_mk ? in[0].at(i, t) : in[0].at(t, i));
      }
      auto& b = b_cols[j];
      if (b.empty()) {
        b.resize(static_cast<std::size_t>(k));
        for (std::int64_t t = 0; t < k; ++t)
          b[static_cast<std::size_t>(t)] = static_cast<float>(in[1].at(t, j));
      }
      out[0].push_back(dot(a, b, p_.scaled ? in[2].at(i, 0) : 1.0));
    }
    return out;
  }

  [[nodiscard]] bool computed(std::int64_t i, std::int64_t j) const {
    return element_computed(pl_, i, j, injected());
  }

  /// C[i, j] as the schedule computes it from A's row, B's column and the
  /// row's scale (1 without scale = row).
  [[nodiscard]] double element(const std::vector<float>& a, const std::vector<float>& b,
                               float scale) const {
    return schedule_dot(pl_, a, b, injected(), scale);
  }

  /// The rows of A and columns of B read in this suite.
  struct operands {
    std::map<std::int64_t, std::vector<float>> a_rows, b_cols;
  };

  plan pl_;
  const params& p_;
  input_memo<operands> memo_;
};

}  // namespace

std::int64_t blocks_visited(const plan& pl, int d, fault f) {
  const auto i = static_cast<std::size_t>(d);
  if (f != fault::drop_tail) return pl.nb[i];
  return std::max<std::int64_t>(1, pl.p.ext[i] / pl.p.tile[i]);
}

bool element_computed(const plan& pl, std::int64_t i, std::int64_t j, fault f) {
  return i / pl.p.tile[dim_m] < blocks_visited(pl, dim_m, f) &&
         j / pl.p.tile[dim_n] < blocks_visited(pl, dim_n, f);
}

double exact_dot(std::span<const float> a, std::span<const float> b) {
  double sum = 0;
  for (std::size_t k = 0; k < a.size(); ++k)
    sum += static_cast<double>(a[k]) * static_cast<double>(b[k]);
  return sum;
}

double schedule_dot(const plan& pl, std::span<const float> a, std::span<const float> b, fault f,
                    float scale) {
  const params& p = pl.p;
  const std::int64_t nk = blocks_visited(pl, dim_k, f), tile_k = p.tile[dim_k];
  const std::int64_t k_end = std::min(p.size_k, nk * tile_k);
  const bool skip = f == fault::skip_accumulation;
  const element_type acc = element_of(p.acc), out = element_of(p.out);
  float psum = 0, partial = 0;
  for (std::int64_t kb = 0; kb < nk; ++kb) {
    const std::int64_t k0 = kb * tile_k, k1 = std::min(p.size_k, k0 + tile_k);
    if (pl.acc != accumulation::psum_across || kb == 0) psum = 0;  // a group opens
    for (std::int64_t t0 = k0; t0 < k1; t0 += p.mm_k) {            // one matmul instruction each
      const std::int64_t t1 = std::min(k1, t0 + p.mm_k);
      if (skip && t1 == k_end) continue;  // the fault: the last accumulation is lost
      float s = psum;
      for (std::int64_t t = t0; t < t1; ++t)
        s += a[static_cast<std::size_t>(t)] * b[static_cast<std::size_t>(t)];
      psum = s;
    }
    if (pl.acc != accumulation::sbuf) continue;
    const bool last = kb + 1 == nk;
    const float drained = psum * scale;
    const float sum = kb == 0 ? drained : partial + drained;  // the evict engine's fp32 add
    if (last) return round_to(out, sum);
    partial = static_cast<float>(round_to(acc, sum));  // kept in SBUF as acc_dtype
  }
  return round_to(out, psum * scale);
}

std::unique_ptr<functional_kernel> make_functional(const plan& pl) {
  return std::make_unique<matmul_kernel>(pl);
}

}  // namespace tessel::sim::mm
