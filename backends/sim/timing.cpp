// timing.cpp: the event-driven timing model (timing.hpp). One pass over a
// time-ordered event queue. Compute engines and DMA queues run their streams
// in order; DMA data phases share the 16 DMA engines (each active transfer
// progresses at 1/n of its busiest engine, n = transfers using it: the round
// robin between queues of the NKI DMA overview). The cost of each
// instruction comes from cost_rules.hpp; every rule is stated in
// docs/simulator.md with its source.
#include "timing.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <tuple>
#include <type_traits>
#include <utility>

namespace tessel::sim {

using cost_rule::stationary_load_cycles;
using cost_rule::tensor_cycles;

// --- the simulator ---------------------------------------------------------------

namespace {

enum class cause_kind : std::uint8_t { none, engine, dependency, port };
enum class event_kind : std::uint8_t { compute_end, dma_issue_end, wake };

struct event {
  double t;
  std::uint64_t seq;
  std::uint32_t id;  ///< instruction (engine for wake)
  std::uint32_t version;
  event_kind kind;
};

struct later {
  bool operator()(const event& a, const event& b) const noexcept {
    return a.t > b.t || (a.t == b.t && a.seq > b.seq);
  }
};

struct port {
  double free_at = 0;
  std::uint32_t holder = program::none;
  bool used = false;
};

/// Per-thread storage reused across runs (no reallocation per config).
struct workspace {
  std::vector<std::uint32_t> cause, mask, active, finished;
  std::vector<std::uint32_t> waiters;  ///< per instruction: engines waiting for its end (bits)
  std::vector<memory> buffer_memory;   ///< per buffer: where it lives
  std::vector<double> start, end, data_start, done, ready, remaining, rate, hbm_rate;
  std::vector<cause_kind> cause_kinds;
  std::array<std::vector<std::uint32_t>, engine_count> streams;
  std::vector<event> heap;
  std::vector<double> shares;
};

/// The last value of a cost rule and the instruction fields it reads:
/// streams repeat one shape for long runs, and the rules are pure, so the
/// value is the rule's to the bit.
template <auto rule, auto... fields>
struct last_value {
  decltype(rule(instruction{}, machine{})) value{};
  std::tuple<std::remove_cvref_t<decltype(instruction{}.*fields)>...> key{};
  bool known = false;

  auto get(const instruction& in, const machine& m) {
    const auto k = std::tuple{in.*fields...};
    if (!known || k != key) {
      value = rule(in, m);
      key = k;
      known = true;
    }
    return value;
  }
};

/// The hybrid event model. Engines with no shared resource (TensorE always;
/// VectorE, ScalarE and GpSimdE where the target has no shared ports) are
/// resolved eagerly: an in-order engine with no contention starts each
/// instruction at max(engine free, dependencies done), which is known as soon
/// as its dependencies' end times are, so no event is needed. What shares a
/// resource is ordered by time through the event queue: DMA data phases (the
/// 16 engines) and, on trn1, the instructions that contend for a port.
class simulator {
 public:
  simulator(const program& p, const machine& m, const timing_options& o, workspace& w)
      : p_(p), m_(m), o_(o), ins_(p.instructions()), n_(ins_.size()), w_(w) {
    const bool ports = m.vector_scalar_share_psum || m.vector_gpsimd_share_sbuf_port;
    for (int e = 0; e < engine_count; ++e) {
      const auto id = static_cast<engine_id>(e);
      eager_[static_cast<std::size_t>(e)] = !is_dma(id) && (id == tensor_engine || !ports);
    }
  }

  timing_result run() {
    prepare();
    for (int e = 0; e < engine_count; ++e) schedule(static_cast<engine_id>(e));
    drain();
    constexpr double never = std::numeric_limits<double>::infinity();
    for (;;) {
      // the shared engines' next data-phase end lives outside the heap: it
      // moves at every change, and re-pushing it would fill the heap with stale copies
      const double heap_next =
          heap_.empty() ? never
                        : heap_.front().t;  // NOLINT(bugprone-narrowing-conversions): both double
      if (share_next_ < never && share_next_ <= heap_next) {
        now_ = share_next_;
        on_share_event();
      } else if (!heap_.empty()) {
        std::pop_heap(heap_.begin(), heap_.end(), later{});
        const event ev = heap_.back();
        heap_.pop_back();
        now_ = ev.t;
        handle(ev);
      } else {
        break;
      }
      drain();
    }
    check_finished();
    return finish();
  }

