// cache_fixtures.hpp: what the compile-cache tests share (cache_test.cpp,
// cache_poison_test.cpp): a kernel y = SCALE x whose SCALE comes from a
// header beside it, its options, and readers of the cache's files.
#pragma once

#include <tessel/cpu.hpp>
#include <tessel/dsl.hpp>
#include <tessel/files.hpp>

#include "test_kernel.hpp"

#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

namespace tessel::testing {

inline const std::string kernels_dir = std::string(TESSEL_SOURCE_DIR) + "/tests/cpu/kernels";

inline void write(const std::filesystem::path& path, std::string_view text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
}

/// y = SCALE x, SCALE from scale.hpp beside the kernel; the reference is 2 x.
inline constexpr std::string_view scaled_kernel = R"(#include <tessel/cpu_kernel.hpp>
#include "scale.hpp"
#include <cstdint>
void scaled(const tessel::cpu::kernel_args& a) {
  const float* x = a.in(0).as<float>();
  float* y = a.out(0).as<float>();
  for (std::int64_t i = 0; i < a.in(0).elements(); ++i) y[i] = TESSEL_TEST_SCALE * x[i];
}
)";

inline space one_config_space() { return parse_space("space s { const N = 4096 param us : {1} }"); }

inline cpu_options scaled_options(const std::filesystem::path& folder) {
  auto o = kernel_options((folder / "scaled.cpp").string() + ":scaled",
                          kernels_dir + "/reference.cpp:twice_reference");
  o.gate_settings.secret = 31;
  o.gate_settings.suite = {distribution::normal, distribution::uniform};
  return o;
}

/// The file in `dir` whose name starts with `prefix` and ends with `suffix`.
inline std::filesystem::path only_file(const std::filesystem::path& dir, std::string_view prefix,
                                       std::string_view suffix) {
  std::filesystem::path found;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    const auto name = e.path().filename().string();
    if (name.starts_with(prefix) && name.ends_with(suffix)) {
      CHECK_MESSAGE(found.empty(), "two files " << prefix << "*" << suffix);
      found = e.path();
    }
  }
  REQUIRE_MESSAGE(!found.empty(), "no file " << prefix << "*" << suffix << " in " << dir);
  return found;
}

/// The outcome a manifest names (its second line: "KIND NAME ..."), beside it.
inline std::filesystem::path named_by(const std::filesystem::path& manifest) {
  const auto text = read_file(manifest);
  const auto line = text.find('\n') + 1;
  const auto name = text.find(' ', line) + 1;
  REQUIRE(line > 0);
  REQUIRE(name > line);
  return manifest.parent_path() / text.substr(name, text.find_first_of(" \n", name) - name);
}

}  // namespace tessel::testing
