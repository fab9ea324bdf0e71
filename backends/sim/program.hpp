// program.hpp: what a workload lowers to and the timing model executes. A
// program is per-engine instruction streams (16 DMA queues, TensorE, VectorE,
// ScalarE, GpSimdE) over named buffers in HBM, SBUF and PSUM, with explicit
// dependencies between instructions (instruction ids). Each engine executes
// its stream in program order; an instruction may start when its engine is
// free and every instruction it depends on is done (docs/simulator.md).
//
// Instructions are plain data and cheap: a workload emits thousands per
// config. An instruction may stand for `count` identical instructions issued
// back to back on its engine (aggregation): the workload may only aggregate
// where the hardware order is fixed and every dependency of the later copies
// is already satisfied when the first one may start, so the timing stays exact.
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

namespace tessel::sim {

// --- engines -----------------------------------------------------------------

/// Engine ids: the DMA queues first, then the compute engines.
using engine_id = std::uint8_t;
inline constexpr int dma_queue_count = 16;
inline constexpr engine_id tensor_engine = 16;  ///< TensorE (the PE array)
inline constexpr engine_id vector_engine = 17;  ///< VectorE
inline constexpr engine_id scalar_engine = 18;  ///< ScalarE (activation)
inline constexpr engine_id gpsimd_engine = 19;  ///< GpSimdE (pool)
inline constexpr int engine_count = 20;

[[nodiscard]] constexpr bool is_dma(engine_id e) noexcept { return e < dma_queue_count; }
/// "dma3", "tensor", "vector", "scalar", "gpsimd".
[[nodiscard]] std::string engine_name(engine_id e);

// --- data ----------------------------------------------------------------------

enum class dtype : std::uint8_t { bf16, fp8, fp32, fp16 };
[[nodiscard]] int dtype_bytes(dtype t) noexcept;
[[nodiscard]] std::string_view to_string(dtype t) noexcept;

enum class memory : std::uint8_t { hbm, sbuf, psum };
[[nodiscard]] std::string_view to_string(memory m) noexcept;

/// A named buffer. For SBUF and PSUM, `bytes_per_partition` is what one slot
/// occupies on each partition it uses and `slots` is its multi-buffering
/// depth, so the buffer needs bytes_per_partition * slots per partition. For
/// HBM, `bytes` is the tensor's size.
struct buffer {
  std::string name;  ///< "A", "B", "C partials", "out staging"
  memory where = memory::sbuf;
  std::int64_t bytes_per_partition = 0;
  std::int64_t slots = 1;
  std::int64_t bytes = 0;  ///< HBM tensors: total size
  [[nodiscard]] std::int64_t sbuf_bytes_per_partition() const noexcept {
    return where == memory::hbm ? 0 : bytes_per_partition * slots;
  }
};
using buffer_id = std::uint16_t;

// --- instructions ----------------------------------------------------------------

enum class op : std::uint8_t {
  dma,            ///< a DMA transfer (engine: a queue)
  matmul,         ///< nc_matmul: LoadStationary [p, m] + MultiplyMoving [p, n] -> PSUM [m, n]
  transpose,      ///< TensorE transpose through the identity: [p, n] -> PSUM [n, p]
  copy,           ///< one input: copy / cast (tensor_copy), n elements per partition
  tensor_scalar,  ///< one input with a scalar operand
  activation,     ///< one input through ScalarE's function unit (fused scale/bias)
  tensor_tensor,  ///< two inputs, elementwise
  reduce,         ///< tensor_reduce along the free axis (add / max)
  reciprocal,     ///< 1/x
  bn_stats,       ///< batch-norm statistics (mean, variance) of n elements
};
[[nodiscard]] std::string_view to_string(op o) noexcept;

/// Flags of an instruction.
enum instruction_flags : std::uint8_t {
  flag_reads_psum = 1u << 0,      ///< an elementwise instruction reading PSUM
  flag_writes_psum = 1u << 1,     ///< ... writing PSUM
  flag_new_stationary = 1u << 2,  ///< matmul: loads a new stationary (else reuses the loaded one)
  flag_sbuf_contiguous =
      1u << 3,  ///< elementwise SBUF -> SBUF on 2-byte data: VectorE perf mode eligible
  flag_accumulate = 1u << 4,  ///< matmul: accumulates into a PSUM group already open
};

struct instruction {
  engine_id engine = tensor_engine;
  op kind = op::matmul;
  dtype type = dtype::bf16;  ///< element type the engine processes (matmul: the inputs')
  std::uint8_t flags = 0;
  std::uint32_t count = 1;  ///< identical copies issued back to back
  /// matmul/transpose: contraction (partition) size. Elementwise: partitions.
  /// DMA: partitions written or read on the SBUF side (rows of the transfer).
  std::uint32_t partitions = 0;
  /// matmul: moving free size N. transpose: free size of the input.
  /// Elementwise: elements per partition. DMA: bytes per partition (row).
  std::uint32_t free = 0;
  /// matmul: stationary free size M. DMA: bytes of one contiguous chunk of a
  /// row (a descriptor); 0 means the whole row is contiguous.
  std::uint32_t aux = 0;
  /// DMA: the first SBUF partition the transfer touches (which engines serve it).
  std::uint16_t partition_offset = 0;
  buffer_id src = 0, dst = 0;
  std::uint16_t tag = 0;                     ///< the program's label index ("load A", "evict")
  std::uint32_t dep_begin = 0, dep_end = 0;  ///< range in program::deps
};
using instruction_id = std::uint32_t;

// --- instruction builders ------------------------------------------------------
// One per kind of instruction, for every lowering and steady model: the
// fields the kind reads (the comments of `instruction`), the rest default.

/// What a lowering's instruction reads and writes and its label (a steady
/// model's instructions, only timed, have none).
struct instruction_io {
  buffer_id src = 0, dst = 0;
  std::uint16_t tag = 0;
};

/// The fields every builder sets: the engine, the kind and `io`.
[[nodiscard]] constexpr instruction instruction_on(engine_id e, op kind, instruction_io io) {
  instruction in;
  in.engine = e;
  in.kind = kind;
  in.src = io.src;
  in.dst = io.dst;
  in.tag = io.tag;
  return in;
}

/// nc_matmul on TensorE: contraction `k` (partitions), stationary free `m`,
/// moving free `n`, inputs of `type`.
[[nodiscard]] constexpr instruction make_matmul(dtype type, std::int64_t k, std::int64_t m,
                                                std::int64_t n, std::uint8_t flags = 0,
                                                instruction_io io = {}) {
  instruction in = instruction_on(tensor_engine, op::matmul, io);
  in.type = type;
  in.flags = flags;
  in.partitions = static_cast<std::uint32_t>(k);
  in.aux = static_cast<std::uint32_t>(m);
  in.free = static_cast<std::uint32_t>(n);
  return in;
}

/// A TensorE transpose of `rows` partitions x `cols` elements of `type`.
[[nodiscard]] constexpr instruction make_transpose(dtype type, std::int64_t rows, std::int64_t cols,
                                                   instruction_io io = {}) {
  instruction in = make_matmul(type, rows, 0, cols, 0, io);
  in.kind = op::transpose;
  return in;
}

/// An elementwise instruction of `kind` on engine `e`: `rows` partitions x
/// `n` elements (at least 1) of `type`.
[[nodiscard]] constexpr instruction make_elementwise(engine_id e, op kind, dtype type,
                                                     std::int64_t rows, std::int64_t n,
                                                     std::uint8_t flags = 0,
                                                     instruction_io io = {}) {
  instruction in = instruction_on(e, kind, io);
  in.type = type;
  in.flags = flags;
  in.partitions = static_cast<std::uint32_t>(rows);
  in.free = static_cast<std::uint32_t>(n > 1 ? n : 1);
  return in;
}

/// A DMA transfer on `queue`: `rows` partitions x `bytes` per row, in
/// descriptors of `chunk` bytes (0: a row is one).
[[nodiscard]] constexpr instruction make_dma(engine_id queue, std::int64_t rows, std::int64_t bytes,
                                             std::int64_t chunk = 0, instruction_io io = {}) {
  instruction in = instruction_on(queue, op::dma, io);
  in.partitions = static_cast<std::uint32_t>(rows);
  in.free = static_cast<std::uint32_t>(bytes);
  in.aux = static_cast<std::uint32_t>(chunk);
  return in;
}

/// Engine-independent tallies a workload states for the roofline.
struct workload_totals {
  double flops = 0;                  ///< useful floating-point operations
  double min_hbm_bytes = 0;          ///< bytes any implementation must move to or from HBM
  dtype compute_type = dtype::bf16;  ///< the matmul input type (sets the peak)
};

class program {
 public:
  /// Adds a buffer; returns its id.
  buffer_id add_buffer(buffer b);
  /// Adds a label for instructions ("load A"); returns its index. Labels are
  /// deduplicated by text.
  std::uint16_t add_tag(std::string_view text);

