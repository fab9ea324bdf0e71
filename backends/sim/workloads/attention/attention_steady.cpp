// attention_steady.cpp: the steady-state model of the attention plan
// (attention_plan.hpp, docs/simulator.md "attention's model") in closed
// form, without lowering or replaying the whole schedule. The counts
// (instructions, HBM bytes) are the lowering's (attention.cpp), summed per
// kv iteration (count()). The time is a sum of unit periods: the lowering
// pipelines the units (one q sub-tile against one kv tile) one deep, and
// its in-order engines chain them, so one unit's cycle runs its S = Q K^T
// (TensorE), the mask, row max, reference and bias (VectorE), the
// correction and exp (ScalarE), the running sum (VectorE), then the
// transposes, their copies and the P V matmuls of the unit before, block by
// block (TensorE and VectorE in turn). A unit's period is that chain timed
// with the event model's costs (cost_rules.hpp, exposed stationary loads,
// TensorE's warm-up throttle in its steady state: the same unit repeated
// until the throttle settles), once per distinct kind of unit (first or
// later kv tile, diagonal or not, lazy reference steps, partial tiles) and
// counted per q tile in closed form. To that come the loads' stalls (each
// K/V tile's loads wait for the last reader of its slot, each Q tile's for
// the last S of the q tile before; with one slot the last P V of a tile
// also reads the next tile's V; a store issued before them holds the queue
// until its normalization; a stalled S overlaps what VectorE has left of
// the unit before), the fill (the first loads) and the drain (the last
// normalization and store), bounded below by the DMA data, the queues'
// time and each engine's work.
#include "../../cost_rules.hpp"
#include "../../steady_closed.hpp"
#include "../../steady_common.hpp"
#include "attention_plan.hpp"

#include <algorithm>
#include <array>
#include <cstdint>
#include <vector>

namespace tessel::sim::attn {
namespace {

/// What sets a unit's cycle apart from another's.
struct kind {
  std::int64_t rows = 0, cols = 0;
  bool first = false;     ///< the q tile's first kv tile (no correction)
  bool diagonal = false;  ///< causal: masked
  int steps = 0;          ///< lazy reference: 0 (eager), 1 (a correction) or 4
  bool norm = false;      ///< the product in its cycle is a last kv tile's (normalized, stored)
  bool operator==(const kind&) const = default;
};

/// A unit's cycle: its period, the work of each engine, and when its
/// product (the unit before's transposes) starts after its S.
struct cycle {
  double period = 0, to_product = 0, qk = 0;  ///< qk: its S's time
  /// How long VectorE is still busy with the unit before after S: what a
  /// stalled S overlaps.
  double slack = 0;
  std::array<double, 4> busy{};
};

class model {
 public:
  model(const params& p, const machine& m)
      : p_(p), m_(m), l_(layout_of(p, m)), c_(m, p.type, p.queues), b_(dtype_bytes(p.type)) {
    // room for the kinds a plan has (a handful to a dozen): no regrowth per estimate
    cycles_.reserve(16);
    simulated_.reserve(8);
    data_.reserve(8);
  }

