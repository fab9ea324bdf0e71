// cross_entropy.cpp: the fused cross-entropy of a language model's head on
// one NeuronCore: loss[t] = logsumexp_v(x[t] . W[:, v]) - x[t] . W[:, label[t]],
// with x given transposed ([d_model, tokens]) and W as [d_model, vocab]. The
// logits are computed a vocabulary chunk at a time into PSUM and folded into
// a running (max, sum, label logit) per token (the online log-sum-exp), so
// the logits are never written to HBM: only the loss (4 bytes per token) is.
//
// Units are (token tile, vocabulary chunk) pairs visited in `order`. For a
// unit, each 128-token row tile accumulates its logits over the d_model
// contraction in PSUM (one bank per 512 logits); then the chunk's row max
// (VectorE), the new running max, exp(logits - max) with its row sum
// (ScalarE), the label's logit through a one-hot mask (pick_engine)
// multiplied by the logits and summed, and the running sum's correction. After the last chunk:
// loss = max + ln(sum) - label logit, stored. docs/simulator.md has the table.
#include "../../functional.hpp"
#include "../../nki/nki.hpp"
#include "../../timing.hpp"
#include "../../typed_workload.hpp"
#include "../emit.hpp"
#include "cross_entropy_nki.hpp"
#include "cross_entropy_plan.hpp"

