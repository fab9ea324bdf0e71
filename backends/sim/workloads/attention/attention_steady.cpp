// attention_steady.cpp: the steady-state model of the attention plan
// (attention_plan.hpp, docs/simulator.md "Speed"). It replays the lowering's
// schedule (attention.cpp: the same units, instructions and dependencies, in
// the same order) through steady::replay, a max-plus recurrence over the
// in-order engines, without building a program. Inside each q tile, once
// the kv iterations between the first and the diagonal (and, without
// skip_masked, those past it) repeat, steady::periodic_jump adds the rest in
// one step; across q tiles, once three groups of them lie on a line in their
// number of kv iterations before the diagonal, the groups up to the last q
// tile are extrapolated. The rotations the lowering keys by unit, transpose,
// store or kv tile number (score sets, transpose banks, P V readers, output
// staging, K/V slots) are kept oldest first (steady::ring), so that the
// state repeats from one kv iteration to the next. The instruction count
// and HBM bytes are counted in closed form (count()).
#include "../../steady_common.hpp"
#include "attention_plan.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <numeric>
#include <vector>

namespace tessel::sim::attn {
namespace {

using steady::token;
using window = steady::ring<token>;

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
  std::array<token, 32> v;  ///< one per 128-key block (inline: the slots rotate by value)
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
    // a repetition: whole turns of the queues (the lazy corrections'
    // pattern, every rescale_every kv tiles, is a cycle periodic_jump finds)
    per_ = p.queues / std::gcd<std::int64_t>(p.queues, 1 + l_.kv_blocks);
    // q tiles: the K/V slots and queues restart at each; with kv tiles
    // longer than q tiles, the key moves every kv_tile / q_tile of them
    group_ = std::lcm<std::int64_t>(p.kv_bufs, p.queues);
    if (p.kv_tile > p.q_tile) group_ = std::lcm(group_, ceil_div(p.kv_tile, p.q_tile));
    r_.times(times_);
    for (token* t : {&q_load_, &q_reader_, &o_part_, &last_copy_, &diag_, &pending_.exp})
      times_.push_back(&t->done);
    for (window* w : {&scores_, &banks_, &pv_, &stores_})
      for (token& t : w->slots()) times_.push_back(&t.done);
    for (auto& s : kv_) {
      times_.push_back(&s.k.done);
      times_.push_back(&s.reader.done);
      for (int v = 0; v < l_.kv_blocks; ++v)
        times_.push_back(&s.v[static_cast<std::size_t>(v)].done);
    }
    for (auto* side : {&state_, &acc_})
      for (auto& t : *side) times_.push_back(&t.done);
    r_.totals(totals_);
    latency_ = static_cast<std::size_t>(std::find(times_.begin(), times_.end(), &r_.latency) -
                                        times_.begin());
    fields_ = times_;
    fields_.insert(fields_.end(), totals_.begin(), totals_.end());
    r_.throttle(fields_);
  }

  steady_estimate run() {
    if (p_.causal)
      diag_ = r_.compute(steady::elementwise(gpsimd_engine, op::copy, l_.partitions, p_.kv_tile, 0),
                         {});
    steady::periodic_jump jump(fields_);
    const std::int64_t q_tiles = ceil_div(p_.seq, p_.q_tile);
    std::vector<double> before(fields_.size());
    std::vector<group> groups;
    for (std::int64_t qt = 0; qt < q_tiles; ++qt) {
      if (qt % group_ == 0)
        for (std::size_t f = 0; f < fields_.size(); ++f) before[f] = *fields_[f];
      q_tile(qt, jump);
      if ((qt + 1) % group_ != 0) continue;
      group& g = groups.emplace_back();
      g.key = group_key(qt + 1 - group_);
      g.advance.resize(fields_.size());
      for (std::size_t f = 0; f < fields_.size(); ++f) g.advance[f] = *fields_[f] - before[f];
      qt = skip_groups(qt, q_tiles, groups);
    }
    if (have_pending_) product(pending_);
    return estimate();
  }

 private:
  /// Kv iterations of q tile `qt`, and how many come before the first
  /// diagonal one (the key its duration is affine in).
  [[nodiscard]] std::int64_t visited(std::int64_t qt) const {
    const std::int64_t kv_tiles = ceil_div(p_.seq, p_.kv_tile);
    if (!(p_.causal && p_.skip_masked)) return kv_tiles;
    return std::min(kv_tiles, ceil_div(std::min(p_.seq, (qt + 1) * p_.q_tile), p_.kv_tile));
  }
  [[nodiscard]] std::int64_t key(std::int64_t qt) const {
    if (!p_.causal) return visited(qt);
    return std::min(visited(qt), ceil_div(qt * p_.q_tile + 1, p_.kv_tile) - 1);
  }

