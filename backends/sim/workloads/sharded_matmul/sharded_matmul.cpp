// sharded_matmul.cpp: C[M,N] = A @ B split over `tp` ranks of a multi-core
// target (tensor parallel, docs/topology.md). shard = m gives each rank M/tp
// rows of C, shard = n N/tp columns (both then all-gather C), shard = k a
// K/tp slice of the contraction (the partial C are then all-reduced). One
// rank's part is the matmul workload's plan of the shard (its lowering,
// analytic model and executor, unchanged); the collective is timed by
// collectives.hpp over the target's topology, after the compute or, with
// overlap, block by block while the next block computes.
#include "../../functional.hpp"
#include "../../nki/ranks.hpp"
#include "../matmul/matmul_plan.hpp"
#include "../sharded.hpp"

#include <tessel/error.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <memory>
#include <optional>
#include <regex>
#include <string>
#include <vector>

namespace tessel::sim {
namespace {

constexpr std::array<const char*, 3> shape_names{"M", "N", "K"};

struct sharded_plan {
  std::shared_ptr<const space> shard_space;  ///< the space of one rank's part (kept alive)
  cloning_ptr<workload_plan> core;           ///< the matmul plan of one rank's part
  int dim = mm::dim_m;                       ///< the dimension split over the ranks
  std::array<std::int64_t, 3> shape{};       ///< the whole problem's M, N, K
  rank_split split;  ///< tp; the all-gather or all-reduce of the whole C, one per C block

  /// One rank's matmul plan, inside `core` (read without error).
  [[nodiscard]] const mm::plan& rank() const { return value_of<mm::plan>(*core); }
};

/// The gathered C against the unsharded product: each rank's elements as
/// its own plan computes them (mm::schedule_dot on its slice of K), the k
/// split's partial C rounded to the output type, then summed in fp32 by the
/// all-reduce and rounded again.
class sharded_kernel final : public functional_kernel {
 public:
  /// Copies what it reads: the kernel may outlive the plan (workload::functional).
  explicit sharded_kernel(const sharded_plan& p)
      : tp_(p.split.ranks), split_(p.dim), shape_(p.shape), rank_(p.rank()), in_(rank_.p) {}

  [[nodiscard]] std::vector<tensor_spec> inputs() const override {
    const auto t = element_of(in_.in);
    std::vector<std::int64_t> a_shape{size(mm::dim_k), size(mm::dim_m)};
    if (in_.a_mk) a_shape = {size(mm::dim_m), size(mm::dim_k)};
    return {{"A", a_shape, t}, {"B", {size(mm::dim_k), size(mm::dim_n)}, t}};
  }
  [[nodiscard]] std::vector<tensor_spec> outputs() const override {
    return {{"C", {size(mm::dim_m), size(mm::dim_n)}, element_of(in_.out)}};
  }
  [[nodiscard]] probe_points probes(rng& r) const override {
    const std::int64_t want =
        std::clamp<std::int64_t>(probe_budget / (2 * size(mm::dim_k)), 3, 256);
    const auto rows = pick_indices(size(mm::dim_m), in_.tile[mm::dim_m], want, r);
    const auto cols = pick_indices(size(mm::dim_n), in_.tile[mm::dim_n], want, r);
    return {grid(rows, cols, size(mm::dim_n))};
  }
  /// The matmul's (per rank), widened by the k split's tp partial sums
  /// each rounded to the output type.
  [[nodiscard]] std::vector<double> tolerances() const override {
    const auto out = element_of(in_.out);
    double tol = default_tolerance(out);
    if (rank_.acc == mm::accumulation::sbuf)
      tol += 2 * std::sqrt(static_cast<double>(rank_.nb[mm::dim_k])) *
             unit_roundoff(element_of(in_.acc));
    if (split_ == mm::dim_k) tol += 2 * std::sqrt(static_cast<double>(tp_)) * unit_roundoff(out);
    return {tol};
  }
  [[nodiscard]] probe_values reference(std::span<const input_tensor> in,
                                       const probe_points& where) const override {
    return evaluate(in, where,
                    [](const std::vector<float>& a, const std::vector<float>& b, std::int64_t,
                       std::int64_t) { return mm::exact_dot(a, b); });
  }