#include <tessel/gate.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace tessel::sim {
namespace {

using emit::ceil_div;

using ce::params;
using ce::plan;

void read_order(const knob_reader& v, params& p) { p.vocab_outer = v.order("order").at(0) == "v"; }

std::string read(const knob_reader& v, const machine& m, params& p) {
  p.tokens = v.integer("tokens");
  p.d_model = v.integer("d_model");
  p.vocab = v.integer("vocab");
  if (p.tokens <= 0 || p.d_model <= 0 || p.vocab <= 0)
    return "cross_entropy: tokens, d_model and vocab must be positive";
  if (auto e = emit::read_dtype(v, "cross_entropy", p.type); !e.empty()) return e;
  read_order(v, p);
  p.mm_k = v.integer("mm_k", m.max_contraction);
  p.mm_n = v.integer("mm_n", m.max_moving_free);
  if (auto e = emit::check_instruction_tile(p.mm_k, p.mm_n, m); !e.empty()) return e;
  if (m.psum_bank_bytes / 4 % p.mm_n != 0)
    return fmt::format("cross_entropy: mm_n = {} must divide a PSUM bank's {} fp32 columns", p.mm_n,
                       m.psum_bank_bytes / 4);
  p.token_tile = std::min(v.integer("token_tile"), p.tokens);
  p.vocab_chunk = std::min(v.integer("vocab_chunk"), p.vocab);
  if (p.token_tile <= 0 || p.vocab_chunk <= 0)
    return "cross_entropy: token_tile and vocab_chunk must be positive";
  if (p.token_tile > m.partitions && p.token_tile % m.partitions != 0)
    return fmt::format(
        "cross_entropy: token_tile = {} is over {} partitions and not a multiple of {}",
        p.token_tile, m.partitions, m.partitions);
  p.bufs = static_cast<int>(v.integer("bufs"));
  if (p.bufs < 1) return "cross_entropy: bufs must be at least 1";
  p.queues = static_cast<int>(std::clamp<std::int64_t>(v.integer("dma_queues"), 1, 5));
  p.max_engine = emit::read_engine(v, "max_engine");
  p.exp_engine = emit::read_engine(v, "exp_engine");
  p.pick_engine = emit::read_engine(v, "pick_engine");
  // what NKI can run: the row max is a tensor_reduce (VectorE only) of PSUM, exp a ScalarE
  // activation; the one-hot mask is built from SBUF, so GpSimdE may make it
  if (p.max_engine != vector_engine)
    return "cross_entropy: max_engine = gpsimd: the row max is a tensor_reduce, which runs on "
           "VectorE only";
  if (p.exp_engine != scalar_engine)
    return "cross_entropy: exp_engine = vector: exp is a ScalarE activation";
  return "";
}

std::string make_plan(const params& p, const machine& m, plan& pl) {
  pl.p = p;
  const std::int64_t b = dtype_bytes(p.type), parts = m.partitions;
  pl.slabs = ceil_div(p.d_model, p.mm_k);
  pl.subs = ceil_div(p.token_tile, parts);
  pl.banks_per_sub = ceil_div(p.vocab_chunk * 4, m.psum_bank_bytes);
  pl.groups = pl.subs * pl.banks_per_sub;
  pl.token_tiles = ceil_div(p.tokens, p.token_tile);
  pl.chunks = ceil_div(p.vocab, p.vocab_chunk);
  if (pl.groups > m.psum_banks)
    return fmt::format(
        "PSUM overflow: {} accumulation groups outstanding (token_tile {} = {} row tiles x "
        "vocab_chunk {} = {} banks of fp32 logits each); the target has {} banks (over by {})",
        pl.groups, p.token_tile, pl.subs, p.vocab_chunk, pl.banks_per_sub, m.psum_banks,
        pl.groups - m.psum_banks);
  pl.sets = m.psum_banks / pl.groups;
  // the inner (streamed) operand rotates through `bufs` slots; the outer one
  // keeps two when it can, so the next outer block loads during this one
  const int outer = std::min(p.bufs, 2);
  pl.x_slots = p.vocab_outer ? p.bufs : outer;
  pl.w_slots = p.vocab_outer ? outer : p.bufs;
  pl.x_bytes = pl.x_slots * pl.slabs * p.token_tile * b;
  pl.w_bytes = pl.w_slots * pl.slabs * p.vocab_chunk * b;
  pl.scratch_bytes = std::int64_t{16} * p.vocab_chunk;  // exp and one-hot products, 2 slots each
  const std::int64_t rows_pp = p.vocab_outer ? ceil_div(p.tokens, parts) : pl.subs;
  pl.state_bytes = rows_pp * 8 * 4;  // max, sum, label logit, label, temporaries (fp32)
  if (auto e = emit::check_sbuf({{"x tiles", pl.x_bytes},
                                 {"W chunks", pl.w_bytes},
                                 {"exp scratch", pl.scratch_bytes},
                                 {"running state", pl.state_bytes}},
                                m.sbuf_bytes_per_partition,
                                fmt::format("token_tile={}, vocab_chunk={}, bufs={}", p.token_tile,
                                            p.vocab_chunk, p.bufs));
      !e.empty())
    return e;
  const double matmuls = static_cast<double>(ceil_div(p.tokens, parts)) *
                         static_cast<double>(ceil_div(p.vocab, p.mm_n)) *
                         static_cast<double>(pl.slabs);
  if (matmuls > 5e7)
    return fmt::format(
        "cross_entropy: {:.3g} matmul instructions is more than the simulator lowers", matmuls);
  return "";
}

/// One operand's block slots (emit::piece_slots over its contraction
/// slabs) and the block its current slot holds.
struct operand : emit::piece_slots {
  std::int64_t block = -1;
};

class lowerer : emit::lowering<plan> {
 public:
  lowerer(const plan& pl, const machine& m, program& out) : lowering(pl, m, out, 3, pl.p.queues) {}

  void run() {
    setup();
    const std::int64_t outer = p_.vocab_outer ? pl_.chunks : pl_.token_tiles;
    const std::int64_t inner = p_.vocab_outer ? pl_.token_tiles : pl_.chunks;
    for (std::int64_t o = 0; o < outer; ++o)
      for (std::int64_t i = 0; i < inner; ++i) {
        if (p_.vocab_outer)
          unit(i, o);
        else
          unit(o, i);
      }
  }

 private:
  enum tag_index : std::size_t {
    t_x,
    t_w,
    t_labels,
    t_mm,
    t_max,
    t_online,
    t_exp,
    t_pick,
    t_loss,
    t_store,
    tag_count
  };