  /// The kv iterations of q tile `qt`. Two runs of them repeat: those after
  /// the first and before the diagonal, and (without skip_masked) those that
  /// mask every sub-tile, up to the last.
  void q_tile(std::int64_t qt, steady::periodic_jump& jump) {
    const std::int64_t n = visited(qt);
    const std::int64_t rows = std::min(p_.q_tile, p_.seq - qt * p_.q_tile);
    const std::int64_t last_row =
        qt * p_.q_tile + (ceil_div(rows, l_.partitions) - 1) * l_.partitions;
    // the first kv iteration whose last key is past every sub-tile's first row
    const std::int64_t masked =
        p_.causal ? std::max<std::int64_t>(1, ceil_div(last_row + 2, p_.kv_tile) - 1) : n;
    kv_iteration(qt, 0, n);
    std::int64_t i = 1;
    repeat(qt, i, std::min(n - 1, key(qt)), n, jump);
    for (; i < std::min(n, masked); ++i) kv_iteration(qt, i, n);
    repeat(qt, i, n - 1, n, jump);
    for (; i < n; ++i) kv_iteration(qt, i, n);
  }

  /// Kv iterations i.. of identical units up to `end` (not included): once
  /// two repetitions advance the state alike, the rest in one jump.
  void repeat(std::int64_t qt, std::int64_t& i, std::int64_t end, std::int64_t n,
              steady::periodic_jump& jump) {
    jump.reset();
    while (i + per_ <= end) {
      const std::int64_t cycle = per_ * jump.step();
      if (cycle > 0 && (end - i) / cycle > 0) {
        const std::int64_t more = (end - i) / cycle;
        jump.jump(static_cast<double>(more));
        i += more * cycle;
        dma_serial_ += more * cycle * (1 + l_.kv_blocks);
        loaded_kt_ = i - 1;
        kv_front_ = i % p_.kv_bufs;
        pending_.u.kt = i - 1;
        pending_.u.kv_index = static_cast<int>(i - 1);
        return;
      }
      for (std::int64_t k = 0; k < per_; ++k) kv_iteration(qt, i + k, n);
      i += per_;
    }
  }

  /// A run of group_ q tiles: its key (the sum of theirs) and what it
  /// advanced each field by.
  struct group {
    std::int64_t key = 0;
    std::vector<double> advance;
  };
  [[nodiscard]] std::int64_t group_key(std::int64_t first) const {
    std::int64_t k = 0;
    for (std::int64_t qt = first; qt < first + group_; ++qt) k += key(qt);
    return k;
  }

  /// After a group ending at q tile `done`, the whole groups before the
  /// last q tile by extrapolation, when the groups seen (past the first,
  /// which starts cold) fix it: each takes the last group's time, corrected
  /// along the key by the slope between the last two groups of different
  /// keys, provided that line holds at a third; every time of the state
  /// moves by their sum and each total advances likewise. Returns the last
  /// q tile simulated or skipped.
  std::int64_t skip_groups(std::int64_t done, std::int64_t q_tiles,
                           const std::vector<group>& groups) {
    const std::int64_t skipped = (q_tiles - 1 - (done + 1)) / group_;
    if (skipped <= 0 || groups.size() < 3) return done;
    const group& j = groups.back();
    const group* i = nullptr;
    const group* h = nullptr;
    for (std::size_t g = groups.size() - 1; g-- > 1 && !h;) {
      if (!i && groups[g].key != j.key)
        i = &groups[g];
      else if (i && groups[g].key != i->key)
        h = &groups[g];
    }
    double keys = 0;
    for (std::int64_t g = 0; g < skipped; ++g)
      keys += static_cast<double>(group_key(done + 1 + g * group_) - j.key);
    const auto slope = [&](std::size_t f) {
      return keys != 0 ? (j.advance[f] - i->advance[f]) / static_cast<double>(j.key - i->key) : 0.0;
    };
    // the check: the line through the last two at a third, or (no key
    // change ahead) the group before the last taking the same time
    if (keys != 0 && !h) return done;
    const group& c = keys != 0 ? *h : groups[groups.size() - 2];
    const double t_c = c.advance[latency_];
    const double predicted =
        j.advance[latency_] + slope(latency_) * static_cast<double>(c.key - j.key);
    if (std::abs(predicted - t_c) > 0.002 * std::abs(t_c)) return done;
    const auto n = static_cast<double>(skipped);
    const double shift = n * j.advance[latency_] + keys * slope(latency_);
    for (std::size_t f = 0; f < times_.size(); ++f) *fields_[f] += shift;
    for (std::size_t f = times_.size(); f < times_.size() + totals_.size(); ++f)
      *fields_[f] += n * j.advance[f] + keys * slope(f);
    // the state the next q tile starts from: the last skipped one's kv tiles and unit
    const std::int64_t last = done + skipped * group_, n_last = visited(last);
    loaded_kt_ = n_last - 1;
    kv_front_ = n_last % p_.kv_bufs;
    pending_.u.qt = last;
    pending_.u.kt = n_last - 1;
    pending_.u.kv_index = static_cast<int>(n_last - 1);
    pending_.u.first_kv = n_last == 1;
    return last;
  }

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

