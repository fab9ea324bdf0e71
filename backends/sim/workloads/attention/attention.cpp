// attention.cpp: flash-attention forward for one head on one NeuronCore,
// O = softmax(Q K^T / sqrt(d)) V with the online softmax, as NKI kernels do it:
// Q and K given transposed ([d, seq]), V and O as [seq, d]. For each q tile
// (128-row sub-tiles) and each kv tile: S = Q K^T into PSUM (TensorE), the
// row max (track_max_on), the running-max correction of the accumulator
// (rescale), P = exp(S - max) with a running row sum (exp_engine), P
// transposed block by block through TensorE, O_part = P V (TensorE), and
// O_acc += O_part (VectorE); at the end O = O_acc / l, stored. The sub-tiles
// are software-pipelined one deep: S of the next unit is issued before the
// transposes of the current one. Reads the names of examples/attention.tsl.
#include "../../functional.hpp"
#include "../../nki/nki.hpp"
#include "../../timing.hpp"
#include "../../typed_workload.hpp"
#include "../emit.hpp"
#include "attention_plan.hpp"

#include <tessel/gate.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <initializer_list>
#include <string>
#include <vector>

namespace tessel::sim {

namespace attn {

std::string read(const knob_reader& v, const machine& m, params& p) {
  p.seq = v.integer("seq");
  p.d = v.integer("head_dim");
  if (p.seq <= 0 || p.d <= 0) return "attention: seq and head_dim must be positive";
  std::string type = v.symbol("dtype", "");
  if (type.empty()) type = v.integer("bytes") == 4 ? "fp32" : "bf16";
  p.type = emit::dtype_named(type);
  p.causal = v.flag("causal");
  p.skip_masked = v.flag("skip_masked");
  p.q_tile = std::min(v.integer("q_tile"), p.seq);
  p.kv_tile = std::min(v.integer("kv_tile"), p.seq);
  p.kv_bufs = static_cast<int>(v.integer("kv_bufs"));
  p.queues = static_cast<int>(std::clamp<std::int64_t>(v.integer("dma_queues"), 1, 4));
  p.dma_order = v.order("dma_order");
  p.exp_on_vector = v.symbol("exp_engine") == "vector";
  if (p.exp_on_vector)
    return "attention: exp_engine = vector: exp is a ScalarE activation (VectorE has no function "
           "unit)";
  p.rescale_every =
      v.symbol("rescale") == "lazy" ? static_cast<int>(v.integer("rescale_every")) : 1;
  p.max_engine = v.symbol("track_max_on") == "gpsimd" ? gpsimd_engine : vector_engine;
  if (p.max_engine != vector_engine)
    return "attention: track_max_on = gpsimd: the row max is a tensor_reduce, which runs on "
           "VectorE only (and GpSimdE cannot read the scores in PSUM)";
  if (p.d > m.max_contraction)
    return fmt::format(
        "partition dim {} > {}: head_dim is the contraction of Q K^T and must fit the partitions",
        p.d, m.max_contraction);
  if (p.q_tile <= 0 || p.kv_tile <= 0 || p.kv_bufs < 1 || p.rescale_every < 1)
    return "attention: q_tile, kv_tile, kv_bufs and rescale_every must be positive";
  if (p.q_tile % m.partitions != 0 && p.q_tile > m.partitions)
    return fmt::format("attention: q_tile = {} must be a multiple of {}", p.q_tile, m.partitions);
  return "";
}

layout layout_of(const params& p, const machine& m) {
  layout l;
  l.partitions = m.partitions;
  l.sub_tiles = static_cast<int>(ceil_div(p.q_tile, l.partitions));
  l.kv_blocks = static_cast<int>(ceil_div(p.kv_tile, l.partitions));
  l.s_banks = static_cast<int>(ceil_div(p.kv_tile * 4, m.psum_bank_bytes));
  const int free_banks = m.psum_banks - 2 /*transposes*/ - 1 /*O part*/;
  l.s_sets = free_banks / std::max(1, l.s_banks);
  return l;
}

std::string check_memory(const params& p, const machine& m) {
  const layout l = layout_of(p, m);
  if (l.s_sets < 1)
    return fmt::format(
        "PSUM overflow: a {}-wide score tile needs {} banks, transposes 2 and the output 1; the "
        "target has {} (over by {})",
        p.kv_tile, l.s_banks, m.psum_banks, l.s_banks + 3 - m.psum_banks);
  const std::int64_t bytes = dtype_bytes(p.type);
  const std::int64_t q = p.q_tile * bytes;  // Q^T: d partitions x q_tile
  const std::int64_t kv = static_cast<std::int64_t>(p.kv_bufs) *
                          (p.kv_tile * bytes + l.kv_blocks * p.d * bytes);  // K^T and V
  const std::int64_t probs = p.kv_tile * bytes * 4;  // masked scores, P and P^T
  const std::int64_t acc = static_cast<std::int64_t>(l.sub_tiles) * p.d * 4 +
                           2 * p.d * bytes;  // O_acc (fp32) and output staging
  const std::int64_t total = q + kv + probs + acc, cap = m.sbuf_bytes_per_partition;
  if (total <= cap) return "";
  return fmt::format(
      "SBUF overflow: Q ({} B), K and V with kv_bufs={} ({} B), probabilities ({} B) and "
      "accumulators ({} B) need {} B per partition; the target has {} (over by {} B)",
      q, p.kv_bufs, kv, probs, acc, total, cap, total - cap);
}

}  // namespace attn

namespace {

using namespace attn;

/// One (q sub-tile, kv tile) step of the pipeline.
struct unit {
  std::int64_t qt = 0, kt = 0;  ///< tile indices
  int sub = 0;                  ///< 128-row sub-tile of the q tile
  bool diagonal = false;        ///< causal: some key of the tile is after some row of the sub-tile
  bool first_kv = false, last_kv = false;
  int kv_index = 0;  ///< position among the kv tiles this q tile visits
};

/// The lowering issues what the NKI kernel (attention_nki.cpp) issues, unit
/// by unit; the units are software-pipelined one deep in issue order (S of
/// the next unit before the transposes of this one), as the compiler's
/// scheduler would overlap them.
class lowerer {
 public:
  lowerer(const params& p, const machine& m, program& out)
      : p_(p), m_(m), out_(out), b_(out), q_(1, p.queues) {}