  void setup() {
    const std::int64_t b = dtype_bytes(p_.type), parts = m_.partitions;
    hbm_x_ = out_.add_buffer({"x^T (HBM)", memory::hbm, 0, 1, p_.d_model * p_.tokens * b});
    hbm_w_ = out_.add_buffer({"W (HBM)", memory::hbm, 0, 1, p_.d_model * p_.vocab * b});
    hbm_labels_ = out_.add_buffer({"labels (HBM)", memory::hbm, 0, 1, p_.tokens * 4});
    hbm_loss_ = out_.add_buffer({"loss (HBM)", memory::hbm, 0, 1, p_.tokens * 4});
    sb_x_ = out_.add_buffer({"x tiles", memory::sbuf, pl_.x_bytes / pl_.x_slots, pl_.x_slots, 0});
    sb_w_ = out_.add_buffer({"W chunks", memory::sbuf, pl_.w_bytes / pl_.w_slots, pl_.w_slots, 0});
    sb_scratch_ = out_.add_buffer({"exp scratch", memory::sbuf, pl_.scratch_bytes / 2, 2, 0});
    sb_state_ = out_.add_buffer({"running state", memory::sbuf, pl_.state_bytes, 1, 0});
    psum_ = emit::psum_banks(out_, m_, m_.psum_banks);
    b_.tags({"load x", "load W", "load labels", "logits", "row max", "online max", "exp",
             "label logit", "loss", "store loss"});
    x_.init(pl_.x_slots, pl_.slabs);
    w_.init(pl_.w_slots, pl_.slabs);
    bank_readers_.assign(static_cast<std::size_t>(m_.psum_banks), {program::none, program::none});
    state_.assign(static_cast<std::size_t>(pl_.token_tiles * pl_.subs), program::none);
    labels_.assign(static_cast<std::size_t>(pl_.token_tiles * pl_.subs), program::none);
    // the vocabulary chunk's column indices (nisa.iota on GpSimdE), once
    iota_ = b_.compute(gpsimd_engine, op::copy, parts, p_.vocab_chunk, sb_scratch_, sb_scratch_,
                       t_pick, {});
    if (p_.vocab_outer)  // every token's label, once, a row tile at a time
      for (std::int64_t ti = 0; ti < pl_.token_tiles; ++ti) load_labels(ti);
    out_.totals.flops = 2.0 * static_cast<double>(p_.tokens) * static_cast<double>(p_.d_model) *
                        static_cast<double>(p_.vocab);
    out_.totals.min_hbm_bytes = static_cast<double>((p_.tokens + p_.vocab) * p_.d_model * b) +
                                8.0 * static_cast<double>(p_.tokens);  // labels in, loss out
    out_.totals.compute_type = p_.type;
  }

  /// The labels of token tile `ti`: one int32 per partition per row tile.
  void load_labels(std::int64_t ti) {
    const std::int64_t parts = m_.partitions;
    const std::int64_t rows_t = std::min(p_.token_tile, p_.tokens - ti * p_.token_tile);
    for (std::int64_t s = 0; s < ceil_div(rows_t, parts); ++s)
      labels_[static_cast<std::size_t>(ti * pl_.subs + s)] = b_.dma(
          q_.next(2), hbm_labels_, sb_state_, std::min(parts, rows_t - s * parts), 4, t_labels, {});
  }

  /// Loads block `block` of `x` (stream 0: x tiles, 1: W chunks) when it is
  /// not the block its current slot holds.
  void place(operand& x, int stream, std::int64_t block, std::int64_t cols) {
    if (x.block == block) return;
    x.block = block;
    const auto war = x.next();
    const std::int64_t b = dtype_bytes(p_.type);
    for (std::int64_t k = 0; k < pl_.slabs; ++k) {
      const std::int64_t rows = std::min(p_.mm_k, p_.d_model - k * p_.mm_k);
      const auto id =
          b_.dma(q_.next(stream), stream == 0 ? hbm_x_ : hbm_w_, stream == 0 ? sb_x_ : sb_w_, rows,
                 cols * b, stream == 0 ? t_x : t_w, {war});
      x.fill(k, id);
    }
  }

