// builtins.hpp: the cpu backend's built-in kernels (kernels/*.cpp, embedded):
// their tensors as functions of the space's constants, their fp64
// references (tessel's own code: trusted, so computed in-process, at the
// gate's probes only) and their flop counts. Private to the cpu backend.
#pragma once

#include <tessel/gate.hpp>

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace tessel::detail {

/// The space's constants as a built-in kernel reads them.
struct kernel_constants {
  std::string kernel;                                         ///< for messages
  std::map<std::string, std::int64_t, std::less<>> integers;  ///< with overrides applied
  std::map<std::string, std::string, std::less<>> symbols;

  /// The integer constant `name`; throws tessel::error naming the kernel and
  /// the constant the space must declare.
  [[nodiscard]] std::int64_t at(std::string_view name) const;
  /// The symbol constant `name`, or `fallback`.
  [[nodiscard]] std::string symbol_or(std::string_view name, std::string_view fallback) const;
};

/// Every input, materialized (row-major values, one vector per input).
using input_values = std::vector<std::vector<double>>;

struct builtin_kernel {
  std::string_view name;      ///< the space's `const kernel = NAME`
  std::string_view file;      ///< the embedded source ("kernels/gemm.cpp")
  std::string_view function;  ///< the function it defines
  std::vector<tensor_spec> (*inputs)(const kernel_constants&);
  std::vector<tensor_spec> (*outputs)(const kernel_constants&);
  /// The outputs at `where`, in fp64 (throws like kernel_constants::at).
  probe_values (*reference)(const input_values& in, const kernel_constants& k,
                            const probe_points& where);
  /// Floating-point operations of one call (0: not a compute kernel).
  double (*flops)(const kernel_constants&);
};

/// The kernel `name`, or nullptr.
[[nodiscard]] const builtin_kernel* find_builtin(std::string_view name);
/// Every built-in kernel's name, sorted.
[[nodiscard]] std::vector<std::string> builtin_names();

}  // namespace tessel::detail
