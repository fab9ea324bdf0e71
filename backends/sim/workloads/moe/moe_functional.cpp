// moe_functional.cpp: moe's schedule executed on data for the equivalence
// gate (docs/simulator.md, "Functional mode and the gate").
#include "../../functional.hpp"
#include "../emit.hpp"
#include "moe.hpp"

#include <tessel/gate.hpp>

#include <algorithm>
#include <map>
#include <memory>
#include <utility>
#include <vector>

namespace tessel::sim::moe_detail {
namespace {

/// The schedule on data: for each probed token and column, each of its
/// top_k rows that a group tile computes accumulates x . W_e over d_in in
/// fp32 (the PSUM group), is multiplied by its router weight in fp32 (the
/// evict) and kept as an fp32 partial; the combine adds the partials in
/// slot order in fp32 and rounds y to dtype. The reference is the same sum in fp64 without
/// roundings. drop_tail: the partial last tile of every group is not computed (a group smaller than
/// token_tile is lost whole), or the rows make_kernel was given; skip_accumulation: the last
/// 128-row slab of d_in is not accumulated.
class moe_kernel final : public functional_kernel {
 public:
  moe_kernel(const plan& pl, std::vector<std::uint8_t> lost)
      : p_(pl.p), expert_of_(pl.expert_of), tail_(std::move(lost)), type_(element_of(pl.p.type)) {
    if (tail_.empty()) mark_tails(pl);
    // tokens of tail tiles, smallest groups first, for the probes
    std::vector<std::pair<std::int64_t, std::int64_t>> by_size;  // (group size, token)
    for (std::size_t i = 0; i < expert_of_.size(); ++i)
      if (tail_[i])
        by_size.emplace_back(pl.group_size[static_cast<std::size_t>(expert_of_[i])],
                             static_cast<std::int64_t>(i) / p_.top_k);
    std::sort(by_size.begin(), by_size.end());
    for (const auto& [size, t] : by_size)
      if (tail_tokens_.size() < 4 &&
          std::find(tail_tokens_.begin(), tail_tokens_.end(), t) == tail_tokens_.end())
        tail_tokens_.push_back(t);
  }

  [[nodiscard]] std::vector<tensor_spec> inputs() const override {
    return {{"x", p_.x_rows ? std::vector{p_.tokens, p_.d_in} : std::vector{p_.d_in, p_.tokens},
             type_, 0},
            {"W", {p_.experts, p_.d_in, p_.d_out}, type_, 0},
            {"router_weights", {p_.tokens, p_.top_k}, element_type::fp32, 0}};
  }
  [[nodiscard]] std::vector<tensor_spec> outputs() const override {
    return {{"y", {p_.tokens, p_.d_out}, type_, 0}};
  }

  /// Tokens of the first and last 128-token tiles, of the tail tiles of the
  /// smallest groups and random ones, times columns of the first, the tail
  /// and random out blocks: a (token, column) costs top_k x d_in reads.
  [[nodiscard]] probe_points probes(rng& r) const override {
    const double per = static_cast<double>(p_.top_k * p_.d_in);
    const auto want = static_cast<std::int64_t>(std::clamp(4.0 * probe_budget / per, 4.0, 12.0));
    auto tokens = pick_indices(p_.tokens, 128, want, r);
    for (const auto t : tail_tokens_) tokens.push_back(t);
    std::sort(tokens.begin(), tokens.end());
    tokens.erase(std::unique(tokens.begin(), tokens.end()), tokens.end());
    return {grid(tokens, pick_indices(p_.d_out, p_.out_tile, want, r), p_.d_out)};
  }

  [[nodiscard]] probe_values reference(std::span<const input_tensor> in,
                                       const probe_points& where) const override {
    return outputs_at(in, where, true);
  }

 protected:
  [[nodiscard]] probe_values execute(std::span<const input_tensor> in,
                                     const probe_points& where) const override {
    return outputs_at(in, where, false);
  }