  void unit(std::int64_t ti, std::int64_t vi) {
    const std::int64_t parts = m_.partitions;
    const std::int64_t rows_t = std::min(p_.token_tile, p_.tokens - ti * p_.token_tile);
    const std::int64_t cols = std::min(p_.vocab_chunk, p_.vocab - vi * p_.vocab_chunk);
    const bool new_x = x_.block != ti;
    place(x_, 0, ti, rows_t);
    if (new_x && !p_.vocab_outer) load_labels(ti);
    place(w_, 1, vi, cols);
    const auto set = static_cast<std::int64_t>(units_++ % pl_.sets);
    const std::int64_t subs = ceil_div(rows_t, parts);
    const std::int64_t n_tiles = ceil_div(cols, p_.mm_n);
    instruction_id last = program::none;
    for (std::int64_t s = 0; s < subs; ++s) {
      const std::int64_t rows = std::min(parts, rows_t - s * parts);
      const std::int64_t bank0 = set * pl_.groups + s * pl_.banks_per_sub;
      for (std::int64_t n = 0; n < n_tiles; ++n) {
        const std::int64_t width = std::min(p_.mm_n, cols - n * p_.mm_n);
        const auto bank = static_cast<std::size_t>(bank0 + n * p_.mm_n * 4 / m_.psum_bank_bytes);
        for (std::int64_t k = 0; k < pl_.slabs; ++k) {
          deps_.clear();
          if (k == 0)
            for (const auto r : bank_readers_[bank])
              if (r != program::none) deps_.push_back(r);
          x_.need(k, deps_);
          w_.need(k, deps_);
          last = b_.matmul(p_.type, std::min(p_.mm_k, p_.d_model - k * p_.mm_k), rows, width, true,
                           k > 0, sb_w_, psum_[bank], t_mm, deps_);
        }
      }
      epilogue(ti, vi, s, rows, cols, last, bank0);
    }
    x_.read_by(last);
    w_.read_by(last);
  }

  /// The online log-sum-exp step of one row tile over one chunk of logits,
  /// and after the last chunk the loss and its store, as the kernel issues
  /// it (cross_entropy_nki.cpp): the running max is kept negated, so the
  /// exp's bias and the correction exp(m_old - m_new) need no extra pass.
  void epilogue(std::int64_t ti, std::int64_t vi, std::int64_t s, std::int64_t rows,
                std::int64_t cols, instruction_id last_mm, std::int64_t bank0) {
    const auto row_tile = static_cast<std::size_t>(ti * pl_.subs + s);
    const instruction_id prev = state_[row_tile];
    const bool first = vi == 0;
    const buffer_id z = psum_[static_cast<std::size_t>(bank0)];
    // -max of the chunk, then the new running -max (the first chunk's is its own)
    instruction_id mnew =
        b_.compute(vector_engine, op::reduce, rows, cols, z, sb_state_, t_max, {last_mm});
    if (!first)
      mnew = b_.compute(vector_engine, op::tensor_tensor, rows, 1, sb_state_, sb_state_, t_online,
                        {mnew, prev});
    const auto ex = b_.function(scalar_engine, rows, cols, z, sb_scratch_, t_exp, {mnew});
    // the label's logit: a one-hot mask (column + c0 == label), times the logits, summed
    const auto mask = b_.compute(p_.pick_engine, op::tensor_scalar, rows, cols, sb_scratch_,
                                 sb_scratch_, t_pick, {labels_[row_tile], iota_});
    const auto product = b_.compute(vector_engine, op::tensor_tensor, rows, cols, z, sb_scratch_,
                                    t_pick, {mask, last_mm});
    instruction_id update = b_.compute(vector_engine, op::reduce, rows, cols, sb_scratch_,
                                       sb_state_, t_pick, {product});
    for (std::int64_t k = 0; k < pl_.banks_per_sub; ++k)
      bank_readers_[static_cast<std::size_t>(bank0 + k)] = {ex, product};
    if (!first) {  // l = l * exp(m_old - m_new) + the chunk's sum; picked += the chunk's
      const auto alpha =
          b_.function(scalar_engine, rows, 1, sb_state_, sb_state_, t_online, {mnew});
      b_.compute(vector_engine, op::tensor_tensor, rows, 1, sb_state_, sb_state_, t_online,
                 {ex, alpha});
      update = b_.compute(vector_engine, op::tensor_tensor, rows, 1, sb_state_, sb_state_, t_online,
                          {update});
    }
    state_[row_tile] = update;
    if (vi + 1 < pl_.chunks) return;
    const auto ln = b_.function(scalar_engine, rows, 1, sb_state_, sb_state_, t_loss, {update, ex});
    const auto loss =
        b_.compute(vector_engine, op::tensor_tensor, rows, 1, sb_state_, sb_state_, t_loss, {ln});
    state_[row_tile] = b_.dma(q_.next(2), sb_state_, hbm_loss_, rows, 4, t_store, {loss});
  }

