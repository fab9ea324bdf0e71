// helpers.hpp: small builders shared by the simulator tests.
#pragma once

#include "sim/fixed_space.hpp"
#include "sim/machine.hpp"
#include "sim/program.hpp"
#include "sim/timing.hpp"
#include "sim/workload.hpp"

#include <tessel/dsl.hpp>
#include <tessel/random.hpp>
#include <tessel/sim.hpp>
#include <tessel/target.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <map>
#include <string>

namespace tessel::sim::testing {

inline target builtin(const std::string& name) { return *builtin_target(name); }

inline machine machine_for(const std::string& name) { return resolve_machine(builtin(name)); }

/// One evaluation of (s, c) by the sim backend with `model`, without the gate.
inline measurement evaluate(const space& s, const config& c, sim_model model = sim_model::event) {
  sim_options o;
  o.gate = false;
  o.model = model;
  sim_backend b(o);
  b.prepare(s);
  return b.evaluate(s, c);
}

/// A program with one SBUF and one PSUM buffer and a "work" tag.
struct bench_program {
  program p;
  buffer_id hbm = p.add_buffer({"HBM", memory::hbm, 0, 1, 0});
  buffer_id sbuf = p.add_buffer({"SBUF", memory::sbuf, 0, 1, 0});
  buffer_id psum = p.add_buffer({"PSUM", memory::psum, 2048, 8, 0});
  std::uint16_t tag = p.add_tag("work");

  instruction matmul(std::uint32_t k, std::uint32_t m, std::uint32_t n,
                     dtype t = dtype::bf16) const {
    instruction in;
    in.engine = tensor_engine;
    in.kind = op::matmul;
    in.type = t;
    in.flags = flag_new_stationary;
    in.partitions = k;
    in.aux = m;
    in.free = n;
    in.src = sbuf;
    in.dst = psum;
    in.tag = tag;
    return in;
  }
  instruction elementwise(engine_id e, op kind, std::uint32_t n, std::uint8_t flags = 0) const {
    instruction in;
    in.engine = e;
    in.kind = kind;
    in.type = dtype::fp32;
    in.flags = flags;
    in.partitions = 128;
    in.free = n;
    in.src = psum;
    in.dst = sbuf;
    in.tag = tag;
    return in;
  }
  instruction load(engine_id queue, std::uint32_t partitions, std::uint32_t bytes) const {
    instruction in;
    in.engine = queue;
    in.kind = op::dma;
    in.partitions = partitions;
    in.free = bytes;
    in.src = hbm;
    in.dst = sbuf;
    in.tag = tag;
    return in;
  }
};

/// The matmul tutorial's problem (trn1) with overrides, as a one-config space.
inline fixed_values matmul_values(std::int64_t M, std::int64_t N, std::int64_t K) {
  fixed_values v;
  v.integers = {{"M", M}, {"N", N}, {"K", K}};
  v.symbols = {{"workload", "matmul"}, {"dtype", "bf16"}};
  v.order = {"m", "n", "k"};
  return v;
}

/// A workload lowered and timed on one fixed config.
struct outcome {
  std::string error;  ///< the compile error, or ""
  program p;
  timing_result t;
  double roofline_ns = 0;  ///< max(FLOPs at peak, minimal HBM bytes at peak DMA)
};

/// Lowers `w` for the one-config space `name` built from `v` on `t`, and
/// times it when it compiles.
inline outcome lower_and_time(const workload& w, const std::string& name, const target& t,
                              fixed_values v) {
  const machine m = resolve_machine(t);
  auto [s, c] = fixed_space(name, t, std::move(v));
  outcome o;
  o.error = w.lower(s, c, m, o.p);
  if (!o.error.empty()) return o;
  o.t = time_program(o.p, m);
  o.roofline_ns = std::max(o.p.totals.flops / m.bf16_peak_flops_per_ns,
                           o.p.totals.min_hbm_bytes / m.dma_peak_bytes_per_ns());
  return o;
}

/// FLOPs of the program's matmul instructions (2 K M N each, with counts).
inline double matmul_flops(const program& p) {
  double f = 0;
  for (const auto& in : p.instructions())
    if (in.kind == op::matmul) f += 2.0 * in.count * in.partitions * in.aux * in.free;
  return f;
}

/// What check_example_samples asks of the sampled configs.
struct sample_checks {
  int samples = 8;
  /// A compile error passes too (the space's requirements do not mirror
  /// every resource check of the workload); at least one config must run.
  bool compile_errors = false;
  bool explained = false;  ///< a config that runs also explains its time
};

/// Loads examples/`example` on trn2 with `overrides` and times
/// `checks.samples` sampled configs with the gate off (the gate has its own
/// cases): each must compile (the space's requirements match the workload's
/// resource checks; see sample_checks::compile_errors) and take no less than
/// its roofline bound.
inline void check_example_samples(const std::string& example,
                                  const std::map<std::string, std::string>& overrides,
                                  std::uint64_t seed, const sample_checks& checks = {}) {
  parse_options options;
  options.target = "trn2";
  for (const auto& [name, value] : overrides) options.overrides[name] = value;
  const space s = load_space(std::string(TESSEL_SOURCE_DIR) + "/examples/" + example, options);
  sim_options timing_only;
  timing_only.gate = false;
  sim_backend b(timing_only);
  b.prepare(s);
  rng random(seed);
  int ok = 0;
  for (int i = 0; i < checks.samples; ++i) {
    const auto c = s.sample(random);
    const auto m = b.evaluate(s, c);
    INFO(m.message);
    if (checks.compile_errors)
      CHECK((m.ok() || m.status == status::compile_error));
    else
      CHECK(m.ok());
    if (!m.ok()) continue;
    ++ok;
    CHECK(m.objective >= m.metrics.at("roofline_s"));
    if (checks.explained) CHECK(!b.explain(s, c).empty());
  }
  CHECK(ok > 0);
}

}  // namespace tessel::sim::testing
