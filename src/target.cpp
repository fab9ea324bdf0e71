// The built-in targets: trn1, trn2 (constants of docs/neuroncore.md,
// each with its source in docs/targets.md) and cpu (the host, detected once).
#include <tessel/target.hpp>

#include <cctype>
#include <charconv>
#include <cstdint>
#include <fstream>
#include <string>
#include <string_view>
#include <thread>
#include <utility>

#if defined(__unix__) || defined(__APPLE__)
#include <unistd.h>
#endif

namespace tessel {
namespace {

constexpr std::int64_t kib = 1024;
constexpr std::int64_t mib = 1024 * kib;
constexpr std::int64_t gib = 1024 * mib;

// --- Trainium ----------------------------------------------------------------

/// What NeuronCore-v2 (trn1) and NeuronCore-v3 (trn2) share. Sources:
/// docs/targets.md, one row per constant.
void add_neuroncore_common(target& t) {
  auto& c = t.constants;
  c["partitions"] = 128;
  c["psum_banks"] = 8;
  c["psum_bank_bytes"] = 2 * kib;            // per partition: 512 fp32
  c["psum_bytes_per_partition"] = 16 * kib;  // 8 banks x 2 KiB
  c["psum_total_bytes"] = 2 * mib;           // 128 partitions x 16 KiB
  c["matmul_max_contraction"] = 128;         // partition dim of both operands
  c["matmul_max_stationary_free"] = 128;
  c["matmul_max_moving_free"] = 512;
  c["tensor_min_instruction_cycles"] = 64;  // multiplies issue every max(N, 64)
  c["fp32_matmul_cost_factor"] = 4;
  c["vector_min_instruction_cycles"] = 64;
  c["vector_static_overhead_cycles"] = 60;         // per SBUF/PSUM access
  c["vector_dependent_instruction_cycles"] = 100;  // tiny dependent instructions
  c["gpsimd_start_cycles"] = 150;
  c["dma_engines"] = 16;
  c["dma_partitions_per_engine"] = 8;
  c["dma_fixed_latency_ns"] = 1300;
  c["dma_overhead_bound_bytes_per_partition"] = 256;  // below: overhead-bound
  c["dma_min_bytes_per_partition"] = 2 * kib;         // the minimum to design for
  c["dma_saturating_bytes_per_partition"] = 4 * kib;
  c["lnc"] = 1;  // physical cores per logical core (trn2_lnc2: 2)
  // Topology (docs/targets.md, "Topology"): a one-core target spans one rank.
  c["chips"] = 1;
  c["ranks_per_chip"] = 1;  // the cores a collective spans on each chip
  c["torus_x"] = 1;         // chips in the chip-to-chip torus, per dimension
  c["torus_y"] = 1;
}

/// Constants derived from others of the same target, so they cannot disagree.
void add_neuroncore_derived(target& t) {
  auto& c = t.constants;
  c["sbuf_total_bytes"] = c["partitions"] * c["sbuf_bytes_per_partition"];
  c["dma_bytes_per_us"] = c["dma_engines"] * c["dma_bytes_per_us_per_engine"];
  // 128 x 128 MACs, 2 FLOP each, per TensorE cycle (neuroncore.md, "derived").
  c["bf16_peak_gflops"] = std::int64_t{128} * 128 * 2 * c["tensor_clock_mhz"] / 1000;
  c["cores"] = c["cores_per_chip"];
  c["memory_bytes"] = c["hbm_bytes"];
  c["ranks"] = c["chips"] * c["ranks_per_chip"];
}

target make_trn1() {
  target t{.name = "trn1", .base = "", .constants = {}};
  add_neuroncore_common(t);
  auto& c = t.constants;
  c["cores_per_chip"] = 2;
  c["sbuf_bytes_per_partition"] = 180'224;  // usable
  c["sbuf_physical_bytes_per_partition"] = 192 * kib;
  c["tensor_clock_mhz"] = 2800;
  c["vector_clock_mhz"] = 1120;
  c["scalar_clock_mhz"] = 1400;
  c["gpsimd_clock_mhz"] = 1400;
  c["fp8_matmul_speedup"] = 1;
  c["matmul_fp8_max_contraction"] = 128;
  c["vector_perf_mode_max_speedup"] = 1;
  c["tensor_warmup_ns"] = 0;  // no ramp documented on v2
  c["tensor_warmup_start_percent"] = 100;
  c["vector_scalar_share_psum"] = 1;
  c["vector_gpsimd_share_sbuf_port"] = 1;
  c["dma_bytes_per_us_per_engine"] = 17'000;  // 17 B/ns
  c["chip_links"] = 4;                        // NeuronLink-v2 per chip
  c["chip_link_bytes_per_us"] = 0;            // not published per link: no multi-chip trn1 target
  c["chip_link_latency_ns"] = 0;
  c["hbm_bytes"] = 32 * gib;
  c["hbm_bytes_per_us"] = 820'000;  // 820 GB/s per chip
  add_neuroncore_derived(t);
  return t;
}

target make_trn2() {
  target t{.name = "trn2", .base = "", .constants = {}};
  add_neuroncore_common(t);
  auto& c = t.constants;
  c["cores_per_chip"] = 8;                  // physical; logical setting 2 pairs them
  c["sbuf_bytes_per_partition"] = 212'984;  // usable
  c["sbuf_physical_bytes_per_partition"] = 224 * kib;
  c["tensor_clock_mhz"] = 2400;
  c["vector_clock_mhz"] = 960;
  c["scalar_clock_mhz"] = 1200;
  c["gpsimd_clock_mhz"] = 1200;
  c["fp8_matmul_speedup"] = 2;  // "double row" mode
  c["matmul_fp8_max_contraction"] = 256;
  c["vector_perf_mode_max_speedup"] = 4;
  c["tensor_warmup_ns"] = 3000;
  c["tensor_warmup_start_percent"] = 50;
  c["vector_scalar_share_psum"] = 0;
  c["vector_gpsimd_share_sbuf_port"] = 0;
  c["dma_bytes_per_us_per_engine"] = 23'000;  // 23 B/ns (uncertain)
  c["chip_links"] = 4;                        // NeuronLink-v3 per chip
  c["chip_link_bytes_per_us"] = 320'000;      // 1.28 TB/s per chip over 4 links (uncertain)
  c["chip_link_latency_ns"] = 2'000;          // per hop: an assumption, no published figure
  c["hbm_bytes"] = 96 * gib;
  c["hbm_bytes_per_us"] = 2'900'000;  // 2.9 TB/s per chip (uncertain)
  add_neuroncore_derived(t);
  return t;
}

/// `from` renamed `name`, with `from` as its base: the start of a target
/// made from another.
target derived(target from, std::string name) {
  from.base = std::exchange(from.name, std::move(name));
  return from;
}

/// trn2 with the logical NeuronCore setting 2 (LNC=2): two physical
/// NeuronCore-v3 fused into one logical core that shares their HBM. Per-core
/// figures (partitions, SBUF and PSUM per partition, clocks, DMA engines of a
/// core) stay as trn2's; what a logical core has in all doubles: its total
/// SBUF and PSUM, its peak FLOP/s and DMA bandwidth; the chip exposes 4
/// logical cores instead of 8. Source: Neuron docs, "Logical NeuronCore
/// configuration" and NKI "Using Logical NeuronCores (LNC)" (docs/targets.md).
target make_trn2_lnc2() {
  target t = derived(make_trn2(), "trn2_lnc2");
  auto& c = t.constants;
  c["lnc"] = 2;
  c["cores"] = c["cores_per_chip"] / 2;  // logical cores of the chip
  c["sbuf_total_bytes"] *= 2;
  c["psum_total_bytes"] *= 2;
  c["bf16_peak_gflops"] *= 2;
  c["dma_bytes_per_us"] *= 2;
  return t;
}

/// One Trainium2 chip as a whole: its 8 physical NeuronCore-v3 (LNC=1) as
/// 8 ranks of a collective. Each rank's work is timed on one trn2 core;
/// ranks on a chip exchange data through the shared HBM (docs/targets.md,
/// "Topology"; docs/topology.md).
target make_trn2_chip() {
  target t = derived(make_trn2(), "trn2_chip");
  auto& c = t.constants;
  c["ranks_per_chip"] = c["cores_per_chip"];
  c["ranks"] = c["chips"] * c["ranks_per_chip"];
  return t;
}

/// A trn2.48xlarge server: 16 Trainium2 chips linked by NeuronLink-v3 as a
/// 4 x 4 2D torus (Neuron docs, "Best practices for training", "Keep TP4
/// within a chip. Use NeuronLink-v3's 4 x 4 torus ..."); 128 ranks at LNC=1.
target make_trn2_server() {
  target t = derived(make_trn2_chip(), "trn2_server");
  auto& c = t.constants;
  c["torus_x"] = 4;
  c["torus_y"] = 4;
  c["chips"] = c["torus_x"] * c["torus_y"];
  c["ranks"] = c["chips"] * c["ranks_per_chip"];
  return t;
}

// --- the host ------------------------------------------------------------------

/// Fallbacks when neither sysfs nor sysconf knows: a common x86-64 / arm64 core.
constexpr std::int64_t fallback_l1d_bytes = 32 * kib;
constexpr std::int64_t fallback_l2_bytes = 1 * mib;
constexpr std::int64_t fallback_l3_bytes = 8 * mib;
constexpr std::int64_t fallback_cache_line_bytes = 64;
constexpr std::int64_t fallback_page_bytes = 4 * kib;
constexpr std::int64_t fallback_memory_bytes = 4 * gib;

/// The first line of a small text file, or "" when it cannot be read.
std::string read_line(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  if (in) std::getline(in, line);
  while (!line.empty() && std::isspace(static_cast<unsigned char>(line.back()))) line.pop_back();
  return line;
}

/// Parses sysfs sizes: "48K", "1024K", "32M", "64"; 0 when malformed.
std::int64_t parse_size(std::string_view text) {
  std::int64_t number = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), number);
  if (ec != std::errc{} || number < 0) return 0;
  std::string_view suffix(end, static_cast<std::size_t>(text.data() + text.size() - end));
  if (suffix.empty()) return number;
  if (suffix == "K") return number * kib;
  if (suffix == "M") return number * mib;
  if (suffix == "G") return number * gib;
  return 0;
}