  buffer_id hbm_x_ = 0, hbm_w_ = 0, hbm_labels_ = 0, hbm_loss_ = 0, sb_x_ = 0, sb_w_ = 0,
            sb_scratch_ = 0, sb_state_ = 0;
  std::vector<buffer_id> psum_;  ///< one per bank
  operand x_, w_;
  std::vector<std::array<instruction_id, 2>> bank_readers_;
  std::vector<instruction_id> state_, labels_, deps_;
  instruction_id iota_ = program::none;
  std::uint64_t units_ = 0;
};

// --- functional mode ---------------------------------------------------------------

/// The schedule on data: per probed token, the logits of each vocabulary
/// chunk accumulated in fp32 over d_model (one mm_k slab after another, as
/// the PSUM group does), then the fp32 online log-sum-exp in chunk order —
/// chunk max, new running max, the sum of exp(logit - max), the label's
/// logit picked by the one-hot reduce, the running sum corrected by
/// exp(m_old - m_new) — and loss = max + ln(sum) - label logit in fp32.
/// The reference is the same in fp64 with an exact log-sum-exp. Each run
/// reads every column of W once (d_model x vocab draws) whatever the
/// number of probed tokens; past emit::functional_reads_per_output,
/// functional() checks the schedule at a vocabulary and d_model shrunk to
/// the first, an interior and the tail chunk and slab (emit::shrink).
class cross_entropy_kernel final : public functional_kernel {
 public:
  explicit cross_entropy_kernel(const params& p) : p_(p), type_(element_of(p.type)) {}

  [[nodiscard]] std::vector<tensor_spec> inputs() const override {
    return {{"x", {p_.d_model, p_.tokens}, type_, 0},
            {"W", {p_.d_model, p_.vocab}, type_, 0},
            {"labels", {p_.tokens}, element_type::int32, p_.vocab}};
  }
  [[nodiscard]] std::vector<tensor_spec> outputs() const override {
    return {{"loss", {p_.tokens}, element_type::fp32, 0}};
  }

  /// Tokens of the first, the tail and random interior token tiles: every
  /// token costs d_model x vocab multiply-adds, so long projections get few.
  [[nodiscard]] probe_points probes(rng& r) const override {
    const double per_token = static_cast<double>(p_.d_model) * static_cast<double>(p_.vocab);
    const auto want =
        static_cast<std::int64_t>(std::clamp(64.0 * probe_budget / per_token, 4.0, 128.0));
    return {pick_indices(p_.tokens, p_.token_tile, want, r)};
  }

  [[nodiscard]] probe_values reference(std::span<const input_tensor> in,
                                       const probe_points& where) const override {
    return losses(in, where, true);
  }

 protected:
  [[nodiscard]] probe_values execute(std::span<const input_tensor> in,
                                     const probe_points& where) const override {
    return losses(in, where, false);
  }

 private:
  /// W (column after column) and the probed tokens' x columns and labels,
  /// drawn once per suite (input_memo).
  struct drawn {
    std::vector<float> w;
    std::map<std::int64_t, std::pair<std::vector<float>, std::int64_t>> tokens;
  };

  /// The running state of one token (fp32 in the schedule, fp64 in the reference).
  template <class real>
  struct state {
    real m = -std::numeric_limits<real>::infinity(), l = 0, picked = 0;
    bool started = false;
  };

  template <class real>
  static void fold(state<real>& st, const std::vector<real>& logits, std::int64_t label_at) {
    real cmax = -std::numeric_limits<real>::infinity();
    for (const real z : logits) cmax = std::max(cmax, z);
    const real mnew = std::max(st.m, cmax);
    real sum = 0;
    for (const real z : logits) sum += std::exp(z - mnew);
    if (label_at >= 0) st.picked += logits[static_cast<std::size_t>(label_at)];
    st.l = st.started ? st.l * std::exp(st.m - mnew) + sum : sum;
    st.m = mnew;
    st.started = true;
  }