  steady_estimate run() {
    const std::int64_t P = l_.partitions, q_tiles = ceil_div(p_.seq, p_.q_tile);
    const std::int64_t kv_tiles = ceil_div(p_.seq, p_.kv_tile);
    double latency = 0, stalls = 0;
    std::array<double, 4> busy{};
    const auto add = [&](const kind& k, double n) {
      if (n <= 0) return;
      const cycle& c = of(k);
      latency += n * c.period;
      for (std::size_t e = 0; e < 4; ++e) busy[e] += n * c.busy[e];
    };
    std::int64_t prev_last_kt = -1;
    double prev_period = 0, prev_qk = 0;
    std::int64_t prev_subs = 1;
    // a sub-tile's last accumulation and normalization, before its store
    const double finish = ew(vector_engine, op::tensor_tensor, P, p_.d) +
                          ew(vector_engine, op::reciprocal, P, 1, true) +
                          ew(vector_engine, op::tensor_scalar, P, p_.d, true);
    for (std::int64_t qt = 0; qt < q_tiles; ++qt) {
      const std::int64_t n = visited(qt), row0 = qt * p_.q_tile;
      const std::int64_t q_rows = std::min(p_.q_tile, p_.seq - row0);
      const std::int64_t subs = ceil_div(q_rows, P);
      const std::int64_t tail_rows = q_rows - (subs - 1) * P;
      // kv iteration i: its units by kind
      const auto iteration = [&](std::int64_t i, double times, int steps) {
        const std::int64_t cols = std::min(p_.kv_tile, p_.seq - i * p_.kv_tile);
        const std::int64_t ds = diagonal_subs(i, row0, subs);
        for (std::int64_t s = 0; s < subs; ++s) {
          kind k;
          k.rows = s + 1 == subs ? tail_rows : P;
          k.cols = cols;
          k.first = i == 0;
          k.diagonal = s < ds;
          k.steps = steps;
          k.norm = (i + 1 == n && s > 0) || (i == 0 && s == 0 && qt > 0);
          add(k, times);
        }
      };
      const auto steps_of = [&](std::int64_t i) {
        if (p_.rescale_every <= 1) return 0;
        return i == 0 || i % p_.rescale_every == 0 ? 1 : 4;
      };
      // a run of kv iterations [a, b) alike but for the lazy steps
      const auto run_of = [&](std::int64_t a, std::int64_t b) {
        if (b <= a) return;
        if (p_.rescale_every <= 1) {
          iteration(a, static_cast<double>(b - a), 0);
          return;
        }
        const std::int64_t e = p_.rescale_every;
        const std::int64_t corrections = (b - 1) / e - (a - 1) / e;
        iteration(a, static_cast<double>(corrections), 1);
        iteration(a, static_cast<double>(b - a - corrections), 4);
      };
      iteration(0, 1, steps_of(0));
      // the kv iterations past the first and before the last: unmasked
      // ones, those that mask some sub-tiles (one at a time), those that
      // mask all (without skip_masked), all with whole kv tiles
      const std::int64_t last = n - 1;
      std::int64_t i = 1;
      if (last > 1) {
        const std::int64_t first_diag = p_.causal ? first_kv_past(row0) : last;
        const std::int64_t all_diag = p_.causal ? first_kv_past(row0 + (subs - 1) * P) : last;
        const std::int64_t whole = std::min(last, kv_tiles - (p_.seq % p_.kv_tile ? 1 : 0));
        const std::int64_t plain_end = std::clamp<std::int64_t>(first_diag, 1, whole);
        run_of(1, plain_end);
        i = plain_end;
        const std::int64_t masked = std::clamp<std::int64_t>(all_diag, i, whole);
        for (; i < masked; ++i) iteration(i, 1, steps_of(i));
        run_of(i, whole);
        i = std::max(i, whole);
        for (; i < last; ++i) iteration(i, 1, steps_of(i));
      }
      if (last >= 1) iteration(last, 1, steps_of(last));

      // the loads' stalls: the q tile's first (Q, and K/V unless kept)
      const kind head{std::min(P, q_rows), std::min(p_.kv_tile, p_.seq), true, false, 0, qt > 0};
      const cycle& h = of(head);
      if (qt == 0) {
        fill_ = load_stall(q_rows, true, 0, 0, h.period + h.to_product, h);
      } else {
        const bool reload = prev_last_kt != 0;
        const double w0 = prev_period - prev_qk;
        // with the K/V tile in the slot the last tile used, the loads wait
        // for its readers, and the last P V reads the new tile's V
        const bool same_slot = reload && (p_.kv_bufs == 1 || prev_last_kt % p_.kv_bufs == 0);
        const double k_ready = same_slot ? w0 : 0;
        // with sub-tiles, the store of the last kv tile's second to last one
        // is issued before Q, ready after the q tile's last product
        const double store = prev_subs > 1 ? w0 + finish : -1e300;
        stalls +=
            std::max(0.0, load_stall(q_rows, reload, w0, k_ready,
                                     w0 + (same_slot ? 0 : h.period) + h.to_product, h, store) -
                              h.slack);
      }
      // then each later kv tile's
      if (n > 1) {
        const double mid = kv_stall(false, subs);
        const std::int64_t partial = p_.seq % p_.kv_tile && n == kv_tiles ? 1 : 0;
        stalls += static_cast<double>(n - 1 - partial) * mid;
        if (partial) stalls += kv_stall(true, subs);
        // the second kv tile's loads queue behind the store of the q tile before
        if (qt > 0) stalls += std::max(0.0, store_stall(head, subs) - mid);
      }
      prev_last_kt = n - 1;
      prev_subs = subs;
      kind tail{tail_rows,       std::min(p_.kv_tile, p_.seq - (n - 1) * p_.kv_tile),
                n == 1,          diagonal_subs(n - 1, row0, subs) == subs,
                steps_of(n - 1), subs > 1};
      const cycle& t = of(tail);
      prev_period = t.period;
      prev_qk = t.qk;
    }
    // the drain: the last product, its normalization and store
    const std::int64_t last_rows = p_.seq - (q_tiles - 1) * p_.q_tile;
    const std::int64_t rows = last_rows - (ceil_div(last_rows, P) - 1) * P;
    const double drain = c_.elementwise_ns(vector_engine, op::reciprocal, rows, 1) +
                         c_.elementwise_ns(vector_engine, op::tensor_scalar, rows, p_.d) +
                         m_.dma_issue_ns + c_.transfer_ns(rows, p_.d * b_, 0, true) +
                         std::max(0.0, m_.dma_fixed_latency_ns - m_.dma_issue_ns);
    if (p_.causal) busy[3] += c_.elementwise_ns(gpsimd_engine, op::copy, l_.partitions, p_.kv_tile);
    const counts n = count();
    double path = fill_ + latency + stalls + drain + steady::warmup_loss(busy[0], m_);
    path = std::max({path, n.dma_data, n.queue, busy[1], busy[2], busy[3]});
    steady_estimate e;
    e.latency_ns = path;
    e.busy_ns = busy;
    e.dma_data_ns = n.dma_data;
    e.hbm_read_bytes = n.hbm_read;
    e.hbm_write_bytes = n.hbm_write;
    e.instructions = n.instructions;
    const auto seq = static_cast<double>(p_.seq);
    const double pairs = p_.causal ? 0.5 * seq * (seq + 1) : seq * seq;
    e.totals.flops = 4.0 * pairs * static_cast<double>(p_.d);
    e.totals.min_hbm_bytes = 4.0 * static_cast<double>(p_.seq * p_.d * b_);
    e.totals.compute_type = p_.type;
    steady::name_bound(e, {"QK^T", "accumulate O", "exp", "mask"}, "load K");
    return e;
  }

