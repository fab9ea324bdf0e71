// attention_steady.cpp: the steady-state model of the attention plan
// (attention_plan.hpp, docs/simulator.md "Speed"). It replays the lowering's
// schedule (attention.cpp: the same units, instructions and dependencies, in
// the same order) through steady::replay, a max-plus recurrence over the
// in-order engines, without building a program; inside each q tile, once
// the kv iterations between the first and the diagonal repeat with a fixed
// advance, steady::periodic_jump adds the rest in one step. The rotations
// the lowering keys by unit, transpose or store number (score sets,
// transpose banks, P V readers, output staging) are kept as sliding windows
// (oldest first), so that the state repeats from one kv iteration to the next.
#include "../../steady_common.hpp"
#include "attention_plan.hpp"

#include <algorithm>
#include <numeric>
#include <vector>

namespace tessel::sim::attn {
namespace {

using steady::token;

/// A few tokens, oldest first: push() drops the oldest.
class window {
 public:
  explicit window(std::size_t n) : t_(std::max<std::size_t>(n, 1)) {}
  [[nodiscard]] const token& oldest() const { return t_.front(); }
  void push(const token& t) {
    std::rotate(t_.begin(), t_.begin() + 1, t_.end());
    t_.back() = t;
  }
  void fields(std::vector<double*>& out) {
    for (auto& t : t_) out.push_back(&t.done);
  }

 private:
  std::vector<token> t_;
};

struct unit {
  std::int64_t qt = 0, kt = 0;
  int sub = 0;
  bool diagonal = false, first_kv = false, last_kv = false;
  int kv_index = 0;
};

/// A unit whose scores are issued and whose product is not yet.
struct pending {
  unit u;
  token exp;
  std::int64_t rows = 0, cols = 0;
};

/// One K/V slot: its loads and its last reader (TensorE, in order).
struct kv_slot {
  token k, reader;
  std::vector<token> v;
};

class attention_replay {
 public:
  attention_replay(const params& p, const machine& m)
      : p_(p),
        m_(m),
        l_(layout_of(p, m)),
        r_(m),
        scores_(static_cast<std::size_t>(l_.s_sets)),
        banks_(2),
        pv_(2),
        stores_(2),
        kv_(static_cast<std::size_t>(p.kv_bufs)),
        state_(static_cast<std::size_t>(l_.sub_tiles)),
        acc_(static_cast<std::size_t>(l_.sub_tiles)) {
    for (auto& s : kv_) s.v.resize(static_cast<std::size_t>(l_.kv_blocks));
    // a repetition: whole turns of the K/V slots, the lazy corrections and the queues
    per_ = std::lcm(p.kv_bufs, p.rescale_every);
    const auto loads = 1 + l_.kv_blocks;
    per_ *= p.queues / std::gcd<std::int64_t>(p.queues, per_ * loads);
    r_.fields(fields_);
    for (token* t : {&q_load_, &q_reader_, &o_part_, &last_copy_, &diag_, &pending_.exp})
      fields_.push_back(&t->done);
    for (window* w : {&scores_, &banks_, &pv_, &stores_}) w->fields(fields_);
    for (auto& s : kv_) {
      fields_.push_back(&s.k.done);
      fields_.push_back(&s.reader.done);
      for (auto& v : s.v) fields_.push_back(&v.done);
    }
    for (auto* side : {&state_, &acc_})
      for (auto& t : *side) fields_.push_back(&t.done);
  }

