// sharded_helpers.hpp: what the sharded workloads' tests share
// (sharded_matmul, sharded_attention, sharded_moe; docs/topology.md): their
// example spaces on a target, an evaluation without the gate, the gate's
// check of a sharded kernel and of a fault it must catch, explain naming
// the collective, and the NKI refusal of a sharded config.
#pragma once

#include "helpers.hpp"

#include <tessel/dsl.hpp>
#include <tessel/error.hpp>
#include <tessel/gate.hpp>
#include <tessel/sim.hpp>

#include <doctest/doctest.h>

#include <map>
#include <string>

namespace tessel::sim::testing {

using overrides = std::map<std::string, std::string, std::less<>>;

/// examples/`file` on `target` with `sets` overriding its constants.
inline space sharded_example(const std::string& file, const std::string& target, overrides sets) {
  parse_options options;
  options.target = target;
  options.overrides = std::move(sets);
  return load_space(std::string(TESSEL_SOURCE_DIR) + "/examples/" + file, options);
}

inline config with(const space& s, const std::string& json) { return s.from_partial_json(json); }

/// Evaluating (s, json) without the gate is a compile error that says
/// `message` (a split the topology or the shapes cannot take).
inline void check_compile_error(const space& s, const std::string& json,
                                const std::string& message) {
  const measurement m = evaluate(s, with(s, json));
  CHECK(m.status == status::compile_error);
  CHECK(m.message == message);
}

/// The gate passes (s, c)'s functional kernel on `m`, then catches it with
/// `f` injected. Returns the kernel (its shapes are the caller's to check).
inline std::unique_ptr<functional_kernel> check_gate_catches(const space& s, const config& c,
                                                             const machine& m, fault f) {
  auto kernel = workload_for_space(s, "")->functional(s, c, m);
  REQUIRE(kernel);
  gate g(gate_options{.secret = 3});
  const verdict v = g.check(*kernel, *kernel, 1);
  INFO(v.message);
  CHECK(v.ok());
  kernel->inject(f);
  gate again(gate_options{.secret = 3});
  CHECK_FALSE(again.check(*kernel, *kernel, 1).ok());
  kernel->inject(fault::none);
  return kernel;
}

/// explain of `bound` on `s` is collective-bound by `collective` (the start
/// of its description) and suggests overlap first; `compute` is not
/// collective-bound.
inline void check_explain_names(const space& s, const config& bound, const std::string& collective,
                                const config& compute) {
  sim_options o;
  o.gate = false;
  sim_backend b(o);
  b.prepare(s);
  const auto e = b.analyse(s, bound);
  INFO(e.text());
  CHECK(e.bottleneck.starts_with("collective-bound: " + collective));
  REQUIRE_FALSE(e.suggestions.empty());
  CHECK(e.suggestions.front().starts_with("set overlap = true"));
  CHECK_FALSE(b.analyse(s, compute).bottleneck.starts_with("collective"));
}

/// Why emit_nki refuses (s, json): its message, or "" when it emits.
inline std::string nki_refusal(const space& s, const std::string& json) {
  try {
    (void)emit_nki(s, s.from_partial_json(json), nki_options{});
  } catch (const error& e) {
    return e.what();
  }
  return "";
}

}  // namespace tessel::sim::testing