 private:
  /// Kv iterations of q tile `qt`.
  [[nodiscard]] std::int64_t visited(std::int64_t qt) const {
    const std::int64_t kv_tiles = ceil_div(p_.seq, p_.kv_tile);
    if (!(p_.causal && p_.skip_masked)) return kv_tiles;
    return std::min(kv_tiles, ceil_div(std::min(p_.seq, (qt + 1) * p_.q_tile), p_.kv_tile));
  }
  /// The first kv tile whose last key is past `row` (causal).
  [[nodiscard]] std::int64_t first_kv_past(std::int64_t row) const {
    return ceil_div(row + 2, p_.kv_tile) - 1;
  }
  /// How many sub-tiles of a q tile from `row0` kv iteration i masks.
  [[nodiscard]] std::int64_t diagonal_subs(std::int64_t i, std::int64_t row0,
                                           std::int64_t subs) const {
    if (!p_.causal) return 0;
    const std::int64_t last_key = std::min(p_.seq, (i + 1) * p_.kv_tile) - 1;
    if (last_key <= row0) return 0;
    return std::min(subs, ceil_div(last_key - row0, l_.partitions));
  }

  // --- one unit's cycle ---------------------------------------------------------------

  /// The engines' state across repeated cycles of one kind.
  struct engines {
    double tensor = 0, vector = 0, scalar = 0, gpsimd = 0, exp_prev = 0;
    std::array<double, 8> exps{};  ///< the last exps' ends, newest first
    double last_end = -1, prev_cycles = 0;
    std::array<double, 4> busy{};
    warmup_throttle throttle;
  };

