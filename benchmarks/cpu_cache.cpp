// bench_cpu_cache: what a hit of the cpu backend's compile cache costs
// (backends/cpu/toolchain.cpp). Side by side, interleaved in rounds on this
// thread's CPU clock: the lookup before manifests (the key's hash and one
// stat of the build, as toolchain::build did), a hit that re-hashes the
// user's and tessel's headers its manifest lists (-MMD, the default), and a
// hit that re-hashes the system headers too (-MD, hash_system_headers).
// Prints the per-lookup medians over rounds and their ratios to before.
#include "common.hpp"

#include "cpu/kernel_unit.hpp"
#include "cpu/toolchain.hpp"

#include <tessel/dsl.hpp>
#include <tessel/files.hpp>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <array>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include <unistd.h>

namespace {

namespace fs = std::filesystem;
using namespace tessel;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 == 1 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"bench_cpu_cache: the cost of a cpu compile-cache hit, before and after manifests"};
  int rounds = 30;
  int lookups = 200;
  std::string kernel = std::string(TESSEL_SOURCE_DIR) + "/tests/cpu/kernels/kernels.cpp:spin";
  app.add_option("--rounds", rounds, "interleaved rounds (the median is over them)");
  app.add_option("--lookups", lookups, "lookups of each kind per round");
  app.add_option("--kernel", kernel, "FILE.cpp:FUNCTION, the kernel built and looked up");
  CLI11_PARSE(app, argc, argv);

  const auto colon = kernel.rfind(':');
  const auto file = fs::absolute(kernel.substr(0, colon));
  const auto kernel_text = read_file(file);
  const auto s = parse_space("space b { const N = 64 param us : {1} }");
  const auto c = s.from_json(R"({"us": 1})");
  const auto unit = detail::kernel_unit(s, &c, file, kernel.substr(colon + 1));
  const auto cache =
      fs::temp_directory_path() / fmt::format("tessel-bench-cpu-cache-{}", ::getpid());

  const auto tools = [&](bool system_headers) {
    detail::toolchain_options o;
    o.flags = {"-O1"};
    o.cache_dir = cache;
    o.hash_system_headers = system_headers;
    return detail::toolchain(o);
  };
  const auto mmd = tools(false);
  const auto md = tools(true);
  for (const auto* t : {&mmd, &md}) {
    const auto first = t->build(unit, {kernel_text}, {});
    if (first.status != status::ok) {
      fmt::print(stderr, "the kernel does not build: {}\n", first.message);
      return 1;
    }
  }
  // What each manifest lists: files and bytes a hit reads and hashes.
  std::vector<std::pair<std::size_t, std::size_t>> listed;
  for (const auto& e : fs::directory_iterator(cache / "build")) {
    if (e.path().extension() != ".manifest") continue;
    std::istringstream lines(read_file(e.path()));
    std::string line;
    std::pair<std::size_t, std::size_t> n{0, 0};
    // After the magic, the outcome and its bytes, "HASH SIZE PATH" per file.
    for (int i = 0; std::getline(lines, line); ++i) {
      std::string hash;
      std::size_t size = 0;
      if (i >= 3 && std::istringstream(line) >> hash >> size) n = {n.first + 1, n.second + size};
    }
    listed.push_back(n);
  }
  std::sort(listed.begin(), listed.end());

  // Before: the key's hash over the text and what it includes, one stat.
  const auto key_base = mmd.identity() + "\n-O1\n\n" + detail::host_cpu_model() + "\n";
  const auto before_library = cache / "build" / "before.so";
  std::ofstream(before_library) << "x";
  std::size_t sink = 0;
  const std::array<std::function<void()>, 3> kinds{
      [&] {
        std::string keyed = key_base + unit;
        keyed += "\n" + kernel_text;
        sink += detail::content_key(keyed).size() + (fs::exists(before_library) ? 1 : 0);
      },
      [&] { sink += mmd.build(unit, {kernel_text}, {}).cached ? 1 : 0; },
      [&] { sink += md.build(unit, {kernel_text}, {}).cached ? 1 : 0; }};
  std::array<std::vector<double>, 3> per_lookup;
  for (int r = 0; r < rounds; ++r)
    for (std::size_t k = 0; k < kinds.size(); ++k) {
      const auto& run = kinds[(k + static_cast<std::size_t>(r)) % kinds.size()];
      const auto start = bench::thread_cpu_s();
      for (int i = 0; i < lookups; ++i) run();
      per_lookup[(k + static_cast<std::size_t>(r)) % kinds.size()].push_back(
          (bench::thread_cpu_s() - start) / lookups);
    }
  if (sink != static_cast<std::size_t>(rounds) * static_cast<std::size_t>(lookups) * 35)
    fmt::print(stderr, "warning: a lookup missed\n");

  fmt::print("kernel {} ({} rounds x {} lookups each, interleaved; thread CPU time)\n", kernel,
             rounds, lookups);
  const std::array<std::string, 3> names{"before: key hash + stat", "after, -MMD (default)",
                                         "after, -MD (system headers)"};
  for (std::size_t k = 0; k < kinds.size(); ++k)
    fmt::print("  {:<30} {:>9.1f} us per hit  x{:.1f}\n", names[k], median(per_lookup[k]) * 1e6,
               median(per_lookup[k]) / median(per_lookup[0]));
  for (const auto& [files, bytes] : listed)
    fmt::print("  a manifest lists {} files, {:.1f} KiB\n", files,
               static_cast<double>(bytes) / 1024);
  std::error_code ec;
  fs::remove_all(cache, ec);
  return 0;
}