  token vector(op kind, std::int64_t rows, std::int64_t n, std::uint8_t flags,
               std::initializer_list<token> deps) {
    return r_.compute(steady::elementwise(vector_engine, kind, rows, n, flags), deps);
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
    // the lowering's slot kt % kv_bufs: the oldest, but at a q tile's first load
    const std::int64_t b = p_.kv_bufs, turn = ((kt - kv_front_) % b + b) % b;
    std::rotate(kv_.begin(), kv_.begin() + turn, kv_.end());
    std::rotate(kv_.begin(), kv_.begin() + 1, kv_.end());
    kv_front_ = (kt + 1) % b;
    auto& slot = kv_.back();
    const std::int64_t cols = std::min(p_.kv_tile, p_.seq - kt * p_.kv_tile);
    const token war = slot.reader;
    slot.reader = {};
    for (const auto& which : p_.dma_order) {
      if (which == "k") slot.k = dma(p_.d, cols * bytes(), true, {war});
      if (which == "v")
        for (std::int64_t v = 0; v < ceil_div(cols, l_.partitions); ++v)
          slot.v[static_cast<std::size_t>(v)] =
              dma(std::min(l_.partitions, cols - v * l_.partitions), p_.d * bytes(), true, {war});
    }
  }

  /// The slot that holds kv tile `kt` (the lowering's slot kt % kv_bufs).
  kv_slot& kv_at(std::int64_t kt) {
    const std::int64_t b = p_.kv_bufs;
    return kv_[static_cast<std::size_t>(((kt - kv_front_) % b + b) % b)];
  }

  /// S = Q K^T, the mask, the running max, the correction and P = exp.
  pending scores(const unit& u) {
    const std::int64_t cols = std::min(p_.kv_tile, p_.seq - u.kt * p_.kv_tile);
    const std::int64_t rows =
        std::min<std::int64_t>(l_.partitions, p_.seq - u.qt * p_.q_tile - u.sub * l_.partitions);
    token last;
    for (std::int64_t c = 0; c < cols; c += m_.max_moving_free) {
      const std::int64_t n = std::min<std::int64_t>(m_.max_moving_free, cols - c);
      last = c == 0 ? matmul(p_.d, rows, n, true, {scores_.oldest(), q_load_, kv_.back().k})
                    : matmul(p_.d, rows, n, false, {});
    }
    q_reader_ = last;
    kv_.back().reader = last;
    token prev = last;
    std::uint8_t from = flag_reads_psum;
    if (u.diagonal) {
      const token mask =
          r_.compute(steady::elementwise(gpsimd_engine, op::tensor_scalar, rows, cols, 0), {diag_});
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
      alpha = r_.compute(steady::elementwise(scalar_engine, op::activation, rows, 1, 0), {bias});
      acc_[sub] = vector(op::tensor_scalar, rows, p_.d, 0, {alpha, acc_[sub]});
    }
    const token exp =
        r_.compute(steady::elementwise(scalar_engine, op::activation, rows, cols, from),
                   {bias, prev, last_copy_});
    state_[sub] = u.first_kv ? exp : row_step(op::tensor_tensor, rows, {exp, alpha});
    scores_.next() = exp;
    return {u, exp, rows, cols};
  }