  std::string run() {
    const layout l = layout_of(p_, m_);
    P_ = l.partitions;
    sub_tiles_ = l.sub_tiles;
    kv_blocks_ = l.kv_blocks;
    s_banks_ = l.s_banks;
    s_sets_ = l.s_sets;
    if (auto e = check_memory(p_, m_); !e.empty()) return e;
    setup();
    const auto units = schedule();
    for (std::size_t u = 0; u < units.size(); ++u) {
      if (units[u].sub == 0 && units[u].first_kv) load_q(units[u].qt);
      if (units[u].sub == 0) load_kv(units[u].kt);
      scores(units[u], u);
      if (u > 0) product(units[u - 1], u - 1);
    }
    if (!units.empty()) product(units.back(), units.size() - 1);
    return "";
  }

 private:
  [[nodiscard]] std::int64_t bytes() const { return dtype_bytes(p_.type); }

  void setup() {
    const std::int64_t tensor = p_.seq * p_.d * bytes();
    hbm_ = out_.add_buffer({"Q, K, V (HBM)", memory::hbm, 0, 1, 3 * tensor});
    hbm_o_ = out_.add_buffer({"O (HBM)", memory::hbm, 0, 1, tensor});
    sb_q_ = out_.add_buffer({"Q^T tile", memory::sbuf, p_.q_tile * bytes(), 1, 0});
    sb_kv_ = out_.add_buffer({"K^T and V tiles", memory::sbuf,
                              p_.kv_tile * bytes() + kv_blocks_ * p_.d * bytes(), p_.kv_bufs, 0});
    sb_p_ = out_.add_buffer({"P and P^T", memory::sbuf, 2 * p_.kv_tile * bytes(), 2, 0});
    sb_o_ = out_.add_buffer(
        {"O accumulators", memory::sbuf, sub_tiles_ * p_.d * 4 + 2 * p_.d * bytes(), 1, 0});
    // banks 0 and 1: the transposes of P; 2: O_part; then the score sets
    psum_ = emit::psum_banks(out_, m_, m_.psum_banks);
    b_.tags({"load Q", "load K", "load V", "QK^T", "row max", "mask", "rescale", "exp",
             "transpose P", "PV", "accumulate O", "normalize O", "store O"});
    kv_readers_.assign(static_cast<std::size_t>(p_.kv_bufs), {});
    kv_loads_.assign(static_cast<std::size_t>(p_.kv_bufs),
                     std::vector<instruction_id>(static_cast<std::size_t>(1 + kv_blocks_)));
    s_reader_.assign(static_cast<std::size_t>(s_sets_), program::none);
    acc_last_.assign(static_cast<std::size_t>(sub_tiles_), program::none);
    state_.assign(static_cast<std::size_t>(sub_tiles_), program::none);
    if (p_.causal)  // key - row for every (row, key) of a score tile: nisa.iota, once
      diag_ = b_.compute(gpsimd_engine, op::copy, P_, p_.kv_tile, sb_p_, sb_p_, t_mask, {});
    const double pairs = p_.causal
                             ? 0.5 * static_cast<double>(p_.seq) * static_cast<double>(p_.seq + 1)
                             : static_cast<double>(p_.seq) * static_cast<double>(p_.seq);
    out_.totals.flops = 4.0 * pairs * static_cast<double>(p_.d);
    out_.totals.min_hbm_bytes = 4.0 * static_cast<double>(p_.seq * p_.d * bytes());
    out_.totals.compute_type = p_.type;
  }