 private:
  // --- set-up -----------------------------------------------------------------

  void prepare() {
    start_.resize(n_);
    end_.resize(n_);
    data_start_.resize(n_);
    ready_.resize(n_);
    remaining_.resize(n_);
    rate_.resize(n_);
    hbm_rate_.resize(n_);
    mask_.resize(n_);
    done_.assign(n_, -1);  // -1: the end is not known yet
    cause_.assign(n_, program::none);
    cause_kind_.assign(n_, cause_kind::none);
    waiters_.assign(n_, 0);
    heap_.clear();
    active_.clear();
    for (auto& st : streams_) st.clear();
    not_full_ = 0;
    // buffer ids are checked once here, not per instruction
    auto& where = w_.buffer_memory;
    where.clear();
    for (const auto& b : p_.buffers()) where.push_back(b.where);
    for (std::size_t i = 0; i < n_; ++i) {
      const auto& in = ins_[i];
      streams_[in.engine].push_back(static_cast<std::uint32_t>(i));
      const bool dma_engine = is_dma(in.engine);
      const bool reads_buffers = dma_engine || in.kind == op::dma;
      const memory src = reads_buffers ? where.at(in.src) : memory::sbuf;
      const memory dst = reads_buffers ? where.at(in.dst) : memory::sbuf;
      tally(in, src, dst);
      if (dma_engine) {
        mask_[i] = dma_mask_.get(in, m_);
        // until its data phase starts (on_issue_end), hbm_rate_ holds the
        // bytes it moves to or from HBM
        const bool hbm = src == memory::hbm || dst == memory::hbm;
        hbm_rate_[i] = hbm ? static_cast<double>(in.count) * in.partitions * in.free : 0;
      }
    }
  }

  /// Adds `in` to the byte and instruction tallies (in program order, as
  /// the sums have always been taken).
  void tally(const instruction& in, memory src, memory dst) {
    totals_.instructions += in.count;
    if (in.kind == op::dma) {
      const double bytes = static_cast<double>(in.count) * in.partitions * in.free;
      if (src == memory::hbm) totals_.hbm_read_bytes += bytes;
      if (dst == memory::hbm) totals_.hbm_write_bytes += bytes;
      if (src == memory::sbuf || dst == memory::sbuf) totals_.sbuf_dma_bytes += bytes;
    } else if (in.kind == op::matmul || in.kind == op::transpose) {
      const double rows = in.kind == op::matmul ? in.aux : in.free;
      const double cols = in.kind == op::matmul ? in.free : in.partitions;
      totals_.psum_write_bytes += static_cast<double>(in.count) * rows * cols * 4;
    }
  }

  /// Whether every dependency of `id` has a known end (possibly in the
  /// future). If so, ready_/cause_ hold the latest one; if not, engine `e`
  /// waits for the first unknown one.
  bool dependencies_known(std::uint32_t id, engine_id e) {
    const auto& in = ins_[id];
    const auto& deps = p_.deps();
    double ready = 0;
    std::uint32_t cause = program::none;
    for (auto d = in.dep_begin; d < in.dep_end; ++d) {
      const auto dep = deps[d];
      if (done_[dep] < 0) {
        waiters_[dep] |= 1u << e;
        return false;
      }
      if (done_[dep] >= ready) {
        ready = done_[dep];
        cause = dep;
      }
    }
    ready_[id] = ready;
    cause_[id] = cause;
    return true;
  }

  // --- events and the work list --------------------------------------------------

  void push(double t, std::uint32_t id, event_kind k, std::uint32_t version = 0) {
    heap_.push_back(event{t, seq_++, id, version, k});
    std::push_heap(heap_.begin(), heap_.end(), later{});
  }

  /// Queues engine `e` to look at its head instruction.
  void schedule(engine_id e) {
    if (queued_[e]) return;
    queued_[e] = true;
    work_[work_size_++] = e;
  }

