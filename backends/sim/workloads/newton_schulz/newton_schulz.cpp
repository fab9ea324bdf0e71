// newton_schulz.cpp: Muon's Newton-Schulz orthogonalisation of one gradient
// matrix on one NeuronCore: X0 = G / ||G||_F, then `iterations` steps of
// X <- a X + (b A + c A^2) X with A = X X^T (newton_schulz.hpp has the
// coefficients). G is [rows, cols] with rows <= cols (Muon transposes a tall
// matrix first); every operand stays resident in SBUF, so HBM sees G once
// and X once.
//
// The schedule, per step (TensorE contracts over the partitions):
//   1. A' = b X X^T: stationary X^T[k slab, 128 rows of A], moving X^T[k
//      slab, mm_n columns], accumulated over the col_tiles slabs in one PSUM
//      bank; the `evict` engine scales by b into A' (dtype);
//   2. B = (c / b^2) A'A' + A': A' is symmetric, so its own row slabs are the
//      stationaries; VectorE combines from PSUM (scalar_tensor_tensor);
//   3. X+ = a X + B X: stationary B[k slab, 128 rows] (B is symmetric),
//      moving X[k slab, mm_n columns]; VectorE combines into X's other slot;
//   4. X^T for the next step: `transpose = tensor` transposes X+ 128 x 128
//      through PSUM (the evict engine drains a bank of four at a time);
//      `transpose = recompute` forms X+^T = a X^T + X^T B by a second chain of
//      matmuls (stationary X[k slab, 128 columns]) combined in place.
// Before the steps: G's row tiles load, ScalarE sums their squares, one
// matmul by a ones tile adds the partitions, ScalarE takes rsqrt, the evict
// engine scales, and X0 is transposed once. docs/simulator.md has the table.
#include "newton_schulz.hpp"
#include "../../timing.hpp"
#include "../../typed_workload.hpp"
#include "../emit.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <string>
#include <vector>

namespace tessel::sim {
namespace {

using emit::ceil_div;
using ns_detail::params;
using ns_detail::plan;

std::string read(const knob_reader& v, const machine& m, params& p) {
  p.rows = v.integer("rows");
  p.cols = v.integer("cols");
  if (p.rows <= 0 || p.cols <= 0) return "newton_schulz: rows and cols must be positive";
  if (p.rows > p.cols)
    return fmt::format(
        "newton_schulz: rows = {} > cols = {}: give the wide orientation (Muon transposes a tall "
        "matrix, and X X^T is then the small product)",
        p.rows, p.cols);
  p.iterations = v.integer("iterations");
  if (p.iterations < 1) return "newton_schulz: iterations must be at least 1";
  if (auto e = emit::read_dtype(v, "newton_schulz", p.type); !e.empty()) return e;
  p.mm_n = v.integer("mm_n", m.max_moving_free);
  if (auto e = emit::check_instruction_tile(m.partitions, p.mm_n, m); !e.empty()) return e;
  p.recompute_t = v.symbol("transpose") == "recompute";
  p.evict = emit::read_engine(v, "evict");
  p.psum_bufs = static_cast<int>(v.integer("psum_bufs"));
  if (p.psum_bufs < 1) return "newton_schulz: psum_bufs must be at least 1";
  if (p.psum_bufs > m.psum_banks)
    return fmt::format("PSUM overflow: psum_bufs = {} banks in rotation; the target has {}",
                       p.psum_bufs, m.psum_banks);
  return "";
}

std::string make_plan(const params& p, const machine& m, plan& pl) {
  pl.p = p;
  const std::int64_t b = dtype_bytes(p.type), parts = m.partitions;
  pl.row_tiles = ceil_div(p.rows, parts);
  pl.col_tiles = ceil_div(p.cols, parts);
  pl.row_groups = ceil_div(p.rows, p.mm_n);
  pl.col_groups = ceil_div(p.cols, p.mm_n);
  pl.t_width = std::max<std::int64_t>(parts, m.psum_bank_bytes / 4 / parts * parts);
  pl.x_bytes = pl.row_tiles * p.cols * b;
  pl.xt_bytes = pl.col_tiles * p.rows * b;
  pl.a_bytes = pl.row_tiles * p.rows * b;
  if (auto e = emit::check_sbuf(
          {{"X (two slots)", 2 * pl.x_bytes},
           {"X^T", pl.xt_bytes},
           {"A'", pl.a_bytes},
           {"B", pl.a_bytes},
           {"row sums and the ones tile", pl.row_tiles * 4 + parts * b}},
          m.sbuf_bytes_per_partition,
          fmt::format("rows={}, cols={}, dtype={}", p.rows, p.cols, to_string(p.type)));
      !e.empty())
    return e;
  const double per_step = static_cast<double>(pl.row_tiles) *
                          static_cast<double>(pl.row_groups * (pl.col_tiles + pl.row_tiles) +
                                              pl.col_groups * pl.row_tiles);
  if (per_step * static_cast<double>(p.iterations) > 5e7)
    return fmt::format(
        "newton_schulz: {:.3g} matmul instructions is more than the simulator lowers",
        per_step * static_cast<double>(p.iterations));
  return "";
}

class lowerer : emit::lowering<plan> {
 public:
  lowerer(const plan& pl, const machine& m, program& out) : lowering(pl, m, out, 2, 1) {}