  /// What one cycle of a kind costs, worked out once (ns, TensorE in
  /// cycles at full speed: `*_load`: its stationary load).
  struct costs {
    int chunks = 1, blocks = 1;
    std::array<double, 2> qk{}, tr{}, pv{}, copy{};  ///< full and last (partial) chunk or block
    double qk_load = 0, tr_load = 0, pv_load = 0;
    double mask = 0, mask_add = 0, reduce = 0, max = 0, reference = 0, bias = 0;
    double alpha = 0, exp = 0, scale = 0, sum = 0, acc = 0, norm = 0;
  };
  [[nodiscard]] costs costs_of(const kind& k) const {
    const std::int64_t rows = k.rows, cols = k.cols, P = l_.partitions, f = m_.max_moving_free;
    costs c;
    c.chunks = static_cast<int>(ceil_div(cols, f));
    c.blocks = static_cast<int>(ceil_div(cols, P));
    const auto cycles = [&](const instruction& in) { return cost_rule::tensor_cycles(in, m_); };
    for (int last = 0; last < 2; ++last) {
      const auto i = static_cast<std::size_t>(last);
      const std::int64_t n = last ? cols - (c.chunks - 1) * f : std::min(f, cols);
      const std::int64_t kb = last ? cols - (c.blocks - 1) * P : std::min(P, cols);
      c.qk[i] = cycles(make_matmul(p_.type, p_.d, rows, n));
      c.tr[i] = cycles(make_transpose(p_.type, rows, kb));
      c.pv[i] = cycles(make_matmul(p_.type, kb, rows, p_.d));
      c.copy[i] = ew(vector_engine, op::copy, kb, rows);
      if (!last) c.tr_load = cost_rule::stationary_load_cycles(static_cast<double>(kb), m_);
    }
    c.qk_load = cost_rule::stationary_load_cycles(static_cast<double>(rows), m_);
    c.pv_load = c.qk_load;
    if (k.diagonal) {
      c.mask = ew(gpsimd_engine, op::tensor_scalar, rows, cols);
      c.mask_add = ew(vector_engine, op::tensor_tensor, rows, cols);
    }
    c.reduce = ew(vector_engine, op::reduce, rows, cols);
    const double step = ew(vector_engine, op::tensor_tensor, rows, 1, true);
    if (!k.first) c.max = step;
    if (k.steps == 1) c.reference = ew(vector_engine, op::copy, rows, 1, true);
    if (k.steps == 4) c.reference = 3 * step + ew(vector_engine, op::tensor_scalar, rows, 1, true);
    c.bias = ew(vector_engine, op::tensor_scalar, rows, 1, true);
    c.exp = ew(scalar_engine, op::activation, rows, cols);
    if (!k.first) {
      c.alpha = ew(scalar_engine, op::activation, rows, 1);
      c.scale = ew(vector_engine, op::tensor_scalar, rows, p_.d);
      c.sum = ew(vector_engine, op::tensor_tensor, rows, 1);
    }
    c.acc = ew(vector_engine, op::tensor_tensor, rows, p_.d);
    if (k.norm)
      c.norm = ew(vector_engine, op::reciprocal, rows, 1, true) +
               ew(vector_engine, op::tensor_scalar, rows, p_.d, true);
    return c;
  }

  /// TensorE runs `cycles` (a multiply, with `load` its stationary load or
  /// none when negative) from `ready` as timing.cpp does: the exposed load,
  /// the throttle. Returns its end.
  double tensor(engines& s, double cycles, double load, double ready) const {
    const double now = std::max(s.tensor, ready);
    const bool gap = s.last_end < 0 || now > s.last_end + 1e-9;
    double all = cycles;
    if (load >= 0) all += gap ? load : std::max(0.0, load - s.prev_cycles);
    s.prev_cycles = cycles;
    const double ns = s.throttle.duration(all / m_.tensor_ghz, now, s.last_end, m_);
    s.busy[0] += ns;
    s.last_end = now + ns;
    s.tensor = s.last_end;
    return s.tensor;
  }
  /// An elementwise instruction's time (`dependent`: on the engine's previous one).
  [[nodiscard]] double ew(engine_id e, op kind, std::int64_t rows, std::int64_t n,
                          bool dependent = false) const {
    return compute_ns(make_elementwise(e, kind, dtype::fp32, rows, n), m_, dependent);
  }

