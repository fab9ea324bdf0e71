// nki.hpp: what every workload's NKI emitter shares (docs/nki.md): a Python
// text writer with indentation, the emission context (machine, header
// lines, the deliberate fault tests ask for), and the names of dtypes and
// engines in the public NKI API. Internal to the simulator.
#pragma once

#include "../machine.hpp"
#include "../program.hpp"

#include <fmt/format.h>

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tessel::sim::nki {

/// A deliberately broken emission (nki_options::fault), for the tests.
enum class fault : std::uint8_t {
  none,
  drop_tail,          ///< the outermost tile loop stops one iteration early
  skip_accumulation,  ///< the last contraction step of each output is not accumulated
  drop_collective,    ///< the last collective that joins the ranks is not called (ep > 1)
};

/// Python source with four-space indentation.
class writer {
 public:
  /// One line at the current indentation ("" writes an empty line).
  void line(std::string_view text = {}) {
    if (!text.empty()) out_.append(static_cast<std::size_t>(indent_) * 4, ' ').append(text);
    out_ += '\n';
  }
  template <class... A>
  void line(fmt::format_string<A...> f, A&&... a) {
    line(std::string_view(fmt::format(f, std::forward<A>(a)...)));
  }
  /// A line that opens a block ("for m in ...:"); the next lines are indented.
  template <class... A>
  void open(fmt::format_string<A...> f, A&&... a) {
    line(std::string_view(fmt::format(f, std::forward<A>(a)...)));
    ++indent_;
  }
  void close(int blocks = 1) { indent_ -= blocks; }
  [[nodiscard]] const std::string& text() const { return out_; }

 private:
  std::string out_;
  int indent_ = 0;
};

struct kernel_file;

/// What an emitter is given besides its plan.
struct context {
  const machine& m;
  fault injected = fault::none;
  std::vector<std::string> header;  ///< comment lines: space, config, target, version
  std::string structure;            ///< the STRUCTURE block of the timed program (to_python), or ""
  /// >= 0: the plan is program `program`'s share of an SPMD kernel (docs/nki.md,
  /// "Two physical cores"), and open_kernel() writes its function, not the kernel
  int program = -1;
  /// When set, assemble() stores the file here and returns "" (workload::emit_nki
  /// gathers the whole problem's file and each program's for assemble_spmd)
  kernel_file* capture = nullptr;
};

/// What a program does, counted the way tests/nki/nki_interp.py counts an
/// emitted kernel (docs/nki.md, "Structure"): the two must be equal.
struct structure {
  /// matmul instructions by (contraction, stationary free, moving free)
  std::map<std::array<std::uint32_t, 3>, std::uint64_t> matmuls;
  /// TensorE transposes by the input's (partitions, free)
  std::map<std::array<std::uint32_t, 2>, std::uint64_t> transposes;
  struct transfers {
    std::uint64_t transfers = 0, bytes = 0;
  };
  std::map<std::string, transfers> dma;          ///< by direction: "hbm->sbuf", "sbuf->hbm", ...
  int psum_banks = 0;                            ///< PSUM banks written (one buffer per bank)
  std::map<std::string, std::uint64_t> engines;  ///< instructions: "tensor", "vector", ...
  /// a rank's collectives by NKI call ("all_gather"): calls and the bytes their
  /// destinations hold (ranks.hpp; empty for a one-rank kernel)
  std::map<std::string, transfers> collectives;
};

/// The structure of a lowered program. PSUM is counted by the buffers
/// instructions write, each one bank (emit::psum_banks).
[[nodiscard]] structure structure_of(const program& p);
/// The STRUCTURE block of an emitted file: a comment and a Python dict.
[[nodiscard]] std::string to_python(const structure& s);

/// The structures of an SPMD kernel's programs, one per program id.
[[nodiscard]] std::string to_python(const std::vector<structure>& programs);

/// One constant of the kernel: NAME = value  # meaning
struct constant {
  std::string name;
  std::string value;
  std::string meaning;
};

/// An HBM tensor of the kernel's signature (kernel_file::inputs, outputs).
struct hbm_tensor {
  hbm_tensor(std::string n, int r, int axis, std::string alloc, std::string u = {})
      : name(std::move(n)),
        rank(r),
        split_axis(axis),
        allocation(std::move(alloc)),
        unit(std::move(u)) {}
  std::string name;  ///< "A"
  int rank = 2;      ///< its axes
  int split_axis =
      -1;  ///< the axis the core split cuts (cores.cpp); -1: read whole by every program
  std::string allocation;  ///< an output's nl.ndarray(...) in shared HBM
  /// Elements of the split axis per unit of the split dimension ("D": a
  /// head's rows of stacked heads), "" for one.
  std::string unit;
};

/// The parts of an emitted file; assemble() puts them together.
struct kernel_file {
  std::string workload;             ///< "matmul"
  std::string summary;              ///< what it computes, one line
  std::vector<std::string> notes;   ///< where the kernel differs from the simulated plan
  std::vector<constant> constants;  ///< the config values and derived sizes
  std::string signature;            ///< INPUTS / OUTPUTS / TOLERANCE lines
  std::string kernel;               ///< the @nki.jit function
  std::string reference;            ///< the numpy reference function
  /// The kernel's HBM arguments and results, in order. An emitter that fills
  /// them and opens its kernel with open_kernel() is emitted for a two-core
  /// logical NeuronCore as an SPMD kernel (assemble_spmd); one that leaves them
  /// empty is emitted as one instance running the whole problem.
  std::vector<hbm_tensor> inputs, outputs;
  /// A program of an SPMD kernel that takes its share itself rather than
  /// through views cut on the split dimension (moe: its cores' group tiles
  /// and tokens): what it runs, for its comment; "" for the others.
  std::string share;

  /// Notes that a config's `dma_queues` (> 1) has no NKI counterpart: the
  /// compiler assigns the queues.
  void note_dma_queues(int queues);
};

/// The whole file: header comment, imports, constants, kernel, reference
/// (or, with c.capture, "" after storing `f` there).
[[nodiscard]] std::string assemble(const kernel_file& f, const context& c);

/// Writes the opening of f's kernel: `@nki.jit def W_kernel(inputs):` and
/// the outputs' allocations, or, for program p of an SPMD kernel
/// (c.program), `def W_program_p(inputs, outputs):`, which writes its share
/// of the outputs through views the kernel hands it.
void open_kernel(writer& w, const kernel_file& f, const context& c);

/// How the core split cuts the problem: the split dimension (a constant of
/// the whole file) and the share of each program, in order.
struct spmd_split {
  std::string dimension;             ///< "M", "rows"
  std::vector<std::int64_t> shares;  ///< sizes, summing to the dimension
};

/// An SPMD kernel for a logical NeuronCore of c.m.cores physical cores
/// (docs/nki.md, "Two physical cores"): the whole problem's constants,
/// signature and reference from `whole`; one function per program from
/// `programs` (each written from its share's plan, its constants that differ
/// from the whole's held as locals); a kernel launched as W_kernel[LNC](...)
/// that gives program p its share by nl.program_id(0); STRUCTURE per program.
[[nodiscard]] std::string assemble_spmd(const kernel_file& whole,
                                        const std::vector<kernel_file>& programs,
                                        const spmd_split& split,
                                        const std::vector<structure>& structures, const context& c);

/// "nl.bfloat16" / "nl.float32" / "nl.float8_e4m3" / "nl.float16".
[[nodiscard]] std::string nl_dtype(dtype t);
/// The dtype's name in INPUTS/OUTPUTS ("bfloat16").
[[nodiscard]] std::string dtype_name(dtype t);
/// "nisa.engine.vector" / "nisa.engine.scalar" / "nisa.engine.gpsimd".
[[nodiscard]] std::string engine(engine_id e);
/// "vector" / "scalar" / "gpsimd".
[[nodiscard]] std::string engine_word(engine_id e);
/// The gate's default tolerance for an output of type t (docs/gate.md): 4
/// units in the last place, at least 2^-12.
[[nodiscard]] double tolerance(dtype t);
/// A double as Python source that reads back exactly ("0.015625", "1e-06").
[[nodiscard]] std::string py_float(double v);

}  // namespace tessel::sim::nki
