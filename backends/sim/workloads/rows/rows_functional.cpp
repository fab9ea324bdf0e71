// rows_functional.cpp: the functional executors of the row workloads
// (rows.hpp). Both follow the pipeline's tiling: rows in tiles of
// rows_per_tile, columns in chunks of cols_per_step; the per-chunk
// reductions (sum of squares, row sum) accumulate in fp32 along the chunk,
// and the per-tile step combines the chunks' partial results in chunk
// order, as the lowering's reduce stage issues them. Values written back to
// SBUF or HBM are rounded to the pipeline's type. docs/simulator.md,
// "Functional mode".
#include "../../functional.hpp"
#include "rows.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <memory>

namespace tessel::sim::rows {
namespace {

/// RMSNorm's epsilon (the NKI tutorial's).
constexpr float rms_epsilon = 1e-6F;

/// Shared by both executors: the tiling, the probes, caching one computed
/// row per probed row.
class row_kernel : public functional_kernel {
 public:
  explicit row_kernel(const pipeline_spec& spec)
      : spec_(spec), tiling_(tiling_of(spec)), type_(element_of(spec.type)) {}

  /// Rows from the first, the tail and random interior row tiles; columns
  /// from the first, the tail and random interior chunks; every combination,
  /// per output. A probed row costs one pass over its columns, so the rows
  /// thin out as rows get long.
  [[nodiscard]] probe_points probes(rng& r) const override {
    const std::int64_t want_rows = std::clamp<std::int64_t>(probe_budget / spec_.cols, 4, 64);
    const auto rows = pick_indices(spec_.rows, tiling_.rows_per_tile, want_rows, r);
    const auto cols = pick_indices(spec_.cols, tiling_.cols_per_step, 64, r);
    return probe_points(outputs().size(), grid(rows, cols, spec_.cols));
  }

 protected:
  /// Every output's values of row `i`, in fp64 (reference) or as the schedule computes them.
  /// `x`: row i of each 2-D input; `shared`: what shared() read.
  [[nodiscard]] virtual std::vector<std::vector<double>> row(
      const std::vector<std::vector<double>>& x, const std::vector<double>& shared, std::int64_t i,
      bool reference) const = 0;
  /// Per output, the spread of row i's reference elements
  /// (gate_spec::reference_with_spread), or none: the outputs are rounded
  /// once.
  [[nodiscard]] virtual std::vector<std::vector<double>> row_spread(
      const std::vector<std::vector<double>>& x, const std::vector<double>& shared) const {
    (void)x;
    (void)shared;
    return {};
  }
  /// Values every row reads, read once per run (RMSNorm's weight).
  [[nodiscard]] virtual std::vector<double> shared(std::span<const input_tensor> in) const {
    (void)in;
    return {};
  }

  /// The outputs at `where`: the reference (with `spread`, also its spread,
  /// or none) or as the schedule computes them.
  [[nodiscard]] probe_values gather(std::span<const input_tensor> in, const probe_points& where,
                                    bool reference, probe_values* spread = nullptr) const {
    return memo_.with(in, [&](row_inputs& read) {
      if (!read.has_shared) read.shared = shared(in);
      read.has_shared = true;
      std::map<std::int64_t, std::vector<std::vector<double>>> rows, spreads;
      probe_values out(where.size());
      if (spread) *spread = probe_values(where.size());
      for (std::size_t k = 0; k < where.size(); ++k)
        for (const auto flat : where[k]) {
          const std::int64_t i = flat / spec_.cols, j = flat % spec_.cols;
          auto& r = rows[i];
          if (r.empty()) {
            r = row(input_rows(in, read, i), read.shared, i, reference);
            if (spread) spreads[i] = row_spread(input_rows(in, read, i), read.shared);
          }
          out[k].push_back(r[k][static_cast<std::size_t>(j)]);
          if (spread && !spreads[i].empty())
            (*spread)[k].push_back(spreads[i][k][static_cast<std::size_t>(j)]);
        }
      if (spread && std::any_of(spread->begin(), spread->end(),
                                [&](const auto& list) { return list.empty(); }))
        spread->clear();  // no spread for some output: none at all
      return out;
    });
  }

  [[nodiscard]] probe_values execute(std::span<const input_tensor> in,
                                     const probe_points& where) const override {
    return gather(in, where, false);
  }

 private:
  /// The input rows and shared values read in this suite.
  struct row_inputs {
    std::map<std::int64_t, std::vector<std::vector<double>>> rows;
    std::vector<double> shared;
    bool has_shared = false;
  };