  /// One cycle of a kind: its S, its scores' chain, and the product of the
  /// unit before (taken to be of the same shape). Returns when S starts.
  double step(engines& s, const costs& c, cycle& out) const {
    const auto sets = static_cast<std::size_t>(std::clamp(l_.s_sets, 1, 8));
    // S waits for its score set's last exp
    const double start = std::max(s.tensor, s.exps[sets - 1]);
    double t = start;
    for (int i = 0; i < c.chunks; ++i)
      t = tensor(s, c.qk[i + 1 == c.chunks ? 1 : 0], i == 0 ? c.qk_load : -1, start);
    out.slack = std::max(0.0, s.vector - t);
    double v = std::max(t, s.vector);
    double vector_busy = 0;
    const auto vec = [&](double ns) {
      v += ns;
      vector_busy += ns;
    };
    if (c.mask > 0) {  // the mask (GpSimdE, ahead) added to S
      s.gpsimd += c.mask;
      s.busy[3] += c.mask;
      vec(c.mask_add);
    }
    vec(c.reduce + c.max + c.reference + c.bias);
    double exp_start = v;
    if (c.alpha > 0) {
      s.scalar = std::max(v, s.scalar) + c.alpha;
      s.busy[2] += c.alpha;
      exp_start = s.scalar;
      v = std::max(v, s.scalar);
      vec(c.scale);  // O_acc *= alpha
    }
    s.scalar = std::max(exp_start, s.scalar) + c.exp;
    s.busy[2] += c.exp;
    if (c.alpha > 0) {
      v = std::max(v, s.scalar);
      vec(c.sum);  // the running sum
    }
    out.qk = t - start;
    out.to_product = v - start;
    // the product of the unit before: P^T block by block, copied, P V
    double pv = t;
    for (int b = 0; b < c.blocks; ++b) {
      const std::size_t last = b + 1 == c.blocks ? 1 : 0;
      v = std::max(v, tensor(s, c.tr[last], c.tr_load, s.exp_prev));
      vec(c.copy[last]);
      pv = tensor(s, c.pv[last], c.pv_load, v);
    }
    v = std::max(v, pv);
    vec(c.acc + c.norm);  // O_acc += O_part, and a last kv tile's normalization
    s.vector = v;
    s.busy[1] += vector_busy;
    s.exp_prev = s.scalar;
    std::rotate(s.exps.rbegin(), s.exps.rbegin() + 1, s.exps.rend());
    s.exps[0] = s.scalar;
    return start;
  }

  /// The cycle of kind k in its steady state: repeated until TensorE's
  /// throttle settles, the period between the last two starts. The mask,
  /// the lazy reference's steps and a normalization are added to the cycle
  /// of the kind without them (they lengthen VectorE's chain where they are).
  const cycle& of(const kind& k) {
    for (const auto& [key, c] : cycles_)
      if (key == k) return c;
    kind plain = k;
    plain.steps = 0;
    plain.norm = false;
    plain.diagonal = false;
    cycle c = simulated(plain);
    const std::int64_t rows = k.rows;
    double reference = 0, norm = 0;
    if (k.diagonal) {  // the mask (GpSimdE, ahead of VectorE) added to S on VectorE
      reference += ew(vector_engine, op::tensor_tensor, rows, k.cols);
      c.busy[3] += ew(gpsimd_engine, op::tensor_scalar, rows, k.cols);
    }
    if (k.steps == 1) reference += ew(vector_engine, op::copy, rows, 1, true);
    if (k.steps == 4)
      reference += 3 * ew(vector_engine, op::tensor_tensor, rows, 1, true) +
                   ew(vector_engine, op::tensor_scalar, rows, 1, true);
    if (k.norm)
      norm = ew(vector_engine, op::reciprocal, rows, 1, true) +
             ew(vector_engine, op::tensor_scalar, rows, p_.d, true);
    // the next S overlaps the accumulation (and normalization) of O
    const double acc = ew(vector_engine, op::tensor_tensor, rows, p_.d);
    c.period += reference + std::max(c.qk, acc + norm) - std::max(c.qk, acc);
    c.slack = std::max(0.0, acc + norm - c.qk);
    c.to_product += reference;
    c.busy[1] += reference + norm;
    cycles_.emplace_back(k, c);
    return cycles_.back().second;
  }
  [[nodiscard]] cycle simulated(const kind& k) {
    for (const auto& [key, c] : simulated_)
      if (key == k) return c;
    const costs work = costs_of(k);
    engines s;
    double start = 0;
    cycle c, next;
    for (int pass = 0; pass < 3; ++pass) start = step(s, work, c);
    const std::array<double, 4> before = s.busy;
    c.period = step(s, work, next) - start;
    for (std::size_t e = 0; e < 4; ++e) c.busy[e] = s.busy[e] - before[e];
    simulated_.emplace_back(k, c);
    return c;
  }

