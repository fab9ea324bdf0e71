// attention_functional.cpp: the attention workload's functional executor.
// Row by row it follows the schedule of attention.cpp: the kv tiles the q
// tile visits (visited_kv_tiles), S = Q K^T accumulated in fp32 over d, the
// causal mask, the running row max and the accumulator correction (every kv
// tile, or with rescale = lazy every rescale_every tiles, the exps using the
// max of the last correction), P = exp((S - max) / sqrt(d)) in fp32 with the
// row sum taken from the fp32 values and P itself written in the input type
// for the P V matmul (fp32 in PSUM), O_acc in fp32 in SBUF, and O = O_acc *
// (1 / l) cast to the output type. docs/simulator.md, "Functional mode".
// With heads > 1 (sharded_attention) the heads are stacked: Q^T and K^T as
// [heads * d, seq], V and O as [heads * seq, d], each head computed alone.
#include "../../functional.hpp"
#include "attention_plan.hpp"

#include <tessel/gate.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <memory>

namespace tessel::sim::attn {
namespace {

/// Lazy rescaling corrects early when the row max grew by more than this
/// (in units of the exponent): the exps of a stale max stay below e^8, as
/// the emitted kernel guards them (and the lowering times the guard's steps).
constexpr float lazy_guard = 8.0F;

/// K^T columns and V rows read so far in one suite (each read once).
struct kv_cache {
  std::vector<std::vector<float>> k, v;
  std::vector<std::uint8_t> v_columns;  ///< the columns of V read (those of O probed)
};

class attention_kernel final : public functional_kernel {
 public:
  attention_kernel(const params& p, std::int64_t partitions, head_split heads)
      : p_(p), partitions_(partitions), heads_(heads), type_(element_of(p.type)) {}

  [[nodiscard]] std::vector<tensor_spec> inputs() const override {
    const std::int64_t h = heads_.heads;
    return {{"Q", {h * p_.d, p_.seq}, type_},
            {"K", {h * p_.d, p_.seq}, type_},
            {"V", {h * p_.seq, p_.d}, type_}};
  }
  [[nodiscard]] std::vector<tensor_spec> outputs() const override {
    return {{"O", {heads_.heads * p_.seq, p_.d}, type_}};
  }

  /// Rows of O: the first and the last row (the first and the tail q tile),
  /// then the other edges of those tiles and rows of random interior tiles as
  /// the budget allows; 8 of the d columns (the first, the last, random) in
  /// each. A row reads all of K it attends to (and V's probed columns), so
  /// long sequences get two rows. Stacked heads: a random row of every head
  /// no such row falls in, so one wrong head anywhere is probed.
  [[nodiscard]] probe_points probes(rng& r) const override {
    const std::int64_t want = std::clamp<std::int64_t>(16 * probe_budget / (p_.seq * p_.d), 2, 64);
    const std::int64_t sub = std::min(p_.q_tile, partitions_);
    const std::int64_t rows = heads_.heads * p_.seq;  // the last row: the last head's
    auto picked = pick_indices(rows, sub, want, r);
    std::vector<std::uint8_t> probed(static_cast<std::size_t>(heads_.heads), 0);
    for (const auto i : picked) probed[static_cast<std::size_t>(i / p_.seq)] = 1;
    for (std::int64_t h = 0; h < heads_.heads; ++h)
      if (!probed[static_cast<std::size_t>(h)])
        picked.push_back(h * p_.seq +
                         static_cast<std::int64_t>(r() % static_cast<std::uint64_t>(p_.seq)));
    std::sort(picked.begin(), picked.end());
    return {grid(picked, pick_indices(p_.d, p_.d, 8, r), p_.d)};
  }

  [[nodiscard]] probe_values reference(std::span<const input_tensor> in,
                                       const probe_points& where) const override {
    return gather(in, where, true);
  }

 protected:
  [[nodiscard]] probe_values execute(std::span<const input_tensor> in,
                                     const probe_points& where) const override {
    return gather(in, where, false);
  }