 protected:
  [[nodiscard]] probe_values execute(std::span<const input_tensor> in,
                                     const probe_points& where) const override {
    return evaluate(in, where,
                    [&](const std::vector<float>& a, const std::vector<float>& b, std::int64_t i,
                        std::int64_t j) { return element(a, b, i, j); });
  }

 private:
  [[nodiscard]] std::int64_t size(int d) const { return shape_[static_cast<std::size_t>(d)]; }

  /// C[i, j] as the rank that owns it (m, n) or all ranks (k) compute it.
  [[nodiscard]] double element(const std::vector<float>& a, const std::vector<float>& b,
                               std::int64_t i, std::int64_t j) const {
    const fault f = injected();
    if (split_ != mm::dim_k) {
      const std::int64_t part = size(split_) / tp_;
      const std::int64_t li = split_ == mm::dim_m ? i % part : i;
      const std::int64_t lj = split_ == mm::dim_n ? j % part : j;
      return mm::element_computed(rank_, li, lj, f) ? mm::schedule_dot(rank_, a, b, f) : 0.0;
    }
    if (!mm::element_computed(rank_, i, j, f)) return 0.0;
    const auto part = static_cast<std::size_t>(size(mm::dim_k) / tp_);
    float sum = 0;  // the all-reduce adds the ranks' partial C in fp32
    for (int r = 0; r < tp_; ++r) {
      const std::size_t at = static_cast<std::size_t>(r) * part;
      const std::span<const float> ar(a.data() + at, part), br(b.data() + at, part);
      sum += static_cast<float>(mm::schedule_dot(rank_, ar, br, f));
    }
    return round_to(element_of(in_.out), sum);
  }

  /// Calls dot(A row i, B column j, i, j) at every probe, reading each
  /// probed row and column once.
  template <class Dot>
  probe_values evaluate(std::span<const input_tensor> in, const probe_points& where,
                        Dot dot) const {
    return memo_.with(in, [&](operands& read) {
      const std::int64_t n = size(mm::dim_n), k = size(mm::dim_k);
      probe_values out(1);
      out[0].reserve(where.at(0).size());
      for (const auto flat : where.at(0)) {
        const std::int64_t i = flat / n, j = flat % n;
        auto& a = read.a_rows[i];
        if (a.empty()) {
          a.resize(static_cast<std::size_t>(k));
          for (std::int64_t t = 0; t < k; ++t)
            a[static_cast<std::size_t>(t)] =
                static_cast<float>(in_.a_mk ? in[0].at(i, t) : in[0].at(t, i));
        }
        auto& b = read.b_cols[j];
        if (b.empty()) {
          b.resize(static_cast<std::size_t>(k));
          for (std::int64_t t = 0; t < k; ++t)
            b[static_cast<std::size_t>(t)] = static_cast<float>(in[1].at(t, j));
        }
        out[0].push_back(dot(a, b, i, j));
      }
      return out;
    });
  }

  struct operands {
    std::map<std::int64_t, std::vector<float>> a_rows, b_cols;
  };

