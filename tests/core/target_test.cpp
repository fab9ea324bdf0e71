// Built-in targets: the documented figures (docs/targets.md), the derived
// constants agree with their inputs, and the host target is plausible.
#include <tessel/target.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <thread>

namespace {

std::int64_t constant(const tessel::target& t, std::string_view key) {
  const auto value = t.find(key);
  INFO("target ", t.name, " constant ", std::string(key));
  REQUIRE(value.has_value());
  return *value;
}

}  // namespace

TEST_CASE("builtin_target_names lists the built-ins in a stable order") {
  const auto names = tessel::builtin_target_names();
  CHECK(names ==
        std::vector<std::string>{"trn1", "trn2", "trn2_lnc2", "trn2_chip", "trn2_server", "cpu"});
  for (const auto& name : names) {
    const auto t = tessel::builtin_target(name);
    REQUIRE(t.has_value());
    CHECK(t->name == name);
  }
}

TEST_CASE("builtin_target rejects unknown names") {
  CHECK_FALSE(tessel::builtin_target("trn3").has_value());
  CHECK_FALSE(tessel::builtin_target("").has_value());
  CHECK_FALSE(tessel::builtin_target("TRN2").has_value());
}

TEST_CASE("trn1 carries the NeuronCore-v2 figures") {
  const auto t = *tessel::builtin_target("trn1");
  CHECK(constant(t, "partitions") == 128);
  CHECK(constant(t, "sbuf_bytes_per_partition") == 180'224);
  CHECK(constant(t, "sbuf_total_bytes") == 128 * 180'224);
  CHECK(constant(t, "psum_banks") == 8);
  CHECK(constant(t, "psum_bank_bytes") == 2048);
  CHECK(constant(t, "psum_bytes_per_partition") == 16'384);
  CHECK(constant(t, "tensor_clock_mhz") == 2800);
  CHECK(constant(t, "vector_clock_mhz") == 1120);
  CHECK(constant(t, "scalar_clock_mhz") == 1400);
  CHECK(constant(t, "gpsimd_clock_mhz") == 1400);
  CHECK(constant(t, "dma_bytes_per_us_per_engine") == 17'000);
  CHECK(constant(t, "dma_bytes_per_us") == 272'000);
  CHECK(constant(t, "hbm_bytes") == 32LL << 30);
  CHECK(constant(t, "bf16_peak_gflops") == 91'750);
  CHECK(constant(t, "fp8_matmul_speedup") == 1);
  CHECK(constant(t, "tensor_warmup_ns") == 0);
  CHECK(constant(t, "vector_scalar_share_psum") == 1);
  CHECK(constant(t, "vector_gpsimd_share_sbuf_port") == 1);
  CHECK(constant(t, "cores_per_chip") == 2);
}

TEST_CASE("trn2 carries the NeuronCore-v3 figures") {
  const auto t = *tessel::builtin_target("trn2");
  CHECK(constant(t, "partitions") == 128);
  CHECK(constant(t, "sbuf_bytes_per_partition") == 212'984);
  CHECK(constant(t, "sbuf_total_bytes") == 128 * 212'984);
  CHECK(constant(t, "tensor_clock_mhz") == 2400);
  CHECK(constant(t, "vector_clock_mhz") == 960);
  CHECK(constant(t, "dma_bytes_per_us_per_engine") == 23'000);
  CHECK(constant(t, "dma_bytes_per_us") == 368'000);
  CHECK(constant(t, "dma_fixed_latency_ns") == 1300);
  CHECK(constant(t, "hbm_bytes") == 96LL << 30);
  CHECK(constant(t, "bf16_peak_gflops") == 78'643);
  CHECK(constant(t, "fp8_matmul_speedup") == 2);
  CHECK(constant(t, "fp32_matmul_cost_factor") == 4);
  CHECK(constant(t, "tensor_warmup_ns") == 3000);
  CHECK(constant(t, "vector_scalar_share_psum") == 0);
  CHECK(constant(t, "vector_gpsimd_share_sbuf_port") == 0);
  CHECK(constant(t, "cores_per_chip") == 8);
}

TEST_CASE("trn1 and trn2 define the same constants, so a space re-targets") {
  const auto trn1 = *tessel::builtin_target("trn1");
  const auto trn2 = *tessel::builtin_target("trn2");
  REQUIRE(trn1.constants.size() == trn2.constants.size());
  for (const auto& entry : trn1.constants) {  // no structured binding: clang 14 cannot capture one
    INFO("constant ", entry.first);
    CHECK(trn2.find(entry.first).has_value());
    CHECK(entry.second >= 0);
  }
}

TEST_CASE("trn2_lnc2 is trn2 with two physical cores per logical core") {
  const auto trn2 = *tessel::builtin_target("trn2");
  const auto lnc2 = *tessel::builtin_target("trn2_lnc2");
  CHECK(lnc2.base == "trn2");
  REQUIRE(lnc2.constants.size() == trn2.constants.size());  // re-targets like trn2
  CHECK(constant(trn2, "lnc") == 1);
  CHECK(constant(lnc2, "lnc") == 2);
  // what a logical core has in all doubles; per-core figures stay
  for (const char* doubled :
       {"sbuf_total_bytes", "psum_total_bytes", "bf16_peak_gflops", "dma_bytes_per_us"})
    CHECK(constant(lnc2, doubled) == 2 * constant(trn2, doubled));
  CHECK(constant(lnc2, "cores") == constant(trn2, "cores") / 2);
  for (const char* same : {"partitions", "sbuf_bytes_per_partition", "psum_banks", "dma_engines",
                           "tensor_clock_mhz", "hbm_bytes", "cores_per_chip"})
    CHECK(constant(lnc2, same) == constant(trn2, same));
}

TEST_CASE("psum and matmul figures are consistent") {
  for (const char* name : {"trn1", "trn2"}) {
    const auto t = *tessel::builtin_target(name);
    CHECK(constant(t, "psum_banks") * constant(t, "psum_bank_bytes") ==
          constant(t, "psum_bytes_per_partition"));
    CHECK(constant(t, "psum_bytes_per_partition") * constant(t, "partitions") ==
          constant(t, "psum_total_bytes"));
    CHECK(constant(t, "matmul_max_contraction") == constant(t, "partitions"));
    CHECK(constant(t, "matmul_max_moving_free") * 4 == constant(t, "psum_bank_bytes"));
    CHECK(constant(t, "sbuf_bytes_per_partition") <=
          constant(t, "sbuf_physical_bytes_per_partition"));
  }
}

TEST_CASE("cpu describes the host with plausible values") {
  const auto t = *tessel::builtin_target("cpu");
  const unsigned threads = std::thread::hardware_concurrency();
  CHECK(constant(t, "cores") == (threads > 0 ? threads : 1));
  const auto l1 = constant(t, "l1d_bytes");
  const auto l2 = constant(t, "l2_bytes");
  const auto l3 = constant(t, "l3_bytes");
  CHECK(l1 >= 4096);
  CHECK(l2 >= l1);
  CHECK(l3 > 0);
  const auto line = constant(t, "cache_line_bytes");
  CHECK(line >= 16);
  CHECK((line & (line - 1)) == 0);
  const auto page = constant(t, "page_bytes");
  CHECK(page >= 4096);
  CHECK((page & (page - 1)) == 0);
  CHECK(constant(t, "memory_bytes") >= page);
  CHECK_FALSE(t.find("partitions").has_value());
  // The vector unit: SSE2/NEON at least, and the registers of its width.
  const auto simd = constant(t, "simd_bytes");
  CHECK((simd == 16 || simd == 32 || simd == 64));
  CHECK((constant(t, "vector_registers") == 16 || constant(t, "vector_registers") == 32));
#if defined(__x86_64__)
  __builtin_cpu_init();
  CHECK((simd == 64) == (__builtin_cpu_supports("avx512f") != 0));
#endif
}

TEST_CASE("every built-in target has the shared keys cores and memory_bytes") {
  for (const auto& name : tessel::builtin_target_names()) {
    const auto t = *tessel::builtin_target(name);
    CHECK(constant(t, "cores") >= 1);
    CHECK(constant(t, "memory_bytes") > 0);
  }
}

TEST_CASE("trn2_chip and trn2_server: the topology constants and trn2's per-core figures") {
  const auto core = *tessel::builtin_target("trn2");
  const auto chip = *tessel::builtin_target("trn2_chip");
  const auto server = *tessel::builtin_target("trn2_server");
  CHECK(chip.base == "trn2");
  CHECK(server.base == "trn2_chip");
  CHECK(constant(core, "ranks") == 1);
  CHECK(constant(chip, "ranks") == 8);
  CHECK(constant(chip, "chips") == 1);
  CHECK(constant(server, "chips") == 16);
  CHECK(constant(server, "torus_x") * constant(server, "torus_y") == 16);
  CHECK(constant(server, "ranks") == 128);
  CHECK(constant(server, "ranks_per_chip") == 8);
  CHECK(constant(server, "chip_links") == 4);
  // 1.28 TB/s per chip over its four NeuronLink-v3 (docs/targets.md)
  CHECK(constant(server, "chip_links") * constant(server, "chip_link_bytes_per_us") == 1'280'000);
  // every other constant is trn2's: a rank is one NeuronCore-v3
  for (const auto& entry : core.constants) {  // not a structured binding: INFO captures it
    const std::string& key = entry.first;
    if (key == "ranks" || key == "ranks_per_chip" || key == "chips" || key.starts_with("torus_"))
      continue;
    INFO(key);
    CHECK(constant(server, key) == entry.second);
  }
  CHECK(server.constants.size() == core.constants.size());
}
