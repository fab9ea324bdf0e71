// kernel_unit.hpp: the translation unit compiled for one config of a cpu
// kernel: the config's knobs (and the space's symbol and boolean constants)
// as macros, the kernel's file included, and the C entry point the loader
// calls (docs/cpu.md, "Writing a kernel"). Private to the cpu backend.
#pragma once

#include <tessel/config.hpp>
#include <tessel/space.hpp>

#include <filesystem>
#include <string>
#include <string_view>

namespace tessel::detail {

/// The macro a parameter or constant is seen as: TESSEL_ and its name
/// upper-cased, other characters than letters and digits as '_'.
[[nodiscard]] std::string macro_name(std::string_view name);

/// The source of `function` in `kernel_file` built for config `c` of `s`
/// (nullptr: no config, a reference): `#define TESSEL_<NAME> value` per
/// active integer or boolean parameter (booleans 0/1), `TESSEL_<NAME>_<VALUE> 1`
/// per symbol parameter, `TESSEL_<NAME>_<ELEMENT> position` (0 = outermost)
/// per permutation element, and likewise for the space's symbol and boolean
/// constants (integer constants reach the kernel at run time, so one build
/// serves every shape).
[[nodiscard]] std::string kernel_unit(const space& s, const config* c,
                                      const std::filesystem::path& kernel_file,
                                      std::string_view function);

}  // namespace tessel::detail
