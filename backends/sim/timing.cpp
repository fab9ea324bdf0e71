// timing.cpp: the event-driven timing model (timing.hpp). One pass over a
// time-ordered event queue. Compute engines and DMA queues run their streams
// in order; DMA data phases share the 16 DMA engines (dma_sharing.hpp). The
// cost of each instruction comes from cost_rules.hpp; the set-up pass is
// timing_setup.cpp, the critical path timing_path.cpp. Every rule is stated
// in docs/simulator.md with its source.
#include "timing.hpp"
#include "cost_rules.hpp"
#include "timing_parts.hpp"

#include <algorithm>
#include <bit>
#include <limits>
#include <stdexcept>
#include <utility>

namespace tessel::sim {

using cost_rule::stationary_load_cycles;
using cost_rule::tensor_cycles;

// --- the simulator ---------------------------------------------------------------

namespace {

using timing_detail::cause_kind;
using timing_detail::last_value;

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
  std::vector<std::uint32_t> cause;
  std::vector<std::uint32_t> waiters;  ///< per instruction: engines waiting for its end (bits)
  std::vector<memory> buffer_memory;   ///< per buffer: where it lives
  std::vector<double> start, end, data_start, done, ready;
  std::vector<cause_kind> cause_kinds;
  timing_detail::engine_streams streams;
  std::vector<event> heap;
  std::vector<double> shares;
  dma_sharing sharing;
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
      if (const double share_next = sharing_.next();
          share_next < never && share_next <= heap_next) {
        now_ = share_next;
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
    done_.assign(n_, -1);  // -1: the end is not known yet
    // written before they are read: cause_ by dependencies_known(), cause_kind_ by begin()
    cause_.resize(n_);
    cause_kind_.resize(n_);
    waiters_.assign(n_, 0);
    heap_.clear();
    sharing_.reset(n_, m_);
    totals_ = timing_detail::prepare(p_, m_, streams_, sharing_, w_.buffer_memory);
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
    data_start_[id] = now_;
    sharing_.start(id, dma_data_.get(ins_[id], m_), now_);
  }

  /// The earliest predicted end of a data phase: finish every transfer done by now.
  void on_share_event() {
    for (const auto id : sharing_.finish_due(now_)) on_data_end(id);
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
      begin(id, e, issue_start);
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
      begin(id, e, at);
      const auto& in = ins_[id];
      const double duration =
          e == tensor_engine ? tensor_duration(in, at) : elementwise_duration(in);
      finish_compute(id, e, at + duration);
    }
  }

  /// Records the start of `id` on `e` at `at` and what made it wait (an
  /// engine or a dependency: the DMA queues and the eager engines, which
  /// hold no port; small enough to inline into their loops).
  void begin(std::uint32_t id, engine_id e, double at) {
    start_[id] = at;
    data_start_[id] = at;
    // ready_/cause_ hold the latest dependency; the engine wins if it freed later
    const auto prev = last_on_engine_[e];
    if (prev != program::none && (cause_[id] == program::none || free_at_[e] > ready_[id])) {
      cause_[id] = prev;
      cause_kind_[id] = cause_kind::engine;
    } else {
      cause_kind_[id] = cause_[id] != program::none ? cause_kind::dependency : cause_kind::none;
    }
    last_on_engine_[e] = id;
  }

  /// begin() where the instruction may hold ports: a port's holder wins if
  /// it frees the port after the engine and the dependencies.
  void begin(std::uint32_t id, engine_id e, double at, const port* pp, const port* sp) {
    begin(id, e, at);
    for (const port* pt : {pp, sp})
      if (pt && pt->holder != program::none && pt->free_at > std::max(free_at_[e], ready_[id])) {
        cause_[id] = pt->holder;
        cause_kind_[id] = cause_kind::port;
      }
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
    r.dma_active_ns = sharing_.active_ns();
    r.dma_work_ns = sharing_.work_ns();
    r.tensor_ideal_ns = tensor_ideal_ns_;
    r.tensor_warmup_ns = tensor_warmup_loss_ns_;
    r.instructions = totals_.instructions;
    r.hbm_read_bytes = totals_.hbm_read_bytes;
    r.hbm_write_bytes = totals_.hbm_write_bytes;
    r.sbuf_dma_bytes = totals_.sbuf_dma_bytes;
    r.psum_write_bytes = totals_.psum_write_bytes;
    for (const auto id : p_.barriers()) r.barrier_ns = std::max(r.barrier_ns, start_[id]);
    timing_detail::critical_path(p_, {cause_, cause_kind_, start_, end_, data_start_, done_}, last,
                                 r, w_.shares);
    if (o_.record) {
      r.start_ns = start_;
      r.end_ns = end_;
      r.done_ns = done_;
      r.data_start_ns = data_start_;
    }
    return r;
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
  timing_detail::engine_streams& streams_ = w_.streams;
  std::array<std::size_t, engine_count> head_{};
  std::array<bool, engine_count> busy_{}, eager_{}, queued_{}, waking_{};
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
  dma_sharing& sharing_ = w_.sharing;
  std::uint64_t seq_ = 0;
  double now_ = 0;

  double tensor_last_end_ = -1, tensor_prev_cycles_ = 0;
  last_value<tensor_cycles, &instruction::kind, &instruction::type, &instruction::partitions,
             &instruction::free, &instruction::aux>
      tensor_cycles_;
  last_value<dma_data_ns, &instruction::partition_offset, &instruction::partitions,
             &instruction::free, &instruction::aux, &instruction::count>
      dma_data_;
  warmup_throttle throttle_;
  double tensor_ideal_ns_ = 0, tensor_warmup_loss_ns_ = 0;

  timing_detail::program_tallies totals_;  ///< of the program (prepare())
};

}  // namespace

timing_result time_program(const program& p, const machine& m, const timing_options& options) {
  thread_local workspace w;
  simulator s(p, m, options, w);
  return s.run();
}

}  // namespace tessel::sim