  /// P^T block by block, O_part = P V, O_acc (+)= O_part; the last kv tile's
  /// normalization and store.
  void product(const pending& w) {
    auto& slot = kv_at(w.u.kt);
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
      banks_.next() = copy;
      last = matmul(kb, w.rows, p_.d, true,
                    {copy, slot.v[static_cast<std::size_t>(b)], b == 0 ? o_part_ : token{}});
    }
    last_copy_ = copy;
    pv_.next() = last;
    slot.reader = last;
    const auto sub = static_cast<std::size_t>(w.u.sub);
    const token acc = vector(w.u.first_kv ? op::copy : op::tensor_tensor, w.rows, p_.d,
                             flag_reads_psum, {last, acc_[sub]});
    o_part_ = acc;
    acc_[sub] = acc;
    if (!w.u.last_kv) return;
    const token inv = vector(op::reciprocal, w.rows, 1, 0, {acc, state_[sub]});
    const token norm = vector(op::tensor_scalar, w.rows, p_.d, 0, {inv, stores_.oldest()});
    stores_.next() = (dma(w.rows, p_.d * bytes(), false, {norm}));
    acc_[sub] = norm;
  }

  /// What the lowering issues and moves, counted in closed form per kv
  /// iteration (the replay skips most of them).
  struct counts {
    double instructions = 0, hbm_read = 0, hbm_write = 0;
  };
  [[nodiscard]] counts count() const {
    counts c;
    const std::int64_t P = l_.partitions, b = bytes(), d = p_.d;
    const auto q_tiles = ceil_div(p_.seq, p_.q_tile);
    c.instructions = p_.causal ? 1 : 0;
    std::int64_t loaded = -1;
    for (std::int64_t qt = 0; qt < q_tiles; ++qt) {
      const std::int64_t n = visited(qt), row0 = qt * p_.q_tile;
      const std::int64_t q_rows = std::min(p_.q_tile, p_.seq - row0);
      const std::int64_t subs = ceil_div(q_rows, P);
      c.instructions += 1;
      c.hbm_read += static_cast<double>(d * q_rows * b);
      for (std::int64_t i = 0; i < n; ++i) {
        const std::int64_t cols = std::min(p_.kv_tile, p_.seq - i * p_.kv_tile);
        const std::int64_t blocks = ceil_div(cols, P);
        if (loaded != i) {
          loaded = i;
          c.instructions += static_cast<double>(1 + blocks);
          c.hbm_read += static_cast<double>(2 * d * cols * b);
        }
        const bool first = i == 0, last = i + 1 == n;
        std::int64_t per_unit = ceil_div(cols, m_.max_moving_free) + 3 + 3 * blocks + 1;
        if (p_.rescale_every > 1) per_unit += first || i % p_.rescale_every == 0 ? 1 : 4;
        if (!first) per_unit += 4;
        if (last) per_unit += 3;
        std::int64_t diagonal_subs = 0;
        const std::int64_t last_key = std::min(p_.seq, (i + 1) * p_.kv_tile) - 1;
        if (p_.causal && last_key > row0)
          diagonal_subs = std::min(subs, ceil_div(last_key - row0, P));
        c.instructions += static_cast<double>(subs * per_unit + 2 * diagonal_subs);
        if (last) c.hbm_write += static_cast<double>(q_rows * d * b);
      }
    }
    return c;
  }

  [[nodiscard]] steady_estimate estimate() const {
    steady_estimate e = r_.estimate();
    const counts c = count();
    e.hbm_read_bytes = c.hbm_read;
    e.hbm_write_bytes = c.hbm_write;
    e.instructions = c.instructions;
    const auto seq = static_cast<double>(p_.seq);
    const double pairs = p_.causal ? 0.5 * seq * (seq + 1) : seq * seq;
    e.totals.flops = 4.0 * pairs * static_cast<double>(p_.d);
    e.totals.min_hbm_bytes = 4.0 * static_cast<double>(p_.seq * p_.d * bytes());
    e.totals.compute_type = p_.type;
    steady::name_bound(e, {"QK^T", "accumulate O", "exp", "mask"}, "load K");
    return e;
  }

  const params& p_;
  const machine& m_;
  const layout l_;
  steady::replay r_;
  /// The state's times (the replay's and the tokens'), the totals, and all
  /// of them with the throttle (fields_: times, then totals, then throttle).
  std::vector<double*> times_, totals_, fields_;
  std::size_t latency_ = 0;  ///< the index of the replay's latency in times_
  std::int64_t per_ = 1;     ///< kv iterations a repetition
  std::int64_t group_ = 1;   ///< q tiles a repetition
  token q_load_, q_reader_, o_part_, last_copy_, diag_;
  window scores_, banks_, pv_, stores_;  ///< score sets, transpose banks, P V, staging
  std::vector<kv_slot> kv_;              ///< oldest first (the lowering's slots, rotated)
  /// The K/V slots, oldest first; the lowering's slot number of the oldest.
  std::int64_t kv_front_ = 0;
  std::vector<token> state_, acc_;
  pending pending_;
  bool have_pending_ = false;
  std::int64_t loaded_kt_ = -1, dma_serial_ = 0;
};

}  // namespace

std::optional<steady_estimate> estimate_steady(const params& p, const machine& m) {
  if (!check_memory(p, m).empty()) return std::nullopt;     // the event model reports it
  if (layout_of(p, m).kv_blocks > 32) return std::nullopt;  // wider than the replay's slots
  return attention_replay(p, m).run();
}

}  // namespace tessel::sim::attn
