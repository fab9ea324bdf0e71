// rows_steady.cpp: the steady-state screening model of the row pipeline
// (rows::estimate_steady; docs/simulator.md, "Speed"), shared by rmsnorm,
// softmax and layernorm. The lowering (rows.cpp) issues each tile's loads,
// reduce steps and scale steps as a software pipeline; on the event model's
// in-order engines the period then depends on chains that cross engines and
// stages of tiles issued an iteration apart, which no per-resource bound
// sees. So this replays the issue order itself, as a max-plus recurrence:
// each compute instruction starts at max(its engine free, its dependencies
// done) exactly as the event model's uncontended engines do, each DMA queue
// issues and moves data in order. The one approximation is the sharing of
// the 16 DMA engines by the data phases in flight (timing.cpp's round
// robin): each transfer is stretched by the other queues' occupancy, worked
// out in closed form from one tile's work before the replay, and at least by
// the transfers of other queues already moving when it starts (a burst: x
// and the residual loaded together move at half rate each). Only the
// pipeline's fill and three steady iterations are replayed, once; the period
// of the last two (at least one tile's data through the shared DMA engines)
// extends over the rest, which is exact once the recurrence is periodic.
#include "../../cost_rules.hpp"
#include "rows.hpp"

#include <algorithm>
#include <array>
#include <vector>

namespace tessel::sim::rows {
namespace {

enum stage_id : int { stage_load = 0, stage_reduce = 1, stage_scale = 2 };

/// Tiles replayed after the pipeline's fill (the first iterations without
/// every stage: at most two, the pipeline being at most three deep); the
/// period is measured over the last `period_span` of them and extended over
/// the tiles not replayed.
constexpr std::int64_t steady_iterations = 3;
constexpr std::int64_t period_span = 2;
/// Rounds of the closed-form stretch (replay::closed_stretch) from 1.
constexpr int stretch_iterations = 4;
/// A run of fewer than `short_run` times the replayed tiles is short: its
/// stretch is refined from the replay, in `refined_passes` replays at most.
constexpr std::int64_t short_run = 2;
constexpr int refined_passes = 2;
/// Tiles whose chains are live at once, as in the lowering.
constexpr std::int64_t window = 4;

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

/// An issued compute instruction as later ones see it: when it is done and
/// which it is (0: none), so an instruction knows whether it depends on the
/// one before it on its engine (the event model's dependent-instruction floor).
struct ref {
  double done = 0;
  std::uint32_t id = 0;
};

using queue_times = std::array<double, dma_queue_count>;

/// Replays of the first `tiles` tiles (the last one `last_rows` rows), one
/// per stretch: what does not depend on the stretch (the ops' durations, the
/// transfers' data phases alone, the stage order, the queues in use) is
/// worked out once, and the replay's per-instruction work is table lookups.
class replay {
 public:
  replay(const pipeline_spec& s, const machine& m, std::int64_t tiles, std::int64_t last_rows)
      : s_(s), m_(m), tiles_(tiles), last_rows_(last_rows) {
    const tiling t = tiling_of(s);
    P_ = m.partitions;
    rpt_ = t.rows_per_tile;
    cps_ = t.cols_per_step;
    chunks_ = t.chunks;
    groups_ = ceil_div(rpt_, P_);
    readers_.assign(static_cast<std::size_t>(s.bufs * chunks_), 0.0);
    loads_ = readers_;
    chunk_last_.assign(static_cast<std::size_t>(window * chunks_ * groups_), ref{});
    stage_store_.assign(2 * static_cast<std::size_t>(s.outputs), 0.0);
    // the ops' durations: they depend on the element count only, not the partitions
    const std::int64_t tail = s.cols - (chunks_ - 1) * cps_;
    std::size_t ops = 0;
    for (const auto* list : {&s.reduce, &s.scale})
      for (const auto& step : *list) ops += step.ops.size();
    cost_.reserve(ops);
    for (const auto* list : {&s.reduce, &s.scale})
      for (const auto& step : *list)
        for (const auto& o : step.ops) {
          std::array<double, 4> ns{};
          const std::int64_t full = step.per_chunk ? cps_ : groups_;
          const std::int64_t last = step.per_chunk ? tail : groups_;
          for (int dependent = 0; dependent < 2; ++dependent) {
            ns[static_cast<std::size_t>(dependent)] =
                compute_ns(op_instruction(s, o, P_, full), m, dependent != 0);
            // the last chunk's cost is the same when the chunks divide the columns
            ns[static_cast<std::size_t>(2 + dependent)] =
                last == full ? ns[static_cast<std::size_t>(dependent)]
                             : compute_ns(op_instruction(s, o, P_, last), m, dependent != 0);
          }
          cost_.push_back(ns);
        }
    reduce_ops_ = 0;
    for (const auto& step : s.reduce) reduce_ops_ += step.ops.size();
    // a chunk's loads and stores move the same shape: by last tile, last chunk
    const std::int64_t bytes = dtype_bytes(s.type);
    for (int lt = 0; lt < 2; ++lt)
      for (int lc = 0; lc < 2; ++lc) {
        const std::int64_t cols = lc ? chunk_cols(chunks_ - 1) : chunk_cols(0);
        const std::int64_t parts = (lt ? last_rows_ : rpt_) / groups_;
        alone_[static_cast<std::size_t>(2 * lt + lc)] =
            data_alone(parts, groups_ * cols * bytes, cols == s.cols ? 0 : cols * bytes, true);
      }
    order_.reserve(s.stage_order.size());
    for (const auto& name : s.stage_order)
      order_.push_back(name == "load" ? stage_load : name == "reduce" ? stage_reduce : stage_scale);
    if (s.bufs < 3) std::sort(order_.begin(), order_.end());
    // the queues the streams rotate over (broadcasts use queue 0 and are not tracked)
    std::array<bool, dma_queue_count> used{};
    for (int stream = 0; stream < s.inputs + s.outputs; ++stream) {
      stream_base_[static_cast<std::size_t>(stream)] = stream * s.queues;
      for (int n = 0; n < s.queues; ++n)
        used[static_cast<std::size_t>((stream * s.queues + n) % dma_queue_count)] = true;
    }
    used_queues_.reserve(used.size());
    for (std::size_t q = 0; q < used.size(); ++q)
      if (used[q]) used_queues_.push_back(q);
    marks.reserve(static_cast<std::size_t>(tiles_));
  }

