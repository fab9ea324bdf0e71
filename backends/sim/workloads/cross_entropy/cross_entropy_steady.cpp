// cross_entropy_steady.cpp: the steady-state model of the cross_entropy
// plan (cross_entropy_plan.hpp, docs/simulator.md "Speed"). It replays the
// lowering's schedule (cross_entropy.cpp: the same units, instructions,
// aggregated matmuls and dependencies, in the same order) through
// steady::replay without building a program, and skips the repeating part
// of both loops with steady::periodic_jump: the units of the inner loop
// between its first and its last, and the outer iterations between the
// first and the last. The lowering's rotations (operand slots, PSUM sets)
// are kept oldest first (steady::ring), so the state repeats.
#include "../../steady_common.hpp"
#include "../emit.hpp"
#include "cross_entropy_plan.hpp"

#include <algorithm>
#include <array>
#include <numeric>
#include <vector>

namespace tessel::sim::ce {
namespace {

using emit::ceil_div;
using steady::token;

constexpr std::int64_t max_slabs = 64;  ///< contraction tiles the replay's slots hold

/// One slot of an operand: its slab loads, whether TensorE already waited
/// on each, and its last reader.
struct slot {
  std::array<token, max_slabs> load{};
  std::array<bool, max_slabs> consumed{};
  token reader;
};

/// The two readers of each PSUM bank of a set (the exp and the label product).
using bank_readers = std::array<std::array<token, 2>, 8>;

class cross_entropy_replay {
 public:
  cross_entropy_replay(const plan& pl, const machine& m)
      : pl_(pl),
        p_(pl.p),
        m_(m),
        r_(m),
        per_queue_(std::clamp(p_.queues, 1, dma_queue_count / 3)),
        x_(static_cast<std::size_t>(pl.x_slots)),
        w_(static_cast<std::size_t>(pl.w_slots)),
        sets_(static_cast<std::size_t>(pl.sets)),
        rows_(static_cast<std::size_t>(p_.vocab_outer ? pl.token_tiles * pl.subs : pl.subs)) {
    for (auto& s : x_.slots()) s.consumed.fill(true);
    for (auto& s : w_.slots()) s.consumed.fill(true);
    r_.times(inner_);
    inner_.push_back(&iota_.done);
    for (auto* ring : {&x_, &w_})
      for (auto& s : ring->slots()) {
        inner_.push_back(&s.reader.done);
        for (std::int64_t k = 0; k < pl.slabs; ++k)
          inner_.push_back(&s.load[static_cast<std::size_t>(k)].done);
      }
    for (auto& set : sets_.slots())
      for (std::int64_t b = 0; b < pl.groups; ++b)
        for (token& t : set[static_cast<std::size_t>(b)]) inner_.push_back(&t.done);
    r_.totals(inner_);
    r_.throttle(inner_);
    // (t, v): one token tile's rows, reset at each; (v, t): every token's,
    // each updated once an outer iteration (so only the outer jump moves them)
    if (!p_.vocab_outer) add_rows(inner_);
    outer_ = inner_;
    if (p_.vocab_outer) add_rows(outer_);
  }