  enum tag_index : std::size_t {
    t_q,
    t_k,
    t_v,
    t_qk,
    t_max,
    t_mask,
    t_rescale,
    t_exp,
    t_transpose,
    t_pv,
    t_acc,
    t_norm,
    t_store
  };

  /// Every (q tile, kv tile, sub-tile) step, skipping fully masked kv tiles.
  [[nodiscard]] std::vector<unit> schedule() const {
    std::vector<unit> units;
    const std::int64_t q_tiles = ceil_div(p_.seq, p_.q_tile);
    for (std::int64_t qt = 0; qt < q_tiles; ++qt) {
      const std::vector<std::int64_t> kvs = visited_kv_tiles(p_, qt);
      for (std::size_t i = 0; i < kvs.size(); ++i)
        for (int sub = 0; sub < sub_tiles_ && qt * p_.q_tile + sub * P_ < p_.seq; ++sub) {
          unit u;
          u.qt = qt;
          u.kt = kvs[i];
          u.sub = sub;
          const std::int64_t last_key = std::min(p_.seq, (kvs[i] + 1) * p_.kv_tile) - 1;
          u.diagonal = p_.causal && last_key > qt * p_.q_tile + sub * P_;
          u.first_kv = i == 0;
          u.last_kv = i + 1 == kvs.size();
          u.kv_index = static_cast<int>(i);
          units.push_back(u);
        }
    }
    return units;
  }

  /// A one-value-per-row VectorE step of the running state.
  instruction_id row_step(op kind, std::size_t tag, std::initializer_list<instruction_id> deps,
                          std::int64_t rows) {
    return b_.compute(vector_engine, kind, rows, 1, sb_p_, sb_p_, tag, deps);
  }

  void load_q(std::int64_t qt) {
    const std::int64_t cols = std::min(p_.q_tile, p_.seq - qt * p_.q_tile);
    q_load_ = b_.dma(q_.next(0), hbm_, sb_q_, p_.d, cols * bytes(), t_q, q_readers_);
    q_readers_.clear();
  }

  /// K^T [d, kv] in one transfer and V a 128-key block per transfer, in dma_order.
  void load_kv(std::int64_t kt) {
    const auto slot = static_cast<std::size_t>(kt % p_.kv_bufs);
    if (loaded_kt_ == kt) return;
    loaded_kt_ = kt;
    const std::int64_t cols = std::min(p_.kv_tile, p_.seq - kt * p_.kv_tile);
    const auto war = kv_readers_[slot];
    kv_readers_[slot].clear();
    for (const auto& which : p_.dma_order) {
      if (which == "k")
        kv_loads_[slot][0] = b_.dma(q_.next(0), hbm_, sb_kv_, p_.d, cols * bytes(), t_k, war);
      if (which == "v")
        for (std::int64_t b = 0; b < ceil_div(cols, P_); ++b)
          kv_loads_[slot][static_cast<std::size_t>(1 + b)] = b_.dma(
              q_.next(0), hbm_, sb_kv_, std::min(P_, cols - b * P_), p_.d * bytes(), t_v, war);
    }
    kv_slot_ = slot;
  }