  steady_estimate run() {
    if (p_.causal)
      diag_ = r_.compute(elementwise(gpsimd_engine, op::copy, l_.partitions, p_.kv_tile, 0), {});
    steady::periodic_jump jump(fields_);
    const std::int64_t q_tiles = ceil_div(p_.seq, p_.q_tile);
    for (std::int64_t qt = 0; qt < q_tiles; ++qt) {
      const auto n = static_cast<std::int64_t>(visited_kv_tiles(p_, qt).size());
      // the kv iterations that repeat: after the first, before the diagonal and the last
      std::int64_t middle_end = n - 1;
      for (std::int64_t i = 0; i < middle_end; ++i)
        if (diagonal(qt, i, 0)) middle_end = i;
      kv_iteration(qt, 0, n);
      std::int64_t i = 1;
      jump.reset();
      while (i + per_ <= middle_end) {
        if (jump.step()) {
          const std::int64_t more = (middle_end - i) / per_;
          jump.jump(static_cast<double>(more));
          i += more * per_;
          dma_serial_ += more * per_ * (1 + l_.kv_blocks);
          loaded_kt_ = i - 1;
          pending_.u.kt = i - 1;
          if (i + per_ > middle_end) break;
        }
        for (std::int64_t k = 0; k < per_; ++k) kv_iteration(qt, i + k, n);
        i += per_;
      }
      for (; i < n; ++i) kv_iteration(qt, i, n);
    }
    if (have_pending_) product(pending_);
    return estimate();
  }

 private:
  [[nodiscard]] std::int64_t bytes() const { return dtype_bytes(p_.type); }

  [[nodiscard]] bool diagonal(std::int64_t qt, std::int64_t kt, int sub) const {
    const std::int64_t last_key = std::min(p_.seq, (kt + 1) * p_.kv_tile) - 1;
    return p_.causal && last_key > qt * p_.q_tile + sub * l_.partitions;
  }

  void kv_iteration(std::int64_t qt, std::int64_t i, std::int64_t n) {
    for (int sub = 0; sub < l_.sub_tiles && qt * p_.q_tile + sub * l_.partitions < p_.seq; ++sub) {
      unit u;
      u.qt = qt;
      u.kt = i;
      u.sub = sub;
      u.diagonal = diagonal(qt, i, sub);
      u.first_kv = i == 0;
      u.last_kv = i + 1 == n;
      u.kv_index = static_cast<int>(i);
      if (sub == 0 && u.first_kv) load_q(qt);
      if (sub == 0) load_kv(i);
      pending next = scores(u);
      if (have_pending_) product(pending_);
      pending_ = next;
      have_pending_ = true;
    }
  }

  // --- the instructions, as attention.cpp's lowerer issues them ------------------------

  [[nodiscard]] static instruction elementwise(engine_id e, op kind, std::int64_t rows,
                                               std::int64_t n, std::uint8_t flags) {
    instruction in;
    in.engine = e;
    in.kind = kind;
    in.type = dtype::fp32;
    in.flags = flags;
    in.partitions = static_cast<std::uint32_t>(rows);
    in.free = static_cast<std::uint32_t>(std::max<std::int64_t>(n, 1));
    return in;
  }
  token vector(op kind, std::int64_t rows, std::int64_t n, std::uint8_t flags,
               std::initializer_list<token> deps) {
    return r_.compute(elementwise(vector_engine, kind, rows, n, flags), deps);
  }
  token row_step(op kind, std::int64_t rows, std::initializer_list<token> deps) {
    return vector(kind, rows, 1, 0, deps);
  }
  token matmul(std::int64_t k, std::int64_t rows, std::int64_t n, bool fresh,
               std::initializer_list<token> deps) {
    instruction in;
    in.kind = op::matmul;
    in.type = p_.type;
    in.flags = fresh ? static_cast<std::uint8_t>(flag_new_stationary) : std::uint8_t{0};
    in.partitions = static_cast<std::uint32_t>(k);
    in.aux = static_cast<std::uint32_t>(rows);
    in.free = static_cast<std::uint32_t>(n);
    return r_.compute(in, deps);
  }
  token dma(std::int64_t rows, std::int64_t row_bytes, bool load,
            std::initializer_list<token> deps) {
    instruction in;
    in.engine = static_cast<engine_id>(dma_serial_++ % p_.queues);
    in.kind = op::dma;
    in.partitions = static_cast<std::uint32_t>(rows);
    in.free = static_cast<std::uint32_t>(row_bytes);
    return r_.dma(in, load, !load, deps);
  }