 private:
  [[nodiscard]] probe_values gather(std::span<const input_tensor> in, const probe_points& where,
                                    bool reference) const {
    return memo_.with(in, [&](kv_cache& cache) {
      cache.k.resize(static_cast<std::size_t>(heads_.heads * p_.seq));
      cache.v.resize(static_cast<std::size_t>(heads_.heads * p_.seq));
      cache.v_columns.resize(static_cast<std::size_t>(p_.d));
      for (const auto flat : where.at(0)) {
        auto& column = cache.v_columns[static_cast<std::size_t>(flat % p_.d)];
        if (!column) cache.k.assign(cache.k.size(), {});  // a new column: read again
        column = 1;
      }
      std::map<std::int64_t, std::vector<double>> rows;
      probe_values out(1);
      for (const auto flat : where.at(0)) {
        const std::int64_t row = flat / p_.d, c = flat % p_.d;
        const head at{row / p_.seq};
        auto& r = rows[row];
        if (r.empty())
          r = reference ? exact_row(in, cache, at, row % p_.seq)
                        : scheduled_row(in, cache, at, row % p_.seq);
        out[0].push_back(r[static_cast<std::size_t>(c)]);
      }
      return out;
    });
  }

  /// One head of the stacked tensors.
  struct head {
    std::int64_t index = 0;
  };

  [[nodiscard]] std::vector<float> query(std::span<const input_tensor> in, head h,
                                         std::int64_t i) const {
    std::vector<float> q(static_cast<std::size_t>(p_.d));
    for (std::int64_t c = 0; c < p_.d; ++c)
      q[static_cast<std::size_t>(c)] = static_cast<float>(in[0].at(h.index * p_.d + c, i));
    return q;
  }

  /// Key j of head h into the cache (K^T column and V row, at h * seq + j).
  [[nodiscard]] std::size_t fetch(std::span<const input_tensor> in, kv_cache& cache, head h,
                                  std::int64_t j) const {
    const auto jj = static_cast<std::size_t>(h.index * p_.seq + j);
    if (!cache.k[jj].empty()) return jj;
    cache.k[jj].resize(static_cast<std::size_t>(p_.d));
    cache.v[jj].resize(static_cast<std::size_t>(p_.d));
    for (std::int64_t c = 0; c < p_.d; ++c) {
      const auto cc = static_cast<std::size_t>(c);
      cache.k[jj][cc] = static_cast<float>(in[1].at(h.index * p_.d + c, j));
      if (cache.v_columns[cc])
        cache.v[jj][cc] = static_cast<float>(in[2].at(h.index * p_.seq + j, c));
    }
    return jj;
  }

  [[nodiscard]] std::vector<double> exact_row(std::span<const input_tensor> in, kv_cache& cache,
                                              head h, std::int64_t i) const {
    const auto q = query(in, h, i);
    const std::int64_t keys = p_.causal ? i + 1 : p_.seq;
    const double scale = 1 / std::sqrt(static_cast<double>(p_.d));
    std::vector<double> s(static_cast<std::size_t>(keys));
    double top = -std::numeric_limits<double>::infinity();
    std::vector<std::size_t> at(static_cast<std::size_t>(keys));
    for (std::int64_t j = 0; j < keys; ++j) {
      const std::size_t jj = at[static_cast<std::size_t>(j)] = fetch(in, cache, h, j);
      double dot = 0;
      for (std::size_t c = 0; c < q.size(); ++c)
        dot += static_cast<double>(q[c]) * static_cast<double>(cache.k[jj][c]);
      s[static_cast<std::size_t>(j)] = dot * scale;
      top = std::max(top, dot * scale);
    }
    std::vector<double> o(q.size(), 0.0);
    double sum = 0;
    for (std::int64_t j = 0; j < keys; ++j) {
      const double e = std::exp(s[static_cast<std::size_t>(j)] - top);
      sum += e;
      for (std::size_t c = 0; c < o.size(); ++c)
        o[c] += e * static_cast<double>(cache.v[at[static_cast<std::size_t>(j)]][c]);
    }
    for (auto& x : o) x /= sum;
    return o;
  }