  /// The schedule's (exact = false) or the reference's losses at `where`.
  [[nodiscard]] probe_values losses(std::span<const input_tensor> in, const probe_points& where,
                                    bool exact) const {
    return memo_.with(in, [&](drawn& cache) { return losses(in, where, exact, cache); });
  }

  /// Fills `cache` with W and the x columns and labels of `points`.
  void draw(std::span<const input_tensor> in, const std::vector<std::int64_t>& points,
            drawn& cache) const {
    const std::int64_t d = p_.d_model;
    if (cache.w.empty()) {
      cache.w.resize(static_cast<std::size_t>(d * p_.vocab));
      for (std::int64_t v = 0; v < p_.vocab; ++v)
        for (std::int64_t k = 0; k < d; ++k)
          cache.w[static_cast<std::size_t>(v * d + k)] = static_cast<float>(in[1].at(k, v));
    }
    for (const auto t : points) {
      auto& [x, label] = cache.tokens[t];
      if (!x.empty()) continue;
      x.resize(static_cast<std::size_t>(d));
      for (std::int64_t k = 0; k < d; ++k)
        x[static_cast<std::size_t>(k)] = static_cast<float>(in[0].at(k, t));
      label = static_cast<std::int64_t>(in[2].at(t));
    }
  }

  [[nodiscard]] probe_values losses(std::span<const input_tensor> in, const probe_points& where,
                                    bool exact, drawn& cache) const {
    const auto& points = where.at(0);
    draw(in, points, cache);
    const bool drop = !exact && injected() == fault::drop_tail;
    const bool skip = !exact && injected() == fault::skip_accumulation;
    const std::int64_t d = p_.d_model, chunk = p_.vocab_chunk;
    // drop_tail: the loops stop before a partial last chunk or token tile
    const std::int64_t v_end =
        drop && p_.vocab % chunk != 0 && p_.vocab > chunk ? p_.vocab / chunk * chunk : p_.vocab;
    const std::int64_t t_end = drop && p_.tokens % p_.token_tile != 0 && p_.tokens > p_.token_tile
                                   ? p_.tokens / p_.token_tile * p_.token_tile
                                   : p_.tokens;
    const std::int64_t k_end = skip ? (ceil_div(d, p_.mm_k) - 1) * p_.mm_k : d;
    const std::size_t n = points.size();
    std::vector<const std::vector<float>*> x(n);
    std::vector<std::int64_t> label(n);
    for (std::size_t i = 0; i < n; ++i) {
      const auto& token = cache.tokens.at(points[i]);
      x[i] = &token.first;
      label[i] = token.second;
    }
    std::vector<state<float>> fs(n);
    std::vector<state<double>> ds(n);
    std::vector<std::vector<float>> fl(n);
    std::vector<std::vector<double>> dl(n);
    for (std::int64_t c0 = 0; c0 < v_end; c0 += chunk) {
      const std::int64_t c1 = std::min(p_.vocab, c0 + chunk);
      for (std::size_t i = 0; i < n; ++i) {
        fl[i].assign(static_cast<std::size_t>(c1 - c0), 0.0F);
        dl[i].assign(static_cast<std::size_t>(c1 - c0), 0.0);
      }
      for (std::int64_t v = c0; v < c1; ++v) {
        const float* w = cache.w.data() + v * d;
        const auto j = static_cast<std::size_t>(v - c0);
        for (std::size_t i = 0; i < n; ++i) {
          if (exact) {
            double z = 0;
            for (std::int64_t k = 0; k < d; ++k)
              z += static_cast<double>((*x[i])[static_cast<std::size_t>(k)]) *
                   static_cast<double>(w[k]);
            dl[i][j] = z;
            continue;
          }
          float z = 0;  // the PSUM group: fp32, slab after slab
          for (std::int64_t k = 0; k < k_end; ++k) z += (*x[i])[static_cast<std::size_t>(k)] * w[k];
          fl[i][j] = z;
        }
      }
      for (std::size_t i = 0; i < n; ++i) {
        const std::int64_t at = label[i] >= c0 && label[i] < c1 ? label[i] - c0 : -1;
        if (exact)
          fold(ds[i], dl[i], at);
        else
          fold(fs[i], fl[i], at);
      }
    }
    probe_values out(1);
    out[0].reserve(n);
    for (std::size_t i = 0; i < n; ++i) {
      if (exact) {
        out[0].push_back(ds[i].m + std::log(ds[i].l) - ds[i].picked);
      } else if (points[i] >= t_end) {
        out[0].push_back(0);  // never computed
      } else {
        const float ln = std::log(fs[i].l);
        out[0].push_back(static_cast<double>((fs[i].m + ln) - fs[i].picked));
      }
    }
    return out;
  }