  void load_q(std::int64_t qt) {
    const std::int64_t cols = std::min(p_.q_tile, p_.seq - qt * p_.q_tile);
    q_load_ = dma(p_.d, cols * bytes(), true, {q_reader_});
    q_reader_ = {};
  }

  void load_kv(std::int64_t kt) {
    if (loaded_kt_ == kt) return;
    loaded_kt_ = kt;
    auto& slot = kv_[static_cast<std::size_t>(kt % p_.kv_bufs)];
    const std::int64_t cols = std::min(p_.kv_tile, p_.seq - kt * p_.kv_tile);
    const token war = slot.reader;
    slot.reader = {};
    for (const auto& which : p_.dma_order) {
      if (which == "k") slot.k = dma(p_.d, cols * bytes(), true, {war});
      if (which == "v")
        for (std::int64_t b = 0; b < ceil_div(cols, l_.partitions); ++b)
          slot.v[static_cast<std::size_t>(b)] =
              dma(std::min(l_.partitions, cols - b * l_.partitions), p_.d * bytes(), true, {war});
    }
    slot_ = &slot;
  }

  /// S = Q K^T, the mask, the running max, the correction and P = exp.
  pending scores(const unit& u) {
    const std::int64_t cols = std::min(p_.kv_tile, p_.seq - u.kt * p_.kv_tile);
    const std::int64_t rows =
        std::min<std::int64_t>(l_.partitions, p_.seq - u.qt * p_.q_tile - u.sub * l_.partitions);
    token last;
    for (std::int64_t c = 0; c < cols; c += m_.max_moving_free) {
      const std::int64_t n = std::min<std::int64_t>(m_.max_moving_free, cols - c);
      last = c == 0 ? matmul(p_.d, rows, n, true, {scores_.oldest(), q_load_, slot_->k})
                    : matmul(p_.d, rows, n, false, {});
    }
    q_reader_ = last;
    slot_->reader = last;
    token prev = last;
    std::uint8_t from = flag_reads_psum;
    if (u.diagonal) {
      const token mask =
          r_.compute(elementwise(gpsimd_engine, op::tensor_scalar, rows, cols, 0), {diag_});
      prev = vector(op::tensor_tensor, rows, cols, flag_reads_psum, {prev, mask});
      from = 0;
    }
    const auto sub = static_cast<std::size_t>(u.sub);
    token mx = vector(op::reduce, rows, cols, from, {prev});
    if (!u.first_kv) mx = row_step(op::tensor_tensor, rows, {mx, state_[sub]});
    token ref = mx;
    if (p_.rescale_every > 1) {
      if (u.first_kv || u.kv_index % p_.rescale_every == 0) {
        ref = row_step(op::copy, rows, {mx});
      } else {
        ref = row_step(op::tensor_tensor, rows, {mx});
        ref = row_step(op::tensor_scalar, rows, {ref});
        ref = row_step(op::tensor_tensor, rows, {ref});
        ref = row_step(op::tensor_tensor, rows, {ref});
      }
    }
    const token bias = row_step(op::tensor_scalar, rows, {ref});
    token alpha;
    if (!u.first_kv) {
      alpha = r_.compute(elementwise(scalar_engine, op::activation, rows, 1, 0), {bias});
      acc_[sub] = vector(op::tensor_scalar, rows, p_.d, 0, {alpha, acc_[sub]});
    }
    const token exp = r_.compute(elementwise(scalar_engine, op::activation, rows, cols, from),
                                 {bias, prev, last_copy_});
    state_[sub] = u.first_kv ? exp : row_step(op::tensor_tensor, rows, {exp, alpha});
    scores_.push(exp);
    return {u, exp, rows, cols};
  }

