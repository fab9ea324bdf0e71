// rows.cpp: the row-wise software pipeline (rows.hpp).
#include "rows.hpp"

#include "../../nki/nki.hpp"

#include "../../functional.hpp"
#include "../emit.hpp"

#include <tessel/gate.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <array>

namespace tessel::sim::rows {
namespace {

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

enum stage_id : int { stage_load = 0, stage_reduce = 1, stage_scale = 2 };

/// The shape, the tiling and SBUF, as a compiler checks them.
std::string check_geometry(const pipeline_spec& s, const machine& m) {
  const std::int64_t P = m.partitions;
  if (s.rows <= 0 || s.cols <= 0) return fmt::format("{}: the shape must be positive", s.name);
  const tiling t = tiling_of(s);
  const std::int64_t rpt = t.rows_per_tile;
  if (rpt <= 0) return fmt::format("{}: rows_per_tile must be positive", s.name);
  if (rpt > P && rpt % P != 0)
    return fmt::format("{}: rows_per_tile = {} is over {} partitions and not a multiple of {}",
                       s.name, rpt, P, P);
  const std::int64_t groups = ceil_div(rpt, P);
  if (s.rows % groups != 0)
    return fmt::format(
        "{}: rows = {} is not a multiple of {}: rows_per_tile = {} puts {} rows on each "
        "partition",
        s.name, s.rows, groups, rpt, groups);
  if (s.bufs < 1) return fmt::format("{}: bufs must be at least 1", s.name);
  if (t.tiles * t.chunks * groups > 4'000'000)
    return fmt::format("{}: too many tiles to lower", s.name);
  return "";
}

std::string check_sbuf(const pipeline_spec& s, const machine& m) {
  const tiling t = tiling_of(s);
  const std::int64_t groups = ceil_div(t.rows_per_tile, m.partitions);
  const std::int64_t bytes = dtype_bytes(s.type), cps = t.cols_per_step;
  const std::int64_t slots = static_cast<std::int64_t>(s.bufs) * s.inputs * groups * s.cols * bytes;
  const std::int64_t staging = 2LL * s.outputs * groups * cps * bytes;
  const std::int64_t broadcast = s.broadcasts * s.cols * bytes;
  // the kernel's per-row fp32 values (two per chunk and two per row of each slot, three per
  // row of a tile) and two chunks of fp32 and of dtype (or fp32) scratch (rows_nki.cpp)
  const std::int64_t scratch = s.bufs * groups * (2 * t.chunks + 2) * 4 + 3 * groups * 4 +
                               2 * cps * (4 + (s.fp32_scratch ? 4 : bytes));
  const std::int64_t total = slots + staging + broadcast + scratch;
  const std::int64_t cap = m.sbuf_bytes_per_partition;
  if (total <= cap) return "";
  if (slots > cap)
    return fmt::format(
        "SBUF overflow: input tiles need {} B per partition with bufs={}; the target has {} "
        "(over by {} B)",
        slots, s.bufs, cap, slots - cap);
  return fmt::format(
      "SBUF overflow: input tiles ({} B), output staging ({} B), broadcast vectors ({} B) and "
      "scratch ({} B) need {} B per partition with bufs={}; the target has {} (over by {} B)",
      slots, staging, broadcast, scratch, total, s.bufs, cap, total - cap);
}

class lowerer {
 public:
  lowerer(const pipeline_spec& s, const machine& m, program& out) : s_(s), m_(m), out_(out) {}

  /// Lowers a spec check() accepted.
  void run() {
    geometry();
    setup();
    const auto order = stage_order();
    std::array<int, 3> lag{0, std::min(1, s_.bufs - 1), std::min(2, s_.bufs - 1)};
    const std::int64_t last_lag = lag[stage_scale];
    for (std::int64_t i = 0; i < tiles_ + last_lag; ++i)
      for (const int st : order) {
        const std::int64_t t = i - lag[static_cast<std::size_t>(st)];
        if (t < 0 || t >= tiles_) continue;
        if (st == stage_load) load(t);
        if (st == stage_reduce) steps(t, s_.reduce, stage_reduce);
        if (st == stage_scale) steps(t, s_.scale, stage_scale);
      }
  }

