// roofline.cpp: machine peaks from a target's constants, and the host's
// measured once (roofline.hpp).
#include <tessel/roofline.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <thread>
#include <vector>

namespace tessel {
namespace {

/// The margin every host figure is raised by: the probe runs for
/// milliseconds on a machine that may be busy or not yet at full clock.
constexpr double host_margin = 1.5;
/// Main memory's margin: a streaming read measured beside other work varies
/// by 2-3x from one run to the next on a loaded machine.
constexpr double memory_margin = 4;

/// Seconds `work` takes, the best of `trials` runs.
template <class F>
double best_seconds(int trials, F&& work) {
  double best = 1e300;
  for (int t = 0; t < trials; ++t) {
    const auto start = std::chrono::steady_clock::now();
    work();
    best = std::min(
        best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  return best;
}

/// Cycles per second of one core: a chain of dependent integer additions
/// (one cycle of latency each on every current core), eight per iteration
/// so the loop's own work runs beside it.
double measured_clock_hz() {
#if defined(__GNUC__)
  constexpr std::uint64_t iterations = 1 << 16;
  const auto chain = [] {
    std::uint64_t x = 0;
    for (std::uint64_t i = 0; i < iterations; ++i) {
      for (int a = 0; a < 8; ++a) {
        x += 1;
        asm volatile("" : "+r"(x));  // keeps each addition, in order
      }
    }
    return x;
  };
  (void)best_seconds(20, chain);  // the core reaches its clock first
  const double seconds = best_seconds(20, chain);
  const double hz = 8.0 * static_cast<double>(iterations) / seconds;
  return std::clamp(hz, 0.5e9, 6e9);
#else
  return 6e9;
#endif
}

/// FP32 lanes of the widest vector instructions the CPU runs, and whether
/// it fuses multiply-adds.
struct vector_unit {
  int lanes = 4;
  bool fma = true;
};

vector_unit detect_vector_unit() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) return {16, true};
  if (__builtin_cpu_supports("avx2") || __builtin_cpu_supports("avx"))
    return {8, __builtin_cpu_supports("fma") != 0};
  return {4, false};
#else
  return {16, true};  // unknown: as wide as the widest (SVE-512)
#endif
}

/// Bytes per second one thread reads streaming through `bytes` of memory.
double measured_stream_bytes_per_s(std::size_t bytes) {
  std::vector<std::uint64_t> buffer(bytes / sizeof(std::uint64_t), 1);
  std::uint64_t sink = 0;
  const double seconds = best_seconds(3, [&] {
    std::uint64_t sum = 0;
    for (const std::uint64_t w : buffer) sum += w;
    sink += sum;
  });
  asm volatile("" : : "r"(sink));
  return static_cast<double>(buffer.size() * sizeof(std::uint64_t)) / seconds;
}

machine_peaks measure_host() {
  const target cpu = builtin_target("cpu").value_or(target{});
  const double threads = static_cast<double>(cpu.find("cores").value_or(1));
  const double l1 = static_cast<double>(cpu.find("l1d_bytes").value_or(32 << 10));
  const double l2 = static_cast<double>(cpu.find("l2_bytes").value_or(1 << 20));
  const double l3 = static_cast<double>(cpu.find("l3_bytes").value_or(8 << 20));
  const double clock = measured_clock_hz();
  const vector_unit v = detect_vector_unit();
  const double flops_per_cycle = 2.0 * v.lanes * (v.fma ? 2 : 1);  // two pipes
  const double load_bytes_per_cycle = 2.0 * v.lanes * 4;           // two loads per cycle
  const auto stream =
      static_cast<std::size_t>(std::clamp(2 * l3, 16.0 * (1 << 20), 32.0 * (1 << 20)));
  machine_peaks p;
  p.flops_per_s = host_margin * threads * clock * flops_per_cycle;
  p.cache_bytes_per_s = host_margin * threads * clock * load_bytes_per_cycle;
  p.cache_bytes = l3 + threads * (l1 + l2);
  p.memory_bytes_per_s = memory_margin * threads * measured_stream_bytes_per_s(stream);
  p.source = fmt::format(
      "host probe: {:.0f} threads at {:.2f} GHz, {} fp32 lanes{}, {:.1f} GB/s streamed per thread",
      threads, clock * 1e-9, v.lanes, v.fma ? " with FMA" : "",
      p.memory_bytes_per_s / memory_margin / threads * 1e-9);
  return p;
}

}  // namespace

double machine_peaks::floor_s(double flops, double bytes) const noexcept {
  double floor = 0;
  if (flops_per_s > 0 && flops > 0) floor = std::max(floor, flops / flops_per_s);
  if (cache_bytes_per_s > 0 && bytes > 0) floor = std::max(floor, bytes / cache_bytes_per_s);
  if (memory_bytes_per_s > 0 && bytes > cache_bytes)
    floor = std::max(floor, (bytes - cache_bytes) / memory_bytes_per_s);
  return floor;
}

const machine_peaks& host_peaks() {
  static const machine_peaks measured = measure_host();  // thread-safe initialization
  return measured;
}

std::optional<machine_peaks> peaks_of(const target& t) {
  const auto gflops = t.find("bf16_peak_gflops");
  const auto hbm = t.find("hbm_bytes_per_us");
  if (gflops && hbm && *gflops > 0 && *hbm > 0) {
    machine_peaks p;
    const double fp8 =
        static_cast<double>(std::max<std::int64_t>(t.find("fp8_matmul_speedup").value_or(1), 1));
    // a topology target (docs/topology.md) runs on all its ranks and chips at once
    const auto ranks = static_cast<double>(std::max<std::int64_t>(t.find("ranks").value_or(1), 1));
    const auto chips = static_cast<double>(std::max<std::int64_t>(t.find("chips").value_or(1), 1));
    p.flops_per_s = static_cast<double>(*gflops) * 1e9 * fp8 * ranks;
    p.memory_bytes_per_s = static_cast<double>(*hbm) * 1e6 * chips;
    p.source = fmt::format("{} constants: {:.0f} TFLOP/s, {:.0f} GB/s HBM", t.name,
                           p.flops_per_s * 1e-12, p.memory_bytes_per_s * 1e-9);
    return p;
  }
  if (t.name == "cpu" || t.base == "cpu") return host_peaks();
  return std::nullopt;
}

}  // namespace tessel