struct host_caches {
  std::int64_t l1d = 0, l2 = 0, l3 = 0, line = 0;
};

/// Reads /sys/devices/system/cpu/cpu0/cache/index*/{level,type,size,coherency_line_size}.
host_caches read_sysfs_caches() {
  host_caches caches;
  for (int index = 0; index < 16; ++index) {
    const std::string dir =
        "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(index) + "/";
    const std::string level = read_line(dir + "level");
    if (level.empty()) continue;
    const std::string type = read_line(dir + "type");
    if (type == "Instruction") continue;
    const std::int64_t size = parse_size(read_line(dir + "size"));
    if (level == "1") caches.l1d = size;
    if (level == "2") caches.l2 = size;
    if (level == "3") caches.l3 = size;
    if (caches.line == 0) caches.line = parse_size(read_line(dir + "coherency_line_size"));
  }
  return caches;
}

/// sysconf(name) when the platform has it and knows the answer, else 0.
std::int64_t sysconf_or_zero([[maybe_unused]] int name) {
#if defined(__unix__) || defined(__APPLE__)
  const long answer = ::sysconf(name);
  return answer > 0 ? answer : 0;
#else
  return 0;
#endif
}

/// Sysfs first, then glibc's sysconf cache queries (CPUID-based), then fallbacks.
host_caches detect_caches() {
  host_caches caches = read_sysfs_caches();
#if defined(_SC_LEVEL1_DCACHE_SIZE)
  if (caches.l1d == 0) caches.l1d = sysconf_or_zero(_SC_LEVEL1_DCACHE_SIZE);
  if (caches.l2 == 0) caches.l2 = sysconf_or_zero(_SC_LEVEL2_CACHE_SIZE);
  if (caches.l3 == 0) caches.l3 = sysconf_or_zero(_SC_LEVEL3_CACHE_SIZE);
  if (caches.line == 0) caches.line = sysconf_or_zero(_SC_LEVEL1_DCACHE_LINESIZE);
#endif
  if (caches.l1d == 0) caches.l1d = fallback_l1d_bytes;
  if (caches.l2 == 0) caches.l2 = fallback_l2_bytes;
  if (caches.l3 == 0) caches.l3 = fallback_l3_bytes;
  if (caches.line == 0) caches.line = fallback_cache_line_bytes;
  return caches;
}