  void drain() {
    while (work_size_ > 0) {
      const engine_id e = work_[--work_size_];
      queued_[e] = false;
      try_start(e);
    }
  }

  void handle(const event& ev) {
    switch (ev.kind) {
      case event_kind::compute_end: on_compute_end(ev.id); break;
      case event_kind::dma_issue_end: on_issue_end(ev.id); break;
      case event_kind::wake:
        waking_[ev.id] = false;
        schedule(static_cast<engine_id>(ev.id));
        break;
    }
  }

  /// `id` is done at `t` (possibly later than now): engines waiting on it
  /// look again, in engine order. An engine waits on one instruction at a
  /// time (its head's first unknown dependency), so `waiters_` holds each
  /// waiting engine once.
  void resolve(std::uint32_t id, double t) {
    done_[id] = t;
    if (t > last_done_) {
      last_done_ = t;
      last_ = id;
    }
    for (std::uint32_t bits = waiters_[id]; bits; bits &= bits - 1)
      schedule(static_cast<engine_id>(std::countr_zero(bits)));
  }

  void on_compute_end(std::uint32_t id) {
    const engine_id e = ins_[id].engine;
    busy_[e] = false;
    release_ports(id);
    schedule(e);
  }

  void on_issue_end(std::uint32_t id) {
    advance_sharing();
    data_start_[id] = now_;
    const auto& in = ins_[id];
    remaining_[id] = dma_data_.get(in, m_);
    const double hbm_bytes = hbm_rate_[id];  // set by prepare()
    hbm_rate_[id] = hbm_bytes > 0 && remaining_[id] > 0 ? hbm_bytes / remaining_[id] : 0;
    active_.push_back(id);
    if (mask_[id] != full_mask()) ++not_full_;
    reshare();
  }

  /// The earliest predicted end of a data phase: finish every transfer done by now.
  void on_share_event() {
    advance_sharing(true);
    reshare();
    for (const auto id : finished_) on_data_end(id);
  }

  void on_data_end(std::uint32_t id) {
    const engine_id q = ins_[id].engine;
    busy_[q] = false;
    end_[id] = now_;
    free_at_[q] = now_;
    busy_ns_[q] += now_ - data_start_[id] + m_.dma_issue_ns * ins_[id].count;
    // dependents see it after the rest of the fixed latency
    resolve(id, now_ + std::max(0.0, m_.dma_fixed_latency_ns - m_.dma_issue_ns));
    schedule(q);
  }

  [[nodiscard]] bool is_head(engine_id e, std::uint32_t id) const {
    return head_[e] < streams_[e].size() && streams_[e][head_[e]] == id;
  }

  // --- ports (trn1: VectorE/ScalarE share PSUM access, VectorE/GpSimdE the SBUF port)

  port* psum_port_for(const instruction& in) {
    const bool engine_ok = in.engine == vector_engine || in.engine == scalar_engine;
    if (!m_.vector_scalar_share_psum || !engine_ok) return nullptr;
    return (in.flags & (flag_reads_psum | flag_writes_psum)) ? &psum_port_ : nullptr;
  }

  port* sbuf_port_for(const instruction& in) {
    const bool engine_ok = in.engine == vector_engine || in.engine == gpsimd_engine;
    return m_.vector_gpsimd_share_sbuf_port && engine_ok ? &sbuf_port_ : nullptr;
  }

  void release_ports(std::uint32_t id) {
    bool freed = false;
    for (port* pt : {&psum_port_, &sbuf_port_})
      if (pt->used && pt->holder == id) {
        pt->used = false;
        freed = true;
      }
    if (freed)
      for (engine_id e : {vector_engine, scalar_engine, gpsimd_engine}) schedule(e);
  }

  // --- starting ---------------------------------------------------------------------

