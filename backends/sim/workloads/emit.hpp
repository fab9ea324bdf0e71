// emit.hpp: small builders shared by the fused workloads (swiglu.cpp,
// cross_entropy.cpp): instruction constructors with matmul aggregation, the
// SBUF budget check worded as a compiler would, and the readers of the names
// every fused workload shares (dtype, engines, instruction tile). Internal to
// the simulator; header-only and inline.
#pragma once

#include "../program.hpp"
#include "../workload.hpp"

#include <tessel/error.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tessel::sim::emit {

[[nodiscard]] inline std::int64_t ceil_div(std::int64_t a, std::int64_t b) {
  return (a + b - 1) / b;
}

/// PSUM as one buffer per 2 KiB bank ("PSUM bank 3"), `count` of them: an
/// instruction that writes or reads a bank names it, so the banks a program
/// uses can be counted (nki::structure_of) and compared with its kernel's.
[[nodiscard]] inline std::vector<buffer_id> psum_banks(program& out, const machine& m, int count) {
  std::vector<buffer_id> banks;
  for (int b = 0; b < count; ++b)
    banks.push_back(
        out.add_buffer({fmt::format("PSUM bank {}", b), memory::psum, m.psum_bank_bytes, 1, 0}));
  return banks;
}

/// "vector" | "scalar" | "gpsimd" -> the engine, else nullopt.
[[nodiscard]] inline std::optional<engine_id> engine_named(std::string_view name) {
  if (name == "vector") return vector_engine;
  if (name == "scalar") return scalar_engine;
  if (name == "gpsimd") return gpsimd_engine;
  return std::nullopt;
}

/// The engine symbol knob `name` names (its choices are engines: the knob
/// reader has checked the value is one of them).
[[nodiscard]] inline engine_id read_engine(const knob_reader& v, std::string_view name) {
  const std::string value = v.symbol(name);
  if (const auto e = engine_named(value)) return *e;
  throw error(fmt::format("sim: '{}' = {} is not an engine", name, value));
}

/// The `dtype` knob of a bf16 | fp16 | fp32 workload, and `bytes`, its
/// stand-in (2 bytes read as bf16).
[[nodiscard]] inline knob dtype_knob(std::string meaning) {
  return knob::symbol("dtype", {"bf16", "fp16", "fp32"}, derived{"bf16 (or from const bytes)"},
                      std::move(meaning));
}
[[nodiscard]] inline knob bytes_knob() {
  return knob::integer("bytes", 2, "the type by size when dtype is absent: 2 bf16, 4 fp32",
                       "2 | 4");
}

/// "bf16" | "fp16" | "fp32" | "fp8" -> the type (bf16 for anything else: the
/// knob reader has checked the value is one of the knob's choices).
[[nodiscard]] inline dtype dtype_named(std::string_view name) {
  if (name == "fp32") return dtype::fp32;
  if (name == "fp16") return dtype::fp16;
  if (name == "fp8") return dtype::fp8;
  return dtype::bf16;
}

/// The input type from `dtype` (bf16 | fp16 | fp32), else from `const bytes` (2 | 4).
[[nodiscard]] inline std::string read_dtype(const knob_reader& v, std::string_view workload,
                                            dtype& out) {
  std::string type = v.symbol("dtype", "");
  if (type.empty()) {
    const auto bytes = v.integer("bytes");
    type = bytes == 2 ? "bf16" : bytes == 4 ? "fp32" : "";
    if (type.empty())
      return fmt::format("{}: const bytes = {} is not 2 (bf16) or 4 (fp32)", workload, bytes);
  }
  out = dtype_named(type);
  return "";
}

/// The instruction tile's limits, as a compiler checks them: `mm_k` is the
/// contraction (partitions), `mm_n` the moving free size.
[[nodiscard]] inline std::string check_instruction_tile(std::int64_t mm_k, std::int64_t mm_n,
                                                        const machine& m) {
  if (mm_k <= 0 || mm_n <= 0) return "mm_k and mm_n must be positive";
  if (mm_k > m.max_contraction)
    return fmt::format(
        "partition dim {} > {}: a matmul contraction tile (mm_k) spans at most {} partitions on {}",
        mm_k, m.max_contraction, m.max_contraction, m.target_name);
  if (mm_n > m.max_moving_free)
    return fmt::format("moving free size {} > {}: mm_n exceeds what one matmul streams", mm_n,
                       m.max_moving_free);
  return "";
}

/// The functional mode's cap on the inputs one output element reads: above
/// it the executors shrink the reduced dimensions (shrink()).
inline constexpr double functional_reads_per_output = 1 << 18;