 private:
  /// The rows drop_tail loses by default: those of each group's partial
  /// last tile (token grouping: each core's last tile).
  void mark_tails(const plan& pl) {
    tail_.assign(expert_of_.size(), 0);
    for (const auto& core : pl.tiles) {
      for (const auto& g : core)
        for (const auto& r : g.rows)
          tail_[static_cast<std::size_t>(r.token * p_.top_k + r.slot)] = g.tail ? 1 : 0;
      if (p_.group == grouping::token && !core.empty())
        for (const auto& r : core.back().rows)  // token grouping: the last tile is the tail
          tail_[static_cast<std::size_t>(r.token * p_.top_k + r.slot)] = 1;
    }
  }

  /// Vectors read so far, by (input, index): x rows and W columns, drawn once per suite.
  using vectors = std::map<std::pair<int, std::int64_t>, std::vector<float>>;

  const std::vector<float>& x_row(vectors& cache, std::span<const input_tensor> in,
                                  std::int64_t t) const {
    auto& v = cache[{0, t}];
    if (v.empty()) {
      v.resize(static_cast<std::size_t>(p_.d_in));
      for (std::int64_t k = 0; k < p_.d_in; ++k)
        v[static_cast<std::size_t>(k)] =
            static_cast<float>(p_.x_rows ? in[0].at(t, k) : in[0].at(k, t));
    }
    return v;
  }
  const std::vector<float>& w_col(vectors& cache, std::span<const input_tensor> in, std::int64_t e,
                                  std::int64_t col) const {
    auto& v = cache[{1, e * p_.d_out + col}];
    if (v.empty()) {
      v.resize(static_cast<std::size_t>(p_.d_in));
      for (std::int64_t k = 0; k < p_.d_in; ++k)
        v[static_cast<std::size_t>(k)] =
            static_cast<float>(in[1].at((e * p_.d_in + k) * p_.d_out + col));
    }
    return v;
  }

  [[nodiscard]] probe_values outputs_at(std::span<const input_tensor> in, const probe_points& where,
                                        bool exact) const {
    return memo_.with(in, [&](vectors& cache) {
      const bool drop = !exact && injected() == fault::drop_tail;
      const bool skip = !exact && injected() == fault::skip_accumulation;
      // skip_accumulation: the last 128-row slab of d_in is lost
      const std::int64_t k_end = skip ? (emit::ceil_div(p_.d_in, 128) - 1) * 128 : p_.d_in;
      probe_values out(1);
      out[0].reserve(where.at(0).size());
      for (const auto flat : where.at(0)) {
        const std::int64_t t = flat / p_.d_out, col = flat % p_.d_out;
        const auto& x = x_row(cache, in, t);
        double exact_sum = 0;
        float acc = 0;
        for (std::int64_t j = 0; j < p_.top_k; ++j) {
          const auto row = static_cast<std::size_t>(t * p_.top_k + j);
          const auto& w = w_col(cache, in, expert_of_[row], col);
          const double weight = in[2].at(t, j);
          if (exact) {
            double dot = 0;
            for (std::size_t k = 0; k < x.size(); ++k)
              dot += static_cast<double>(x[k]) * static_cast<double>(w[k]);
            exact_sum += dot * weight;
            continue;
          }
          float part = 0;  // a dropped row leaves its partial unwritten (0 here)
          if (!(drop && tail_[row])) {
            float dot = 0;
            for (std::int64_t k = 0; k < k_end; ++k)
              dot += x[static_cast<std::size_t>(k)] * w[static_cast<std::size_t>(k)];
            part = dot * static_cast<float>(weight);
          }
          acc = j == 0 ? part : acc + part;
        }
        out[0].push_back(exact ? exact_sum : round_to(type_, acc));
      }
      return out;
    });
  }

  params p_;
  shared_list<std::int32_t> expert_of_;
  std::vector<std::uint8_t> tail_;
  std::vector<std::int64_t> tail_tokens_;
  element_type type_;
  input_memo<vectors> memo_;
};

}  // namespace

std::unique_ptr<functional_kernel> make_kernel(const plan& pl, std::vector<std::uint8_t> lost) {
  return std::make_unique<moe_kernel>(pl, std::move(lost));
}

}  // namespace tessel::sim::moe_detail