  /// Appends `in` with dependencies `deps` (ids of earlier instructions; ids
  /// equal to `none` are skipped). Returns its id. Inline: workloads add
  /// thousands per config.
  instruction_id add(instruction in, std::initializer_list<instruction_id> deps = {}) {
    return append(in, deps.begin(), deps.end());
  }
  instruction_id add(instruction in, const std::vector<instruction_id>& deps) {
    return append(in, deps.data(), deps.data() + deps.size());
  }
  static constexpr instruction_id none = 0xFFFF'FFFFu;

  [[nodiscard]] const std::vector<instruction>& instructions() const noexcept {
    return instructions_;
  }
  /// The instruction `id`, to extend an aggregate (`count`) while lowering.
  [[nodiscard]] instruction& at(instruction_id id) { return instructions_.at(id); }
  [[nodiscard]] const std::vector<instruction_id>& deps() const noexcept { return deps_; }
  [[nodiscard]] const std::vector<buffer>& buffers() const noexcept { return buffers_; }
  [[nodiscard]] const std::vector<std::string>& tags() const noexcept { return tags_; }
  /// Marks instruction `id` as a core barrier (nisa.core_barrier): on a
  /// logical core of several physical cores, no core passes it until every
  /// core has reached its own (sim_backend times the wait: wait_at_barrier).
  void barrier(instruction_id id) { barriers_.push_back(id); }
  /// The core barriers, in the order marked.
  [[nodiscard]] const std::vector<instruction_id>& barriers() const noexcept { return barriers_; }
  [[nodiscard]] std::size_t size() const noexcept { return instructions_.size(); }
  /// Instructions counted with their aggregation (`count`).
  [[nodiscard]] std::uint64_t issued_count() const noexcept;

  workload_totals totals;

  /// Reserves room for about n instructions (avoids regrowth while lowering).
  void reserve(std::size_t n);
  void clear();

 private:
  instruction_id append(instruction in, const instruction_id* first, const instruction_id* last) {
    const auto id = static_cast<instruction_id>(instructions_.size());
    in.dep_begin = static_cast<std::uint32_t>(deps_.size());
    for (; first != last; ++first)
      if (*first != none) {
        if (*first >= id) dependency_not_earlier();
        deps_.push_back(*first);
      }
    in.dep_end = static_cast<std::uint32_t>(deps_.size());
    instructions_.push_back(in);
    return id;
  }
  [[noreturn]] static void dependency_not_earlier();

  std::vector<instruction> instructions_;
  std::vector<instruction_id> deps_;
  std::vector<buffer> buffers_;
  std::vector<std::string> tags_;
  std::vector<instruction_id> barriers_;
};

}  // namespace tessel::sim
