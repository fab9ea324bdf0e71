// workload_plan::clone() (workload.hpp): an even split's second share on a
// logical core is the first share's plan copied, not planned again
// (cores.cpp), so a clone must be the same plan: for every registered
// workload, on configs of each of its example spaces, the copy has the same
// error and, where it compiles, lowers to the same program and has the same
// steady estimate as the original, after the original is gone (a deep copy).
// Every workload's plan copies, the sharded workloads' too (they own their
// inner workload's plan, copied with them), so no share is planned twice.
#include "helpers.hpp"

#include <tessel/dsl.hpp>
#include <tessel/random.hpp>

#include <doctest/doctest.h>

#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

using namespace tessel;
using namespace tessel::sim;

namespace {

/// The example spaces (examples/*.tsl) of each workload, as steady_contract_test reads them.
std::map<std::string, std::vector<std::filesystem::path>> examples_by_workload() {
  std::map<std::string, std::vector<std::filesystem::path>> out;
  for (const auto& entry :
       std::filesystem::directory_iterator(std::string(TESSEL_SOURCE_DIR) + "/examples")) {
    if (entry.path().extension() != ".tsl") continue;
    if (entry.path().stem().string().starts_with("cpu_")) continue;  // the cpu backend's
    const space s = load_space(entry.path());
    out[std::string(workload_for_space(s, "")->name())].push_back(entry.path());
  }
  return out;
}

/// Whether two programs hold the same instructions, dependencies, buffers and labels.
void check_same_program(const program& a, const program& b) {
  REQUIRE(a.size() == b.size());
  CHECK(a.deps() == b.deps());
  CHECK(a.tags() == b.tags());
  REQUIRE(a.buffers().size() == b.buffers().size());
  for (std::size_t i = 0; i < a.buffers().size(); ++i) {
    CHECK(a.buffers()[i].name == b.buffers()[i].name);
    CHECK(a.buffers()[i].where == b.buffers()[i].where);
    CHECK(a.buffers()[i].bytes_per_partition == b.buffers()[i].bytes_per_partition);
    CHECK(a.buffers()[i].slots == b.buffers()[i].slots);
    CHECK(a.buffers()[i].bytes == b.buffers()[i].bytes);
  }
  for (std::size_t i = 0; i < a.size(); ++i) {
    const instruction &x = a.instructions()[i], &y = b.instructions()[i];
    INFO("instruction ", i);
    CHECK(x.engine == y.engine);
    CHECK(x.kind == y.kind);
    CHECK(x.type == y.type);
    CHECK(x.flags == y.flags);
    CHECK(x.count == y.count);
    CHECK(x.partitions == y.partitions);
    CHECK(x.free == y.free);
    CHECK(x.aux == y.aux);
    CHECK(x.partition_offset == y.partition_offset);
    CHECK(x.src == y.src);
    CHECK(x.dst == y.dst);
    CHECK(x.tag == y.tag);
    CHECK(x.dep_begin == y.dep_begin);
    CHECK(x.dep_end == y.dep_end);
  }
  CHECK(a.totals.flops == b.totals.flops);
  CHECK(a.totals.min_hbm_bytes == b.totals.min_hbm_bytes);
}

}  // namespace

TEST_CASE("plan clone: every workload's plan copies to the same plan") {
  const auto examples = examples_by_workload();
  const machine m = testing::machine_for("trn2");
  for (const auto& name : workload_names()) {
    INFO("workload ", name);
    const auto it = examples.find(name);
    REQUIRE(it != examples.end());
    std::size_t copied = 0, refused = 0;
    for (const auto& path : it->second) {
      parse_options options;
      options.target = "trn2";
      const space s = load_space(path, options);
      const workload& w = *workload_for_space(s, "");
      INFO(path.filename().string());
      rng random(5);
      std::size_t compiled = 0;
      for (int draw = 0; draw < 40 && compiled < 3; ++draw) {
        const config c = s.sample(random);
        INFO(s.to_json(c));
        auto plan = w.plan_config(s, c, m);
        auto copy = plan->clone();
        if (!copy) {
          FAIL_CHECK("clone() refused");  // every plan copies, those holding plans too
          ++refused;
          continue;
        }
        ++copied;
        CHECK(copy.get() != plan.get());
        CHECK(copy->error == plan->error);
        CHECK(copy->same_as_previous == plan->same_as_previous);
        if (!plan->error.empty()) continue;
        program original;
        const std::string lowered = w.lower_plan(*plan, m, original);
        const auto estimate = w.steady_plan(*plan, m);
        plan.reset();  // the copy must not lean on the original
        program again;
        CHECK(w.lower_plan(*copy, m, again) == lowered);
        if (!lowered.empty()) continue;
        ++compiled;
        check_same_program(original, again);
        const auto estimate_again = w.steady_plan(*copy, m);
        REQUIRE(estimate.has_value() == estimate_again.has_value());
        if (estimate) {
          CHECK(estimate->latency_ns == estimate_again->latency_ns);
          CHECK(estimate->instructions == estimate_again->instructions);
          CHECK(estimate->hbm_read_bytes == estimate_again->hbm_read_bytes);
          CHECK(estimate->hbm_write_bytes == estimate_again->hbm_write_bytes);
        }
      }
      CHECK(compiled + refused > 0);  // the space gave something to compare
    }
    CHECK(refused == 0);
    CHECK(copied + refused > 0);
  }
}