 private:
  /// Tiles whose chains are live at once: the pipeline is at most three deep.
  static constexpr std::int64_t window = 4;

  void geometry() {
    P_ = m_.partitions;
    const tiling t = tiling_of(s_);
    rpt_ = t.rows_per_tile;
    cps_ = t.cols_per_step;
    tiles_ = t.tiles;
    chunks_ = t.chunks;
    groups_ = ceil_div(rpt_, P_);
  }

  [[nodiscard]] std::int64_t bytes() const { return dtype_bytes(s_.type); }

  /// The stages in the order of `stage_order`, except that stages working on
  /// the same tile (equal lag: too few bufs) keep their dependency order.
  [[nodiscard]] std::vector<int> stage_order() const {
    std::vector<int> order;
    for (const auto& name : s_.stage_order)
      order.push_back(name == "load" ? stage_load : name == "reduce" ? stage_reduce : stage_scale);
    if (s_.bufs < 3) std::sort(order.begin(), order.end());
    return order;
  }

  instruction dma(std::uint32_t partitions, std::int64_t bytes_per_row, std::int64_t chunk,
                  buffer_id src, buffer_id dst, std::uint16_t tag, engine_id queue) const {
    return make_dma(queue, partitions, bytes_per_row, chunk, {src, dst, tag});
  }

  void setup() {
    hbm_in_ = out_.add_buffer(
        {"inputs (HBM)", memory::hbm, 0, 1, s_.inputs * s_.rows * s_.cols * bytes()});
    hbm_out_ = out_.add_buffer(
        {"outputs (HBM)", memory::hbm, 0, 1, s_.outputs * s_.rows * s_.cols * bytes()});
    slots_ = out_.add_buffer(
        {"input tiles", memory::sbuf, s_.inputs * groups_ * s_.cols * bytes(), s_.bufs, 0});
    staging_ = out_.add_buffer(
        {"output staging", memory::sbuf, s_.outputs * groups_ * cps_ * bytes(), 2, 0});
    if (s_.broadcasts > 0) broadcast();
    for (int k = 0; k < s_.inputs; ++k)
      tag_load_.push_back(out_.add_tag("load " + (k < static_cast<int>(s_.input_names.size())
                                                      ? s_.input_names[static_cast<std::size_t>(k)]
                                                      : std::to_string(k))));
    for (int k = 0; k < s_.outputs; ++k)
      tag_store_.push_back(
          out_.add_tag("store " + (k < static_cast<int>(s_.output_names.size())
                                       ? s_.output_names[static_cast<std::size_t>(k)]
                                       : std::to_string(k))));
    readers_.assign(static_cast<std::size_t>(s_.bufs * chunks_), {});
    loads_.assign(static_cast<std::size_t>(s_.bufs * chunks_), {});
    chunk_last_.assign(static_cast<std::size_t>(window * chunks_ * groups_), program::none);
    tile_last_.assign(static_cast<std::size_t>(tiles_), program::none);
    stage_store_.assign(2 * static_cast<std::size_t>(s_.outputs), program::none);
    const double elements = static_cast<double>(s_.rows) * static_cast<double>(s_.cols);
    out_.totals.flops = elements * s_.flops_per_element;
    out_.totals.min_hbm_bytes = (s_.inputs + s_.outputs) * elements * static_cast<double>(bytes()) +
                                static_cast<double>(s_.broadcasts * s_.cols * bytes());
    out_.totals.compute_type = s_.type;
  }

  /// Each broadcast vector: one row into partition 0, then partitions [0, n)
  /// copied to [n, 2n) until all hold it.
  void broadcast() {
    const std::int64_t row = s_.cols * bytes();
    const auto b = out_.add_buffer({"broadcast vectors", memory::sbuf, s_.broadcasts * row, 1, 0});
    const auto tag = out_.add_tag("load broadcast");
    for (int v = 0; v < s_.broadcasts; ++v) {
      instruction_id last = out_.add(dma(1, row, 0, hbm_in_, b, tag, 0));
      for (std::int64_t have = 1; have < P_; have *= 2)
        last = out_.add(
            dma(static_cast<std::uint32_t>(std::min(have, P_ - have)), row, 0, b, b, tag, 0),
            {last});
      broadcast_.push_back(last);
    }
  }