  params p_;
  element_type type_;
  input_memo<drawn> memo_;
};

class cross_entropy final : public planned_workload<plan, params, read, make_plan, lowerer> {
 public:
  cross_entropy()
      : planned_workload({
            "cross_entropy",
            "fused cross-entropy: loss = logsumexp(x W) - (x W)[label], chunked over the "
            "vocabulary (the logits never reach HBM)",
            {
                knob::required_integer("tokens", "rows of x (one loss each)"),
                knob::required_integer("d_model", "the contraction of the vocabulary projection"),
                knob::required_integer("vocab", "columns of W (the logits per token)"),
                emit::dtype_knob("x and W type; PSUM is fp32"),
                emit::bytes_knob(),
                knob::integer("token_tile", 128,
                              "tokens per x tile (128-row tiles; over 128 a multiple of 128)"),
                knob::integer("vocab_chunk", 512,
                              "vocabulary columns per chunk (the W block; one PSUM bank per 512 "
                              "per row tile)"),
                knob::order("order", {"t", "v"},
                            "(t, v): x tile resident, W streamed once per token tile; (v, t): W "
                            "chunk resident, x streamed once per chunk"),
                knob::integer("bufs", 2, "slots of the streamed operand (the outer one keeps 2)",
                              ">= 1"),
                knob::symbol("max_engine", {"vector", "gpsimd"}, "vector",
                             "the chunk's row max: a tensor_reduce of PSUM, which runs on VectorE "
                             "only (gpsimd is a compile error)"),
                knob::symbol("exp_engine", {"scalar", "vector"}, "scalar",
                             "exp(logits - max) with its row sum, and the running-sum "
                             "correction: ScalarE activations (vector is a compile error)"),
                knob::symbol("pick_engine", {"vector", "gpsimd"}, "vector",
                             "builds the one-hot mask of the label's column; VectorE multiplies "
                             "it by the logits (in PSUM) and sums"),
                knob::integer("dma_queues", 1,
                              "queues per stream (x loads, W loads, labels and loss)", "1..5"),
                knob::integer("mm_k", derived{"the partitions (128)"}, "contraction of one matmul"),
                knob::integer("mm_n", derived{"matmul_max_moving_free (512)"},
                              "moving free size of one matmul"),
            },
            "tokens",
        }) {}

  [[nodiscard]] double estimated_instructions(const space& s, const config& c,
                                              const machine& m) const override {
    plan pl;
    if (!read_plan(reader(s, c), m, pl).empty()) return 1;
    const params& p = pl.p;
    return static_cast<double>(pl.token_tiles * pl.chunks) *
           static_cast<double>(pl.slabs * 2 + pl.subs * (8 + ceil_div(p.vocab_chunk, p.mm_n)));
  }

  [[nodiscard]] std::vector<std::string> suggest(const bottleneck& b, const space& s,
                                                 const config& c) const override;

 private:
  [[nodiscard]] std::string lower_program(const plan& pl, const machine& m,
                                          program& out) const override {
    out.reserve(static_cast<std::size_t>(
        std::min<double>(2e6, static_cast<double>(pl.token_tiles * pl.chunks) *
                                  static_cast<double>(pl.slabs * 2 + pl.subs * 8))));
    return planned_workload::lower_program(pl, m, out);
  }