  /// Row i of every 2-D input, read once per suite.
  const std::vector<std::vector<double>>& input_rows(std::span<const input_tensor> in,
                                                     row_inputs& read, std::int64_t i) const {
    auto& x = read.rows[i];
    if (!x.empty()) return x;
    for (const auto& t : in) {
      if (t.spec().shape.size() != 2) continue;
      auto& values = x.emplace_back(static_cast<std::size_t>(spec_.cols));
      for (std::int64_t j = 0; j < spec_.cols; ++j)
        values[static_cast<std::size_t>(j)] = t.at(i, j);
    }
    return x;
  }

  input_memo<row_inputs> memo_;

 public:
  [[nodiscard]] probe_values reference(std::span<const input_tensor> in,
                                       const probe_points& where) const override {
    return gather(in, where, true);
  }
  [[nodiscard]] probe_values reference_with_spread(std::span<const input_tensor> in,
                                                   const probe_points& where,
                                                   probe_values& spread) const override {
    return gather(in, where, true, &spread);
  }

 protected:
  /// Row tiles and column chunks the loops visit: all, or with drop_tail
  /// only the full ones.
  [[nodiscard]] bool row_computed(std::int64_t i) const {
    if (injected() != fault::drop_tail) return true;
    return i / tiling_.rows_per_tile <
           std::max<std::int64_t>(1, spec_.rows / tiling_.rows_per_tile);
  }
  [[nodiscard]] std::int64_t chunks() const {
    if (injected() != fault::drop_tail) return tiling_.chunks;
    return std::max<std::int64_t>(1, spec_.cols / tiling_.cols_per_step);
  }
  [[nodiscard]] std::int64_t chunk_end(std::int64_t c) const {
    return std::min(spec_.cols, (c + 1) * tiling_.cols_per_step);
  }
  /// Whether the per-tile step adds chunk c's partial result.
  [[nodiscard]] bool adds(std::int64_t c) const {
    return !(injected() == fault::skip_accumulation && c + 1 == chunks());
  }
  [[nodiscard]] float rounded(double v) const { return static_cast<float>(round_to(type_, v)); }

  pipeline_spec spec_;
  tiling tiling_;
  element_type type_;
};

class rmsnorm_kernel final : public row_kernel {
 public:
  rmsnorm_kernel(const pipeline_spec& spec, bool residual, bool fuse)
      : row_kernel(spec), residual_(residual), fuse_(fuse) {}

  [[nodiscard]] std::vector<tensor_spec> inputs() const override {
    std::vector<tensor_spec> out{{"x", {spec_.rows, spec_.cols}, type_}};
    if (residual_) out.push_back({"residual", {spec_.rows, spec_.cols}, type_});
    out.push_back({"w", {spec_.cols}, type_});
    return out;
  }
  [[nodiscard]] std::vector<tensor_spec> outputs() const override {
    std::vector<tensor_spec> out{{"y", {spec_.rows, spec_.cols}, type_}};
    if (residual_) out.push_back({"h", {spec_.rows, spec_.cols}, type_});
    return out;
  }

 protected:
  [[nodiscard]] std::vector<double> shared(std::span<const input_tensor> in) const override {
    const input_tensor& weight = in[residual_ ? 2 : 1];
    std::vector<double> w(static_cast<std::size_t>(spec_.cols));
    for (std::size_t j = 0; j < w.size(); ++j) w[j] = weight.at(static_cast<std::int64_t>(j));
    return w;
  }

  [[nodiscard]] std::vector<std::vector<double>> row(const std::vector<std::vector<double>>& x,
                                                     const std::vector<double>& w, std::int64_t i,
                                                     bool reference) const override {
    const auto n = static_cast<std::size_t>(spec_.cols);
    std::vector<std::vector<double>> out(outputs().size(), std::vector<double>(n, 0.0));
    std::vector<double> h(n);
    for (std::size_t j = 0; j < n; ++j) h[j] = x[0][j] + (residual_ ? x[1][j] : 0.0);
    if (reference) {
      double squares = 0;
      for (const double v : h) squares += v * v;
      const double rstd = 1 / std::sqrt(squares / static_cast<double>(n) + rms_epsilon);
      for (std::size_t j = 0; j < n; ++j) {
        out[0][j] = h[j] * rstd * w[j];
        if (residual_) out[1][j] = h[j];
      }
      return out;
    }
    if (!row_computed(i)) return out;
    // the residual add on its engine, written to SBUF (and stored as h)
    for (auto& v : h) v = residual_ ? rounded(v) : v;
    float total = 0;  // the per-tile step: the chunks' sums of squares, in order
    for (std::int64_t c = 0; c < chunks(); ++c) {
      float part = 0;  // one activation with accumulation along the chunk (fp32)
      for (auto j = static_cast<std::size_t>(c * tiling_.cols_per_step);
           j < static_cast<std::size_t>(chunk_end(c)); ++j)
        part += static_cast<float>(h[j]) * static_cast<float>(h[j]);
      if (adds(c)) total += part;
    }
    const float rstd = 1.0F / std::sqrt(total / static_cast<float>(n) + rms_epsilon);
    for (auto j = std::size_t{0}; j < static_cast<std::size_t>(chunk_end(chunks() - 1)); ++j) {
      const auto wj = static_cast<float>(w[j]);
      const auto hj = static_cast<float>(h[j]);
      out[0][j] = fuse_ ? rounded(hj * rstd * wj) : rounded(rounded(hj * rstd) * wj);
      if (residual_) out[1][j] = h[j];
    }
    return out;
  }