  // --- the loads ----------------------------------------------------------------------

  /// One transfer's data phase.
  /// One transfer's data phase (the few shapes a plan moves, kept).
  [[nodiscard]] double data_ns(std::int64_t rows, std::int64_t bytes) const {
    for (const auto& d : data_)
      if (d.rows == rows && d.bytes == bytes) return d.ns;
    const double ns = c_.transfer_ns(rows, bytes, 0, true);
    if (data_.size() < 8) data_.push_back({rows, bytes, ns});
    return ns;
  }

  /// A queue's transfers in order: when the last of them has arrived, each
  /// issued from `ready` (ns), as the replayed queue does.
  struct queue {
    const machine& m;
    double issue_free = -1e300, free = -1e300;
    double transfer(double ready, double data) {
      const double issue = m.dma_issue_ns;
      const double issue_at =
          m.dma_queue_pipelined ? std::max(issue_free, ready - issue) : std::max(free, ready);
      const double start = std::max({issue_at + issue, ready, free});
      issue_free = issue_at + issue;
      free = start + data;
      return free + std::max(0.0, m.dma_fixed_latency_ns - m.dma_issue_ns);
    }
  };

  /// The K/V loads of a tile of `cols` keys in dma_order, issued from
  /// `ready` on `q`: how far the last of them arrives past its need, K
  /// needed at `k_need` and V's block b at `v_need` + b `per_block` (its
  /// P V, one block after another).
  double kv_loads(queue& q, std::int64_t cols, double ready, double k_need, double v_need,
                  double per_block) const {
    const std::int64_t P = l_.partitions;
    double late = -1e300;
    for (const auto& which : p_.dma_order) {
      if (which == "k") late = std::max(late, q.transfer(ready, data_ns(p_.d, cols * b_)) - k_need);
      if (which == "v") {
        const double full = data_ns(std::min(P, cols), p_.d * b_);
        for (std::int64_t x = 0; x < cols; x += P) {
          const double data = x + P <= cols ? full : data_ns(cols - x, p_.d * b_);
          late = std::max(
              late, q.transfer(ready, data) - v_need - static_cast<double>(x / P) * per_block);
        }
      }
    }
    return late;
  }

  /// The stall of a q tile's first loads (`q_rows`: the Q tile, and with
  /// `kv` K/V tile 0) in a frame where the last S of the q tile before ends
  /// at 0: Q issued from 0 and needed with K at `need`, K/V issued from
  /// `k_ready`, V needed from `v_need` (`c`: the first unit's cycle). The
  /// first q tile: everything from 0 (its fill, need 0).
  double load_stall(std::int64_t q_rows, bool kv, double need, double k_ready, double v_need,
                    const cycle& c, double store = -1e300) const {
    queue q{m_};
    if (store > -1e299) {  // a store ahead of them holds the queue until it is ready
      q.issue_free = store;
      q.free = store + data_ns(l_.partitions, p_.d * b_);
    }
    double stall = q.transfer(0, data_ns(p_.d, q_rows * b_)) - need;
    if (kv) {
      const std::int64_t cols = std::min(p_.kv_tile, p_.seq);
      const double per_block =
          (c.period - c.to_product) / static_cast<double>(ceil_div(cols, l_.partitions));
      stall = std::max(stall, kv_loads(q, cols, k_ready, need, v_need, per_block));
    }
    return std::max(stall, 0.0);
  }