std::int64_t detect_page_bytes() {
#if defined(_SC_PAGESIZE)
  if (const std::int64_t page = sysconf_or_zero(_SC_PAGESIZE); page > 0) return page;
#endif
  return fallback_page_bytes;
}

std::int64_t detect_memory_bytes(std::int64_t page_bytes) {
#if defined(_SC_PHYS_PAGES)
  if (const std::int64_t pages = sysconf_or_zero(_SC_PHYS_PAGES); pages > 0)
    return pages * page_bytes;
#endif
  return fallback_memory_bytes;
}

struct host_vectors {
  std::int64_t bytes = 16, registers = 16;
};

/// The widest vector registers the host's instruction set offers, and how
/// many (x86-64 in 64-bit mode: 16 XMM (SSE2, the baseline), 16 YMM with
/// AVX/AVX2, 32 ZMM with AVX-512F: Intel 64 and IA-32 Architectures SDM,
/// vol. 1, ch. 10, 14 and 15; AArch64: 32 V registers of 128 bits, Arm ARM
/// A-profile, "Advanced SIMD"). SVE's scalable width is not read.
host_vectors detect_vectors() {
#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) return {64, 32};
  if (__builtin_cpu_supports("avx")) return {32, 16};
  return {16, 16};
#elif defined(__aarch64__)
  return {16, 32};
#else
  return {};
#endif
}