  /// The latency of the replayed tiles with each queue's data phases
  /// stretched by `stretch`.
  double run(const queue_times& stretch) {
    reset(stretch);
    for (int v = 0; v < s_.broadcasts; ++v) broadcast();
    const std::array<std::int64_t, 3> lag{0, std::min(1, s_.bufs - 1), std::min(2, s_.bufs - 1)};
    for (std::int64_t i = 0; i < tiles_ + lag[stage_scale]; ++i) {
      for (const int st : order_) {
        const std::int64_t t = i - lag[static_cast<std::size_t>(st)];
        if (t < 0 || t >= tiles_) continue;
        if (st == stage_load) load(t);
        if (st == stage_reduce) steps(t, s_.reduce, stage_reduce, 0);
        if (st == stage_scale) steps(t, s_.scale, stage_scale, reduce_ops_);
      }
      if (i < tiles_) marks.push_back(latest_);
    }
    return latest_;
  }

  /// The stretch in closed form, from one tile's work alone (what does not
  /// depend on the replay): the period taken as the busiest resource's work
  /// per tile (an engine, a queue, or the DMA engines' total), each queue's
  /// occupancy of it, and each queue's data phases stretched by 1 + the
  /// other queues' occupancy, iterated a few times from 1.
  void closed_stretch(queue_times& stretch) const {
    queue_times w{};
    const auto add = [&](int stream, double per_tile) {
      for (int n = 0; n < s_.queues; ++n)
        w[static_cast<std::size_t>((stream * s_.queues + n) % dma_queue_count)] +=
            per_tile / s_.queues;
    };
    const double chunk = (static_cast<double>(chunks_ - 1) * alone_[0] + alone_[1]);
    for (int k = 0; k < s_.inputs; ++k) add(k, chunk);
    for (const auto* list : {&s_.reduce, &s_.scale})
      for (const auto& step : *list)
        if (step.per_chunk)
          for (const auto& o : step.ops)
            if (o.store) add(s_.inputs + o.output, chunk);
    std::array<double, 4> busy_tile{};
    std::size_t ordinal = 0;
    for (const auto* list : {&s_.reduce, &s_.scale})
      for (const auto& step : *list)
        for (const auto& o : step.ops) {
          if (!o.store) {
            const double n = step.per_chunk ? static_cast<double>(chunks_ * groups_) : 1.0;
            busy_tile[static_cast<std::size_t>(o.engine - tensor_engine)] += n * cost_[ordinal][0];
          }
          ++ordinal;
        }
    double period = *std::max_element(busy_tile.begin(), busy_tile.end()), all = 0;
    for (const double x : w) {
      period = std::max(period, x);
      all += x;
    }
    period = std::max(period, all);
    stretch.fill(1.0);
    for (int it = 0; it < stretch_iterations; ++it) {
      queue_times occ{};
      double sum = 0;
      for (std::size_t q = 0; q < w.size(); ++q) {
        occ[q] = std::min(1.0, w[q] * stretch[q] / std::max(period, 1e-9));
        sum += occ[q];
      }
      for (std::size_t q = 0; q < w.size(); ++q) stretch[q] = 1 + (sum - occ[q]);
    }
  }