  void run() {
    setup();
    normalise();
    transpose_x();
    for (std::int64_t t = 0; t < p_.iterations; ++t) {
      gram();
      square();
      update();
      if (t + 1 == p_.iterations) break;
      if (p_.recompute_t)
        recompute_xt();
      else
        transpose_x();
    }
    store();
  }

 private:
  enum tag_index : std::size_t {
    t_load,
    t_sumsq,
    t_norm,
    t_scale,
    t_transpose,
    t_evict_t,
    t_gram,
    t_evict_a,
    t_square,
    t_combine_b,
    t_product,
    t_combine_x,
    t_product_t,
    t_combine_t,
    t_store
  };

  [[nodiscard]] std::int64_t rows_of(std::int64_t tile, std::int64_t extent) const {
    return std::min<std::int64_t>(m_.partitions, extent - tile * m_.partitions);
  }
  [[nodiscard]] std::int64_t width_of(std::int64_t group, std::int64_t extent) const {
    return std::min(p_.mm_n, extent - group * p_.mm_n);
  }
  static std::size_t at(std::int64_t i) { return static_cast<std::size_t>(i); }

  void setup() {
    const std::int64_t b = dtype_bytes(p_.type);
    hbm_g_ = out_.add_buffer({"G (HBM)", memory::hbm, 0, 1, p_.rows * p_.cols * b});
    hbm_x_ = out_.add_buffer({"X (HBM)", memory::hbm, 0, 1, p_.rows * p_.cols * b});
    sb_x_ = out_.add_buffer({"X", memory::sbuf, pl_.x_bytes, 2, 0});
    sb_xt_ = out_.add_buffer({"X^T", memory::sbuf, pl_.xt_bytes, 1, 0});
    sb_a_ = out_.add_buffer({"A'", memory::sbuf, pl_.a_bytes, 1, 0});
    sb_b_ = out_.add_buffer({"B", memory::sbuf, pl_.a_bytes, 1, 0});
    sb_sums_ = out_.add_buffer({"row sums", memory::sbuf, pl_.row_tiles * 4, 1, 0});
    psum_ = out_.add_buffer({"PSUM", memory::psum, m_.psum_bank_bytes, p_.psum_bufs, 0});
    b_.tags({"load G", "sum of squares", "norm", "scale", "transpose", "evict X^T", "X X^T",
             "evict A'", "A'A'", "combine B", "B X", "combine X", "X^T B", "combine X^T",
             "store X"});
    bank_reader_.assign(at(p_.psum_bufs), program::none);
    x_piece_.assign(at(pl_.row_tiles * pl_.col_groups), program::none);
    xt_ready_.assign(at(pl_.col_tiles), program::none);
    a_ready_.assign(at(pl_.row_tiles), program::none);
    b_ready_.assign(at(pl_.row_tiles), program::none);
    const auto r = static_cast<double>(p_.rows), c = static_cast<double>(p_.cols);
    out_.totals.flops = static_cast<double>(p_.iterations) * (4 * r * r * c + 2 * r * r * r);
    out_.totals.min_hbm_bytes = 2 * r * c * static_cast<double>(b);
    out_.totals.compute_type = p_.type;
  }

  /// The next PSUM bank in rotation; its last reader goes into `deps`.
  std::size_t open_bank(std::vector<instruction_id>& deps) {
    const auto bank =
        at(static_cast<std::int64_t>(banks_++ % static_cast<std::uint64_t>(p_.psum_bufs)));
    deps.push_back(bank_reader_[bank]);
    return bank;
  }

