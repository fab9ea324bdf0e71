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
  p.type = type == "fp32" ? dtype::fp32 : dtype::bf16;
  p.causal = v.flag("causal");
  p.skip_masked = v.flag("skip_masked");
  p.q_tile = std::min(v.integer("q_tile"), p.seq);
  p.kv_tile = std::min(v.integer("kv_tile"), p.seq);
  p.kv_bufs = static_cast<int>(v.integer("kv_bufs"));
  p.queues = static_cast<int>(std::clamp<std::int64_t>(v.integer("dma_queues"), 1, 4));
  p.dma_order = v.order("dma_order");
  p.exp_on_vector = v.symbol("exp_engine") == "vector";
  p.rescale_every =
      v.symbol("rescale") == "lazy" ? static_cast<int>(v.integer("rescale_every")) : 1;
  p.max_engine = v.symbol("track_max_on") == "gpsimd" ? gpsimd_engine : vector_engine;
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

}  // namespace attn

namespace {

using namespace attn;

/// One (q sub-tile, kv tile) step of the pipeline.
struct unit {
  std::int64_t qt = 0, kt = 0;  ///< tile indices
  int sub = 0;                  ///< 128-row sub-tile of the q tile
  bool diagonal = false;        ///< partly masked (causal)
  bool first_kv = false, last_kv = false;
  int kv_index = 0;  ///< position among the kv tiles this q tile visits
};

class lowerer {
 public:
  lowerer(const params& p, const machine& m, program& out) : p_(p), m_(m), out_(out) {}