  std::vector<double> marks;     ///< the latest done time after each iteration with a load
  std::array<double, 4> busy{};  ///< as steady_estimate::busy_ns (TensorE unused)
  queue_times queue_work{};      ///< each queue's data phases alone (the broadcasts apart)
  double dma_work = 0;           ///< every data phase alone, the broadcasts included

 private:
  void reset(const queue_times& stretch) {
    stretch_ = &stretch;
    marks.clear();
    busy = {};
    queue_work = {};
    dma_work = 0;
    free_at_ = {};
    last_on_ = {};
    issue_free_ = {};
    queue_free_ = {};
    moving_from_ = moving_to_ = {};
    stream_next_ = {};
    stage_serial_ = {};
    std::fill(readers_.begin(), readers_.end(), 0.0);
    std::fill(loads_.begin(), loads_.end(), 0.0);
    std::fill(stage_store_.begin(), stage_store_.end(), 0.0);
    std::fill(chunk_last_.begin(), chunk_last_.end(), ref{});
    tile_last_ = {};
    broadcast_done_ = latest_ = 0;
    broadcast_used_ = false;
    next_id_ = 0;
  }

  [[nodiscard]] std::int64_t chunk_cols(std::int64_t c) const {
    return std::min(cps_, s_.cols - c * cps_);
  }
  /// The first slot of tile t's chunks, and of its chunks' group chains.
  [[nodiscard]] std::size_t slots_of(std::int64_t t) const {
    return static_cast<std::size_t>((t % s_.bufs) * chunks_);
  }
  ref* chains_of(std::int64_t t) {
    return &chunk_last_[static_cast<std::size_t>((t % window) * chunks_ * groups_)];
  }
  ref& tile_last(std::int64_t t) { return tile_last_[static_cast<std::size_t>(t % window)]; }
  [[nodiscard]] bool follows(engine_id e, const ref& r) const {
    return r.id != 0 && last_on_[e] == r.id;
  }
  /// The data phase of a chunk's transfer of tile t, chunk c, alone.
  [[nodiscard]] double chunk_alone(std::int64_t t, std::int64_t c) const {
    return alone_[(t == tiles_ - 1 ? 2U : 0U) + (c == chunks_ - 1 ? 1U : 0U)];
  }

  engine_id queue(int stream) {
    auto& n = stream_next_[static_cast<std::size_t>(stream)];
    const int q = (stream_base_[static_cast<std::size_t>(stream)] + n) % dma_queue_count;
    n = n + 1 == s_.queues ? 0 : n + 1;
    return static_cast<engine_id>(q);
  }

  /// A transfer's data phase with the DMA engines to itself.
  [[nodiscard]] double data_alone(std::int64_t parts, std::int64_t row_bytes, std::int64_t chunk,
                                  bool hbm) const {
    double alone = dma_data_ns(make_dma(0, parts, row_bytes, chunk), m_);
    if (hbm && m_.hbm_bytes_per_ns > 0)
      alone = std::max(alone, static_cast<double>(parts * row_bytes) / m_.hbm_bytes_per_ns);
    return alone;
  }