  /// S = Q K^T, the mask, the running max and reference, the correction of
  /// O_acc, P = exp and the row sum: the part of a unit before the transposes.
  void scores(const unit& u, std::size_t index) {
    const std::int64_t cols = std::min(p_.kv_tile, p_.seq - u.kt * p_.kv_tile);
    const std::int64_t rows = std::min<std::int64_t>(P_, p_.seq - u.qt * p_.q_tile - u.sub * P_);
    const auto set = static_cast<std::size_t>(index % static_cast<std::size_t>(s_sets_));
    const auto slot = kv_slot_;
    const auto bank0 = static_cast<std::size_t>(3) + set * static_cast<std::size_t>(s_banks_);
    instruction_id last = program::none;
    for (std::int64_t c = 0; c < cols; c += m_.max_moving_free) {
      std::vector<instruction_id> deps;
      if (c == 0) deps = {s_reader_[set], q_load_, kv_loads_[slot][0]};
      last = b_.matmul(p_.type, p_.d, rows, std::min<std::int64_t>(m_.max_moving_free, cols - c),
                       c == 0, false, sb_kv_,
                       psum_[bank0 + static_cast<std::size_t>(c / m_.max_moving_free)], t_qk, deps);
    }
    q_readers_.push_back(last);
    kv_readers_[slot].push_back(last);
    buffer_id s = psum_[bank0];
    instruction_id prev = last;
    if (u.diagonal) {  // mask = (key - row > offset) * -3e38 (GpSimdE, SBUF), added to S
      const auto mask =
          b_.compute(gpsimd_engine, op::tensor_scalar, rows, cols, sb_p_, sb_p_, t_mask, {diag_});
      prev =
          b_.compute(vector_engine, op::tensor_tensor, rows, cols, s, sb_p_, t_mask, {prev, mask});
      s = sb_p_;  // the masked scores are in SBUF
    }
    const auto sub = static_cast<std::size_t>(u.sub);
    instruction_id m = b_.compute(vector_engine, op::reduce, rows, cols, s, sb_p_, t_max, {prev});
    if (!u.first_kv) m = row_step(op::tensor_tensor, t_max, {m, state_[sub]}, rows);
    // lazy: the reference max the exps use moves at a correction (or past the guard)
    instruction_id ref = m;
    if (p_.rescale_every > 1) {
      if (u.first_kv || u.kv_index % p_.rescale_every == 0) {
        ref = row_step(op::copy, t_rescale, {m}, rows);
      } else {  // diff = m - ref; diff *= (diff * scale > guard); ref += diff
        ref = row_step(op::tensor_tensor, t_rescale, {m}, rows);
        ref = row_step(op::tensor_scalar, t_rescale, {ref}, rows);
        ref = row_step(op::tensor_tensor, t_rescale, {ref}, rows);
        ref = row_step(op::tensor_tensor, t_rescale, {ref}, rows);
      }
    }
    const auto bias = row_step(op::tensor_scalar, t_exp, {ref}, rows);  // -scale * ref
    instruction_id alpha = program::none;
    if (!u.first_kv) {  // alpha = exp(scale * (ref_old - ref_new)); O_acc *= alpha
      alpha = b_.compute(scalar_engine, op::activation, rows, 1, sb_p_, sb_p_, t_rescale, {bias});
      acc_last_[sub] = b_.compute(vector_engine, op::tensor_scalar, rows, p_.d, sb_p_, sb_p_,
                                  t_rescale, {alpha, acc_last_[sub]});
    }
    const instruction_id exp = b_.compute(scalar_engine, op::activation, rows, cols, s, sb_p_,
                                          t_exp, {bias, prev, p_transposed_reader_[index % 2]});
    state_[sub] = u.first_kv ? exp : row_step(op::tensor_tensor, t_exp, {exp, alpha}, rows);
    s_reader_[set] = exp;
    exp_of_[index % 2] = exp;
    cols_of_[index % 2] = cols;
    rows_of_[index % 2] = rows;
  }

