// tessel/cpu_kernel.hpp: what a kernel of the `cpu` backend sees
// (docs/cpu.md). A kernel is a C++ function
//
//     void my_kernel(const tessel::cpu::kernel_args& args);
//
// that reads args.in(i) and writes the whole of args.out(o). tessel compiles
// it once per config with the config's knobs as macros (TESSEL_<NAME>),
// loads it in a process of its own, and times it there.
//
// Self-contained (the standard library only) on purpose: tessel writes this
// file beside every kernel it compiles, so a kernel builds with no tessel
// installed; the loader process that calls kernels is built from it too.
#pragma once

#include <cstdint>
#include <cstring>

namespace tessel::cpu {

/// How a tensor's elements are stored (the values of tessel::element_type
/// the cpu backend supports).
enum class dtype : std::int32_t {
  fp32 = 0,   ///< float
  bf16 = 1,   ///< tessel::cpu::bf16: the top 16 bits of a float
  int32 = 4,  ///< std::int32_t
};

/// A bfloat16 value: the upper half of an IEEE float's bits.
struct bf16 {
  std::uint16_t bits;
};

/// The float a bf16 stands for (exact).
inline float to_float(bf16 v) noexcept {
  const std::uint32_t u = static_cast<std::uint32_t>(v.bits) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

/// `f` rounded to the nearest bf16, ties to even (NaN stays NaN).
inline bf16 to_bf16(float f) noexcept {
  std::uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  if ((u & 0x7fffffffu) > 0x7f800000u) return bf16{static_cast<std::uint16_t>((u >> 16) | 0x40)};
  u += 0x7fffu + ((u >> 16) & 1u);
  return bf16{static_cast<std::uint16_t>(u >> 16)};
}

/// One input or output: row-major, its data aligned to 64 bytes.
struct tensor {
  void* data;
  const std::int64_t* shape;  ///< outermost first
  std::int32_t rank;
  dtype type;

  [[nodiscard]] std::int64_t dim(int d) const noexcept { return shape[d]; }
  [[nodiscard]] std::int64_t elements() const noexcept {
    std::int64_t n = 1;
    for (std::int32_t d = 0; d < rank; ++d) n *= shape[d];
    return n;
  }
  /// The data as T (float for fp32, bf16 for bf16, std::int32_t for int32).
  template <class T>
  [[nodiscard]] T* as() const noexcept {
    return static_cast<T*>(data);
  }
};

/// A space constant as the kernel sees it at run time (integers only:
/// symbol and boolean constants are macros, docs/cpu.md).
struct constant {
  const char* name;
  std::int64_t value;
};

/// Everything one call gets. Inputs must not be written; every element of
/// every output must be (the loader fills outputs with NaN before each call).
struct kernel_args {
  const tensor* inputs;
  std::int32_t input_count;
  const tensor* outputs;
  std::int32_t output_count;
  const constant* constants;  ///< the space's integer constants (with --set / set.NAME applied)
  std::int32_t constant_count;

  [[nodiscard]] const tensor& in(int i) const noexcept { return inputs[i]; }
  [[nodiscard]] const tensor& out(int o) const noexcept { return outputs[o]; }
  /// The integer constant `name`, or `fallback` when the space has none.
  [[nodiscard]] std::int64_t constant_or(const char* name, std::int64_t fallback) const noexcept {
    for (std::int32_t i = 0; i < constant_count; ++i)
      if (std::strcmp(constants[i].name, name) == 0) return constants[i].value;
    return fallback;
  }
};

/// The entry point tessel generates around a kernel (C linkage, so the
/// loader finds it with dlsym): 0 on success, else a message in `message`
/// (at most `capacity` bytes with the NUL).
using entry_function = int (*)(const kernel_args* args, char* message, int capacity);
inline constexpr const char* entry_symbol = "tessel_cpu_entry";

}  // namespace tessel::cpu
