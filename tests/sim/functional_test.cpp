// The simulator's functional mode through the equivalence gate: every
// deliberate mistake of the gate's corpus (sim_options::fault) is caught
// through sim_backend::evaluate, correct configs of the example spaces pass,
// and the functional outputs match a direct fp64 computation.
#include "sim/functional.hpp"
#include "helpers.hpp"

#include <tessel/backends.hpp>
#include <tessel/dsl.hpp>
#include <tessel/error.hpp>
#include <tessel/gate.hpp>
#include <tessel/sim.hpp>

#include <doctest/doctest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <map>

using namespace tessel;
using namespace tessel::sim;
using namespace tessel::sim::testing;

namespace {

constexpr std::uint64_t test_secret = 0x7e57'5ec7e7;

sim_options gated(std::string fault = "") {
  sim_options o;
  o.gate_options.secret = test_secret;
  o.fault = std::move(fault);
  o.concurrency = 1;
  return o;
}

/// Small shapes with a partial last tile in every tiled dimension (fp8: k blocks
/// of 384 and 316 rows, each a double_row tile of 256 and one that fits a slab,
/// as double_row requires: check_contraction).
fixed_values matmul_tail(const std::string& dtype = "bf16", const std::string& layout = "km") {
  auto v = matmul_values(300, 600, 700);
  v.integers.insert(
      {{"tile_m", 128}, {"tile_n", 512}, {"tile_k", dtype.starts_with("fp8") ? 384 : 256}});
  v.symbols["dtype"] = dtype;
  v.symbols["a_layout"] = layout;
  v.order = {"m", "k", "n"};  // k not innermost: partial sums added in SBUF
  return v;
}

/// fp8 with its per-row dequantization scale (scale = row).
fixed_values matmul_scaled(const std::string& dtype) {
  auto v = matmul_tail(dtype);
  v.symbols["scale"] = "row";
  return v;
}

fixed_values rmsnorm_tail() {
  fixed_values v;
  v.integers = {{"rows", 300}, {"hidden", 700}, {"rows_per_tile", 128}, {"cols_per_step", 256}};
  v.symbols = {{"workload", "rmsnorm"}, {"dtype", "bf16"}};
  return v;
}

fixed_values softmax_tail() {
  fixed_values v;
  v.integers = {{"rows", 300}, {"cols", 700}, {"rows_per_tile", 128}, {"cols_per_step", 256}};
  v.symbols = {{"workload", "softmax"}, {"dtype", "bf16"}};
  return v;
}

fixed_values attention_tail(bool causal) {
  fixed_values v;
  v.integers = {{"seq", 320},     {"head_dim", 64},           {"q_tile", 128},
                {"kv_tile", 128}, {"causal", causal ? 1 : 0}, {"skip_masked", 1}};
  v.symbols = {{"workload", "attention"}, {"dtype", "bf16"}};
  return v;
}

struct named_case {
  const char* workload;
  fixed_values values;
};

std::vector<named_case> tail_cases() {
  return {{"matmul", matmul_tail()},
          {"matmul", matmul_tail("fp8", "mk")},
          {"matmul", matmul_tail("fp32")},
          {"matmul", matmul_scaled("fp8_e5m2")},
          {"rmsnorm", rmsnorm_tail()},
          {"softmax", softmax_tail()},
          {"attention", attention_tail(false)},
          {"attention", attention_tail(true)}};
}

/// A space's fixed config (the order permutation must exist for matmul only).
std::pair<space, config> fixed(const named_case& c) {
  auto v = c.values;
  if (std::string(c.workload) != "matmul") v.order.clear();
  return fixed_space(c.workload, builtin("trn2"), v);
}

}  // namespace

TEST_CASE("functional: the fault names round-trip") {
  for (const char* name : {"none", "drop_tail", "skip_accumulation", "truncate_output",
                           "constant_output", "ignore_input"})
    CHECK(to_string(*parse_fault(name)) == name);
  CHECK(parse_fault("") == fault::none);
  CHECK(!parse_fault("drop_tails"));
  auto o = gated("drop_tails");
  CHECK_THROWS_WITH_AS(o.validate(),
                       doctest::Contains("sim_options.fault: unknown fault 'drop_tails'"),
                       options_error);
}