  int tp_, split_;
  std::array<std::int64_t, 3> shape_;
  mm::plan rank_;
  const mm::params& in_;
  input_memo<operands> memo_;
};

/// The rank's M, N, K: the whole's, the split dimension cut tp ways.
std::array<std::int64_t, 3> rank_shape(const sharded_plan& p) {
  std::array<std::int64_t, 3> part = p.shape;
  part[static_cast<std::size_t>(p.dim)] /= p.split.ranks;
  return part;
}

/// rank_inputs()'s entries (nki/ranks.hpp): each input's rows or columns of
/// the split dimension that are the rank's, or the input whole.
std::vector<std::string> rank_shards(const sharded_plan& p) {
  const auto n = rank_shape(p)[static_cast<std::size_t>(p.dim)];
  const std::string cut = fmt::format("rank * {0}:(rank + 1) * {0}", n);
  const auto slice = [&](const char* name, int rows, int cols) {
    if (rows != p.dim && cols != p.dim) return fmt::format("\"{0}\": {0}", name);
    return fmt::format("\"{0}\": {0}[{1}, {2}]", name, rows == p.dim ? cut : ":",
                       cols == p.dim ? cut : ":");
  };
  const mm::params& in = p.rank().p;
  std::vector<std::string> out{
      in.a_mk ? slice("A", mm::dim_m, mm::dim_k) : slice("A", mm::dim_k, mm::dim_m),
      slice("B", mm::dim_k, mm::dim_n)};
  if (in.scaled) out.push_back(slice("scale", mm::dim_m, -1));
  return out;
}

/// The kernel's collectives after the rank's matmul, and `return C`: one
/// all-gather (into C viewed [tp, rank rows, rank columns]) or all-reduce,
/// or with overlap one per C block of the rank, on the block's views.
void add_collectives(const sharded_plan& p, nki::rank_emission& e) {
  const bool gather = p.split.kind == collective::all_gather;
  const auto call = [&](const std::string& src, const std::string& dst) {
    return fmt::format("ncc.{}(srcs=[{}], dsts=[{}], replica_group=group, {})",
                       gather ? "all_gather" : "all_reduce", src, dst,
                       gather ? "collective_dim=0" : "op=nl.add");
  };
  const auto part = rank_shape(p);
  const std::int64_t mr = part[mm::dim_m], nr = part[mm::dim_n];
  const std::string stacked = fmt::format("C.reshape((RANKS, {}, {}))", mr, nr);
  if (!p.split.overlap) {
    e.communicate = {gather ? call("C_rank", stacked) : call("C_rank", "C"), "return C"};
    return;
  }
  const mm::plan& rank = p.rank();
  const std::int64_t tm = rank.p.tile[mm::dim_m], tn = rank.p.tile[mm::dim_n];
  e.communicate = {
      fmt::format("# overlap: one {} per C block of the rank ({} x {}), in block order",
                  to_string(p.split.kind), tm, tn),
      fmt::format("for bm in nl.sequential_range({}):", rank.nb[mm::dim_m]),
      fmt::format("    for bn in nl.sequential_range({}):", rank.nb[mm::dim_n]),
      fmt::format("        r0, c0 = bm * {}, bn * {}", tm, tn),
      fmt::format("        r1, c1 = min(r0 + {}, {}), min(c0 + {}, {})", tm, mr, tn, nr),
      "        " + (gather ? call("C_rank[r0:r1, c0:c1]", stacked + "[:, r0:r1, c0:c1]")
                           : call("C_rank[r0:r1, c0:c1]", "C[r0:r1, c0:c1]")),
      "return C"};
  e.notes.push_back(
      "overlap: each C block's collective is issued after the rank's compute, in block order; "
      "it depends only on its block's stores, so NKI's scheduler may start it while later "
      "blocks compute, as the simulator times it (not checked on hardware)");
}

/// e.signature: the rank's INPUTS and OUTPUTS at the whole problem's shapes
/// (C's column blocks stacked for shard = n, with its reference), the
/// split's tolerance; the split constant of `rank` says it is a share. ""
/// or why matmul's file is not in the form read here.
std::string whole_signature(const sharded_plan& p, nki::kernel_file& rank, nki::rank_emission& e) {
  auto& signature = e.signature = rank.signature;
  if (p.dim == mm::dim_n) {
    const std::string from = "\"C\": ((M, N),";
    const auto at = signature.find(from);
    if (at == std::string::npos) return "sharded_matmul: matmul's OUTPUTS changed form";
    signature.replace(at, from.size(), "\"C\": ((RANKS * M, N // RANKS),");
    e.reference =
        "\n\nwhole_reference = reference\n\n\n"
        "def reference(**inputs):\n"
        "    \"\"\"C's column blocks stacked, as the all-gather (along axis 0) leaves them: "
        "rank r's\n"
        "    N / RANKS columns in rows r * M to (r + 1) * M.\"\"\"\n"
        "    C = whole_reference(**inputs)[\"C\"]\n"
        "    return {\"C\": np.concatenate(np.split(C, RANKS, axis=1))}\n";
    e.notes.push_back(
        "shard = n: C is returned as its column blocks stacked ([RANKS * M, N / RANKS]); NKI's "
        "all-gather concatenates HBM tensors along axis 0 only");
  }
  for (int d = 0; d < 3; ++d) {
    const auto name = shape_names[static_cast<std::size_t>(d)];
    const auto whole = p.shape[static_cast<std::size_t>(d)];
    signature = std::regex_replace(signature, std::regex(fmt::format("\\b{}\\b", name)),
                                   fmt::to_string(whole));
    for (auto& k : rank.constants)
      if (k.name == name && d == p.dim)
        k.meaning += fmt::format(": one rank's share of {} = {}", name, whole);
  }
  // the gate's tolerance of the split (sharded_kernel): the rank's, widened by k's tp sums
  const auto tol = signature.find("TOLERANCE = ");
  if (tol == std::string::npos) return "sharded_matmul: matmul's TOLERANCE changed form";
  signature.replace(tol, signature.find(' ', tol + 12) - tol,
                    "TOLERANCE = " + nki::py_float(sharded_kernel(p).tolerances().at(0)));
  return "";
}

std::vector<knob> knobs_of_sharded() {
  std::vector<knob> out = mm::knobs_of_matmul();
  out.push_back(knob::integer("tp", 1, "ranks the matmul is split over (tensor parallel degree)",
                              "1..target.ranks, dividing the split dimension"));
  out.push_back(knob::symbol(
      "shard", {"m", "n", "k"}, "m",
      "the dimension split across ranks: m (rows of C) and n (columns) then all-gather C; k (the "
      "contraction) all-reduces the partial C"));
  for (auto& k : split_knobs("the collective's",
                             "communicate each finished C block while the next computes (one "
                             "collective per block) instead of once after the compute"))
    out.push_back(std::move(k));
  return out;
}

class sharded_matmul final : public sharded_workload<sharded_plan> {
 public:
  sharded_matmul()
      : sharded_workload({"sharded_matmul",
                          "C = A @ B split over tp ranks (m, n or k) with its all-gather or "
                          "all-reduce",
                          knobs_of_sharded(), "M"},
                         matmul_workload()) {}