  /// A transfer on queue q whose data phase alone takes `alone`, ready at
  /// `ready`; returns when its dependents see it done.
  double transfer(engine_id q, double alone, double ready, bool counted = true) {
    dma_work += alone;
    if (counted) queue_work[q] += alone;
    const double issue = m_.dma_issue_ns;
    double data_at = 0;
    if (m_.dma_queue_pipelined) {  // issue overlaps the wait and the previous data phase
      const double issue_at = std::max(issue_free_[q], ready - issue);
      issue_free_[q] = issue_at + issue;
      data_at = std::max({issue_at + issue, ready, queue_free_[q]});
    } else {
      data_at = std::max(queue_free_[q], ready) + issue;
    }
    // a transfer that starts while another queue's is moving shares the
    // engines with it (q's own last transfer ended by data_at: never counted)
    int together = 1;
    for (const std::size_t o : used_queues_)
      together +=
          static_cast<int>(moving_from_[o] <= data_at) & static_cast<int>(data_at < moving_to_[o]);
    queue_free_[q] = data_at + alone * std::max((*stretch_)[q], static_cast<double>(together));
    if (counted) {
      moving_from_[q] = data_at;
      moving_to_[q] = queue_free_[q];
    }
    const double done = queue_free_[q] + std::max(0.0, m_.dma_fixed_latency_ns - issue);
    latest_ = std::max(latest_, done);
    return done;
  }

  /// The op numbered `ordinal` (reduce ops, then scale ops), on the last
  /// chunk when `last` is true.
  ref compute(const row_op& o, std::size_t ordinal, bool last, double ready, bool dependent) {
    const double ns = cost_[ordinal][(last ? 2U : 0U) + (dependent ? 1U : 0U)];
    const double end = std::max(free_at_[o.engine], ready) + ns;
    free_at_[o.engine] = end;
    const auto e = static_cast<std::size_t>(o.engine - tensor_engine);
    busy[e] += ns;
    latest_ = std::max(latest_, end);
    last_on_[o.engine] = ++next_id_;
    return {end, next_id_};
  }

  /// One broadcast vector: a row into partition 0, then doubled (rows.cpp).
  void broadcast() {
    const std::int64_t row = s_.cols * dtype_bytes(s_.type);
    double done = transfer(0, data_alone(1, row, 0, true), 0, false);
    for (std::int64_t have = 1; have < P_; have *= 2)
      done = transfer(0, data_alone(std::min(have, P_ - have), row, 0, false), done, false);
    broadcast_done_ = std::max(broadcast_done_, done);
  }

  void load(std::int64_t t) {
    tile_last(t) = {};
    const std::size_t slots = slots_of(t);
    ref* chains = chains_of(t);
    for (std::int64_t c = 0; c < chunks_; ++c) {
      const auto slot = slots + static_cast<std::size_t>(c);
      const double war = readers_[slot], alone = chunk_alone(t, c);
      readers_[slot] = loads_[slot] = 0;
      std::fill_n(chains + c * groups_, groups_, ref{});
      for (int k = 0; k < s_.inputs; ++k)
        loads_[slot] = std::max(loads_[slot], transfer(queue(k), alone, war));
    }
  }

  /// The steps of `list`, whose first op is numbered `ordinal`.
  void steps(std::int64_t t, const std::vector<row_step>& list, int stage, std::size_t ordinal) {
    for (const auto& step : list) {
      if (step.per_chunk) {
        for (std::int64_t c = 0; c < chunks_; ++c) chain(t, c, step, stage, ordinal);
        ordinal += step.ops.size();
        continue;
      }
      // on the tile's [partitions, groups] per-row values, after the last chunk's chains
      ref& last = tile_last(t);
      const ref* chains = chains_of(t) + (chunks_ - 1) * groups_;
      double ready = last.done;
      bool after_previous[engine_count]{};
      for (const auto& o : step.ops) after_previous[o.engine] = follows(o.engine, last);
      for (std::int64_t g = 0; g < groups_; ++g) {
        const ref& r = chains[g];
        ready = std::max(ready, r.done);
        for (const auto& o : step.ops)
          after_previous[o.engine] = after_previous[o.engine] || follows(o.engine, r);
      }
      bool first = true;
      for (const auto& o : step.ops) {
        const bool dependent = first ? after_previous[o.engine] : follows(o.engine, last);
        last = compute(o, ordinal++, false, ready, dependent);
        ready = last.done;
        first = false;
      }
    }
  }