  /// P^T a 128-key block at a time (TensorE, into alternating banks, copied
  /// out by VectorE), O_part = P V accumulated in PSUM, O_acc (+)= O_part; at
  /// the last kv tile the normalization and the store.
  void product(const unit& u, std::size_t index) {
    const auto slot = static_cast<std::size_t>(u.kt % p_.kv_bufs);
    const std::int64_t cols = cols_of_[index % 2], rows = rows_of_[index % 2];
    instruction_id last = program::none, copy = program::none;
    for (std::int64_t b = 0; b < ceil_div(cols, P_); ++b) {
      const std::int64_t kb = std::min(P_, cols - b * P_);
      const auto bank = static_cast<std::size_t>(transposes_++ % 2);
      const auto tid = b_.transpose(p_.type, rows, kb, sb_p_, psum_[bank], t_transpose,
                                    {exp_of_[index % 2], transpose_bank_reader_[bank]});
      copy = b_.compute(vector_engine, op::copy, kb, rows, psum_[bank], sb_p_, t_transpose,
                        {tid, pv_reader_[index % 2]});
      transpose_bank_reader_[bank] = copy;
      std::vector<instruction_id> deps{copy, kv_loads_[slot][static_cast<std::size_t>(1 + b)]};
      if (b == 0) deps.push_back(o_part_reader_);
      last = b_.matmul(p_.type, kb, rows, p_.d, true, false, sb_kv_, psum_[2], t_pv, deps);
    }
    p_transposed_reader_[index % 2] = copy == program::none ? exp_of_[index % 2] : copy;
    pv_reader_[index % 2] = last;
    kv_readers_[slot].push_back(last);
    const auto sub = static_cast<std::size_t>(u.sub);
    const auto acc = b_.compute(vector_engine, u.first_kv ? op::copy : op::tensor_tensor, rows,
                                p_.d, psum_[2], sb_p_, t_acc, {last, acc_last_[sub]});
    o_part_reader_ = acc;
    acc_last_[sub] = acc;
    if (!u.last_kv) return;
    const auto inv = row_step(op::reciprocal, t_norm, {acc, state_[sub]}, rows);
    const auto norm = b_.compute(vector_engine, op::tensor_scalar, rows, p_.d, sb_p_, sb_p_, t_norm,
                                 {inv, store_[store_serial_ % 2]});
    const auto store = b_.dma(q_.next(0), sb_o_, hbm_o_, rows, p_.d * bytes(), t_store, {norm});
    store_[store_serial_++ % 2] = store;
    acc_last_[sub] = norm;
  }