  [[nodiscard]] std::int64_t tile_rows(std::int64_t t) const {
    return std::min(rpt_, s_.rows - t * rpt_);
  }
  /// The partitions tile t spans: its rows, groups_ to a partition.
  [[nodiscard]] std::int64_t tile_parts(std::int64_t t) const { return tile_rows(t) / groups_; }
  [[nodiscard]] std::int64_t chunk_cols(std::int64_t c) const {
    return std::min(cps_, s_.cols - c * cps_);
  }
  [[nodiscard]] std::size_t at(std::int64_t t, std::int64_t c) const {
    return static_cast<std::size_t>((t % s_.bufs) * chunks_ + c);
  }
  /// The last instruction of row group g's chain on chunk c of tile t.
  [[nodiscard]] instruction_id& chunk_last(std::int64_t t, std::int64_t c, std::int64_t g) {
    return chunk_last_[static_cast<std::size_t>(((t % window) * chunks_ + c) * groups_ + g)];
  }

  engine_id queue(int stream) {
    const int n = static_cast<int>(stream_count_[static_cast<std::size_t>(stream)]++ % s_.queues);
    return static_cast<engine_id>((stream * s_.queues + n) % dma_queue_count);
  }

  void load(std::int64_t t) {
    const auto parts = static_cast<std::uint32_t>(tile_parts(t));
    for (std::int64_t c = 0; c < chunks_; ++c) {
      const auto slot = at(t, c);
      const std::int64_t cols = chunk_cols(c);
      std::vector<instruction_id> war = readers_[slot];
      readers_[slot].clear();
      loads_[slot].clear();
      for (std::int64_t g = 0; g < groups_; ++g) chunk_last(t, c, g) = program::none;
      for (int k = 0; k < s_.inputs; ++k)
        loads_[slot].push_back(
            out_.add(dma(parts, groups_ * cols * bytes(), cols == s_.cols ? 0 : cols * bytes(),
                         hbm_in_, slots_, tag_load_[static_cast<std::size_t>(k)], queue(k)),
                     war));
    }
  }

  instruction compute(const row_op& o, std::int64_t parts, std::int64_t elements) {
    instruction in = op_instruction(s_, o, parts, elements);
    in.src = slots_;
    in.dst = o.to_staging ? staging_ : slots_;
    in.tag = out_.add_tag(o.tag);
    return in;
  }

  void steps(std::int64_t t, const std::vector<row_step>& list, int stage) {
    const std::int64_t parts = tile_parts(t);
    for (const auto& step : list) {
      if (!step.per_chunk) {  // on the tile's [partitions, groups] per-row values
        std::vector<instruction_id> deps{tile_last_[static_cast<std::size_t>(t)]};
        for (std::int64_t g = 0; g < groups_; ++g) deps.push_back(chunk_last(t, chunks_ - 1, g));
        instruction_id prev = program::none;
        for (const auto& o : step.ops) {
          prev = out_.add(compute(o, parts, groups_), deps);
          deps = {prev};
        }
        tile_last_[static_cast<std::size_t>(t)] = prev;
        continue;
      }
      for (std::int64_t c = 0; c < chunks_; ++c) chain(t, c, step, stage, parts);
    }
  }

  /// The first instruction of a chain on a slot waits for the slot's loads.
  void first_reads(std::int64_t t, std::int64_t c, std::int64_t g, int stage,
                   std::vector<instruction_id>& deps) {
    deps.push_back(tile_last_[static_cast<std::size_t>(t)]);
    if (chunk_last(t, c, g) == program::none && stage != stage_load)
      for (const auto l : loads_[at(t, c)]) deps.push_back(l);
  }

