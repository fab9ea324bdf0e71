// swiglu_functional.cpp: swiglu's schedule executed on data for the
// equivalence gate (docs/simulator.md, "Functional mode and the gate").
#include "../../functional.hpp"
#include "../emit.hpp"
#include "swiglu.hpp"

#include <tessel/gate.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <vector>

namespace tessel::sim::swiglu_detail {
namespace {

using emit::ceil_div;
constexpr double inf = std::numeric_limits<double>::infinity();

/// The schedule on data: for each probed token, g and u accumulated in fp32
/// over d_model (mm_k slab after slab, one PSUM group each), SiLU in fp32
/// into the scratch tile, h = silu(g) * u in fp32 rounded to dtype (the h
/// tile), then y accumulated in fp32 over d_ff in 128-row steps (the down
/// projection's PSUM group; with fuse_down one group per ff block, added into
/// the fp32 accumulator) and rounded to dtype. The
/// reference is the same in fp64 without roundings. A suite reads every
/// column of W_gate and W_up once (2 x d_model x d_ff draws, kept for its
/// other runs: input_memo) and the probed columns of W_down, whatever the
/// number of probed tokens; past
/// emit::functional_reads_per_output, functional() checks the schedule at
/// a d_ff and d_model shrunk to the first, an interior and the tail ff and
/// d blocks (emit::shrink).
class swiglu_kernel final : public functional_kernel {
 public:
  explicit swiglu_kernel(const params& p) : p_(p), type_(element_of(p.type)) {}

  [[nodiscard]] std::vector<tensor_spec> inputs() const override {
    // weights at the magnitude of a trained layer's, 1/sqrt(fan-in) (tensor_spec::scale)
    const double in_scale = 1 / std::sqrt(static_cast<double>(p_.d_model));
    const double down_scale = 1 / std::sqrt(static_cast<double>(p_.d_ff));
    return {{"x", {p_.d_model, p_.tokens}, type_, 0},
            {"W_gate", {p_.d_model, p_.d_ff}, type_, 0, 0, in_scale},
            {"W_up", {p_.d_model, p_.d_ff}, type_, 0, 0, in_scale},
            {"W_down", {p_.d_ff, p_.d_model}, type_, 0, 0, down_scale}};
  }
  [[nodiscard]] std::vector<tensor_spec> outputs() const override {
    return {{"y", {p_.tokens, p_.d_model}, type_, 0}};
  }

  /// Rows (tokens) of the first, the tail and random interior token tiles
  /// times columns of the first, the tail and random interior d blocks: a
  /// token costs 2 x d_model x d_ff multiply-adds, a column d_ff per token.
  [[nodiscard]] probe_points probes(rng& r) const override {
    const double per_token = 2.0 * static_cast<double>(p_.d_model) * static_cast<double>(p_.d_ff);
    const auto rows =
        static_cast<std::int64_t>(std::clamp(64.0 * probe_budget / per_token, 4.0, 64.0));
    const auto cols = static_cast<std::int64_t>(
        std::clamp(static_cast<double>(probe_budget) / static_cast<double>(p_.d_ff), 8.0, 256.0));
    return {grid(pick_indices(p_.tokens, p_.token_tile, rows, r),
                 pick_indices(p_.d_model, p_.d_tile, cols, r), p_.d_model)};
  }

  [[nodiscard]] probe_values reference(std::span<const input_tensor> in,
                                       const probe_points& where) const override {
    probe_values spread;
    return reference_with_spread(in, where, spread);
  }

  /// The down projection's terms h_j W_down[j, c] are products of h, which
  /// the schedule stores in dtype: their root sum of squares is the spread.
  [[nodiscard]] probe_values reference_with_spread(std::span<const input_tensor> in,
                                                   const probe_points& where,
                                                   probe_values& spread) const override {
    return memo_.with(in, [&](columns& cache) { return outputs_at(in, where, &spread, cache); });
  }

 protected:
  [[nodiscard]] probe_values execute(std::span<const input_tensor> in,
                                     const probe_points& where) const override {
    return memo_.with(in, [&](columns& cache) { return outputs_at(in, where, nullptr, cache); });
  }

 private:
  /// Columns read so far, by (input, column): drawn once per suite (input_memo).
  using columns = std::map<std::pair<int, std::int64_t>, std::vector<float>>;

  /// Column `col` of input `which` (its first `rows` elements), drawn once.
  static const std::vector<float>& column(columns& cache, std::span<const input_tensor> in,
                                          int which, std::int64_t col, std::int64_t rows) {
    auto& c = cache[{which, col}];
    if (c.empty()) {
      c.resize(static_cast<std::size_t>(rows));
      for (std::int64_t k = 0; k < rows; ++k)
        c[static_cast<std::size_t>(k)] =
            static_cast<float>(in[static_cast<std::size_t>(which)].at(k, col));
    }
    return c;
  }

  /// The f (d_ff) and d (d_model) extents the loops visit, and whether the
  /// token `t` is computed: with drop_tail the partial last blocks are not.
  [[nodiscard]] std::int64_t visited(std::int64_t extent, std::int64_t tile, bool drop) const {
    return drop && extent % tile != 0 && extent > tile ? extent / tile * tile : extent;
  }