  /// Adds `id` to `deps` the first time TensorE waits on it in this phase.
  void need(std::vector<instruction_id>& ready, std::vector<std::uint8_t>& seen, std::int64_t i,
            std::vector<instruction_id>& deps) {
    if (seen[at(i)]) return;
    seen[at(i)] = 1;
    deps.push_back(ready[at(i)]);
  }

  /// A drain of PSUM on the evict engine (ScalarE: an activation; VectorE:
  /// a copy, or a tensor_scalar when it scales).
  instruction_id evict(std::int64_t rows, std::int64_t n, bool scales, buffer_id dst,
                       std::size_t tag, const std::vector<instruction_id>& deps) {
    const op kind = p_.evict == scalar_engine ? op::activation
                    : scales                  ? op::tensor_scalar
                                              : op::copy;
    return b_.compute(p_.evict, kind, rows, n, psum_, dst, tag, deps);
  }

  /// G's row tiles, their sums of squares, the total over the partitions (a
  /// matmul by a ones tile), its rsqrt, and X0 = G * rsqrt in slot 0.
  void normalise() {
    std::vector<instruction_id> loads, sums;
    for (std::int64_t i = 0; i < pl_.row_tiles; ++i) {
      const std::int64_t rows = rows_of(i, p_.rows);
      loads.push_back(
          b_.dma(q_.next(0), hbm_g_, sb_x_, rows, p_.cols * dtype_bytes(p_.type), t_load, {}));
      sums.push_back(b_.compute(scalar_engine, op::activation, rows, p_.cols, sb_x_, sb_sums_,
                                t_sumsq, {loads.back()}));
    }
    // the ones tile the partition sum multiplies by: one VectorE memset
    const auto ones = b_.compute(vector_engine, op::tensor_scalar, m_.partitions, m_.partitions,
                                 sb_sums_, sb_sums_, t_norm, {});
    deps_.clear();
    const auto bank = open_bank(deps_);
    instruction_id total = program::none;
    for (std::int64_t i = 0; i < pl_.row_tiles; ++i) {
      if (i > 0) deps_.clear();
      if (i == 0) deps_.push_back(ones);
      deps_.push_back(sums[at(i)]);
      total = b_.matmul(dtype::fp32, rows_of(i, p_.rows), m_.partitions, 1, true, i > 0, sb_sums_,
                        psum_, t_norm, deps_);
    }
    const auto rsqrt = b_.compute(scalar_engine, op::activation, m_.partitions, 1, psum_, sb_sums_,
                                  t_norm, {total});
    bank_reader_[bank] = rsqrt;
    for (std::int64_t i = 0; i < pl_.row_tiles; ++i) {
      const auto id =
          b_.compute(p_.evict, p_.evict == scalar_engine ? op::activation : op::tensor_scalar,
                     rows_of(i, p_.rows), p_.cols, sb_x_, sb_x_, t_scale, {rsqrt, loads[at(i)]});
      for (std::int64_t g = 0; g < pl_.col_groups; ++g) x_piece_[at(i * pl_.col_groups + g)] = id;
    }
  }

  /// X^T from X (the slot last written) by TensorE transposes, a PSUM bank
  /// of t_width X^T columns at a time, drained by the evict engine. X's two
  /// slots alternate; the dependencies follow the pieces' writers.
  void transpose_x() {
    const std::int64_t per_bank = pl_.t_width / m_.partitions;
    for (std::int64_t j = 0; j < pl_.col_tiles; ++j) {
      const std::int64_t cols = rows_of(j, p_.cols);
      const std::int64_t g = j * m_.partitions / p_.mm_n;
      for (std::int64_t i0 = 0; i0 < pl_.row_tiles; i0 += per_bank) {
        deps_.clear();
        const auto bank = open_bank(deps_);
        instruction_id last = program::none;
        std::int64_t width = 0;
        for (std::int64_t i = i0; i < std::min(pl_.row_tiles, i0 + per_bank); ++i) {
          if (i > i0) deps_.clear();
          deps_.push_back(x_piece_[at(i * pl_.col_groups + g)]);
          last = b_.transpose(p_.type, rows_of(i, p_.rows), cols, sb_x_, psum_, t_transpose, deps_);
          width += rows_of(i, p_.rows);
        }
        const auto e = evict(cols, width, false, sb_xt_, t_evict_t, {last});
        bank_reader_[bank] = e;
        xt_ready_[at(j)] = e;
      }
    }
  }