  /// One chunk's ops: the compute ops between two stores run row group by row
  /// group (each group's chain in turn), each store moves all groups at once.
  void chain(std::int64_t t, std::int64_t c, const row_step& step, int stage, std::int64_t parts) {
    const auto slot = at(t, c);
    const std::int64_t cols = chunk_cols(c);
    bool wrote_staging = false;
    std::size_t stage_slot = 0;
    std::vector<instruction_id> deps;
    for (std::size_t begin = 0; begin < step.ops.size();) {
      std::size_t end = begin;
      while (end < step.ops.size() && !step.ops[end].store) ++end;
      for (std::int64_t g = 0; g < groups_ && end > begin; ++g)
        for (std::size_t i = begin; i < end; ++i) {
          const auto& o = step.ops[i];
          if (o.to_staging && !wrote_staging) {
            stage_slot =
                2 * static_cast<std::size_t>(o.output) +
                static_cast<std::size_t>(stage_serial_[static_cast<std::size_t>(o.output)]++ % 2);
            wrote_staging = true;
            deps.push_back(stage_store_[stage_slot]);
          }
          first_reads(t, c, g, stage, deps);
          deps.push_back(chunk_last(t, c, g));
          if (o.uses_broadcast && !broadcast_used_) {
            deps.insert(deps.end(), broadcast_.begin(), broadcast_.end());
            broadcast_used_ = true;
          }
          const auto id = out_.add(compute(o, parts, cols), deps);
          deps.clear();
          chunk_last(t, c, g) = id;
          readers_[slot].push_back(id);
        }
      if (end == step.ops.size()) break;
      const auto& o = step.ops[end];  // a store: a side branch, the chains go on
      for (std::int64_t g = 0; g < groups_; ++g) {
        first_reads(t, c, g, stage, deps);
        deps.push_back(chunk_last(t, c, g));
      }
      const auto id = out_.add(
          dma(static_cast<std::uint32_t>(parts), groups_ * cols * bytes(),
              cols == s_.cols ? 0 : cols * bytes(), wrote_staging ? staging_ : slots_, hbm_out_,
              tag_store_[static_cast<std::size_t>(o.output)], queue(s_.inputs + o.output)),
          deps);
      deps.clear();
      if (wrote_staging)
        stage_store_[stage_slot] = id;
      else
        readers_[slot].push_back(id);
      begin = end + 1;
    }
  }