TEST_CASE("functional: correct schedules with tail tiles pass the gate through evaluate") {
  for (const auto& c : tail_cases()) {
    INFO(c.workload, " ", c.values.symbols.at("dtype"));
    auto [s, cfg] = fixed(c);
    sim_backend b(gated());
    b.prepare(s);
    const measurement m = b.evaluate(s, cfg);
    INFO(m.message);
    CHECK(m.ok());
    CHECK(m.metrics.at("gate_wall_s") > 0);
    CHECK(m.metrics.count("roofline_s") == 1);
  }
}

TEST_CASE("functional: every fault of the corpus is caught through sim_backend::evaluate") {
  for (const char* f :
       {"drop_tail", "skip_accumulation", "truncate_output", "constant_output", "ignore_input"})
    for (const auto& c : tail_cases()) {
      INFO(f, " ", c.workload, " ", c.values.symbols.at("dtype"));
      auto [s, cfg] = fixed(c);
      sim_backend b(gated(f));
      b.prepare(s);
      const measurement m = b.evaluate(s, cfg);
      INFO(m.message);
      CHECK((m.status == status::incorrect || m.status == status::suspicious));
      // the message names the verdict and the output element or output that failed
      const bool names = m.message.rfind("incorrect: output ", 0) == 0 ||
                         m.message.rfind("suspicious: output ", 0) == 0;
      CHECK(names);
      CHECK(m.metrics.at("gate_wall_s") > 0);
    }
}

TEST_CASE("functional: the timing does not depend on the gate or the fault") {
  auto [s, cfg] = fixed({"matmul", matmul_tail()});
  sim_options off;
  off.gate = false;
  sim_backend plain(off), faulty(gated("drop_tail"));
  const auto a = plain.evaluate(s, cfg), b = faulty.evaluate(s, cfg);
  CHECK(a.ok());
  CHECK(a.cost.gate_s == 0);
  CHECK(a.metrics.at("latency_s") == b.metrics.at("latency_s"));
}

TEST_CASE("functional: sampled configs of the example spaces pass the gate") {
  struct example {
    const char* file;
    std::map<std::string, std::string, std::less<>> sets;
  };
  const std::vector<example> examples{
      {"matmul.tsl", {{"M", "256"}, {"N", "512"}, {"K", "256"}}},
      {"sim_matmul.tsl", {{"M", "256"}, {"N", "1024"}, {"K", "256"}}},
      {"rmsnorm.tsl", {{"rows", "512"}, {"hidden", "512"}}},
      {"sim_rmsnorm.tsl", {{"rows", "512"}, {"hidden", "512"}}},
      {"sim_softmax.tsl", {{"rows", "1024"}, {"cols", "512"}}},
      {"sim_layernorm.tsl", {{"rows", "512"}, {"hidden", "512"}}},
      {"sim_newton_schulz.tsl", {{"rows", "192"}, {"cols", "640"}}},
      {"attention.tsl", {{"seq", "512"}}},
      {"sim_attention.tsl", {{"seq", "512"}}},
      {"moe.tsl", {{"tokens", "128"}, {"d_in", "512"}, {"experts", "16"}, {"top_k", "4"}}},
  };
  for (const auto& e : examples) {
    INFO(std::string(e.file));
    parse_options options;
    options.target = "trn2";
    options.overrides = e.sets;
    const space s = load_space(std::string(TESSEL_SOURCE_DIR) + "/examples/" + e.file, options);
    sim_backend b(gated());
    b.prepare(s);
    rng random(17);
    int passed = 0;
    for (int i = 0; i < 16; ++i) {
      const auto c = s.sample(random);
      const auto m = b.evaluate(s, c);
      INFO(s.to_json(c), ": ", m.message);
      CHECK((m.ok() || m.status == status::compile_error));
      passed += m.ok();
    }
    CHECK(passed > 0);
  }
}