 private:
  bool residual_, fuse_;
};

/// LayerNorm's epsilon (PyTorch's default).
constexpr float layernorm_epsilon = 1e-5F;

/// LayerNorm (layernorm.cpp): per chunk the row sum and sum of squares in
/// fp32, combined in chunk order; mean, var = E[x^2] - mean^2, rstd and
/// -mean * rstd in fp32; then (x * rstd - mean * rstd) and * gamma in fp32,
/// + beta written in the pipeline's type.
class layernorm_kernel final : public row_kernel {
 public:
  using row_kernel::row_kernel;

 private:
  /// A row's mean and 1 / sqrt(variance + epsilon), in fp64.
  [[nodiscard]] static std::pair<double, double> moments(const std::vector<double>& x) {
    const auto n = static_cast<double>(x.size());
    double mean = 0, var = 0;
    for (const double v : x) mean += v;
    mean /= n;
    for (const double v : x) var += (v - mean) * (v - mean);
    return {mean, 1 / std::sqrt(var / n + layernorm_epsilon)};
  }

  /// (x - mean) * rstd * gamma of one row in fp64: the first term of y.
  [[nodiscard]] static std::vector<double> scaled_row(const std::vector<double>& x,
                                                      const std::vector<double>& gb) {
    const auto [mean, rstd] = moments(x);
    std::vector<double> out(x.size());
    for (std::size_t j = 0; j < x.size(); ++j) out[j] = (x[j] - mean) * rstd * gb[j];
    return out;
  }

 public:
  /// y = t + beta sums two terms, t stored in the pipeline's type (twice
  /// rounded), and t = (x - mean) rstd gamma cancels x rstd gamma against
  /// mean rstd gamma, where the mean carries its fp32 sum's rounding: the
  /// spread is sqrt(t^2 + beta^2 + (mean rstd gamma)^2). Without the last
  /// term an fp32 row of one value (the `constant` suite: t is 0, rstd is
  /// 1/sqrt(epsilon)) failed by up to 8 x its bound.
  [[nodiscard]] std::vector<std::vector<double>> row_spread(
      const std::vector<std::vector<double>>& in, const std::vector<double>& gb) const override {
    const auto [mean, rstd] = moments(in[0]);
    auto out = scaled_row(in[0], gb);
    for (std::size_t j = 0; j < out.size(); ++j)
      out[j] = std::hypot(out[j], gb[out.size() + j], mean * rstd * gb[j]);
    return {out};
  }

  [[nodiscard]] std::vector<tensor_spec> inputs() const override {
    return {{"x", {spec_.rows, spec_.cols}, type_},
            {"gamma", {spec_.cols}, type_},
            {"beta", {spec_.cols}, type_}};
  }
  [[nodiscard]] std::vector<tensor_spec> outputs() const override {
    return {{"y", {spec_.rows, spec_.cols}, type_}};
  }

 protected:
  /// gamma, then beta.
  [[nodiscard]] std::vector<double> shared(std::span<const input_tensor> in) const override {
    std::vector<double> v(2 * static_cast<std::size_t>(spec_.cols));
    for (std::int64_t j = 0; j < spec_.cols; ++j) {
      v[static_cast<std::size_t>(j)] = in[1].at(j);
      v[static_cast<std::size_t>(spec_.cols + j)] = in[2].at(j);
    }
    return v;
  }