  /// The stall of the second kv tile's loads of a q tile after the first
  /// (`head`: its first unit's kind): the last store of the q tile before
  /// holds the queue until its normalization is done (after the first
  /// unit's product), and they follow it; frame as kv_stall's.
  double store_stall(const kind& head, std::int64_t subs) {
    if (store_stall_ >= 0) return store_stall_;
    const std::int64_t P = l_.partitions, cols = std::min(p_.kv_tile, p_.seq);
    const cycle& h = of(head);
    const double norm = ew(vector_engine, op::reciprocal, head.rows, 1, true) +
                        ew(vector_engine, op::tensor_scalar, head.rows, p_.d, true);
    const double acc = ew(vector_engine, op::tensor_tensor, head.rows, p_.d);
    const kind k{P, p_.kv_tile, false, false, 0, false};
    const cycle& c = of(k);
    const double ready = acc + norm - static_cast<double>(subs - 1) * c.period;
    queue q{m_};
    q.issue_free = ready;
    q.free = ready + data_ns(head.rows, p_.d * b_);
    const double v_need = p_.kv_bufs == 1 ? c.to_product : c.period + c.to_product;
    const double per_block = (c.period - c.to_product) / static_cast<double>(ceil_div(cols, P));
    store_stall_ = std::max(0.0, kv_loads(q, cols, ready, 0, v_need, per_block) - h.slack);
    return store_stall_;
  }

  /// The stall of a later kv iteration's loads (`partial`: the last, short
  /// tile), in a frame where its first S would start at 0: issued when the
  /// last reader of their slot is done (the P V of the tile kv_bufs back,
  /// in the cycle of the unit after it), K needed at 0, V by its P V; at
  /// least what the queues take for them beyond the kv iteration's units.
  double kv_stall(bool partial, std::int64_t subs) {
    auto& memo = kv_stall_[partial ? 1 : 0];
    if (memo >= 0) return memo;
    const std::int64_t P = l_.partitions;
    const std::int64_t cols = partial ? p_.seq % p_.kv_tile : p_.kv_tile;
    const kind k{P, p_.kv_tile, false, false, 0, false};
    const cycle& c = of(k);
    const double ready =
        -static_cast<double>(std::max<std::int64_t>(0, (p_.kv_bufs - 1) * subs - 1)) * c.period;
    const double v_need = p_.kv_bufs == 1 ? c.to_product : c.period + c.to_product;
    const double per_block = (c.period - c.to_product) / static_cast<double>(ceil_div(cols, P));
    queue q{m_};
    double stall = kv_loads(q, cols, ready, 0, v_need, per_block);
    // the queues' throughput: each transfer holds one for its issue (and its data)
    double held = 0;
    const auto hold = [&](double data, double n) {
      held +=
          n * (m_.dma_queue_pipelined ? std::max(m_.dma_issue_ns, data) : m_.dma_issue_ns + data);
    };
    hold(data_ns(p_.d, cols * b_), 1);
    hold(data_ns(P, p_.d * b_), static_cast<double>(cols / P));
    if (cols % P) hold(data_ns(cols % P, p_.d * b_), 1);
    stall = std::max(stall, held / p_.queues - static_cast<double>(subs) * c.period);
    memo = std::max(0.0, stall - c.slack);
    return memo;
  }

  // --- the counts ---------------------------------------------------------------------