  /// One chunk's ops (rows.cpp's chain): the compute ops between two stores
  /// run row group by row group, each store moves all groups at once. An
  /// instruction on group g waits besides its engine for the lowering's
  /// first_reads (the chunk's loads, for a chain's first instruction after
  /// the load stage) and the group's last instruction.
  void chain(std::int64_t t, std::int64_t c, const row_step& step, int stage, std::size_t ordinal) {
    const auto slot = slots_of(t) + static_cast<std::size_t>(c);
    ref* chains = chains_of(t) + c * groups_;
    const ref tile = tile_last(t);  // the chain does not change it
    const bool last_chunk = c == chunks_ - 1;
    const double loaded = stage != stage_load ? loads_[slot] : 0.0;
    const auto reads = [&](const ref& last) {
      const double ready = std::max(tile.done, last.done);
      return last.id == 0 ? std::max(ready, loaded) : ready;
    };
    double readers = readers_[slot];
    bool wrote_staging = false;
    std::size_t stage_slot = 0;
    for (std::size_t begin = 0; begin < step.ops.size();) {
      std::size_t end = begin;
      while (end < step.ops.size() && !step.ops[end].store) ++end;
      for (std::int64_t g = 0; g < groups_ && end > begin; ++g) {
        ref& last = chains[g];
        for (std::size_t i = begin; i < end; ++i) {
          const auto& o = step.ops[i];
          double ready = reads(last);
          if (o.to_staging && !wrote_staging) {
            stage_slot =
                2 * static_cast<std::size_t>(o.output) +
                static_cast<std::size_t>(stage_serial_[static_cast<std::size_t>(o.output)]++ % 2);
            wrote_staging = true;
            ready = std::max(ready, stage_store_[stage_slot]);
          }
          if (o.uses_broadcast && !broadcast_used_) {
            ready = std::max(ready, broadcast_done_);
            broadcast_used_ = true;
          }
          const bool dependent = follows(o.engine, last) || follows(o.engine, tile);
          last = compute(o, ordinal + i, last_chunk, ready, dependent);
          readers = std::max(readers, last.done);
        }
      }
      if (end == step.ops.size()) break;
      const auto& o = step.ops[end];  // a store: a side branch, the chains go on
      double ready = 0;
      for (std::int64_t g = 0; g < groups_; ++g) ready = std::max(ready, reads(chains[g]));
      const double done = transfer(queue(s_.inputs + o.output), chunk_alone(t, c), ready);
      if (wrote_staging)
        stage_store_[stage_slot] = done;
      else
        readers = std::max(readers, done);
      begin = end + 1;
    }
    readers_[slot] = readers;
  }