  [[nodiscard]] double estimated_instructions(const space& s, const config& c,
                                              const machine& m) const override {
    sharded_plan p;
    if (!read_plan(reader(s, c), m, p).empty()) return inner().estimated_instructions(s, c, m);
    return inner().estimated_instructions(p.shard_space ? *p.shard_space : s, c, m);
  }

  [[nodiscard]] std::vector<std::string> suggest(const bottleneck& b, const space& s,
                                                 const config& c) const override {
    if (b.phase != "collective") return inner().suggest(b, s, c);
    const knob_reader v = reader(s, c);
    auto out =
        split_suggestions(v, "set overlap = true to send each C block while the next one computes",
                          "lower tp: fewer ranks each compute more, but the collective moves less");
    if (v.symbol("shard") == "k")
      out.emplace_back("try shard = m or n: an all-gather moves about half an all-reduce's bytes");
    return out;
  }

 private:
  [[nodiscard]] std::unique_ptr<functional_kernel> executor(const sharded_plan& p,
                                                            const machine& m) const override {
    (void)m;
    return std::make_unique<sharded_kernel>(p);
  }
  [[nodiscard]] std::string write_nki(const sharded_plan& p, const nki::context& ctx,
                                      std::string& out) const override {
    if (p.split.ranks == 1) return inner().emit_nki_plan(*p.core, ctx, out);
    return write_ranks(p, ctx, out);
  }