TEST_CASE("functional: sampled tail-tile configs pass the gate") {
  // random block sizes over shapes no block size divides
  rng random(23);
  const std::vector<std::int64_t> blocks{64, 128, 192, 256, 512};
  for (int i = 0; i < 24; ++i) {
    auto v = matmul_tail(i % 3 == 0 ? "fp8" : "bf16", i % 2 ? "mk" : "km");
    v.integers["tile_m"] = blocks[random.uniform(blocks.size())];
    v.integers["tile_n"] = blocks[random.uniform(blocks.size())];
    v.integers["tile_k"] = blocks[random.uniform(blocks.size())];
    v.symbols["acc_dtype"] = i % 4 ? "bf16" : "fp32";
    const std::vector<std::vector<std::string>> orders{
        {"m", "n", "k"}, {"k", "m", "n"}, {"n", "k", "m"}};
    v.order = orders[static_cast<std::size_t>(i) % orders.size()];
    auto fixed = fixed_space("matmul", builtin("trn2"), v);  // no structured binding: INFO captures
    const auto& s = fixed.first;
    const auto& c = fixed.second;
    sim_backend b(gated());
    const auto m = b.evaluate(s, c);
    INFO(s.to_json(c), ": ", m.message);
    CHECK((m.ok() || m.status == status::compile_error));
  }
}

namespace {

/// The kernel's run() against `direct` (an fp64 computation written here,
/// independently of the kernel's reference()) on the normal suite.
void check_direct(
    const named_case& c,
    std::function<double(std::span<const input_tensor>, std::size_t, std::int64_t)> direct) {
  auto [s, cfg] = fixed(c);
  const machine m = machine_for("trn2");
  const auto kernel = find_workload(c.workload)->functional(s, cfg, m);
  REQUIRE(kernel);
  const auto specs = kernel->inputs();
  std::vector<input_tensor> in;
  for (std::size_t i = 0; i < specs.size(); ++i)
    in.emplace_back(specs[i], distribution::normal, 1000 + i);
  rng r(3);
  const auto where = kernel->probes(r);
  const auto got = kernel->run(in, where);
  const auto tol = kernel->tolerances();
  for (std::size_t o = 0; o < where.size(); ++o) {
    REQUIRE(!where[o].empty());
    std::vector<double> want;
    double squares = 0;
    for (const auto flat : where[o]) {
      want.push_back(direct(in, o, flat));
      squares += want.back() * want.back();
    }
    const double rms = std::sqrt(squares / static_cast<double>(want.size()));
    int off = 0;
    for (std::size_t p = 0; p < want.size(); ++p)
      off += std::abs(got[o][p] - want[p]) > tol[o] * (std::abs(want[p]) + rms);
    CHECK(off == 0);
  }
}

}  // namespace