  const pipeline_spec& s_;
  const machine& m_;
  program& out_;
  std::int64_t P_ = 128, rpt_ = 128, cps_ = 0, tiles_ = 0, chunks_ = 0, groups_ = 1;
  buffer_id hbm_in_ = 0, hbm_out_ = 0, slots_ = 0, staging_ = 0;
  std::vector<std::uint16_t> tag_load_, tag_store_;
  std::vector<instruction_id> broadcast_;
  bool broadcast_used_ = false;
  std::vector<std::vector<instruction_id>> readers_, loads_;
  std::vector<instruction_id> chunk_last_, tile_last_, stage_store_;
  std::array<std::int64_t, 16> stream_count_{};
  std::array<std::int64_t, 8> stage_serial_{};
};

}  // namespace

instruction op_instruction(const pipeline_spec& spec, const row_op& o, std::int64_t parts,
                           std::int64_t elements) {
  instruction in;
  in.engine = o.engine;
  in.kind = o.kind;
  in.type = o.fp32_out ? dtype::fp32 : spec.type;
  in.partitions = static_cast<std::uint32_t>(parts);
  in.free = static_cast<std::uint32_t>(
      std::max<double>(1, static_cast<double>(elements) * o.cycles_per_element));
  if (o.perf_mode) in.flags |= flag_sbuf_contiguous;
  return in;
}

tiling tiling_of(const pipeline_spec& spec) {
  tiling t;
  t.rows_per_tile = std::min(spec.rows_per_tile, spec.rows);
  t.cols_per_step = spec.cols_per_step > 0 ? std::min(spec.cols_per_step, spec.cols) : spec.cols;
  if (t.rows_per_tile > 0) t.tiles = ceil_div(spec.rows, t.rows_per_tile);
  if (t.cols_per_step > 0) t.chunks = ceil_div(spec.cols, t.cols_per_step);
  return t;
}

std::string check(const pipeline_spec& spec, const machine& m) {
  if (auto e = check_geometry(spec, m); !e.empty()) return e;
  return check_sbuf(spec, m);
}

std::string lower(const pipeline_spec& spec, const machine& m, program& out) {
  out.clear();
  if (auto e = check(spec, m); !e.empty()) return e;
  lowerer(spec, m, out).run();
  return "";
}

std::string read_common(const knob_reader& v, std::string name, std::string_view rows_name,
                        std::string_view cols_name, pipeline_spec& spec) {
  spec.name = std::move(name);
  spec.rows = v.integer(rows_name);
  spec.cols = v.integer(cols_name);
  std::string type = v.symbol("dtype", "");
  if (type.empty()) {
    const auto b = v.integer("bytes");
    type = b == 4 ? "fp32" : b == 2 ? "bf16" : b == 1 ? "fp8" : "";
    if (type.empty()) return fmt::format("{}: const bytes = {} is not 1, 2 or 4", spec.name, b);
  }
  spec.type = emit::dtype_named(type);
  spec.rows_per_tile = v.integer("rows_per_tile");
  spec.cols_per_step = v.integer("cols_per_step", 0);
  spec.bufs = static_cast<int>(v.integer("bufs"));
  spec.queues = static_cast<int>(std::clamp<std::int64_t>(v.integer("dma_queues"), 1, 5));
  spec.stage_order = v.order("stages");
  return "";
}

std::vector<knob> knobs_with(const std::string& rows_name, const std::string& cols_name,
                             std::vector<knob> own) {
  std::vector<knob> out{
      knob::required_integer(rows_name, "rows (each normalized on its own)"),
      knob::required_integer(cols_name, "columns of a row"),
      knob::symbol("dtype", {"bf16", "fp16", "fp8", "fp32"}, derived{"bf16 (or from const bytes)"},
                   "element type in HBM and SBUF"),
      knob::integer("bytes", 2, "the type by size when dtype is absent: 1 fp8, 2 bf16, 4 fp32",
                    "1 | 2 | 4"),
      knob::integer("rows_per_tile", 128,
                    "rows per tile: up to 128 one per partition, above that a multiple of 128"),
      knob::integer("cols_per_step", derived{"the whole row"},
                    "columns per chunk: each instruction and DMA covers one chunk"),
      knob::integer("bufs", 2,
                    "tile slots: how many tiles may be in flight (the pipeline depth is min(bufs, "
                    "3))",
                    ">= 1"),
      knob::order("stages", {"load", "reduce", "scale"}, "issue order of the pipeline's stages"),
      knob::integer("dma_queues", 1,
                    "DMA queues per stream (each input's loads, each output's stores)", "1..5"),
  };
  for (auto& k : own) out.push_back(std::move(k));
  return out;
}

std::vector<std::string> suggest(const bottleneck& b, const knob_reader& v) {
  std::vector<std::string> out;
  const bool dma = b.phase.rfind("dma", 0) == 0;
  const auto rpt = v.integer("rows_per_tile"), cps = v.integer("cols_per_step", 0);
  const auto bytes = v.symbol("dtype", "") == "fp32" ? 4 : v.integer("bytes");
  const auto per_partition = std::max<std::int64_t>(1, rpt / 128) * cps * bytes;
  if (dma && b.issue_share > 0.25 * b.share) {
    out.push_back(fmt::format(
        "raise cols_per_step or rows_per_tile (now {} x {}): each transfer pays a fixed issue cost",
        rpt, cps));
    out.push_back(fmt::format("raise dma_queues (now {}) so more transfers issue at once",
                              v.integer("dma_queues")));
  }
  if (dma && b.latency_share > 0.2 * b.share)
    out.emplace_back("raise bufs so loads run ahead of the compute");
  if (dma && b.data_share > 0.5 * b.share && cps > 0 && per_partition < 4096)
    out.push_back(fmt::format(
        "transfers move {} B per partition: 4 KiB or more runs the DMA engines at full rate",
        per_partition));
  if (!dma) {
    out.push_back(
        fmt::format("the {} engine is on the critical path ({}): move that step to an idle engine",
                    b.phase, b.tag));
    out.emplace_back("raise bufs (3 or more) so the three stages of different tiles overlap");
  }
  return out;
}

}  // namespace tessel::sim::rows
