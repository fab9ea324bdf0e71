// matmul_steady.cpp: the steady-state analytic model of the matmul plan
// (matmul_steady.hpp). Every per-instruction cost comes from cost_rules.hpp,
// the same rules the event-driven model charges; what is approximated is
// how they overlap: the latency is the largest of the resource totals
// (TensorE, the evict engines, the DMA engines and each queue) plus the
// pipeline's fill and drain and the stalls where a slot's next load cannot
// be hidden behind the compute its buffering depth leaves it.
#include "matmul_steady.hpp"

#include "../../cost_rules.hpp"
#include "../../steady_closed.hpp"

#include <algorithm>
#include <cmath>

namespace tessel::sim::mm {
namespace {

using steady::cut;
using steady::each;
using steady::split;
using steady::warmup_loss;

double matmul_ns(const params& p, const machine& m, std::int64_t k, std::int64_t rows,
                 std::int64_t cols) {
  return cost_rule::tensor_cycles(matmul_instruction(p, k, rows, cols), m) / m.tensor_ghz;
}

double dma_ns(const machine& m, std::int64_t rows, std::int64_t bytes) {
  return dma_data_ns(make_dma(0, rows, bytes), m);
}

class totals_builder {
 public:
  totals_builder(const plan& pl, const machine& m) : pl_(pl), p_(pl.p), m_(m) {}

  steady_work run() {
    const cut cm = split(p_.size_m, p_.tile[dim_m]), cn = split(p_.size_n, p_.tile[dim_n]),
              ck = split(p_.size_k, p_.tile[dim_k]);
    w_.iterations = static_cast<double>(pl_.nb[dim_m] * pl_.nb[dim_n] * pl_.nb[dim_k]);
    const double a_reload = reload(dim_n, p_.a_reuse), b_reload = reload(dim_m, p_.b_reuse);
    each(cm, [&](double nm, std::int64_t mb) {
      each(ck, [&](double nk, std::int64_t kb) { load_a(nm * nk * a_reload, mb, kb); });
      each(cn, [&](double nn, std::int64_t nbk) {
        c_block(nm * nn, mb, nbk);
        each(ck, [&](double nk, std::int64_t kb) { compute(nm * nn * nk, mb, nbk, kb); });
      });
    });
    each(ck, [&](double nk, std::int64_t kb) {
      each(cn, [&](double nn, std::int64_t nbk) { load_b(nk * nn * b_reload, kb, nbk); });
    });
    if (p_.scaled)  // one fp32 per row of each stationary tile
      each(cm, [&](double nm, std::int64_t mb) {
        each(split(mb, p_.mm_m), [&](double nr, std::int64_t r) { transfer(3, nm * nr, r, 4); });
      });
    w_.groups = groups_ / std::max(1.0, w_.iterations);
    w_.engine_ns[0] += w_.tensor_ns;
    return w_;
  }

 private:
  /// How many times each block of an operand is loaded: with reuse over
  /// its free loop `u` (u not innermost), once per `reuse` blocks of u;
  /// streamed, once when u is the innermost loop that has more than one
  /// block, else once per block of u.
  [[nodiscard]] double reload(int u, std::int64_t reuse) const {
    const auto nu = pl_.nb[static_cast<std::size_t>(u)];
    if (reuse > 1 && p_.pos[static_cast<std::size_t>(u)] < 2)
      return static_cast<double>(ceil_div(nu, std::min(reuse, nu)));
    for (int i = 2; i >= 0; --i) {
      const int d = p_.order[static_cast<std::size_t>(i)];
      if (pl_.nb[static_cast<std::size_t>(d)] > 1)
        return d == u ? 1.0 : static_cast<double>(pl_.nb[static_cast<std::size_t>(u)]);
    }
    return 1;
  }

  void transfer(int stream, double count, std::int64_t rows, std::int64_t bytes) {
    auto& s = w_.streams[static_cast<std::size_t>(stream)];
    s.transfers += count;
    // alone, a transfer moves at its busiest engine's rate, capped by the core's HBM share
    const double moved = static_cast<double>(rows * bytes);
    const double hbm = m_.hbm_bytes_per_ns > 0 ? moved / m_.hbm_bytes_per_ns : 0;
    s.data_ns += count * std::max(dma_ns(m_, rows, bytes), hbm);
    s.bytes += count * static_cast<double>(rows * bytes);
    w_.instructions += count;
  }