  steady_estimate run() {
    iota_ = r_.compute(
        steady::elementwise(gpsimd_engine, op::copy, m_.partitions, p_.vocab_chunk, 0), {});
    if (p_.vocab_outer)
      for (std::int64_t ti = 0; ti < pl_.token_tiles; ++ti) load_labels(ti);
    const std::int64_t outer = p_.vocab_outer ? pl_.chunks : pl_.token_tiles;
    const std::int64_t inner = p_.vocab_outer ? pl_.token_tiles : pl_.chunks;
    steady::periodic_jump outer_jump(outer_), inner_jump(inner_);
    // a repetition of either loop: whole turns of each stream's queues
    const std::int64_t per_inner =
        turns(p_.vocab_outer ? pl_.slabs : 0, p_.vocab_outer ? 0 : pl_.slabs, 0);
    const std::int64_t per_outer = p_.vocab_outer
                                       ? turns(pl_.token_tiles * pl_.slabs, pl_.slabs, 0)
                                       : turns(pl_.slabs, pl_.chunks * pl_.slabs, 2 * pl_.subs);
    std::int64_t o = 0;
    outer_step(o, inner, inner_jump, per_inner);
    while (o < outer) {
      const std::int64_t cycle = o + per_outer <= outer - 1 ? per_outer * outer_jump.step() : 0;
      if (cycle > 0 && (outer - 1 - o) / cycle > 0) {
        const std::int64_t more = (outer - 1 - o) / cycle;
        outer_jump.jump(static_cast<double>(more));
        o += more * cycle;
        placed(o - 1, inner - 1);
      }
      for (std::int64_t k = 0; k < per_outer && o < outer; ++k)
        outer_step(o, inner, inner_jump, per_inner);
    }
    return estimate();
  }

 private:
  struct row_state {
    token state, label;
  };

  void add_rows(std::vector<double*>& fields) {
    for (auto& row : rows_) {
      fields.push_back(&row.state.done);
      fields.push_back(&row.label.done);
    }
  }

  /// The smallest repetition after which each stream's queue turns are
  /// whole, given the transfers one issues on each stream.
  [[nodiscard]] std::int64_t turns(std::int64_t x, std::int64_t w, std::int64_t rows) const {
    std::int64_t per = 1;
    for (const std::int64_t n : {x, w, rows})
      per = std::lcm<std::int64_t>(per, per_queue_ / std::gcd<std::int64_t>(per_queue_, n));
    return per;
  }

  /// One outer iteration `o` (then o + 1), its inner loop jumping over the
  /// repeating units between the first and the last.
  void outer_step(std::int64_t& o, std::int64_t inner, steady::periodic_jump& jump,
                  std::int64_t per) {
    std::int64_t i = 0;
    run_unit(o, i++);
    jump.reset();
    while (i < inner) {
      const std::int64_t cycle = i + per <= inner - 1 ? per * jump.step() : 0;
      if (cycle > 0 && (inner - 1 - i) / cycle > 0) {
        const std::int64_t more = (inner - 1 - i) / cycle;
        jump.jump(static_cast<double>(more));
        if (p_.vocab_outer)  // the skipped token tiles' running state: the last one's
          for (std::int64_t ti = i; ti < i + more * cycle; ++ti)
            for (std::int64_t s = 0; s < pl_.subs; ++s)
              rows_[static_cast<std::size_t>(ti * pl_.subs + s)].state =
                  rows_[static_cast<std::size_t>((i - 1) * pl_.subs + s)].state;
        i += more * cycle;
        placed(o, i - 1);
      }
      for (std::int64_t k = 0; k < per && i < inner; ++k) run_unit(o, i++);
    }
    ++o;
  }

  /// After a jump: the blocks the slots hold are those of unit (o, i).
  void placed(std::int64_t o, std::int64_t i) {
    x_block_ = p_.vocab_outer ? i : o;
    w_block_ = p_.vocab_outer ? o : i;
  }

  void run_unit(std::int64_t o, std::int64_t i) {
    if (p_.vocab_outer)
      unit(i, o);
    else
      unit(o, i);
  }

  // --- the instructions, as cross_entropy.cpp's lowerer issues them ---------------------

  token compute(engine_id e, op kind, std::int64_t rows, std::int64_t n, std::uint8_t flags,
                std::initializer_list<token> deps) {
    return r_.compute(steady::elementwise(e, kind, rows, n, flags), deps);
  }
  token dma(int stream, std::int64_t rows, std::int64_t row_bytes, bool load,
            std::initializer_list<token> deps) {
    instruction in;
    const auto n = queue_count_[static_cast<std::size_t>(stream)]++ % per_queue_;
    in.engine = static_cast<engine_id>((stream * per_queue_ + n) % dma_queue_count);
    in.kind = op::dma;
    in.partitions = static_cast<std::uint32_t>(rows);
    in.free = static_cast<std::uint32_t>(row_bytes);
    return r_.dma(in, load, !load, deps);
  }