  const pipeline_spec& s_;
  const machine& m_;
  const queue_times* stretch_ = nullptr;
  std::int64_t tiles_, last_rows_;
  std::int64_t P_ = 128, rpt_ = 128, cps_ = 0, chunks_ = 0, groups_ = 1;
  std::size_t reduce_ops_ = 0;
  std::vector<int> order_;                ///< the stages in issue order
  std::array<double, 4> alone_{};         ///< chunk_alone()'s cases
  std::vector<std::size_t> used_queues_;  ///< the queues the streams use
  std::array<int, 16> stream_base_{}, stream_next_{};
  std::array<double, engine_count> free_at_{};
  std::array<std::uint32_t, engine_count> last_on_{};
  queue_times issue_free_{}, queue_free_{};
  /// Each queue's last counted data phase: [from, to).
  queue_times moving_from_{}, moving_to_{};
  std::array<std::int64_t, 8> stage_serial_{};
  std::vector<double> readers_, loads_, stage_store_;
  std::vector<ref> chunk_last_;
  /// Per op (reduce ops, then scale ops): ns on a chunk (or a tile's values),
  /// without and with the dependent floor, then the same on the last chunk.
  std::vector<std::array<double, 4>> cost_;
  std::array<ref, window> tile_last_{};
  double broadcast_done_ = 0, latest_ = 0;
  bool broadcast_used_ = false;
  std::uint32_t next_id_ = 0;
};

/// The instructions the lowering issues for a spec.
double instruction_count(const pipeline_spec& s, const tiling& t, std::int64_t groups,
                         std::int64_t partitions) {
  std::int64_t doublings = 0;
  for (std::int64_t have = 1; have < partitions; have *= 2) ++doublings;
  std::int64_t per_tile = t.chunks * s.inputs;
  for (const auto* list : {&s.reduce, &s.scale})
    for (const auto& step : *list) {
      std::int64_t computes = 0, stores = 0;
      for (const auto& o : step.ops) (o.store ? stores : computes) += 1;
      per_tile += step.per_chunk ? t.chunks * (groups * computes + stores) : computes + stores;
    }
  return static_cast<double>(s.broadcasts * (1 + doublings) + t.tiles * per_tile);
}

/// The stores each chunk issues (one per output written per step).
std::int64_t stores_per_chunk(const pipeline_spec& s) {
  std::int64_t n = 0;
  for (const auto* list : {&s.reduce, &s.scale})
    for (const auto& step : *list)
      if (step.per_chunk)
        for (const auto& o : step.ops) n += o.store ? 1 : 0;
  return n;
}

}  // namespace

steady_estimate estimate_steady(const pipeline_spec& spec, const machine& m) {
  const tiling t = tiling_of(spec);
  const std::int64_t groups = ceil_div(t.rows_per_tile, m.partitions);
  // the fill (the scale stage's lag behind the loads), then the steady iterations
  const std::int64_t fill = std::min(2, spec.bufs - 1);
  const std::int64_t replayed = std::min(t.tiles, fill + steady_iterations);
  const std::int64_t last_rows = spec.rows - (t.tiles - 1) * t.rows_per_tile;
  replay r(spec, m, replayed, last_rows);
  queue_times stretch;
  r.closed_stretch(stretch);
  double latency = 0;
  for (int pass = 1;; ++pass) {
    const double replayed_ns = r.run(stretch);
    const auto k = static_cast<std::int64_t>(r.marks.size());
    const std::int64_t span = std::min(period_span, k - 1);
    double period = span > 0 ? (r.marks[static_cast<std::size_t>(k - 1)] -
                                r.marks[static_cast<std::size_t>(k - 1 - span)]) /
                                   static_cast<double>(span)
                             : 0;
    // the tiles not replayed move at least their data through the shared DMA engines
    double data = 0;
    for (const double w : r.queue_work) data += w;
    period = std::max(period, data / static_cast<double>(replayed));
    latency = replayed_ns + static_cast<double>(t.tiles - replayed) * period;
    // A short run (the fill and the drain a large part of it) keeps the
    // queues less busy than the steady regime the closed form assumes: the
    // stretch is worked out again from this replay's occupancy (each
    // queue's data phases over the latency) and replayed once more.
    if (pass == refined_passes || t.tiles >= short_run * replayed) break;
    queue_times occupancy{};
    double all = 0;
    for (std::size_t q = 0; q < occupancy.size(); ++q) {
      occupancy[q] =
          std::min(1.0, r.queue_work[q] * static_cast<double>(t.tiles) /
                            static_cast<double>(replayed) * stretch[q] / std::max(latency, 1e-9));
      all += occupancy[q];
    }
    for (std::size_t q = 0; q < stretch.size(); ++q) stretch[q] = 1 + (all - occupancy[q]);
  }
  const double scale = static_cast<double>(t.tiles) / static_cast<double>(replayed);
  steady_estimate e;
  for (std::size_t i = 0; i < 4; ++i) e.busy_ns[i] = r.busy[i] * scale;
  e.dma_data_ns = r.dma_work * scale;
  e.latency_ns = latency;
  const double bytes = static_cast<double>(dtype_bytes(spec.type));
  const double elements = static_cast<double>(spec.rows) * static_cast<double>(spec.cols);
  e.hbm_read_bytes =
      spec.inputs * elements * bytes + static_cast<double>(spec.broadcasts * spec.cols) * bytes;
  e.hbm_write_bytes = static_cast<double>(stores_per_chunk(spec)) * elements * bytes;
  e.instructions = instruction_count(spec, t, groups, m.partitions);
  e.totals.flops = elements * spec.flops_per_element;
  e.totals.min_hbm_bytes = (spec.inputs + spec.outputs) * elements * bytes +
                           static_cast<double>(spec.broadcasts * spec.cols) * bytes;
  e.totals.compute_type = spec.type;
  // what bounds it: the busiest engine when it fills the period, else the DMA
  static constexpr std::array<const char*, 4> engines{"tensor", "vector", "scalar", "gpsimd"};
  const auto busiest = static_cast<std::size_t>(
      std::max_element(e.busy_ns.begin() + 1, e.busy_ns.end()) - e.busy_ns.begin());
  if (e.busy_ns[busiest] >= 0.9 * latency) {
    e.bound = engines[busiest];
    e.tag = "compute";
  } else {
    e.bound = e.dma_data_ns >= 0.9 * latency ? "dma data" : "dma latency";
    e.tag = "load";
  }
  return e;
}

}  // namespace tessel::sim::rows