  /// A' = b X X^T, row tile by row tile.
  void gram() {
    row_products(xt_ready_, pl_.col_tiles, p_.cols, sb_xt_, t_gram, a_ready_,
                 [this](std::int64_t rows, std::int64_t width, instruction_id last) {
                   return evict(rows, width, true, sb_a_, t_evict_a, {last});
                 });
  }

  /// B = (c / b^2) A'A' + A', the combine on VectorE from PSUM.
  void square() {
    row_products(a_ready_, pl_.row_tiles, p_.rows, sb_a_, t_square, b_ready_,
                 [this](std::int64_t rows, std::int64_t width, instruction_id last) {
                   return b_.compute(vector_engine, op::tensor_tensor, rows, width, psum_, sb_b_,
                                     t_combine_b, {last});
                 });
  }

  /// A [rows x rows] product per row tile: TensorE accumulates the `k_tiles`
  /// tiles of `in` (of `k_extent` rows in all, ready as `in_ready` says) into
  /// one PSUM bank per row group, and `finish(rows, width, last)` drains each
  /// group; `out_ready` gets the row tile's last drain.
  template <class finish_fn>
  void row_products(std::vector<instruction_id>& in_ready, std::int64_t k_tiles,
                    std::int64_t k_extent, buffer_id in, std::size_t tag,
                    std::vector<instruction_id>& out_ready, const finish_fn& finish) {
    std::vector<std::uint8_t> seen(at(k_tiles), 0);
    for (std::int64_t i = 0; i < pl_.row_tiles; ++i) {
      const std::int64_t rows = rows_of(i, p_.rows);
      instruction_id e = program::none;
      for (std::int64_t g = 0; g < pl_.row_groups; ++g) {
        deps_.clear();
        const auto bank = open_bank(deps_);
        instruction_id last = program::none;
        for (std::int64_t k = 0; k < k_tiles; ++k) {
          if (k > 0) deps_.clear();
          need(in_ready, seen, k, deps_);
          last = b_.matmul(p_.type, rows_of(k, k_extent), rows, width_of(g, p_.rows), true, k > 0,
                           in, psum_, tag, deps_);
        }
        e = finish(rows, width_of(g, p_.rows), last);
        bank_reader_[bank] = e;
      }
      out_ready[at(i)] = e;
    }
  }

  /// X+ = a X + B X into X's other slot.
  void update() {
    std::vector<std::uint8_t> seen(at(pl_.row_tiles), 0);
    for (std::int64_t i = 0; i < pl_.row_tiles; ++i) {
      const std::int64_t rows = rows_of(i, p_.rows);
      for (std::int64_t g = 0; g < pl_.col_groups; ++g) {
        deps_.clear();
        const auto bank = open_bank(deps_);
        instruction_id last = program::none;
        for (std::int64_t k = 0; k < pl_.row_tiles; ++k) {
          if (k > 0) deps_.clear();
          need(b_ready_, seen, k, deps_);
          last = b_.matmul(p_.type, rows_of(k, p_.rows), rows, width_of(g, p_.cols), true, k > 0,
                           sb_b_, psum_, t_product, deps_);
        }
        const auto e = b_.compute(vector_engine, op::tensor_tensor, rows, width_of(g, p_.cols),
                                  psum_, sb_x_, t_combine_x, {last});
        bank_reader_[bank] = e;
        x_piece_[at(i * pl_.col_groups + g)] = e;
      }
    }
  }

  /// X+^T = a X^T + X^T B in place: stationary X (the slot update() read)
  /// [k slab, 128 columns], moving B [k slab, mm_n columns].
  void recompute_xt() {
    for (std::int64_t j = 0; j < pl_.col_tiles; ++j) {
      const std::int64_t cols = rows_of(j, p_.cols);
      instruction_id e = program::none;
      for (std::int64_t g = 0; g < pl_.row_groups; ++g) {
        deps_.clear();
        const auto bank = open_bank(deps_);
        instruction_id last = program::none;
        for (std::int64_t k = 0; k < pl_.row_tiles; ++k) {
          if (k > 0) deps_.clear();
          last = b_.matmul(p_.type, rows_of(k, p_.rows), cols, width_of(g, p_.rows), true, k > 0,
                           sb_x_, psum_, t_product_t, deps_);
        }
        e = b_.compute(vector_engine, op::tensor_tensor, cols, width_of(g, p_.rows), psum_, sb_xt_,
                       t_combine_t, {last});
        bank_reader_[bank] = e;
      }
      xt_ready_[at(j)] = e;
    }
  }