  /// The schedule's outputs at `where`, or with `spread` the fp64 reference
  /// and its spread (gate_spec::reference_with_spread).
  [[nodiscard]] probe_values outputs_at(std::span<const input_tensor> in, const probe_points& where,
                                        probe_values* spread, columns& cache) const {
    const bool exact = spread != nullptr;
    const auto& points = where.at(0);
    const bool drop = !exact && injected() == fault::drop_tail;
    const bool skip = !exact && injected() == fault::skip_accumulation;
    const std::int64_t d = p_.d_model, f = p_.d_ff, parts = 128;
    const std::int64_t f_end = visited(f, p_.ff_tile, drop);
    const std::int64_t t_end = visited(p_.tokens, p_.token_tile, drop);
    const std::int64_t d_end = visited(d, p_.d_tile, drop);
    // skip_accumulation: the last 128-row step of each down-projection group is lost
    const std::int64_t down_end = skip ? (ceil_div(f_end, parts) - 1) * parts : f_end;
    std::vector<std::int64_t> tokens, cols;
    for (const auto flat : points) {
      tokens.push_back(flat / d);
      cols.push_back(flat % d);
    }
    std::sort(tokens.begin(), tokens.end());
    tokens.erase(std::unique(tokens.begin(), tokens.end()), tokens.end());
    std::sort(cols.begin(), cols.end());
    cols.erase(std::unique(cols.begin(), cols.end()), cols.end());
    const std::size_t n = tokens.size();
    std::vector<const std::vector<float>*> x(n);
    for (std::size_t i = 0; i < n; ++i) x[i] = &column(cache, in, 0, tokens[i], d);
    // h[i][j] for every f the schedule visits
    std::vector<std::vector<double>> h(n, std::vector<double>(static_cast<std::size_t>(f), 0.0));
    for (std::int64_t j = 0; j < f_end; ++j) {
      const auto& wg = column(cache, in, 1, j, d);
      const auto& wu = column(cache, in, 2, j, d);
      for (std::size_t i = 0; i < n; ++i)
        h[i][static_cast<std::size_t>(j)] =
            exact ? exact_h(*x[i], wg, wu) : scheduled_h(*x[i], wg, wu);
    }
    std::vector<std::vector<double>> y(n, std::vector<double>(cols.size(), 0.0));
    auto terms = y;  // exact: the root sum of squares of h_j W_down[j, c]
    for (std::size_t c = 0; c < cols.size(); ++c) {
      if (cols[c] >= d_end) continue;  // never computed
      const auto& wd = column(cache, in, 3, cols[c], f);
      for (std::size_t i = 0; i < n; ++i) {
        if (tokens[i] >= t_end) continue;
        if (exact) {
          double sum = 0, squares = 0;
          for (std::int64_t j = 0; j < f; ++j) {
            const double t = h[i][static_cast<std::size_t>(j)] *
                             static_cast<double>(wd[static_cast<std::size_t>(j)]);
            sum += t;
            squares += t * t;
          }
          y[i][c] = sum;
          // an h beyond dtype's range saturates in the h tile: no bound holds
          terms[i][c] = saturates(h[i], f) ? inf : std::sqrt(squares);
          continue;
        }
        // the PSUM group over d_ff; with fuse_down one group per ff block,
        // each added into the fp32 accumulator
        const std::int64_t group = p_.fuse_down ? p_.ff_tile : f;
        float sum = 0;
        for (std::int64_t j0 = 0; j0 < down_end; j0 += group) {
          float part = 0;
          for (std::int64_t j = j0; j < std::min(down_end, j0 + group); ++j)
            part += static_cast<float>(h[i][static_cast<std::size_t>(j)]) *
                    wd[static_cast<std::size_t>(j)];
          sum = j0 == 0 ? part : sum + part;
        }
        y[i][c] = round_to(type_, sum);
      }
    }
    probe_values out(1);
    out[0].reserve(points.size());
    if (spread) *spread = probe_values(1);
    for (const auto flat : points) {
      const auto i = static_cast<std::size_t>(
          std::lower_bound(tokens.begin(), tokens.end(), flat / d) - tokens.begin());
      const auto c = static_cast<std::size_t>(std::lower_bound(cols.begin(), cols.end(), flat % d) -
                                              cols.begin());
      out[0].push_back(y[i][c]);
      if (spread) (*spread)[0].push_back(terms[i][c]);
    }
    return out;
  }

  /// h = silu(g) * u as the schedule computes it: fp32 PSUM sums, fp32 SiLU
  /// and multiply, rounded to dtype in the h tile.
  [[nodiscard]] double scheduled_h(const std::vector<float>& x, const std::vector<float>& wg,
                                   const std::vector<float>& wu) const {
    float g = 0, u = 0;
    for (std::size_t k = 0; k < x.size(); ++k) {
      g += x[k] * wg[k];
      u += x[k] * wu[k];
    }
    const float silu = g / (1.0F + std::exp(-g));
    return round_to(type_, static_cast<double>(silu * u));
  }

  /// Whether one of the first `f` exact h values lies beyond dtype's range,
  /// where the schedule's h tile saturates (fp16 at 65504): the spread of
  /// such an element is infinite, so the gate does not judge it
  /// (gate_spec::reference_with_spread; docs/gate.md, "Input magnitudes").
  [[nodiscard]] bool saturates(const std::vector<double>& h, std::int64_t f) const {
    const double top = max_finite(type_);
    return std::any_of(h.begin(), h.begin() + f, [top](double v) { return std::abs(v) > top; });
  }

  [[nodiscard]] static double exact_h(const std::vector<float>& x, const std::vector<float>& wg,
                                      const std::vector<float>& wu) {
    double g = 0, u = 0;
    for (std::size_t k = 0; k < x.size(); ++k) {
      g += static_cast<double>(x[k]) * static_cast<double>(wg[k]);
      u += static_cast<double>(x[k]) * static_cast<double>(wu[k]);
    }
    return g / (1.0 + std::exp(-g)) * u;
  }

  params p_;
  element_type type_;
  input_memo<columns> memo_;
};

}  // namespace

std::unique_ptr<functional_kernel> make_kernel(const params& p) {
  return std::make_unique<swiglu_kernel>(p);
}

}  // namespace tessel::sim::swiglu_detail