  void try_start(engine_id e) {
    if (eager_[e]) {
      run_eager(e);
      return;
    }
    if (busy_[e] || head_[e] >= streams_[e].size()) return;
    const auto id = streams_[e][head_[e]];
    if (!dependencies_known(id, e)) return;
    const double at = std::max(free_at_[e], ready_[id]);
    if (is_dma(e)) {
      // A queue is a two-stage pipeline: descriptor generation (issue) and the
      // data phase, each in program order. The issue needs neither the data
      // nor the dependencies (it ends when they are met at the earliest, the
      // semaphore wait overlapping it), so it is placed, possibly in the past,
      // once the previous data phase has ended; the data phase joins the
      // shared engines at its event, in time order.
      const double issue = m_.dma_issue_ns * ins_[id].count;
      // without a pipelined queue (trn1's fit) the issue waits for the
      // dependencies and the previous data phase, as one serial step
      const double issue_start = m_.dma_queue_pipelined
                                     ? std::max(issue_free_at_[e], ready_[id] - issue)
                                     : std::max({free_at_[e], ready_[id], now_});
      const double data_at = std::max({issue_start + issue, ready_[id], free_at_[e], now_});
      begin(id, e, issue_start, nullptr, nullptr);
      issue_free_at_[e] = issue_start + issue;
      busy_[e] = true;
      ++head_[e];
      push(data_at, id, event_kind::dma_issue_end);
      return;
    }
    if (at > now_) {  // not yet: look again then
      if (!waking_[e]) {
        waking_[e] = true;
        push(at, e, event_kind::wake);
      }
      return;
    }
    const auto& in = ins_[id];
    port* pp = psum_port_for(in);
    port* sp = sbuf_port_for(in);
    if ((pp && pp->used) || (sp && sp->used)) return;  // retried when the port frees
    begin(id, e, now_, pp, sp);
    const double duration = elementwise_duration(in);
    finish_compute(id, e, now_ + duration);
    for (port* pt : {pp, sp})
      if (pt) {
        pt->used = true;
        pt->holder = id;
        pt->free_at = now_ + duration;
      }
    busy_[e] = true;
    push(now_ + duration, id, event_kind::compute_end);
  }

  /// An uncontended in-order engine: start everything whose dependencies are known.
  void run_eager(engine_id e) {
    auto& stream = streams_[e];
    while (head_[e] < stream.size()) {
      const auto id = stream[head_[e]];
      if (!dependencies_known(id, e)) return;
      const double at = std::max(free_at_[e], ready_[id]);
      begin(id, e, at, nullptr, nullptr);
      const auto& in = ins_[id];
      const double duration =
          e == tensor_engine ? tensor_duration(in, at) : elementwise_duration(in);
      finish_compute(id, e, at + duration);
    }
  }

  /// Records the start of `id` on `e` at `at` and what made it wait.
  void begin(std::uint32_t id, engine_id e, double at, const port* pp, const port* sp) {
    start_[id] = at;
    data_start_[id] = at;
    // ready_/cause_ hold the latest dependency; the engine wins if it freed later
    const auto prev = last_on_engine_[e];
    if (prev != program::none && (cause_[id] == program::none || free_at_[e] > ready_[id])) {
      cause_[id] = prev;
      cause_kind_[id] = cause_kind::engine;
    } else if (cause_[id] != program::none) {
      cause_kind_[id] = cause_kind::dependency;
    }
    for (const port* pt : {pp, sp})
      if (pt && pt->holder != program::none && pt->free_at > std::max(free_at_[e], ready_[id])) {
        cause_[id] = pt->holder;
        cause_kind_[id] = cause_kind::port;
      }
    last_on_engine_[e] = id;
  }

  void finish_compute(std::uint32_t id, engine_id e, double end) {
    end_[id] = end;
    busy_ns_[e] += end - start_[id];
    free_at_[e] = end;
    ++head_[e];
    resolve(id, end);
  }

  [[nodiscard]] double elementwise_duration(const instruction& in) const {
    // the instruction before it on this engine is the one begin() just replaced
    bool depends_on_previous = false;
    const auto prev = prev_on_engine(in.engine);
    if (prev != program::none) {
      const auto& deps = p_.deps();
      for (auto d = in.dep_begin; d < in.dep_end && !depends_on_previous; ++d)
        depends_on_previous = deps[d] == prev;
    }
    return compute_ns(in, m_, depends_on_previous);
  }

  /// The instruction before the head's on engine e (head_ not yet advanced).
  [[nodiscard]] std::uint32_t prev_on_engine(engine_id e) const {
    return head_[e] > 0 ? streams_[e][head_[e] - 1] : program::none;
  }