  const params& p_;
  const machine& m_;
  program& out_;
  emit::builder b_;
  emit::queues q_;
  std::int64_t P_ = 128;
  int sub_tiles_ = 1, kv_blocks_ = 1, s_banks_ = 1, s_sets_ = 1;
  buffer_id hbm_ = 0, hbm_o_ = 0, sb_q_ = 0, sb_kv_ = 0, sb_p_ = 0, sb_o_ = 0;
  std::vector<buffer_id> psum_;  ///< one per bank
  std::vector<std::vector<instruction_id>> kv_readers_, kv_loads_;
  std::vector<instruction_id> s_reader_, q_readers_, state_;
  instruction_id q_load_ = program::none, o_part_reader_ = program::none, diag_ = program::none;
  std::array<instruction_id, 2> exp_of_{program::none, program::none},
      pv_reader_{program::none, program::none};
  std::array<instruction_id, 2> p_transposed_reader_{program::none, program::none};
  std::array<instruction_id, 2> transpose_bank_reader_{program::none, program::none};
  std::array<instruction_id, 2> store_{program::none, program::none};
  std::array<std::int64_t, 2> cols_of_{}, rows_of_{};
  std::vector<instruction_id> acc_last_;
  std::size_t kv_slot_ = 0;
  std::int64_t loaded_kt_ = -1, transposes_ = 0, store_serial_ = 0;
};

class attention final : public typed_workload<params> {
 public:
  attention()
      : typed_workload({
            "attention",
            "flash-attention forward for one head: O = softmax(Q K^T / sqrt(d)) V, online softmax",
            {
                knob::required_integer("seq", "sequence length (queries and keys)"),
                knob::integer("head_dim", 128, "d: the contraction of Q K^T", "<= 128"),
                emit::dtype_knob("Q, K, V, O and P type"),
                emit::bytes_knob(),
                knob::flag("causal", false, "mask keys after the query"),
                knob::flag("skip_masked", true, "causal: skip kv tiles that are wholly masked"),
                knob::integer("q_tile", 128, "query rows per tile (128-row sub-tiles)"),
                knob::integer("kv_tile", 512, "keys per tile (the score tile's width)"),
                knob::integer("kv_bufs", 2, "K/V tile slots", ">= 1"),
                knob::order("dma_order", {"q", "k", "v"},
                            "issue order of the K and V loads of a tile"),
                knob::symbol("exp_engine", {"scalar", "vector"}, "scalar",
                             "exp: a ScalarE activation; vector is a compile error (VectorE has "
                             "no function unit)"),
                knob::symbol("rescale", {"eager", "lazy"}, "eager",
                             "eager: the exps use the running row max; lazy: a reference max "
                             "that moves every rescale_every kv tiles, or for rows whose max "
                             "grew past e^8 (four more VectorE steps per row between "
                             "corrections: no data-dependent branch in NKI)"),
                knob::integer("rescale_every", 2, "lazy: kv tiles between corrections",
                              "2 | 4 | 8"),
                knob::symbol("track_max_on", {"vector", "gpsimd"}, "vector",
                             "the row max: a tensor_reduce, which runs on VectorE only (gpsimd "
                             "is a compile error)"),
                knob::integer("dma_queues", 1, "DMA queues shared by all loads and stores", "1..4"),
            },
            "",
        }) {}

  [[nodiscard]] std::vector<std::string> suggest(const bottleneck& b, const space& s,
                                                 const config& c) const override {
    const knob_reader v = reader(s, c);
    std::vector<std::string> out;
    if (b.tag == "rescale" && v.symbol("rescale") == "lazy")
      out.emplace_back("rescale = eager: the lazy reference costs four VectorE steps per row");
    if (b.phase == "vector")
      out.emplace_back(
          "VectorE carries the transposes' copies, the accumulation and the row max: raise kv_tile "
          "so each pass covers more keys");
    if (b.phase == "tensor")
      out.emplace_back("raise kv_tile: wider score tiles issue fewer, fuller matmuls");
    if (b.phase.rfind("dma", 0) == 0) {
      out.emplace_back("raise kv_tile or q_tile: K and V are re-read once per q tile");
      out.push_back(fmt::format("raise kv_bufs (now {}) or dma_queues (now {})",
                                v.integer("kv_bufs"), v.integer("dma_queues")));
    }
    if (v.flag("causal") && !v.flag("skip_masked"))
      out.emplace_back("skip_masked = true: wholly masked kv tiles do no work");
    return out;
  }

 private:
  [[nodiscard]] std::string read_plan(const knob_reader& v, const machine& m,
                                      params& out) const override {
    return read(v, m, out);
  }

  [[nodiscard]] std::string lower_program(const params& p, const machine& m,
                                          program& out) const override {
    return lowerer(p, m, out).run();
  }

  [[nodiscard]] std::unique_ptr<functional_kernel> executor(const params& p,
                                                            const machine& m) const override {
    return make_functional(p, m.partitions);
  }

  [[nodiscard]] std::optional<steady_estimate> steady(const params& p,
                                                      const machine& m) const override {
    return estimate_steady(p, m);
  }

  [[nodiscard]] std::string write_nki(const params& p, const nki::context& ctx,
                                      std::string& out) const override {
    return attn::emit_nki(p, ctx, out);
  }
};

}  // namespace

const workload& attention_workload() {
  static const attention instance;
  return instance;
}

}  // namespace tessel::sim
