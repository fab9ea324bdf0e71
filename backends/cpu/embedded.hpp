// embedded.hpp: the files the cpu backend writes out and compiles at run time
// (the loader, the kernel header, the racing rule, the built-in kernels),
// embedded in the library by embed.cmake so an installed tessel needs no
// source tree. Private to the cpu backend.
#pragma once

#include <string_view>
#include <vector>

namespace tessel::detail {

struct cpu_embedded {
  std::string_view name;  ///< "tessel/cpu_kernel.hpp", "loader.cpp", "kernels/gemm.cpp"
  std::string_view text;
};

/// Every embedded file, in the order embed.cmake was given them.
[[nodiscard]] const std::vector<cpu_embedded>& cpu_embedded_files();

/// The text of `name`; throws tessel::error when none is embedded (a build defect).
[[nodiscard]] std::string_view cpu_embedded_text(std::string_view name);

}  // namespace tessel::detail