/// `extent` cut to the first, one interior and the tail block of `tile`
/// (three whole blocks when `tile` divides it): the shape the functional
/// mode checks a schedule on when every output reduces over too many inputs
/// to execute at the timed shape; every block kind of the tiling survives.
[[nodiscard]] inline std::int64_t shrink(std::int64_t extent, std::int64_t tile) {
  if (tile <= 0 || extent <= 3 * tile) return extent;
  const std::int64_t tail = extent % tile;
  return tail != 0 ? 2 * tile + tail : 3 * tile;
}

/// One part of an SBUF budget: what it holds and its bytes per partition.
struct sbuf_part {
  std::string what;
  std::int64_t bytes = 0;
};

/// "" when the parts fit `cap` bytes per partition, else the overflow
/// message: the parts, their total, the capacity and by how much it is over.
/// `context` names the parameters that sized them ("token_tile=512, bufs=2").
[[nodiscard]] inline std::string check_sbuf(const std::vector<sbuf_part>& parts, std::int64_t cap,
                                            std::string_view context) {
  std::int64_t total = 0;
  for (const auto& p : parts) total += p.bytes;
  if (total <= cap) return "";
  std::string list;
  for (const auto& p : parts)
    if (p.bytes > 0) list += fmt::format("{}{} ({} B)", list.empty() ? "" : ", ", p.what, p.bytes);
  return fmt::format(
      "SBUF overflow: {} need {} B per partition with {}; the target has {} (over by {} B)", list,
      total, context, cap, total - cap);
}

/// A fused workload's first suggestion when its bottleneck `b` is DMA
/// transfers that spend over a quarter of it issuing: more queues (the
/// `dma_queues` knob) issue the transfers of `b`'s operand in parallel.
inline void suggest_queues_for_issue(const bottleneck& b, const knob_reader& v,
                                     std::vector<std::string>& out) {
  if (b.phase.rfind("dma", 0) == 0 && b.issue_share > 0.25 * b.share)
    out.push_back(fmt::format(
        "raise dma_queues (now {}): every transfer of {} pays a fixed issue cost, and more queues "
        "issue them in parallel",
        v.integer("dma_queues"), b.tag.rfind("load ", 0) == 0 ? b.tag.substr(5) : b.tag));
}

/// Instruction builders over one program, with its table of labels: a
/// builder's `tag` is an index into the texts given to tags(). An elementwise
/// instruction reads PSUM (flag_reads_psum) exactly when its `src` is a PSUM
/// buffer. Matmuls that repeat the previous instruction's shape into the same
/// open accumulation group (PSUM bank), with no dependency of their own, are
/// aggregated into it (program.hpp's rule). Dependencies are a braced list
/// ({a, b}: no allocation) or a vector.
class builder {
  using list = std::initializer_list<instruction_id>;

 public:
  explicit builder(program& out) : out_(out) {}

  /// Adds the labels `texts` to the program, in order: tag i is texts[i].
  void tags(std::initializer_list<std::string_view> texts) {
    for (const auto text : texts) tags_.push_back(out_.add_tag(text));
  }

  /// A DMA transfer in descriptors of `chunk` bytes (0: a row is one).
  template <class deps_t = list>
  instruction_id dma(engine_id queue, buffer_id src, buffer_id dst, std::int64_t rows,
                     std::int64_t bytes_per_row, std::size_t tag, const deps_t& deps,
                     std::int64_t chunk = 0) {
    return out_.add(make_dma(queue, rows, bytes_per_row, chunk, io(src, dst, tag)), deps);
  }

  /// An elementwise instruction: `rows` partitions x `n` elements each.
  template <class deps_t = list>
  instruction_id compute(engine_id e, op kind, std::int64_t rows, std::int64_t n, buffer_id src,
                         buffer_id dst, std::size_t tag, const deps_t& deps,
                         dtype t = dtype::fp32) {
    const bool psum = out_.buffers()[src].where == memory::psum;
    const std::uint8_t flags = psum ? std::uint8_t{flag_reads_psum} : std::uint8_t{0};
    return out_.add(make_elementwise(e, kind, t, rows, n, flags, io(src, dst, tag)), deps);
  }

  /// A function of one input (exp, SiLU, ln): ScalarE's function unit as one
  /// activation pass; VectorE and GpSimdE have no function unit and are
  /// modelled as 4 cycles per element (a reciprocal-class pass over half the
  /// elements, the assumption attention's exp_engine = vector makes).
  template <class deps_t = list>
  instruction_id function(engine_id e, std::int64_t rows, std::int64_t n, buffer_id src,
                          buffer_id dst, std::size_t tag, const deps_t& deps) {
    if (e == scalar_engine) return compute(e, op::activation, rows, n, src, dst, tag, deps);
    return compute(e, op::reciprocal, rows, ceil_div(n, 2), src, dst, tag, deps);
  }