  [[nodiscard]] std::vector<std::vector<double>> row(const std::vector<std::vector<double>>& in,
                                                     const std::vector<double>& gb, std::int64_t i,
                                                     bool reference) const override {
    const auto n = static_cast<std::size_t>(spec_.cols);
    std::vector<std::vector<double>> out(1, std::vector<double>(n, 0.0));
    const std::vector<double>& x = in[0];
    if (reference) {
      const auto scaled = scaled_row(x, gb);
      for (std::size_t j = 0; j < n; ++j) out[0][j] = scaled[j] + gb[n + j];
      return out;
    }
    if (!row_computed(i)) return out;
    float sum = 0, squares = 0;  // the per-tile step: the chunks' partial sums, in order
    for (std::int64_t c = 0; c < chunks(); ++c) {
      float part = 0, part_sq = 0;  // accumulated along the chunk (fp32)
      for (auto j = static_cast<std::size_t>(c * tiling_.cols_per_step);
           j < static_cast<std::size_t>(chunk_end(c)); ++j) {
        const auto v = static_cast<float>(x[j]);
        part += v;
        part_sq += v * v;
      }
      if (adds(c)) {
        sum += part;
        squares += part_sq;
      }
    }
    const float inv_n = 1.0F / static_cast<float>(n);
    const float mean = sum * inv_n;
    // E[x^2] - mean^2 rounds below 0 on a constant row with a large mean
    // (the gate's 'constant' suite): clamp it, as a kernel must, not NaN.
    const float var = std::max(squares * inv_n - mean * mean, 0.0F);
    const float rstd = 1.0F / std::sqrt(var + layernorm_epsilon);
    const float bias = -(mean * rstd);
    for (std::size_t j = 0; j < static_cast<std::size_t>(chunk_end(chunks() - 1)); ++j) {
      const float normalized = static_cast<float>(x[j]) * rstd + bias;
      const float scaled = normalized * static_cast<float>(gb[j]);
      out[0][j] = rounded(scaled + static_cast<float>(gb[n + j]));
    }
    return out;
  }
};

class softmax_kernel final : public row_kernel {
 public:
  using row_kernel::row_kernel;

  [[nodiscard]] std::vector<tensor_spec> inputs() const override {
    return {{"x", {spec_.rows, spec_.cols}, type_}};
  }
  [[nodiscard]] std::vector<tensor_spec> outputs() const override {
    return {{"y", {spec_.rows, spec_.cols}, type_}};
  }

 protected:
  [[nodiscard]] std::vector<std::vector<double>> row(const std::vector<std::vector<double>>& in,
                                                     const std::vector<double>& shared,
                                                     std::int64_t i,
                                                     bool reference) const override {
    (void)shared;
    const auto n = static_cast<std::size_t>(spec_.cols);
    std::vector<std::vector<double>> out(1, std::vector<double>(n, 0.0));
    const std::vector<double>& x = in[0];
    if (reference) {
      const double top = *std::max_element(x.begin(), x.end());
      double sum = 0;
      for (std::size_t j = 0; j < n; ++j) sum += out[0][j] = std::exp(x[j] - top);
      for (auto& v : out[0]) v /= sum;
      return out;
    }
    if (!row_computed(i)) return out;
    const auto end = static_cast<std::size_t>(chunk_end(chunks() - 1));
    float top = -std::numeric_limits<float>::infinity();  // per-chunk maxima, then theirs
    for (std::size_t j = 0; j < end; ++j) top = std::max(top, static_cast<float>(x[j]));
    float total = 0;
    std::vector<float> p(end);
    for (std::int64_t c = 0; c < chunks(); ++c) {
      float part = 0;  // exp with a running sum along the chunk (ScalarE, fp32)
      for (auto j = static_cast<std::size_t>(c * tiling_.cols_per_step);
           j < static_cast<std::size_t>(chunk_end(c)); ++j) {
        const float e = std::exp(static_cast<float>(x[j]) - top);
        part += e;
        p[j] = rounded(e);  // exp written in place, in the pipeline's type
      }
      if (adds(c)) total += part;
    }
    const float inverse = 1.0F / total;
    for (std::size_t j = 0; j < end; ++j) out[0][j] = rounded(p[j] * inverse);
    return out;
  }
};

}  // namespace

std::unique_ptr<functional_kernel> rmsnorm_functional(const pipeline_spec& spec, bool residual,
                                                      bool fuse_weight) {
  return std::make_unique<rmsnorm_kernel>(spec, residual, fuse_weight);
}

std::unique_ptr<functional_kernel> layernorm_functional(const pipeline_spec& spec) {
  return std::make_unique<layernorm_kernel>(spec);
}

std::unique_ptr<functional_kernel> softmax_functional(const pipeline_spec& spec) {
  return std::make_unique<softmax_kernel>(spec);
}

}  // namespace tessel::sim::rows