  void load_labels(std::int64_t ti) {
    const std::int64_t parts = m_.partitions;
    const std::int64_t rows_t = std::min(p_.token_tile, p_.tokens - ti * p_.token_tile);
    for (std::int64_t s = 0; s < ceil_div(rows_t, parts); ++s)
      row(ti, s).label = dma(2, std::min(parts, rows_t - s * parts), 4, true, {});
  }

  row_state& row(std::int64_t ti, std::int64_t s) {
    return rows_[static_cast<std::size_t>(p_.vocab_outer ? ti * pl_.subs + s : s)];
  }

  /// Loads block `block` of an operand into its oldest slot unless its newest holds it.
  void place(steady::ring<slot>& x, std::int64_t& held, int stream, std::int64_t block,
             std::int64_t cols) {
    if (held == block) return;
    held = block;
    slot& s = x.next();
    const token war = s.reader;
    for (std::int64_t k = 0; k < pl_.slabs; ++k) {
      const std::int64_t rows = std::min(p_.mm_k, p_.d_model - k * p_.mm_k);
      s.load[static_cast<std::size_t>(k)] =
          dma(stream, rows, cols * dtype_bytes(p_.type), true, {war});
      s.consumed[static_cast<std::size_t>(k)] = false;
    }
  }

  static token need(slot& s, std::int64_t k) {
    const auto i = static_cast<std::size_t>(k);
    if (s.consumed[i]) return {};
    s.consumed[i] = true;
    return s.load[i];
  }

  void unit(std::int64_t ti, std::int64_t vi) {
    const std::int64_t parts = m_.partitions;
    const std::int64_t rows_t = std::min(p_.token_tile, p_.tokens - ti * p_.token_tile);
    const std::int64_t cols = std::min(p_.vocab_chunk, p_.vocab - vi * p_.vocab_chunk);
    const bool new_x = x_block_ != ti;
    place(x_, x_block_, 0, ti, rows_t);
    if (new_x && !p_.vocab_outer) {
      for (auto& r : rows_) r = {};  // a new token tile's rows
      load_labels(ti);
    }
    place(w_, w_block_, 1, vi, cols);
    bank_readers& set = sets_.next();
    const std::int64_t subs = ceil_div(rows_t, parts), n_tiles = ceil_div(cols, p_.mm_n);
    token last;
    for (std::int64_t s = 0; s < subs; ++s) {
      const std::int64_t rows = std::min(parts, rows_t - s * parts);
      const std::int64_t bank0 = s * pl_.banks_per_sub;
      for (std::int64_t n = 0; n < n_tiles; ++n) {
        const std::int64_t width = std::min(p_.mm_n, cols - n * p_.mm_n);
        const auto& readers =
            set[static_cast<std::size_t>(bank0 + n * p_.mm_n * 4 / m_.psum_bank_bytes)];
        last = contraction(rows, width, readers);
      }
      epilogue(ti, vi, s, rows, cols, last, set, bank0);
    }
    x_.newest().reader = last;
    w_.newest().reader = last;
  }

  /// The matmuls of one row tile's accumulation group over every slab: a
  /// matmul that waits on nothing joins the one before it (the builder's
  /// aggregation), so each run issues as one instruction.
  token contraction(std::int64_t rows, std::int64_t width, const std::array<token, 2>& readers) {
    token last;
    std::int64_t k = 0;
    while (k < pl_.slabs) {
      const std::int64_t kk = std::min(p_.mm_k, p_.d_model - k * p_.mm_k);
      const token x = need(x_.newest(), k), w = need(w_.newest(), k);
      std::uint32_t count = 1;
      while (k + count < pl_.slabs && std::min(p_.mm_k, p_.d_model - (k + count) * p_.mm_k) == kk &&
             x_.newest().consumed[static_cast<std::size_t>(k + count)] &&
             w_.newest().consumed[static_cast<std::size_t>(k + count)])
        ++count;
      instruction in;
      in.kind = op::matmul;
      in.type = p_.type;
      in.flags = flag_new_stationary;
      in.count = count;
      in.partitions = static_cast<std::uint32_t>(kk);
      in.aux = static_cast<std::uint32_t>(rows);
      in.free = static_cast<std::uint32_t>(width);
      last = k == 0 ? r_.compute(in, {readers[0], readers[1], x, w}) : r_.compute(in, {x, w});
      k += count;
    }
    return last;
  }