  [[nodiscard]] std::optional<steady_estimate> steady(const plan& pl,
                                                      const machine& m) const override {
    return ce::estimate_steady(pl, m);
  }

  [[nodiscard]] std::unique_ptr<functional_kernel> executor(const plan& pl,
                                                            const machine& m) const override {
    (void)m;
    params p = pl.p;  // shrunk below for long reductions
    // every loss reads d_model x vocab inputs: past the cap, check the
    // schedule on its first, an interior and its tail chunk and slab
    if (static_cast<double>(p.d_model) * static_cast<double>(p.vocab) >
        emit::functional_reads_per_output) {
      p.vocab = emit::shrink(p.vocab, p.vocab_chunk);
      p.d_model = emit::shrink(p.d_model, p.mm_k);
    }
    return std::make_unique<cross_entropy_kernel>(p);
  }

  [[nodiscard]] std::string write_nki(const plan& pl, const nki::context& ctx,
                                      std::string& out) const override {
    const params& p = pl.p;
    ce::nki_params n;
    n.tokens = p.tokens;
    n.d_model = p.d_model;
    n.vocab = p.vocab;
    n.type = p.type;
    n.token_tile = p.token_tile;
    n.vocab_chunk = p.vocab_chunk;
    n.mm_k = p.mm_k;
    n.mm_n = p.mm_n;
    n.vocab_outer = p.vocab_outer;
    n.bufs = p.bufs;
    n.queues = p.queues;
    n.max_engine = p.max_engine;
    n.exp_engine = p.exp_engine;
    n.pick_engine = p.pick_engine;
    return ce::emit_nki(n, ctx, out);
  }
};

std::vector<std::string> cross_entropy::suggest(const bottleneck& b, const space& s,
                                                const config& c) const {
  const knob_reader v = reader(s, c);
  std::vector<std::string> out;
  const auto tokens = v.integer("tokens"), vocab = v.integer("vocab");
  const auto tile = std::max<std::int64_t>(1, v.integer("token_tile"));
  const auto chunk = std::max<std::int64_t>(1, v.integer("vocab_chunk"));
  const bool dma = b.phase.rfind("dma", 0) == 0;
  emit::suggest_queues_for_issue(b, v, out);
  if (dma && b.tag == "load W") {
    out.push_back(fmt::format(
        "raise token_tile (now {}): W is read from HBM once per token tile ({} times now)", tile,
        ceil_div(tokens, tile)));
    out.emplace_back("order = (v, t) keeps each W chunk resident while x streams");
    out.push_back(fmt::format("raise bufs (now {}) or dma_queues (now {}) to overlap the W loads",
                              v.integer("bufs"), v.integer("dma_queues")));
  } else if (dma && b.tag == "load x") {
    out.push_back(fmt::format(
        "raise vocab_chunk (now {}): x is read once per vocabulary chunk ({} times now)", chunk,
        ceil_div(vocab, chunk)));
    out.emplace_back("order = (t, v) keeps each x tile resident while W streams");
  } else if (dma) {
    out.push_back(fmt::format("raise dma_queues (now {}) so transfers issue in parallel",
                              v.integer("dma_queues")));
  } else if (b.phase == "tensor") {
    out.emplace_back(
        "TensorE carries the vocabulary projection: keep mm_n = 512 and vocab_chunk a multiple "
        "of 512, token_tile a multiple of 128");
    if (ceil_div(tile, 128) * ceil_div(chunk, 512) > 4)
      out.emplace_back(
          "lower token_tile x vocab_chunk to at most 4 PSUM banks so the next chunk's matmuls "
          "overlap this chunk's log-sum-exp");
  } else if (b.tag == "label logit" && v.symbol("pick_engine") == "vector") {
    out.emplace_back("pick_engine = gpsimd: GpSimdE builds the one-hot masks");
  } else if (b.phase == "vector" || b.phase == "scalar" || b.phase == "gpsimd") {
    out.emplace_back(
        "raise vocab_chunk: the per-chunk passes of the online log-sum-exp pay a fixed cost each");
  }
  return out;
}

}  // namespace

const workload& cross_entropy_workload() {
  static const cross_entropy instance;
  return instance;
}

}  // namespace tessel::sim