  /// Row i of head h's O as the schedule computes it.
  [[nodiscard]] std::vector<double> scheduled_row(std::span<const input_tensor> in, kv_cache& cache,
                                                  head h, std::int64_t i) const {
    const bool drop = injected() == fault::drop_tail;
    std::vector<double> o(static_cast<std::size_t>(p_.d), 0.0);
    // sharded: each rank's loop over its heads stops before its last head
    if (drop && heads_.heads > 1 && (h.index + 1) % heads_.per_rank == 0) return o;
    const std::int64_t qt = i / p_.q_tile;
    if (drop && p_.seq % p_.q_tile != 0 && qt == p_.seq / p_.q_tile) return o;
    std::vector<std::int64_t> kvs = visited_kv_tiles(p_, qt);
    if (drop && p_.seq % p_.kv_tile != 0 && kvs.size() > 1 && kvs.back() == p_.seq / p_.kv_tile)
      kvs.pop_back();
    const auto q = query(in, h, i);
    const float scale = 1.0F / std::sqrt(static_cast<float>(p_.d));
    const float minus_inf = -std::numeric_limits<float>::infinity();
    float m_ref = minus_inf, m_run = minus_inf, l = 0;
    std::vector<float> acc(q.size(), 0.0F), part(q.size()), s;
    for (std::size_t idx = 0; idx < kvs.size(); ++idx) {
      const std::int64_t j0 = kvs[idx] * p_.kv_tile, j1 = std::min(p_.seq, j0 + p_.kv_tile);
      s.assign(static_cast<std::size_t>(j1 - j0), minus_inf);
      float tile_max = minus_inf;
      for (std::int64_t j = j0; j < j1; ++j) {
        if (p_.causal && j > i) continue;  // the mask
        const std::size_t jj = fetch(in, cache, h, j);
        float dot = 0;  // QK^T in PSUM, fp32 over d
        for (std::size_t c = 0; c < q.size(); ++c) dot += q[c] * cache.k[jj][c];
        s[static_cast<std::size_t>(j - j0)] = dot;
        tile_max = std::max(tile_max, dot);
      }
      m_run = std::max(m_run, tile_max);
      const bool corrects = idx == 0 || idx % static_cast<std::size_t>(p_.rescale_every) == 0 ||
                            (m_run - m_ref) * scale > lazy_guard;
      if (corrects && m_run > m_ref) {
        const float alpha = idx == 0 ? 0.0F : std::exp((m_ref - m_run) * scale);
        for (auto& x : acc) x *= alpha;
        l *= alpha;
        m_ref = m_run;
      }
      float row_sum = 0;
      std::fill(part.begin(), part.end(), 0.0F);
      for (std::int64_t j = j0; j < j1; ++j) {
        const float sj = s[static_cast<std::size_t>(j - j0)];
        if (sj == minus_inf) continue;
        const float e = std::exp((sj - m_ref) * scale);
        row_sum += e;
        const auto pj = static_cast<float>(round_to(type_, e));  // P in the input type
        for (std::size_t c = 0; c < part.size(); ++c)
          part[c] += pj * cache.v[static_cast<std::size_t>(h.index * p_.seq + j)][c];  // P V
      }
      l += row_sum;
      const bool skipped =
          injected() == fault::skip_accumulation && idx > 0 && idx + 1 == kvs.size();
      if (!skipped)
        for (std::size_t c = 0; c < acc.size(); ++c) acc[c] = idx == 0 ? part[c] : acc[c] + part[c];
    }
    const float inverse = 1.0F / l;
    for (std::size_t c = 0; c < o.size(); ++c) o[c] = round_to(type_, acc[c] * inverse);
    return o;
  }

  params p_;
  std::int64_t partitions_;
  head_split heads_;
  element_type type_;
  input_memo<kv_cache> memo_;
};

}  // namespace

std::unique_ptr<functional_kernel> make_functional(const params& p, std::int64_t partitions,
                                                   head_split heads) {
  return std::make_unique<attention_kernel>(p, partitions, heads);
}

}  // namespace tessel::sim::attn