TEST_CASE("functional: outputs equal a direct fp64 computation within tolerance") {
  SUBCASE("matmul") {
    for (const auto& variant : std::vector<std::pair<std::string, std::string>>{
             {"bf16", "km"}, {"bf16", "mk"}, {"fp8", "km"}, {"fp8_e5m2", "km"}, {"fp32", "mk"}}) {
      const auto& type = variant.first;  // no structured binding: INFO captures
      const auto& layout = variant.second;
      INFO(type, " ", layout);
      const bool mk = layout == "mk";
      check_direct({"matmul", matmul_tail(type, layout)},
                   [&](std::span<const input_tensor> in, std::size_t, std::int64_t flat) {
                     const std::int64_t i = flat / 600, j = flat % 600;
                     double sum = 0;
                     for (std::int64_t k = 0; k < 700; ++k)
                       sum += (mk ? in[0].at(i, k) : in[0].at(k, i)) * in[1].at(k, j);
                     return sum;
                   });
    }
  }
  SUBCASE("matmul with scale = row: row i times scale[i]") {
    for (const char* type : {"fp8_e4m3", "fp8_e5m2", "bf16"}) {
      INFO(type);
      check_direct({"matmul", matmul_scaled(type)},
                   [](std::span<const input_tensor> in, std::size_t, std::int64_t flat) {
                     const std::int64_t i = flat / 600, j = flat % 600;
                     double sum = 0;
                     for (std::int64_t k = 0; k < 700; ++k) sum += in[0].at(k, i) * in[1].at(k, j);
                     return in[2].at(i, 0) * sum;
                   });
    }
  }
  SUBCASE("rmsnorm") {
    check_direct({"rmsnorm", rmsnorm_tail()},
                 [squares = std::map<std::int64_t, double>()](
                     std::span<const input_tensor> in, std::size_t o, std::int64_t flat) mutable {
                   const std::int64_t i = flat / 700, j = flat % 700;
                   if (!squares.count(i))
                     for (std::int64_t k = 0; k < 700; ++k) {
                       const double h = in[0].at(i, k) + in[1].at(i, k);
                       squares[i] += h * h;
                     }
                   const double h = in[0].at(i, j) + in[1].at(i, j);
                   if (o == 1) return h;
                   return h / std::sqrt(squares[i] / 700 + 1e-6) * in[2].at(j);
                 });
  }
  SUBCASE("softmax") {
    check_direct({"softmax", softmax_tail()},
                 [rows = std::map<std::int64_t, std::pair<double, double>>()](
                     std::span<const input_tensor> in, std::size_t, std::int64_t flat) mutable {
                   const std::int64_t i = flat / 700, j = flat % 700;
                   if (!rows.count(i)) {
                     double top = -std::numeric_limits<double>::infinity(), sum = 0;
                     for (std::int64_t k = 0; k < 700; ++k) top = std::max(top, in[0].at(i, k));
                     for (std::int64_t k = 0; k < 700; ++k) sum += std::exp(in[0].at(i, k) - top);
                     rows[i] = {top, sum};
                   }
                   const auto [top, sum] = rows[i];
                   return std::exp(in[0].at(i, j) - top) / sum;
                 });
  }
  SUBCASE("attention") {
    for (const bool causal : {false, true}) {
      INFO("causal ", causal);
      check_direct({"attention", attention_tail(causal)},
                   [&, rows = std::map<std::int64_t, std::vector<double>>()](
                       std::span<const input_tensor> in, std::size_t, std::int64_t flat) mutable {
                     const std::int64_t i = flat / 64, c = flat % 64;
                     if (rows.count(i)) return rows[i][static_cast<std::size_t>(c)];
                     const std::int64_t keys = causal ? i + 1 : 320;
                     std::vector<double> s(static_cast<std::size_t>(keys));
                     double top = -std::numeric_limits<double>::infinity();
                     for (std::int64_t j = 0; j < keys; ++j) {
                       double dot = 0;
                       for (std::int64_t d = 0; d < 64; ++d) dot += in[0].at(d, i) * in[1].at(d, j);
                       s[static_cast<std::size_t>(j)] = dot / 8;
                       top = std::max(top, dot / 8);
                     }
                     double sum = 0;
                     std::vector<double> out(64, 0.0);
                     for (std::int64_t j = 0; j < keys; ++j) {
                       const double e = std::exp(s[static_cast<std::size_t>(j)] - top);
                       sum += e;
                       for (std::int64_t d = 0; d < 64; ++d)
                         out[static_cast<std::size_t>(d)] += e * in[2].at(j, d);
                     }
                     for (auto& x : out) x /= sum;
                     rows[i] = out;
                     return out[static_cast<std::size_t>(c)];
                   });
    }
  }
}

TEST_CASE("functional: probes cover the first and the tail tiles") {
  auto [s, cfg] = fixed({"matmul", matmul_tail()});
  const auto kernel = matmul_workload().functional(s, cfg, machine_for("trn2"));
  REQUIRE(kernel);
  rng r(1);
  const auto where = kernel->probes(r);
  REQUIRE(where.size() == 1);
  const auto has = [&](std::int64_t i, std::int64_t j) {
    return std::find(where[0].begin(), where[0].end(), i * 600 + j) != where[0].end();
  };
  CHECK(has(0, 0));      // the first tile
  CHECK(has(299, 599));  // the corner of the tail tiles
  CHECK(has(256, 0));    // the first row of the tail m block
  CHECK(has(0, 512));    // the first column of the tail n block
  CHECK(has(127, 511));  // the last element of the first block
}

TEST_CASE(
    "functional: the registry settings gate and fault (the CLI's --no-gate sets gate=false)") {
  auto [s, cfg] = fixed({"matmul", matmul_tail()});
  const auto off = make_backend("sim", {{"gate", "false"}});
  const auto m = off->evaluate(s, cfg);
  CHECK(m.ok());
  CHECK(m.cost.gate_s == 0);
  const auto faulty = make_backend("sim", {{"fault", "constant_output"}});
  CHECK(faulty->evaluate(s, cfg).status == status::suspicious);
  CHECK_THROWS_WITH_AS(
      make_backend("sim", {{"gate", "maybe"}}),
      "backend sim: setting gate must be true or false (or 1/0, yes/no, on/off), got 'maybe'",
      error);
}