  /// A TensorE transpose of `rows` partitions x `cols` elements, into PSUM.
  template <class deps_t = list>
  instruction_id transpose(dtype t, std::int64_t rows, std::int64_t cols, buffer_id src,
                           buffer_id dst, std::size_t tag, const deps_t& deps) {
    return out_.add(make_transpose(t, rows, cols, io(src, dst, tag)), deps);
  }

  /// nc_matmul: contraction k, stationary free m, moving free n, into PSUM.
  template <class deps_t = list>
  instruction_id matmul(dtype t, std::int64_t k, std::int64_t m, std::int64_t n,
                        bool new_stationary, bool accumulate, buffer_id src, buffer_id dst,
                        std::size_t tag, const deps_t& deps) {
    std::uint8_t flags = 0;
    if (new_stationary) flags |= flag_new_stationary;
    if (accumulate) flags |= flag_accumulate;
    const instruction in = make_matmul(t, k, m, n, flags, io(src, dst, tag));
    if (accumulate && deps.size() == 0 && last_matmul_ != program::none &&
        last_matmul_ + 1 == out_.size()) {
      auto& prev = out_.at(last_matmul_);
      if (prev.partitions == in.partitions && prev.free == in.free && prev.aux == in.aux &&
          prev.type == in.type && prev.tag == in.tag && prev.dst == in.dst &&
          (prev.flags | flag_accumulate) == in.flags) {
        prev.count += 1;
        return last_matmul_;
      }
    }
    last_matmul_ = out_.add(in, deps);
    return last_matmul_;
  }

 private:
  [[nodiscard]] instruction_io io(buffer_id src, buffer_id dst, std::size_t tag) const {
    return {src, dst, tags_[tag]};
  }

  program& out_;
  std::vector<std::uint16_t> tags_;
  instruction_id last_matmul_ = program::none;
};

/// The slots of one operand, used in turn: who read each slot last (the
/// WAR dependency of the next write into it).
struct slot_ring {
  int count = 1, slot = 0;
  std::int64_t serial = 0;
  std::vector<instruction_id> reader;

  void init(int n) {
    count = n;
    reader.assign(static_cast<std::size_t>(n), program::none);
  }
  /// Moves to the next slot; returns the WAR dependency of writing it.
  instruction_id next() {
    slot = static_cast<int>(serial++ % count);
    return reader[static_cast<std::size_t>(slot)];
  }
  void read_by(instruction_id id) { reader[static_cast<std::size_t>(slot)] = id; }
};

/// The block slots of an operand loaded `pieces` pieces (contraction slabs)
/// to a slot: who loaded each piece (RAW) and who read the slot last (WAR).
struct piece_slots : slot_ring {
  std::int64_t pieces = 1;
  std::vector<instruction_id> load;
  std::vector<std::uint8_t> consumed;

  void init(int slot_count, std::int64_t piece_count) {
    slot_ring::init(slot_count);
    pieces = piece_count;
    load.assign(static_cast<std::size_t>(count * pieces), program::none);
    consumed.assign(load.size(), 1);
  }
  /// `id` loaded `piece` of the current slot.
  void fill(std::int64_t piece, instruction_id id) {
    const auto i = static_cast<std::size_t>(slot * pieces + piece);
    load[i] = id;
    consumed[i] = 0;
  }
  /// Adds the load of `piece` to `deps` unless TensorE already waited on it.
  void need(std::int64_t piece, std::vector<instruction_id>& deps) {
    const auto i = static_cast<std::size_t>(slot * pieces + piece);
    if (consumed[i]) return;
    deps.push_back(load[i]);
    consumed[i] = 1;
  }
};

/// DMA queues for `streams` independent streams, `per_stream` queues each:
/// stream s rotates over its own queues.
class queues {
 public:
  queues(int streams, int per_stream)
      : per_(std::clamp(per_stream, 1, dma_queue_count / std::max(1, streams))),
        count_(static_cast<std::size_t>(std::max(1, streams)), 0) {}
  engine_id next(int stream) {
    const auto n = count_[static_cast<std::size_t>(stream)]++ % per_;
    return static_cast<engine_id>((stream * per_ + static_cast<int>(n)) % dma_queue_count);
  }

 private:
  int per_;
  std::vector<std::int64_t> count_;
};

/// What a fused workload's lowerer starts from: its plan `pl_` (of a Plan
/// with its params as `p`) and those params `p_`, the machine, the program it
/// writes, the instruction builder over that program and the DMA queues
/// (`streams` streams of `per_stream` queues each).
template <class Plan>
class lowering {
 protected:
  lowering(const Plan& pl, const machine& m, program& out, int streams, int per_stream)
      : pl_(pl), p_(pl.p), m_(m), out_(out), b_(out), q_(streams, per_stream) {}

  const Plan& pl_;
  const decltype(Plan::p)& p_;
  const machine& m_;
  program& out_;
  builder b_;
  queues q_;
};

}  // namespace tessel::sim::emit