  void load_a(double blocks, std::int64_t mb, std::int64_t kb) {
    if (blocks <= 0) return;
    const std::int64_t in_b = dtype_bytes(p_.in), parts = m_.partitions;
    w_.streams[0].blocks += blocks;
    const cut slabs = split(kb, parts);
    if (p_.a_mk) {
      const cut rows = split(mb, parts);
      each(rows, [&](double nr, std::int64_t r) {
        if (p_.coalesce)
          transfer(0, blocks * nr, r, kb * in_b);
        else
          each(slabs, [&](double ns, std::int64_t cols) {
            transfer(0, blocks * nr * ns, r, cols * in_b);
          });
        each(slabs,
             [&](double ns, std::int64_t k_cols) { transpose(blocks * nr * ns, r, k_cols); });
      });
      return;
    }
    each(slabs, [&](double ns, std::int64_t rows) {
      if (p_.coalesce)
        transfer(0, blocks * ns, rows, mb * in_b);
      else
        each(split(mb, p_.mm_m), [&](double nw, std::int64_t cols) {
          transfer(0, blocks * ns * nw, rows, cols * in_b);
        });
    });
  }

  /// A given as [M, K]: a TensorE transpose of each 128 x 128 tile and its copy out of PSUM.
  void transpose(double count, std::int64_t m_rows, std::int64_t k_cols) {
    w_.tensor_ns += count *
                    cost_rule::tensor_cycles(transpose_instruction(p_, m_rows, k_cols), m_) /
                    m_.tensor_ghz;
    const instruction c = evict_instruction(p_, op::copy, k_cols, m_rows);
    w_.engine_ns[static_cast<std::size_t>(c.engine - tensor_engine)] += count * compute_ns(c, m_);
    w_.instructions += 2 * count;
  }

  void load_b(double blocks, std::int64_t kb, std::int64_t nbk) {
    if (blocks <= 0) return;
    const std::int64_t in_b = dtype_bytes(p_.in);
    w_.streams[1].blocks += blocks;
    each(split(kb, m_.partitions), [&](double ns, std::int64_t rows) {
      if (p_.coalesce)
        transfer(1, blocks * ns, rows, nbk * in_b);
      else
        each(split(nbk, p_.mm_n), [&](double nw, std::int64_t cols) {
          transfer(1, blocks * ns * nw, rows, cols * in_b);
        });
    });
  }

  void compute(double blocks, std::int64_t mb, std::int64_t nbk, std::int64_t kb) {
    const cut rows = split(mb, p_.mm_m), cols = split(nbk, p_.mm_n), ks = split(kb, p_.mm_k);
    each(rows, [&](double nr, std::int64_t r) {
      each(cols, [&](double nc, std::int64_t c) {
        groups_ += blocks * nr * nc;
        each(ks, [&](double nk, std::int64_t k) {
          const double n = blocks * nr * nc * nk;
          w_.tensor_ns += n * matmul_ns(p_, m_, k, r, c);
          w_.instructions += n;
        });
      });
    });
  }

  /// The evicts and stores of `blocks` C blocks of mb x nbk over all their k blocks.
  void c_block(double blocks, std::int64_t mb, std::int64_t nbk) {
    // one copy per group; with SBUF accumulation, an add for every later k block
    const double copies = 1;
    const double adds = pl_.acc == accumulation::sbuf ? static_cast<double>(pl_.nb[dim_k]) - 1 : 0;
    const std::int64_t out_b = dtype_bytes(p_.out);
    w_.streams[2].blocks += blocks;
    each(split(mb, p_.mm_m), [&](double nr, std::int64_t r) {
      each(split(nbk, p_.mm_n), [&](double nc, std::int64_t c) {
        const double g = blocks * nr * nc;
        const instruction copy = evict_instruction(p_, op::copy, r, c, p_.scaled);
        const instruction add = evict_instruction(p_, op::tensor_tensor, r, c, p_.scaled);
        const double copy_ns = compute_ns(copy, m_), add_ns = compute_ns(add, m_);
        w_.engine_ns[static_cast<std::size_t>(copy.engine - tensor_engine)] += g * copies * copy_ns;
        w_.engine_ns[static_cast<std::size_t>(add.engine - tensor_engine)] += g * adds * add_ns;
        w_.instructions += g * (copies + adds);
        if (p_.psum_memset) {  // a VectorE memset opens each accumulation group
          const double opens =
              pl_.acc == accumulation::psum_across ? 1 : static_cast<double>(pl_.nb[dim_k]);
          w_.engine_ns[1] += g * opens * compute_ns(psum_zero_instruction(r, c), m_);
          w_.instructions += g * opens;
        }
        w_.evict_last_ns = adds > 0 ? add_ns : copy_ns;
        if (!p_.coalesce) transfer(2, g, r, c * out_b);
      });
      if (p_.coalesce) transfer(2, blocks * nr, r, nbk * out_b);
    });
  }