  std::string run() {
    P_ = m_.partitions;
    sub_tiles_ = static_cast<int>(ceil_div(p_.q_tile, P_));
    kv_blocks_ = static_cast<int>(ceil_div(p_.kv_tile, P_));
    s_banks_ = static_cast<int>(ceil_div(p_.kv_tile * 4, m_.psum_bank_bytes));
    const int free_banks = m_.psum_banks - 2 /*transposes*/ - 1 /*O part*/;
    s_sets_ = free_banks / std::max(1, s_banks_);
    if (s_sets_ < 1)
      return fmt::format(
          "PSUM overflow: a {}-wide score tile needs {} banks, transposes 2 and the output 1; the "
          "target has {} (over by {})",
          p_.kv_tile, s_banks_, m_.psum_banks, s_banks_ + 3 - m_.psum_banks);
    if (auto e = check_sbuf(); !e.empty()) return e;
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

  std::string check_sbuf() const {
    const std::int64_t q = p_.q_tile * bytes();  // Q^T: d partitions x q_tile
    const std::int64_t kv = static_cast<std::int64_t>(p_.kv_bufs) *
                            (p_.kv_tile * bytes() + kv_blocks_ * p_.d * bytes());  // K^T and V
    const std::int64_t probs = p_.kv_tile * bytes() * 4;  // P and P^T, 2 slots each
    const std::int64_t acc = static_cast<std::int64_t>(sub_tiles_) * p_.d * 4 +
                             2 * p_.d * bytes();  // O_acc (fp32) and output staging
    const std::int64_t total = q + kv + probs + acc, cap = m_.sbuf_bytes_per_partition;
    if (total <= cap) return "";
    return fmt::format(
        "SBUF overflow: Q ({} B), K and V with kv_bufs={} ({} B), probabilities ({} B) and "
        "accumulators ({} B) need {} B per partition; the target has {} (over by {} B)",
        q, p_.kv_bufs, kv, probs, acc, total, cap, total - cap);
  }

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
    psum_ = out_.add_buffer({"PSUM", memory::psum, m_.psum_bank_bytes, m_.psum_banks, 0});
    for (const char* t : {"load Q", "load K", "load V", "QK^T", "row max", "mask", "rescale", "exp",
                          "transpose P", "PV", "accumulate O", "normalize O", "store O"})
      tags_.push_back(out_.add_tag(t));
    kv_readers_.assign(static_cast<std::size_t>(p_.kv_bufs), {});
    kv_loads_.assign(static_cast<std::size_t>(p_.kv_bufs), {program::none, program::none});
    s_reader_.assign(static_cast<std::size_t>(s_sets_), program::none);
    acc_last_.assign(static_cast<std::size_t>(sub_tiles_), program::none);
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
          u.diagonal = p_.causal && (kvs[i] + 1) * p_.kv_tile > qt * p_.q_tile + sub * P_;
          u.first_kv = i == 0;
          u.last_kv = i + 1 == kvs.size();
          u.kv_index = static_cast<int>(i);
          units.push_back(u);
        }
    }
    return units;
  }

  engine_id queue() { return static_cast<engine_id>(dma_serial_++ % p_.queues); }

  instruction_id dma(buffer_id src, buffer_id dst, std::int64_t rows, std::int64_t bytes_per_row,
                     std::int64_t chunk, std::size_t tag, const std::vector<instruction_id>& deps) {
    instruction in;
    in.engine = queue();
    in.kind = op::dma;
    in.partitions = static_cast<std::uint32_t>(rows);
    in.free = static_cast<std::uint32_t>(bytes_per_row);
    in.aux = static_cast<std::uint32_t>(chunk);
    in.src = src;
    in.dst = dst;
    in.tag = tags_[tag];
    return out_.add(in, deps);
  }

  instruction_id compute(engine_id e, op kind, std::int64_t rows, std::int64_t n,
                         std::uint8_t flags, std::size_t tag,
                         const std::vector<instruction_id>& deps, dtype t = dtype::fp32) {
    instruction in;
    in.engine = e;
    in.kind = kind;
    in.type = t;
    in.flags = flags;
    in.partitions = static_cast<std::uint32_t>(rows);
    in.free = static_cast<std::uint32_t>(std::max<std::int64_t>(n, 1));
    in.src = (flags & flag_reads_psum) ? psum_ : sb_p_;
    in.dst = sb_p_;
    in.tag = tags_[tag];
    return out_.add(in, deps);
  }

  instruction_id matmul(std::int64_t k, std::int64_t m, std::int64_t n, bool fresh, std::size_t tag,
                        const std::vector<instruction_id>& deps) {
    instruction in;
    in.engine = tensor_engine;
    in.kind = op::matmul;
    in.type = p_.type;
    in.flags = fresh ? static_cast<std::uint8_t>(flag_new_stationary) : std::uint8_t{0};
    in.partitions = static_cast<std::uint32_t>(k);
    in.aux = static_cast<std::uint32_t>(m);
    in.free = static_cast<std::uint32_t>(n);
    in.src = sb_kv_;
    in.dst = psum_;
    in.tag = tags_[tag];
    return out_.add(in, deps);
  }

  void load_q(std::int64_t qt) {
    const std::int64_t cols = std::min(p_.q_tile, p_.seq - qt * p_.q_tile);
    q_load_ = dma(hbm_, sb_q_, p_.d, cols * bytes(), 0, t_q, q_readers_);
    q_readers_.clear();
  }

  /// K^T [d, kv] and V [kv, d] (kv/128 rows per partition) in dma_order.
  void load_kv(std::int64_t kt) {
    const auto slot = static_cast<std::size_t>(kt % p_.kv_bufs);
    if (loaded_kt_ == kt) return;
    loaded_kt_ = kt;
    const std::int64_t cols = std::min(p_.kv_tile, p_.seq - kt * p_.kv_tile);
    const auto war = kv_readers_[slot];
    kv_readers_[slot].clear();
    for (const auto& which : p_.dma_order) {
      if (which == "k") kv_loads_[slot][0] = dma(hbm_, sb_kv_, p_.d, cols * bytes(), 0, t_k, war);
      if (which == "v")
        kv_loads_[slot][1] = dma(hbm_, sb_kv_, std::min<std::int64_t>(P_, cols),
                                 ceil_div(cols, P_) * p_.d * bytes(), p_.d * bytes(), t_v, war);
    }
    kv_slot_ = slot;
  }

  /// S = Q K^T, mask, row max, correction, exp: the part of a unit before the transposes.
  void scores(const unit& u, std::size_t index) {
    const std::int64_t cols = std::min(p_.kv_tile, p_.seq - u.kt * p_.kv_tile);
    const std::int64_t rows = std::min<std::int64_t>(P_, p_.seq - u.qt * p_.q_tile - u.sub * P_);
    const auto set = static_cast<std::size_t>(index % static_cast<std::size_t>(s_sets_));
    const auto slot = kv_slot_;
    instruction_id last = program::none;
    for (std::int64_t c = 0; c < cols; c += m_.max_moving_free) {
      std::vector<instruction_id> deps;
      if (c == 0) deps = {s_reader_[set], q_load_, kv_loads_[slot][0]};
      last = matmul(p_.d, rows, std::min<std::int64_t>(m_.max_moving_free, cols - c), c == 0, t_qk,
                    deps);
    }
    q_readers_.push_back(last);
    kv_readers_[slot].push_back(last);
    instruction_id prev = last;
    if (u.diagonal)
      prev = compute(gpsimd_engine, op::tensor_scalar, rows, cols, flag_reads_psum, t_mask, {prev});
    const instruction_id max =
        compute(p_.max_engine, op::reduce, rows, cols, flag_reads_psum, t_max, {prev});
    const bool corrects = !u.first_kv && u.kv_index % p_.rescale_every == 0;
    if (corrects) {  // alpha = exp(m_old - m_new); O_acc *= alpha; l = l * alpha
      const auto alpha = compute(scalar_engine, op::activation, rows, 1, 0, t_rescale, {max});
      compute(vector_engine, op::tensor_scalar, rows, p_.d, 0, t_rescale,
              {alpha, acc_last_[static_cast<std::size_t>(u.sub)]});
    }
    const engine_id exp_engine = p_.exp_on_vector ? vector_engine : scalar_engine;
    instruction e;
    e.engine = exp_engine;
    e.kind = p_.exp_on_vector ? op::reciprocal
                              : op::activation;  // VectorE: no function unit (8N, see docs)
    e.type = dtype::fp32;
    e.flags = flag_reads_psum;
    e.partitions = static_cast<std::uint32_t>(rows);
    e.free = static_cast<std::uint32_t>(p_.exp_on_vector ? ceil_div(cols, 2) : cols);
    e.src = psum_;
    e.dst = sb_p_;
    e.tag = tags_[t_exp];
    const instruction_id exp = out_.add(e, {max, p_transposed_reader_[index % 2]});
    s_reader_[set] = exp;
    exp_of_[index % 2] = exp;
    cols_of_[index % 2] = cols;
    rows_of_[index % 2] = rows;
  }

  /// Transposes of P, O_part = P V, O_acc += O_part; at the last kv tile the normalization and
  /// store.
  void product(const unit& u, std::size_t index) {
    const auto slot = static_cast<std::size_t>(u.kt % p_.kv_bufs);
    const std::int64_t cols = cols_of_[index % 2], rows = rows_of_[index % 2];
    const auto blocks = ceil_div(cols, P_);
    // transposes of 128-column blocks of P into PSUM, a bank's worth at a time
    // (4 fp32 [128 x 128] blocks), each bank drained by one VectorE copy
    const std::int64_t per_bank = std::max<std::int64_t>(1, m_.psum_bank_bytes / (P_ * 4));
    std::vector<instruction_id> copies(static_cast<std::size_t>(blocks), program::none);
    for (std::int64_t g = 0; g < blocks; g += per_bank) {
      const auto bank = static_cast<std::size_t>(transposes_++ % 2);
      instruction_id tid = program::none;
      std::int64_t width = 0;
      for (std::int64_t b = g; b < std::min(blocks, g + per_bank); ++b) {
        const std::int64_t kb = std::min<std::int64_t>(P_, cols - b * P_);
        instruction t;
        t.engine = tensor_engine;
        t.kind = op::transpose;
        t.type = p_.type;
        t.partitions = static_cast<std::uint32_t>(rows);
        t.free = static_cast<std::uint32_t>(kb);
        t.src = sb_p_;
        t.dst = psum_;
        t.tag = tags_[t_transpose];
        tid =
            b == g ? out_.add(t, {exp_of_[index % 2], transpose_bank_reader_[bank]}) : out_.add(t);
        width += rows;
      }
      const auto copy = compute(vector_engine, op::copy, std::min<std::int64_t>(P_, cols - g * P_),
                                width, flag_reads_psum, t_transpose, {tid, pv_reader_[index % 2]});
      transpose_bank_reader_[bank] = copy;
      for (std::int64_t b = g; b < std::min(blocks, g + per_bank); ++b)
        copies[static_cast<std::size_t>(b)] = copy;
    }
    p_transposed_reader_[index % 2] = copies.empty() ? exp_of_[index % 2] : copies.back();
    instruction_id last = program::none;
    for (std::int64_t b = 0; b < blocks; ++b) {
      const std::int64_t kb = std::min<std::int64_t>(P_, cols - b * P_);
      std::vector<instruction_id> deps{copies[static_cast<std::size_t>(b)]};
      if (b == 0) {
        deps.push_back(o_part_reader_);
        deps.push_back(kv_loads_[slot][1]);
      }
      last = matmul(kb, rows, p_.d, true, t_pv, deps);
    }
    pv_reader_[index % 2] = last;
    kv_readers_[slot].push_back(last);
    const auto sub = static_cast<std::size_t>(u.sub);
    const auto acc = compute(vector_engine, u.first_kv ? op::copy : op::tensor_tensor, rows, p_.d,
                             flag_reads_psum, t_acc, {last, acc_last_[sub]});
    o_part_reader_ = acc;
    acc_last_[sub] = acc;
    if (!u.last_kv) return;
    const auto inv = compute(vector_engine, op::reciprocal, rows, 1, 0, t_norm, {acc});
    const auto norm = compute(vector_engine, op::tensor_scalar, rows, p_.d, 0, t_norm,
                              {inv, store_[store_serial_ % 2]});
    const auto store = dma(sb_o_, hbm_o_, rows, p_.d * bytes(), 0, t_store, {norm});
    store_[store_serial_++ % 2] = store;
    acc_last_[sub] = norm;
  }

  const params& p_;
  const machine& m_;
  program& out_;
  std::int64_t P_ = 128;
  int sub_tiles_ = 1, kv_blocks_ = 1, s_banks_ = 1, s_sets_ = 1;
  buffer_id hbm_ = 0, hbm_o_ = 0, sb_q_ = 0, sb_kv_ = 0, sb_p_ = 0, sb_o_ = 0, psum_ = 0;
  std::vector<std::uint16_t> tags_;
  std::vector<std::vector<instruction_id>> kv_readers_;
  std::vector<std::array<instruction_id, 2>> kv_loads_;
  std::vector<instruction_id> s_reader_, q_readers_;
  instruction_id q_load_ = program::none, o_part_reader_ = program::none;
  std::array<instruction_id, 2> exp_of_{program::none, program::none},
      pv_reader_{program::none, program::none};
  std::array<instruction_id, 2> p_transposed_reader_{program::none, program::none};
  std::array<instruction_id, 2> transpose_bank_reader_{program::none, program::none};
  std::array<instruction_id, 2> store_{program::none, program::none};
  std::array<std::int64_t, 2> cols_of_{}, rows_of_{};
  std::vector<instruction_id> acc_last_;
  std::size_t kv_slot_ = 0;
  std::int64_t loaded_kt_ = -1, transposes_ = 0, store_serial_ = 0, dma_serial_ = 0;
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
                             "exp: ScalarE's function unit, or VectorE (no function unit: 8 "
                             "cycles per 2 elements, an assumption)"),
                knob::symbol("rescale", {"eager", "lazy"}, "eager",
                             "correct the accumulator for a new row max every kv tile, or every "
                             "rescale_every"),
                knob::integer("rescale_every", 2, "lazy: kv tiles between corrections",
                              "2 | 4 | 8"),
                knob::symbol("track_max_on", {"vector", "gpsimd"}, "vector",
                             "engine of the row max"),
                knob::integer("dma_queues", 1, "DMA queues shared by all loads and stores", "1..4"),
            },
            "",
        }) {}

  [[nodiscard]] std::vector<std::string> suggest(const bottleneck& b, const space& s,
                                                 const config& c) const override {
    const knob_reader v = reader(s, c);
    std::vector<std::string> out;
    if (b.tag == "exp" && v.symbol("exp_engine") == "vector")
      out.emplace_back("exp_engine = scalar: ScalarE has the function unit");
    if (b.tag == "rescale" && v.symbol("rescale") == "eager")
      out.emplace_back("rescale = lazy: correct the accumulator less often");
    if (b.tag == "row max" && v.symbol("track_max_on") == "vector")
      out.emplace_back("track_max_on = gpsimd: take the row max off VectorE");
    if (b.phase == "vector")
      out.emplace_back(
          "VectorE carries the transposes' copies, the accumulation and the row max: move what can "
          "move (track_max_on, rescale)");
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