  // --- TensorE: stationary loads and the warm-up throttle ------------------------------

  double tensor_duration(const instruction& in, double now) {
    const double each = tensor_cycles_.get(in, m_);
    const bool gap = tensor_last_end_ < 0 || now > tensor_last_end_ + 1e-9;
    double cycles = in.count * each;
    const bool new_stationary = in.kind == op::transpose || (in.flags & flag_new_stationary);
    if (new_stationary) {
      const double free = in.kind == op::transpose ? in.free : in.aux;
      const double load = stationary_load_cycles(free, m_);
      cycles += gap ? load : std::max(0.0, load - tensor_prev_cycles_);
      cycles += (in.count - 1) * std::max(0.0, load - each);
    }
    tensor_prev_cycles_ = each;
    const double moving = in.kind == op::transpose ? in.partitions : in.free;
    double ideal = std::max<double>(moving, m_.tensor_min_cycles) * in.count;
    if (in.type == dtype::fp32) ideal *= m_.fp32_cost_factor;
    tensor_ideal_ns_ += ideal / m_.tensor_ghz;
    const double full_ns = cycles / m_.tensor_ghz;
    const double duration = throttle_.duration(full_ns, now, tensor_last_end_, m_);
    tensor_warmup_loss_ns_ += duration - full_ns;
    tensor_last_end_ = now + duration;
    return duration;
  }

  // --- DMA engines shared by the active data phases --------------------------------------

  /// The mask of a transfer that uses every DMA engine.
  [[nodiscard]] std::uint32_t full_mask() const noexcept { return full_mask_; }