  const plan& pl_;
  const params& p_;
  const machine& m_;
  steady_work w_;
  double groups_ = 0;
};

}  // namespace

steady_work steady_totals(const plan& pl, const machine& m) { return totals_builder(pl, m).run(); }

namespace {

/// One streamed operand's pipeline: its per-block load and the compute
/// between the release of a slot and the next use of that slot.
struct operand_pipe {
  double loads = 0;      ///< block loads
  double transfers = 0;  ///< per block load
  double data_ns = 0;    ///< per block load
  double distance = 0;   ///< iterations of compute that can hide a load
  double slots = 1;      ///< loads that wait for no reader (the first fill)
  /// The share of an iteration's compute that can hide a block load behind
  /// the use before it: the pieces (transfers) of a slot free up as their
  /// last readers finish and the next block's groups need them one by one.
  /// A group's matmuls after its first are one aggregated instruction, so a
  /// group frees what it read at its end. One transfer per slab: every group
  /// reads every piece, so they free up after the last group, and the next
  /// block's first group takes them as they come (1 group). One per
  /// instruction tile: A's pieces free up row by row (the block less a
  /// group); B's during the last row of groups, and the next block's first
  /// row takes them column by column (2 rows less a group).
  double overlap = 0;
};

operand_pipe pipe_of(const plan& pl, const stream_totals& s, int u, std::int64_t reuse, int bufs,
                     int resident, double iterations, double overlap) {
  operand_pipe o;
  o.overlap = overlap;
  o.loads = s.blocks;
  if (o.loads <= 0) return o;
  o.transfers = s.transfers / o.loads;
  o.data_ns = s.data_ns / o.loads;
  const int pu = pl.p.pos[static_cast<std::size_t>(u)];
  if (reuse > 1 && pu < 2) {
    // a resident set serves `reuse` blocks of u, each a pass over the loops inside u
    const auto nu = pl.nb[static_cast<std::size_t>(u)];
    const auto served = static_cast<double>(std::min(reuse, nu));
    o.distance = (bufs - 1) * served * resident + resident - 1;
    o.slots = static_cast<double>(bufs) * resident;
  } else {
    o.distance = (bufs - 1) * iterations / o.loads;
    o.slots = bufs;
  }
  return o;
}

}  // namespace

steady_estimate estimate_steady(const plan& pl, const machine& m) {
  const params& p = pl.p;
  const steady_work w = steady_totals(pl, m);
  steady_estimate e;
  const double issue = m.dma_issue_ns, tail = std::max(0.0, m.dma_fixed_latency_ns - issue);
  const double q = p.queues, n_iter = std::max(1.0, w.iterations), groups = std::max(1.0, w.groups);
  const auto& sa = w.streams[0];
  const auto& sb = w.streams[1];
  const auto& sc = w.streams[2];
  const auto& ss = w.streams[3];  // row scales: up front, ahead of A's first loads
  const double scales = ss.transfers / q * issue + (m.dma_queue_pipelined ? 0 : ss.data_ns);
  const double data = sa.data_ns + sb.data_ns + sc.data_ns + ss.data_ns;
  const double tensor = w.tensor_ns + warmup_loss(w.tensor_ns, m);
  const double evict = std::max({w.engine_ns[1], w.engine_ns[2], w.engine_ns[3]});
  const double per_iter = std::max(w.tensor_ns, evict) / n_iter, tensor_iter = w.tensor_ns / n_iter;
  const double tm = pl.tm, tn = pl.tn;
  const bool a_rows = (!p.coalesce || p.a_mk) && tm > 1, b_cols = !p.coalesce && tn > 1;
  // a piece read by one group only frees up as that group's matmuls (each
  // waiting on its own piece, so not aggregated) pass it
  const bool a_alone = a_rows ? tn == 1 : tm * tn == 1, b_alone = b_cols ? tm == 1 : tm * tn == 1;
  const double g1 = 1 / (tm * tn);
  double a_overlap = a_rows ? (a_alone ? 1 + 1 / tm : 1 - g1) : (a_alone ? 2 : g1);
  double b_overlap = b_cols ? (b_alone ? 2 : std::min(1.0, 2 / tm) - g1) : (b_alone ? 2 : g1);
  // how long before its first use in the next block a slab frees up
  double lead = g1;
  if (p.block_pos[dim_k] == 1) {
    // k inside one tile loop X: a slab frees up during the block's last X
    // step and is needed again in the next block's first
    const double nx = p.block_order[0] == dim_m ? tm : tn;
    a_overlap = b_overlap = std::max(g1, 2 / nx - g1);
    lead = 1 / nx;
  } else if (p.block_pos[dim_k] == 0) {
    // k outermost: slab s frees up after the block's s-th contraction step
    // and is needed at the next block's s-th: the loads stream with the compute
    a_overlap = b_overlap = 2;
    lead = 1 - 1.0 / pl.tk;
  }
  const operand_pipe a =
      pipe_of(pl, sa, dim_n, p.a_reuse, p.a_bufs, pl.a_resident, n_iter, a_overlap);
  const operand_pipe b =
      pipe_of(pl, sb, dim_m, p.b_reuse, p.b_bufs, pl.b_resident, n_iter, b_overlap);
  // trn2's queues pipeline descriptor generation with the data phase and
  // the wait on dependencies (timing.cpp): a queue then moves a transfer per
  // max(issue, data), and a transfer whose issue was hidden behind its wait
  // costs only its data and the completion latency. trn1's queues do one
  // transfer at a time: issue, then data.
  const bool piped = m.dma_queue_pipelined;
  const double hidden_issue = piped ? 0 : issue;
  // the first block: both operands' first loads, engines shared
  const double first_data = a.data_ns + b.data_ns;
  const double first_issues = std::ceil(std::max(a.transfers, b.transfers) / q) * issue;
  const double first =
      (piped ? issue + std::max(first_issues - issue, first_data) : first_issues + first_data) +
      tail + scales;
  const double slab0 = issue + (a.transfers > 0 ? a.data_ns / a.transfers : 0) +
                       (b.transfers > 0 ? b.data_ns / b.transfers : 0) + tail;
  const double fill = std::max(slab0, first - per_iter / groups);
  const double store1 = sc.transfers > 0 ? sc.data_ns / sc.transfers : 0;
  const double drain = w.evict_last_ns + hidden_issue + store1 + tail;
  // PSUM: a group's bank is free again once its evict is done, so with B
  // banks in rotation a group's matmuls and evict take at most B group slots;
  // with k outside the block's instruction loops every group closes at the
  // block's last contraction tile, and the evicts then run after the block
  const double evict_all = w.engine_ns[1] + w.engine_ns[2] + w.engine_ns[3];
  const bool across = pl.acc == accumulation::psum_across;
  const double banks = pl.acc_banks;
  const double bank_bound = across ? 0 : (w.tensor_ns + evict_all) / banks;
  // groups open at once: all of them with k outermost, one tile loop's with k
  // in the middle; they close together at the step's last contraction tile
  const int kpos = p.block_pos[dim_k];
  const double steps = kpos == 0 ? 1 : kpos == 1 ? (p.block_order[0] == dim_m ? tm : tn) : groups;
  const double open = groups / steps;
  const double stall_k =
      kpos < 2 && !across && 2 * open > banks
          ? n_iter * steps * std::max(0.0, (evict_all / n_iter - tensor_iter / pl.tk) / steps)
          : 0;
  // the matmuls run ahead of the evicts by the banks in rotation: with room
  // for two blocks' groups TensorE sets the pace at which slots free up,
  // else the evicts do
  const double pace_iter = banks >= 2 * groups ? tensor_iter : per_iter;

  double total = std::max({tensor, evict, data}) + fill + drain;
  double stall_a = 0, stall_b = 0, stall_c = 0, dma_total = 0;
  std::array<double, 3> queue_ns{};
  for (int round = 0; round < 3; ++round) {
    // each queue: its transfers' issue and their data phases. A stream's
    // queues start together with transfers of one size, so they stay in step:
    // their data phases share the engines with each other (the stream's whole
    // data per queue) and, stretched, with the other streams' transfers
    const auto queue_time = [&](const stream_totals& s) {
      const double others = std::min(0.9, (data - s.data_ns) / total);
      const double issues = s.transfers / q * issue, moving = s.data_ns * (1 + others);
      return piped ? std::max(issues, moving) : issues + moving;
    };
    const auto stretch = [&](const stream_totals& s) {
      return 1 + std::min(0.9, (data - s.data_ns) / total);
    };
    // a slot's next load waits for the last reader of the slot; what the
    // compute between cannot hide is a stall on TensorE
    const auto stall = [&](const operand_pipe& o, const stream_totals& s) {
      if (o.loads <= 0) return 0.0;
      const double st = stretch(s);
      const double issues = std::ceil(o.transfers / q) * issue;
      const double pace =
          piped ? std::max(issues - issue, o.data_ns * st) : issues + o.data_ns * st;
      const double piece = hidden_issue + o.data_ns / std::max(1.0, o.transfers) * st + tail;
      const double run = n_iter / o.loads * tensor_iter;  // compute between two loads
      const double each_ns = std::max({0.0, pace + tail - o.overlap * pace_iter, pace - run,
                                       piece - lead * pace_iter}) -
                             o.distance * per_iter;
      if (each_ns <= 0) return 0.0;
      return std::max(0.0, o.loads - o.slots) *
             (each_ns + steady::burst_warmup_loss(run, each_ns, m));
    };
    queue_ns = {queue_time(sa) + scales, queue_time(sb), queue_time(sc)};
    dma_total = std::max({data, queue_ns[0], queue_ns[1], queue_ns[2]}) + tail;
    stall_a = stall(a, sa);
    stall_b = stall(b, sb);
    // stores: the evict that starts a row band waits for the store
    // stage_slots bands back
    if (sc.transfers > 0) {
      const double chain = hidden_issue + store1 * stretch(sc) + tail;
      const double band = per_iter * n_iter / (static_cast<double>(pl.nb[dim_k]) * sc.transfers);
      stall_c = sc.transfers * std::max(0.0, (chain - pl.stage_slots * band) / pl.stage_slots);
    }
    const double pipeline =
        fill +
        std::max({tensor + std::max(stall_a, stall_b) + stall_c + stall_k, evict, bank_bound}) +
        drain;
    total = std::max(pipeline, dma_total);
  }

  e.latency_ns = total;
  e.busy_ns = w.engine_ns;
  e.busy_ns[0] = tensor;
  e.dma_data_ns = data;
  e.hbm_read_bytes = sa.bytes + sb.bytes + ss.bytes;
  e.hbm_write_bytes = sc.bytes;
  e.instructions = w.instructions;
  e.totals.flops = 2.0 * static_cast<double>(p.size_m) * static_cast<double>(p.size_n) *
                   static_cast<double>(p.size_k);
  e.totals.min_hbm_bytes =
      static_cast<double>(p.size_m * p.size_k + p.size_k * p.size_n) *
          static_cast<double>(dtype_bytes(p.in)) +
      static_cast<double>(p.size_m * p.size_n) * static_cast<double>(dtype_bytes(p.out));
  e.totals.compute_type = p.in;
  // what bounds it, in the event model's words
  static constexpr std::array<const char*, 3> stream_tags{"load A", "load B", "store C"};
  const auto worst_queue = static_cast<std::size_t>(
      std::max_element(queue_ns.begin(), queue_ns.end()) - queue_ns.begin());
  const double compute_path = tensor + std::max(stall_a, stall_b) + stall_c + stall_k;
  if (dma_total >= compute_path && dma_total >= evict) {
    const auto& s = w.streams[worst_queue];
    e.bound = s.transfers / q * issue > s.data_ns ? "dma issue" : "dma data";
    e.tag = stream_tags[worst_queue];
  } else if (evict > compute_path) {
    static constexpr std::array<const char*, 4> engines{"tensor", "vector", "scalar", "gpsimd"};
    const auto i = static_cast<std::size_t>(
        std::max_element(w.engine_ns.begin() + 1, w.engine_ns.end()) - w.engine_ns.begin());
    e.bound = engines[i];
    e.tag = "evict";
  } else if (std::max(stall_a, stall_b) + stall_c > tensor) {
    e.bound = "dma latency";
    e.tag = stall_c > std::max(stall_a, stall_b) ? "store C"
            : stall_a > stall_b                  ? "load A"
                                                 : "load B";
  } else {
    e.bound = "tensor";
    e.tag = "matmul";
  }
  return e;
}

}  // namespace tessel::sim::mm
