// Shared by the storage tests: a small space with every kind of parameter
// (a conditional one, a permutation), trials that exercise every column, a
// field-by-field comparison, and (temp_folder.hpp) private folders.
#pragma once

#include "space_fixtures.hpp"
#include "temp_folder.hpp"

#include <tessel/space.hpp>
#include <tessel/storage.hpp>
#include <tessel/trial.hpp>

#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <vector>

namespace tessel::testing {

/// tile {128, 256, 512}, home {sbuf, hbm}, order perm(k, m, n), fast bool,
/// prefetch bool when home == hbm: 108 valid configs.
inline space storage_space(std::vector<std::int64_t> tiles = {128, 256, 512}) {
  space::definition def;
  def.name = "gemm";
  def.parameters.push_back(param("tile", integers(std::move(tiles))));
  def.parameters.push_back(param("home", symbols(def, {"sbuf", "hbm"})));
  def.parameters.push_back(param("order", permutation(def, {"k", "m", "n"})));
  def.parameters.push_back(param("fast", booleans()));
  auto pre = param("prefetch", booleans());
  pre.when =
      op(expr_op::equal, ref(def, "home"), make_literal(def.intern("hbm"), value_type::symbol));
  def.parameters.push_back(std::move(pre));
  return space(std::move(def));
}

inline study_record storage_record(const space& s) {
  study_record r;
  r.space_name = s.name();
  r.space_source = "space gemm {\n  param tile in {128, 256, 512}\n}\n";
  r.space_hash = "9f3a5c0e11d2b7a4";
  r.target = "trn2";
  r.backend = "sim";
  r.strategy = "ga";
  r.options_json = R"({"seed":42,"jobs":2})";
  r.seed = 0xFEDC'BA98'7654'3210ULL;  // above 2^63: stored as its int64 bit pattern
  return r;
}

/// Every status, listed here so these tests need nothing of measurement.cpp.
inline const std::vector<status>& all_statuses_for_tests() {
  static const std::vector<status> all{
      status::ok,      status::invalid,   status::compile_error, status::runtime_error,
      status::timeout, status::incorrect, status::suspicious};
  return all;
}

/// Trial `id` in `state`, every field set from the id: configs cycle through
/// the space (inactive `prefetch` included), statuses through every status,
/// odd ids carry a prediction. Deterministic, so a reader can rebuild it.
inline trial storage_trial(const space& s, std::uint64_t id,
                           trial_state state = trial_state::finished) {
  trial t;
  t.id = id;
  t.config = s.at((id * 37) % s.count());
  t.key = s.key(t.config);
  const char* sources[] = {"ga", "agent", "user", "baseline"};
  t.provenance.source = sources[id % 4];
  t.provenance.tokens = id % 4 == 1 ? 1234.5 + static_cast<double>(id) : 0.0;
  t.provenance.note = id % 3 == 0 ? "" : "tile " + std::to_string(id) + ", \"why\"\nline 2: é — ✓";
  if (id % 2 == 1)
    t.prediction = prediction{1e-3 / static_cast<double>(id), 2.5e-5, 0.875, 1.0 / 3.0,
                              0.1 * static_cast<double>(id),  7e-7};
  t.state = state;
  t.proposed_at = 0.25 * static_cast<double>(id);
  if (state != trial_state::finished) return t;
  const auto& statuses = all_statuses_for_tests();
  auto& m = t.result;
  m.status = statuses[id % statuses.size()];
  m.objective = m.status == status::ok ? 1.0 / (3.0 + static_cast<double>(id)) : 0.0;
  m.samples = {m.objective * 1.01, m.objective, m.objective * 0.99, 1e-300};
  m.cost = {0.1 + 1.0 / 7.0, 0.01 * static_cast<double>(id), 2.0 / 3.0};
  m.metrics = {{"pe_busy", 0.875}, {"bytes_moved", 1.5e9 + static_cast<double>(id)}};
  m.message = m.status == status::ok ? "" : "failed: \"code\" " + std::to_string(id);
  t.finished_at = t.proposed_at + 0.125;
  return t;
}

/// Bitwise equality of doubles (so NaN equals NaN and -0 differs from 0).
inline bool same(double a, double b) {
  return std::isnan(a) ? std::isnan(b) : (a == b && std::signbit(a) == std::signbit(b));
}

inline void check_same_trial(const trial& got, const trial& want) {
  INFO("trial ", want.id);
  CHECK(got.id == want.id);
  CHECK(got.config == want.config);
  CHECK(got.key == want.key);
  CHECK(got.provenance.source == want.provenance.source);
  CHECK(same(got.provenance.tokens, want.provenance.tokens));
  CHECK(got.provenance.note == want.provenance.note);
  REQUIRE(got.prediction.has_value() == want.prediction.has_value());
  if (want.prediction) {
    CHECK(same(got.prediction->mean, want.prediction->mean));
    CHECK(same(got.prediction->sigma, want.prediction->sigma));
    CHECK(same(got.prediction->p_feasible, want.prediction->p_feasible));
    CHECK(same(got.prediction->expected_gain, want.prediction->expected_gain));
    CHECK(same(got.prediction->cost_s, want.prediction->cost_s));
    CHECK(same(got.prediction->utility, want.prediction->utility));
  }
  CHECK(got.state == want.state);
  CHECK(same(got.proposed_at, want.proposed_at));
  CHECK(same(got.finished_at, want.finished_at));
  const auto &g = got.result, &w = want.result;
  CHECK(g.status == w.status);
  CHECK(same(g.objective, w.objective));
  REQUIRE(g.samples.size() == w.samples.size());
  for (std::size_t i = 0; i < w.samples.size(); ++i) CHECK(same(g.samples[i], w.samples[i]));
  CHECK(same(g.cost.compile_s, w.cost.compile_s));
  CHECK(same(g.cost.gate_s, w.cost.gate_s));
  CHECK(same(g.cost.run_s, w.cost.run_s));
  CHECK(g.metrics == w.metrics);
  CHECK(g.message == w.message);
}

}  // namespace tessel::testing