  /// tp > 1 (docs/nki.md, "Ranks and collectives"): matmul's kernel of one
  /// rank's shard, then the all-gather or all-reduce of C, one per C block
  /// of the rank with overlap. The rank's plan is the file's; the whole
  /// problem's shapes are literals (its own plan may not compile: a block
  /// that fits a rank's share may overflow the whole's PSUM).
  [[nodiscard]] std::string write_ranks(const sharded_plan& p, const nki::context& ctx,
                                        std::string& out) const {
    nki::kernel_file rank;
    if (auto e = inner().emit_nki_plan(*p.core, nki::capturing(ctx, rank, 0), out); !e.empty())
      return e;
    program timed;
    if (auto e = lower_program(p, ctx.m, timed); !e.empty()) return e;
    nki::structure s = nki::structure_of(timed);
    count_collectives(p.split, {p.split.bytes}, s);
    nki::rank_emission e;
    e.workload = "sharded_matmul";
    e.ranks = p.split.ranks;
    e.shards = rank_shards(p);
    const std::array<std::int64_t, 3> part = rank_shape(p);
    e.setup = {p.dim == mm::dim_n
                   ? fmt::format("C = nl.ndarray((RANKS * {}, {} // RANKS), dtype=OUT, "
                                 "buffer=nl.shared_hbm)",
                                 p.shape[0], p.shape[1])
                   : fmt::format("C = nl.ndarray(({}, {}), dtype=OUT, buffer=nl.shared_hbm)",
                                 p.shape[0], p.shape[1]),
               fmt::format("C_rank = nl.ndarray(({}, {}), dtype=OUT, buffer=nl.private_hbm)",
                           part[mm::dim_m], part[mm::dim_n]),
               "group = ncc.ReplicaGroup([list(range(RANKS))])"};
    e.rank_call =
        p.rank().p.scaled ? "matmul_rank(A, B, scale, C_rank)" : "matmul_rank(A, B, C_rank)";
    add_collectives(p, e);
    if (auto err = whole_signature(p, rank, e); !err.empty()) return err;
    out = nki::assemble_ranks(rank, rank, e, s, ctx);
    return "";
  }

  /// Reads (s, c) into `p`: the split, one rank's matmul plan and the
  /// collective's times. "" or why it does not compile.
  [[nodiscard]] std::string read_plan(const knob_reader& v, const machine& m,
                                      sharded_plan& p) const override {
    const space& s = v.source();
    rank_split& r = p.split;
    const std::string shard = v.symbol("shard");
    p.dim = shard == "m" ? mm::dim_m : shard == "n" ? mm::dim_n : mm::dim_k;
    r.kind = p.dim == mm::dim_k ? collective::all_reduce : collective::all_gather;
    r.what = fmt::format("{} of C", to_string(r.kind));
    for (int d = 0; d < 3; ++d)
      p.shape[static_cast<std::size_t>(d)] = v.integer(shape_names[static_cast<std::size_t>(d)]);
    if (auto e = read_split(v, m, "tp", r); !e.empty()) return e;
    const char* dim = shape_names[static_cast<std::size_t>(p.dim)];
    const std::int64_t whole = p.shape[static_cast<std::size_t>(p.dim)];
    if (whole % r.ranks != 0)
      return fmt::format("{} = {} is not a multiple of tp = {}", dim, whole, r.ranks);
    if (r.ranks > 1) {
      const bool constant = std::any_of(s.def().constants.begin(), s.def().constants.end(),
                                        [&](const auto& k) { return k.name == dim; });
      if (!constant)
        return fmt::format("shard = {} needs {} as a constant of the space", shard, dim);
      p.shard_space = space_with_constant(s, dim, whole / r.ranks);
    }
    p.core = inner().plan_config(p.shard_space ? *p.shard_space : s, v.values(), m);
    if (!p.core->error.empty()) return p.core->error;
    const mm::plan& rank = p.rank();
    r.bytes = static_cast<double>(p.shape[0] * p.shape[1] * dtype_bytes(rank.p.out));
    r.chunks = std::max<std::int64_t>(1, rank.nb[mm::dim_m] * rank.nb[mm::dim_n]);
    return time_split(m, r, {r.bytes});
  }
};

}  // namespace

const workload& sharded_matmul_workload() {
  static const sharded_matmul instance;
  return instance;
}

}  // namespace tessel::sim