  /// P^T block by block, O_part = P V, O_acc (+)= O_part; the last kv tile's
  /// normalization and store.
  void product(const pending& w) {
    auto& slot = kv_[static_cast<std::size_t>(w.u.kt % p_.kv_bufs)];
    token last, copy;
    for (std::int64_t b = 0; b < ceil_div(w.cols, l_.partitions); ++b) {
      const std::int64_t kb = std::min(l_.partitions, w.cols - b * l_.partitions);
      instruction t;
      t.kind = op::transpose;
      t.type = p_.type;
      t.partitions = static_cast<std::uint32_t>(w.rows);
      t.free = static_cast<std::uint32_t>(kb);
      const token tid = r_.compute(t, {w.exp, banks_.oldest()});
      copy = vector(op::copy, kb, w.rows, flag_reads_psum, {tid, pv_.oldest()});
      banks_.push(copy);
      last = matmul(kb, w.rows, p_.d, true,
                    {copy, slot.v[static_cast<std::size_t>(b)], b == 0 ? o_part_ : token{}});
    }
    last_copy_ = copy;
    pv_.push(last);
    slot.reader = last;
    const auto sub = static_cast<std::size_t>(w.u.sub);
    const token acc = vector(w.u.first_kv ? op::copy : op::tensor_tensor, w.rows, p_.d,
                             flag_reads_psum, {last, acc_[sub]});
    o_part_ = acc;
    acc_[sub] = acc;
    if (!w.u.last_kv) return;
    const token inv = vector(op::reciprocal, w.rows, 1, 0, {acc, state_[sub]});
    const token norm = vector(op::tensor_scalar, w.rows, p_.d, 0, {inv, stores_.oldest()});
    stores_.push(dma(w.rows, p_.d * bytes(), false, {norm}));
    acc_[sub] = norm;
  }

  [[nodiscard]] steady_estimate estimate() const {
    steady_estimate e;
    e.latency_ns = r_.latency;
    e.busy_ns = r_.busy;
    e.dma_data_ns = r_.dma_data;
    e.hbm_read_bytes = r_.hbm_read;
    e.hbm_write_bytes = r_.hbm_write;
    e.instructions = r_.instructions;
    const auto seq = static_cast<double>(p_.seq);
    const double pairs = p_.causal ? 0.5 * seq * (seq + 1) : seq * seq;
    e.totals.flops = 4.0 * pairs * static_cast<double>(p_.d);
    e.totals.min_hbm_bytes = 4.0 * static_cast<double>(p_.seq * p_.d * bytes());
    e.totals.compute_type = p_.type;
    static constexpr std::array<const char*, 4> engines{"tensor", "vector", "scalar", "gpsimd"};
    static constexpr std::array<const char*, 4> tags{"QK^T", "accumulate O", "exp", "mask"};
    const auto i = static_cast<std::size_t>(std::max_element(e.busy_ns.begin(), e.busy_ns.end()) -
                                            e.busy_ns.begin());
    if (e.dma_data_ns > e.busy_ns[i]) {
      e.bound = "dma data";
      e.tag = "load K";
    } else {
      e.bound = engines[i];
      e.tag = tags[i];
    }
    return e;
  }

  const params& p_;
  const machine& m_;
  const layout l_;
  steady::replay r_;
  std::vector<double*> fields_;
  std::int64_t per_ = 1;  ///< kv iterations a repetition
  token q_load_, q_reader_, o_part_, last_copy_, diag_;
  window scores_, banks_, pv_, stores_;  ///< score sets, transpose banks, P V, staging
  std::vector<kv_slot> kv_;
  kv_slot* slot_ = nullptr;  ///< the slot the last load_kv named
  std::vector<token> state_, acc_;
  pending pending_;
  bool have_pending_ = false;
  std::int64_t loaded_kt_ = -1, dma_serial_ = 0;
};

}  // namespace

std::optional<steady_estimate> estimate_steady(const params& p, const machine& m) {
  if (!check_memory(p, m).empty()) return std::nullopt;  // the event model reports it
  return attention_replay(p, m).run();
}

}  // namespace tessel::sim::attn