  /// The online log-sum-exp step of a row tile over a chunk; after the last
  /// chunk the loss and its store.
  void epilogue(std::int64_t ti, std::int64_t vi, std::int64_t s, std::int64_t rows,
                std::int64_t cols, token last_mm, bank_readers& set, std::int64_t bank0) {
    row_state& r = row(ti, s);
    const bool first = vi == 0;
    token mnew = compute(vector_engine, op::reduce, rows, cols, flag_reads_psum, {last_mm});
    if (!first) mnew = compute(vector_engine, op::tensor_tensor, rows, 1, 0, {mnew, r.state});
    const token ex = compute(scalar_engine, op::activation, rows, cols, flag_reads_psum, {mnew});
    const token mask = compute(p_.pick_engine, op::tensor_scalar, rows, cols, 0, {r.label, iota_});
    const token product =
        compute(vector_engine, op::tensor_tensor, rows, cols, flag_reads_psum, {mask, last_mm});
    token update = compute(vector_engine, op::reduce, rows, cols, 0, {product});
    for (std::int64_t k = 0; k < pl_.banks_per_sub; ++k)
      set[static_cast<std::size_t>(bank0 + k)] = {ex, product};
    if (!first) {
      const token alpha = compute(scalar_engine, op::activation, rows, 1, 0, {mnew});
      compute(vector_engine, op::tensor_tensor, rows, 1, 0, {ex, alpha});
      update = compute(vector_engine, op::tensor_tensor, rows, 1, 0, {update});
    }
    r.state = update;
    if (vi + 1 < pl_.chunks) return;
    const token ln = compute(scalar_engine, op::activation, rows, 1, 0, {update, ex});
    const token loss = compute(vector_engine, op::tensor_tensor, rows, 1, 0, {ln});
    r.state = dma(2, rows, 4, false, {loss});
  }

  [[nodiscard]] steady_estimate estimate() const {
    steady_estimate e = r_.estimate();
    e.totals.flops = 2.0 * static_cast<double>(p_.tokens) * static_cast<double>(p_.d_model) *
                     static_cast<double>(p_.vocab);
    e.totals.min_hbm_bytes =
        static_cast<double>((p_.tokens + p_.vocab) * p_.d_model * dtype_bytes(p_.type)) +
        8.0 * static_cast<double>(p_.tokens);
    e.totals.compute_type = p_.type;
    steady::name_bound(e, {"logits", "row max", "exp", "label logit"},
                       p_.vocab_outer ? "load x" : "load W");
    return e;
  }

  const plan& pl_;
  const params& p_;
  const machine& m_;
  steady::replay r_;
  int per_queue_ = 1;  ///< queues per stream (emit::queues)
  std::array<std::int64_t, 3> queue_count_{};
  steady::ring<slot> x_, w_;
  std::int64_t x_block_ = -1, w_block_ = -1;  ///< the block each newest slot holds
  steady::ring<bank_readers> sets_;
  std::vector<row_state> rows_;
  token iota_;
  /// The fields each jump extrapolates: the inner loop's, and the outer's
  /// (with every token's running state where those live across outer iterations).
  std::vector<double*> inner_, outer_;
};

}  // namespace

std::optional<steady_estimate> estimate_steady(const plan& pl, const machine& m) {
  if (pl.slabs > max_slabs || pl.groups > 8) return std::nullopt;
  return cross_entropy_replay(pl, m).run();
}

}  // namespace tessel::sim::ce