  void store() {
    for (std::int64_t i = 0; i < pl_.row_tiles; ++i) {
      deps_.assign(x_piece_.begin() + i * pl_.col_groups,
                   x_piece_.begin() + (i + 1) * pl_.col_groups);
      b_.dma(q_.next(1), sb_x_, hbm_x_, rows_of(i, p_.rows), p_.cols * dtype_bytes(p_.type),
             t_store, deps_);
    }
  }

  buffer_id hbm_g_ = 0, hbm_x_ = 0, sb_x_ = 0, sb_xt_ = 0, sb_a_ = 0, sb_b_ = 0, sb_sums_ = 0,
            psum_ = 0;
  std::vector<instruction_id> bank_reader_, x_piece_, xt_ready_, a_ready_, b_ready_, deps_;
  std::uint64_t banks_ = 0;
};

class newton_schulz final : public planned_workload<plan, params, read, make_plan, lowerer> {
 public:
  newton_schulz()
      : planned_workload({
            "newton_schulz",
            "Muon's Newton-Schulz orthogonalisation: X = G / ||G||, then X <- a X + (b A + c A^2) "
            "X with A = X X^T, every operand resident in SBUF",
            {
                knob::required_integer("rows", "rows of G and X (rows <= cols)"),
                knob::required_integer("cols", "columns of G and X (the contraction of X X^T)"),
                knob::integer("iterations", 5, "Newton-Schulz steps (Muon: 5)", ">= 1"),
                emit::dtype_knob("G, X, A', B and the matmul inputs"),
                emit::bytes_knob(),
                knob::integer("mm_n", derived{"matmul_max_moving_free (512)"},
                              "moving free size of one matmul: columns of one PSUM group"),
                knob::symbol("transpose", {"tensor", "recompute"}, "tensor",
                             "how X^T for the next step is made: TensorE transposes of X through "
                             "PSUM, or a second product X^T B"),
                knob::symbol("evict", {"vector", "scalar"}, "vector",
                             "drains A' and the transposes from PSUM (VectorE also combines)"),
                knob::integer("psum_bufs", 2,
                              "PSUM banks in rotation: the next group accumulates while one "
                              "drains",
                              "1..8"),
            },
            "",
        }) {}

  [[nodiscard]] std::vector<std::string> suggest(const bottleneck& b, const space& s,
                                                 const config& c) const override {
    const knob_reader v = reader(s, c);
    std::vector<std::string> out;
    if (b.phase == "tensor" && v.symbol("transpose") == "recompute")
      out.emplace_back(
          "transpose = tensor: TensorE transposes of X cost rows x cols / 128 columns, the second "
          "product 2 rows^2 cols FLOPs");
    if (b.phase == "tensor" && v.integer("mm_n", 512) < 512)
      out.emplace_back("raise mm_n to 512: fewer, longer matmuls per stationary load");
    if (b.phase == "vector" && v.symbol("evict") == "vector")
      out.emplace_back("evict = scalar: VectorE also combines B and X; let ScalarE drain A'");
    if ((b.phase == "vector" || b.phase == "scalar") && v.integer("psum_bufs") < 4)
      out.push_back(fmt::format("raise psum_bufs (now {}): more groups accumulate while one drains",
                                v.integer("psum_bufs")));
    return out;
  }

 private:
  [[nodiscard]] std::optional<steady_estimate> steady(const plan& pl,
                                                      const machine& m) const override {
    return ns_detail::estimate_steady(pl, m);
  }

  [[nodiscard]] std::unique_ptr<functional_kernel> executor(const plan& pl,
                                                            const machine& m) const override {
    return ns_detail::make_kernel(pl, m.partitions);
  }

  [[nodiscard]] std::string write_nki(const plan& pl, const nki::context& ctx,
                                      std::string& out) const override {
    return ns_detail::emit_nki(pl, ctx, out);
  }
};

}  // namespace

const workload& newton_schulz_workload() {
  static const newton_schulz instance;
  return instance;
}

}  // namespace tessel::sim