  /// The bits set in `x` (std::popcount is a library call without -mpopcnt).
  [[nodiscard]] static int bits_set(std::uint32_t x) noexcept {
    x = x - ((x >> 1) & 0x5555'5555u);
    x = (x & 0x3333'3333u) + ((x >> 2) & 0x3333'3333u);
    x = (x + (x >> 4)) & 0x0F0F'0F0Fu;
    return static_cast<int>((x * 0x0101'0101u) >> 24);
  }

  /// Moves the active data phases on to now_. With `collect`, those done by
  /// now (within 1e-6 ns) leave active_ for finished_, in order.
  void advance_sharing(bool collect = false) {
    const double dt = now_ - share_t_;
    const bool moved = dt > 0 && !active_.empty();
    if (!moved && !collect) {
      share_t_ = now_;
      return;
    }
    std::uint32_t used = 0;
    std::size_t kept = 0;
    if (collect) finished_.clear();
    const std::uint32_t full = full_mask();
    for (const auto id : active_) {
      if (moved) {
        remaining_[id] = std::max(0.0, remaining_[id] - dt * rate_[id]);
        used |= mask_[id];
      }
      if (!collect) continue;
      if (remaining_[id] <= 1e-6) {
        finished_.push_back(id);
        if (mask_[id] != full) --not_full_;
      } else {
        active_[kept++] = id;
      }
    }
    if (collect) active_.resize(kept);
    if (moved) {
      dma_active_ns_ += dt;
      dma_work_ns_ += dt * bits_set(used);
    }
    share_t_ = now_;
  }

  /// Each active transfer progresses at 1/n of its busiest engine, n = the
  /// transfers using that engine. One event stands for the earliest end.
  void reshare() {
    share_next_ = std::numeric_limits<double>::infinity();
    if (active_.empty()) return;
    const bool all_full = not_full_ == 0;
    double first = std::numeric_limits<double>::infinity();
    double total = 0;  // HBM bytes per ns at these rates (summed in active_ order)
    if (all_full) {    // the common case: every transfer spans all 16 engines
      const double rate = 1.0 / static_cast<double>(active_.size());
      for (const auto id : active_) {
        rate_[id] = rate;
        first = std::min(first, remaining_[id]);
        total += rate * hbm_rate_[id];
      }
      first /= rate;
    } else {
      std::array<int, 32> load{};
      for (const auto id : active_)
        for (std::uint32_t bits = mask_[id]; bits; bits &= bits - 1) ++load[std::countr_zero(bits)];
      for (const auto id : active_) {
        int worst = 1;
        for (std::uint32_t bits = mask_[id]; bits; bits &= bits - 1)
          worst = std::max(worst, load[std::countr_zero(bits)]);
        rate_[id] = 1.0 / worst;
        first = std::min(first, remaining_[id] * worst);
        total += rate_[id] * hbm_rate_[id];
      }
    }
    // HBM bandwidth is shared too: the core's share of the chip's HBM caps
    // the bytes per ns of every transfer that reads or writes HBM
    if (m_.hbm_bytes_per_ns > 0) {
      if (total > m_.hbm_bytes_per_ns) {
        const double scale = m_.hbm_bytes_per_ns / total;
        first = std::numeric_limits<double>::infinity();
        for (const auto id : active_) {
          if (hbm_rate_[id] > 0) rate_[id] *= scale;
          first = std::min(first, remaining_[id] / rate_[id]);
        }
      }
    }
    share_next_ = now_ + first;
  }

  // --- results ---------------------------------------------------------------------------

  void check_finished() const {
    for (int e = 0; e < engine_count; ++e)
      if (head_[e] < streams_[e].size()) {
        const auto id = streams_[e][head_[e]];
        throw std::logic_error("sim timing: deadlock: " + engine_name(static_cast<engine_id>(e)) +
                               " waits forever at instruction " + std::to_string(id) + " (" +
                               std::string(to_string(ins_[id].kind)) + ", tag '" +
                               p_.tags().at(ins_[id].tag) + "')");
      }
  }

  timing_result finish() {
    timing_result r;
    const std::uint32_t last = last_;
    r.latency_ns = last == program::none ? 0 : done_[last];
    r.busy_ns = busy_ns_;
    r.dma_active_ns = dma_active_ns_;
    r.dma_work_ns = dma_work_ns_;
    r.tensor_ideal_ns = tensor_ideal_ns_;
    r.tensor_warmup_ns = tensor_warmup_loss_ns_;
    r.instructions = totals_.instructions;
    r.hbm_read_bytes = totals_.hbm_read_bytes;
    r.hbm_write_bytes = totals_.hbm_write_bytes;
    r.sbuf_dma_bytes = totals_.sbuf_dma_bytes;
    r.psum_write_bytes = totals_.psum_write_bytes;
    critical_path(r, last);
    if (o_.record) {
      r.start_ns = start_;
      r.end_ns = end_;
      r.done_ns = done_;
      r.data_start_ns = data_start_;
    }
    return r;
  }

  /// Walks back from the last instruction along the causes of each start.
  void critical_path(timing_result& r, std::uint32_t last) const {
    // phases: 0..3 compute engines (tensor, vector, scalar, gpsimd), 4 dma issue, 5 dma data, 6 dma
    // latency
    static constexpr std::array<const char*, 7> phase_names{
        "tensor", "vector", "scalar", "gpsimd", "dma issue", "dma data", "dma latency"};
    const std::size_t tags = p_.tags().size();
    auto& shares = w_.shares;
    shares.assign(phase_names.size() * std::max<std::size_t>(tags, 1), 0.0);
    auto add = [&](std::size_t phase, std::uint16_t tag, double ns) {
      if (ns > 0) shares[phase * tags + tag] += ns;
    };
    std::uint32_t cur = last;
    double until = last == program::none ? 0 : done_[last];
    while (cur != program::none) {
      const auto& in = ins_[cur];
      const auto next = cause_[cur];
      double next_until = 0;  // where the cause's share ends
      if (next != program::none) {
        switch (cause_kind_[cur]) {
          case cause_kind::engine:
          case cause_kind::port: next_until = end_[next]; break;
          default: next_until = done_[next]; break;
        }
      }
      if (is_dma(in.engine)) {
        // [next_until, until] splits into the issue (or the wait it
        // overlapped), the data phase and the completion latency
        const double lo = std::min(next_until, until);
        const double data_start = std::max(data_start_[cur], lo), data_end = end_[cur];
        add(4, in.tag, std::min(until, data_start) - lo);
        add(5, in.tag, std::min(until, data_end) - data_start);
        add(6, in.tag, until - std::max(data_end, lo));
      } else {
        add(static_cast<std::size_t>(in.engine - tensor_engine), in.tag, until - start_[cur]);
      }
      if (next != program::none) until = next_until;
      cur = next;
    }
    for (std::size_t ph = 0; ph < phase_names.size(); ++ph)
      for (std::size_t t = 0; t < tags; ++t)
        if (shares[ph * tags + t] > 0)
          r.critical_path.push_back({phase_names[ph], p_.tags()[t], shares[ph * tags + t]});
    std::stable_sort(r.critical_path.begin(), r.critical_path.end(),
                     [](const path_share& a, const path_share& b) { return a.ns > b.ns; });
  }

  const program& p_;
  const machine& m_;
  const timing_options& o_;
  const std::vector<instruction>& ins_;
  std::size_t n_;
  workspace& w_;
  std::vector<double>& start_ = w_.start;
  std::vector<double>& end_ = w_.end;
  std::vector<double>& data_start_ = w_.data_start;
  std::vector<double>& done_ = w_.done;
  std::vector<double>& ready_ = w_.ready;
  std::vector<std::uint32_t>& cause_ = w_.cause;
  std::vector<cause_kind>& cause_kind_ = w_.cause_kinds;
  std::vector<double>& remaining_ = w_.remaining;
  std::vector<double>& rate_ = w_.rate;
  std::vector<double>& hbm_rate_ = w_.hbm_rate;  ///< bytes per ns at full rate (0: no HBM)
  std::vector<std::uint32_t>& mask_ = w_.mask;
  std::array<std::vector<std::uint32_t>, engine_count>& streams_ = w_.streams;
  std::array<std::size_t, engine_count> head_{};
  std::array<bool, engine_count> busy_{}, eager_{}, queued_{}, waking_{};
  const std::uint32_t full_mask_ =
      m_.dma_engines >= 32 ? ~0u : (1u << m_.dma_engines) - 1;  ///< see full_mask()
  std::array<engine_id, engine_count> work_{};
  int work_size_ = 0;
  std::vector<std::uint32_t>& waiters_ = w_.waiters;
  double last_done_ = -1;
  std::uint32_t last_ = program::none;
  std::array<double, engine_count> free_at_{};
  std::array<double, engine_count> issue_free_at_{};  ///< DMA queues: when issue is free
  std::array<double, engine_count> busy_ns_{};
  std::array<std::uint32_t, engine_count> last_on_engine_ = [] {
    std::array<std::uint32_t, engine_count> a{};
    a.fill(program::none);
    return a;
  }();
  port psum_port_, sbuf_port_;

  std::vector<event>& heap_ = w_.heap;
  std::uint64_t seq_ = 0;
  double now_ = 0;

  std::vector<std::uint32_t>& active_ = w_.active;
  std::size_t not_full_ = 0;  ///< active transfers that do not span every DMA engine
  std::vector<std::uint32_t>& finished_ = w_.finished;
  double share_next_ = std::numeric_limits<double>::infinity();
  double share_t_ = 0, dma_active_ns_ = 0, dma_work_ns_ = 0;

  double tensor_last_end_ = -1, tensor_prev_cycles_ = 0;
  last_value<tensor_cycles, &instruction::kind, &instruction::type, &instruction::partitions,
             &instruction::free, &instruction::aux>
      tensor_cycles_;
  last_value<dma_engine_mask, &instruction::partition_offset, &instruction::partitions> dma_mask_;
  last_value<dma_data_ns, &instruction::partition_offset, &instruction::partitions,
             &instruction::free, &instruction::aux, &instruction::count>
      dma_data_;
  warmup_throttle throttle_;
  double tensor_ideal_ns_ = 0, tensor_warmup_loss_ns_ = 0;

  /// The byte and instruction tallies of the program (prepare()).
  struct {
    std::uint64_t instructions = 0;
    double hbm_read_bytes = 0, hbm_write_bytes = 0, sbuf_dma_bytes = 0, psum_write_bytes = 0;
  } totals_;
};

}  // namespace

timing_result time_program(const program& p, const machine& m, const timing_options& options) {
  thread_local workspace w;
  simulator s(p, m, options, w);
  return s.run();
}

}  // namespace tessel::sim