target make_cpu() {
  target t{.name = "cpu", .base = "", .constants = {}};
  auto& c = t.constants;
  const unsigned threads = std::thread::hardware_concurrency();
  c["cores"] = threads > 0 ? static_cast<std::int64_t>(threads) : 1;
  const host_caches caches = detect_caches();
  c["l1d_bytes"] = caches.l1d;
  c["l2_bytes"] = caches.l2;
  c["l3_bytes"] = caches.l3;
  c["cache_line_bytes"] = caches.line;
  c["page_bytes"] = detect_page_bytes();
  c["memory_bytes"] = detect_memory_bytes(c["page_bytes"]);
  const host_vectors vectors = detect_vectors();
  c["simd_bytes"] = vectors.bytes;
  c["vector_registers"] = vectors.registers;
  return t;
}

}  // namespace

std::optional<target> builtin_target(std::string_view name) {
  if (name == "trn1") return make_trn1();
  if (name == "trn2") return make_trn2();
  if (name == "trn2_lnc2") return make_trn2_lnc2();
  if (name == "trn2_chip") return make_trn2_chip();
  if (name == "trn2_server") return make_trn2_server();
  if (name == "cpu") {
    static const target host = make_cpu();  // detected once; thread-safe init
    return host;
  }
  return std::nullopt;
}

std::vector<std::string> builtin_target_names() {
  return {"trn1", "trn2", "trn2_lnc2", "trn2_chip", "trn2_server", "cpu"};
}

}  // namespace tessel