  /// What the lowering issues and moves, counted in closed form per kv iteration.
  struct counts {
    double instructions = 0, hbm_read = 0, hbm_write = 0;
    double dma_data = 0;  ///< every transfer's data phase
    double queue = 0;     ///< a queue's issues and data (the queues take the transfers in turn)
  };
  [[nodiscard]] counts count() const {
    counts c;
    const std::int64_t P = l_.partitions, b = b_, d = p_.d;
    const auto q_tiles = ceil_div(p_.seq, p_.q_tile);
    const std::int64_t kv_tiles = ceil_div(p_.seq, p_.kv_tile);
    c.instructions = p_.causal ? 1 : 0;
    const double queues = p_.queues;
    // one transfer's data: the whole tiles' worked out once
    const std::int64_t kv_full = std::min(p_.kv_tile, p_.seq), q_full = std::min(p_.q_tile, p_.seq);
    const double k_full = data_ns(d, kv_full * b), v_full = data_ns(std::min(P, kv_full), d * b),
                 q_data = data_ns(d, q_full * b);
    const auto data_of = [&](std::int64_t rows, std::int64_t bytes) {
      if (rows == d && bytes == kv_full * b) return k_full;
      if (rows == std::min(P, kv_full) && bytes == d * b) return v_full;
      if (rows == d && bytes == q_full * b) return q_data;
      return data_ns(rows, bytes);
    };
    const auto transfer = [&](std::int64_t rows, std::int64_t bytes, double times) {
      const double data = data_of(rows, bytes);
      c.dma_data += times * data;
      c.queue +=
          times *
          (m_.dma_queue_pipelined ? std::max(m_.dma_issue_ns, data) : m_.dma_issue_ns + data) /
          queues;
    };
    std::int64_t loaded = -1;
    for (std::int64_t qt = 0; qt < q_tiles; ++qt) {
      const std::int64_t n = visited(qt), row0 = qt * p_.q_tile;
      const std::int64_t q_rows = std::min(p_.q_tile, p_.seq - row0);
      const std::int64_t subs = ceil_div(q_rows, P);
      c.instructions += 1;
      c.hbm_read += static_cast<double>(d * q_rows * b);
      transfer(d, q_rows * b, 1);
      // `times` kv iterations like i (`load`: its K/V tile is loaded)
      const auto iteration = [&](std::int64_t i, double times, bool load) {
        const std::int64_t cols = std::min(p_.kv_tile, p_.seq - i * p_.kv_tile);
        const std::int64_t blocks = ceil_div(cols, P);
        if (load) {
          c.instructions += times * static_cast<double>(1 + blocks);
          c.hbm_read += times * static_cast<double>(2 * d * cols * b);
          transfer(d, cols * b, times);
          transfer(P, d * b, times * static_cast<double>(cols / P));
          if (cols % P) transfer(cols % P, d * b, times);
        }
        const bool first = i == 0, last = i + 1 == n;
        std::int64_t per_unit = ceil_div(cols, m_.max_moving_free) + 3 + 3 * blocks + 1;
        if (!first) per_unit += 4;
        if (last) per_unit += 3;
        c.instructions +=
            times * static_cast<double>(subs * per_unit + 2 * diagonal_subs(i, row0, subs));
        if (last) {
          c.hbm_write += static_cast<double>(q_rows * d * b);
          transfer(q_rows - (subs - 1) * P, d * b, 1);
          transfer(P, d * b, static_cast<double>(subs - 1));
        }
      };
      // the lazy reference's steps: 1 at a correction, else 4, per unit
      const auto lazy = [&](std::int64_t a, std::int64_t end) {
        if (p_.rescale_every <= 1 || end <= a) return;
        const std::int64_t e = p_.rescale_every;
        const std::int64_t corrections =
            (end - 1) / e - (a - 1) / e + (a == 0 ? 1 : 0);  // i = 0 corrects too
        c.instructions += static_cast<double>(subs) *
                          static_cast<double>(corrections + 4 * (end - a - corrections));
      };
      lazy(0, n);
      iteration(0, 1, loaded != 0);
      // the whole, unmasked tiles past the first (alike), then one at a time
      const std::int64_t whole = std::min(n - 1, kv_tiles - (p_.seq % p_.kv_tile ? 1 : 0));
      std::int64_t i = 1;
      const std::int64_t plain = p_.causal ? std::min(whole, first_kv_past(row0)) : whole;
      if (plain > i) {
        iteration(i, static_cast<double>(plain - i), true);
        i = plain;
      }
      // then those that mask some sub-tiles, one at a time, and those that mask all
      const std::int64_t all = std::clamp(first_kv_past(row0 + (subs - 1) * P), i, whole);
      for (; i < all; ++i) iteration(i, 1, true);
      if (whole > i) {
        iteration(i, static_cast<double>(whole - i), true);
        i = whole;
      }
      for (; i < n; ++i) iteration(i, 1, true);
      loaded = n - 1;
    }
    return c;
  }

  const params& p_;
  const machine& m_;
  const layout l_;
  steady::counter c_;
  std::int64_t b_;
  std::vector<std::pair<kind, cycle>> cycles_, simulated_;
  std::array<double, 2> kv_stall_{-1, -1};
  double fill_ = 0, store_stall_ = -1;
  struct data_shape {
    std::int64_t rows, bytes;
    double ns;
  };
  mutable std::vector<data_shape> data_;  ///< data_ns's
};

}  // namespace

std::optional<steady_estimate> estimate_steady(const params& p, const machine& m) {
  if (!check_memory(p, m).empty()) return std::nullopt;  // the event model reports it
  return model(p, m).run();
}

}  // namespace tessel::sim::attn
