// The collective cost model (backends/sim/collectives.hpp, docs/topology.md):
// the closed-form ring and tree formulas, monotonicity in bandwidth and
// bytes, contention, and the targets' topologies.
#include "helpers.hpp"

#include "sim/collectives.hpp"

#include <tessel/error.hpp>

#include <doctest/doctest.h>

#include <array>
#include <cmath>
#include <string>
#include <vector>

using namespace tessel;
using namespace tessel::sim;
using namespace tessel::sim::testing;

namespace {

/// Round figures, so the closed forms below are easy to read.
topology chip(int ranks) {
  topology t;
  t.ranks_per_chip = ranks;
  t.core_bytes_per_ns = 100;
  t.hbm_bytes_per_ns = 1e9;  // no HBM contention unless a case sets it
  t.core_latency_ns = 1000;
  return t;
}

topology server() {
  topology t = chip(8);
  t.chips = 16;
  t.torus_x = t.torus_y = 4;
  t.chip_links = 4;
  t.link_bytes_per_ns = 50;
  t.link_latency_ns = 2000;
  return t;
}

constexpr std::array all_kinds{collective::all_reduce, collective::all_gather,
                               collective::reduce_scatter, collective::all_to_all};
constexpr std::array all_algorithms{collective_algorithm::ring, collective_algorithm::tree,
                                    collective_algorithm::hierarchical};

}  // namespace

TEST_CASE("collectives: ring on one chip is the closed form 2(p-1)(alpha + S/(p beta))") {
  const double s = 1 << 20;
  for (const int p : {2, 4, 8}) {
    const auto t = chip(p);
    const auto ar = time_collective(collective::all_reduce, collective_algorithm::ring, s, p, t);
    CHECK(ar.ns == doctest::Approx(2.0 * (p - 1) * (1000 + s / (p * 100.0))));
    CHECK(ar.steps == 2 * (p - 1));
    const auto ag = time_collective(collective::all_gather, collective_algorithm::ring, s, p, t);
    CHECK(ag.ns == doctest::Approx((p - 1) * (1000 + s / (p * 100.0))));
    const auto rs =
        time_collective(collective::reduce_scatter, collective_algorithm::ring, s, p, t);
    CHECK(rs.ns == doctest::Approx(ag.ns));
    CHECK(ar.latency_ns + ar.transfer_ns == doctest::Approx(ar.ns));
  }
}

TEST_CASE("collectives: tree on one chip is 2 log2(p)(alpha + S/beta); doubling (p-1)/p S") {
  const double s = 1 << 20;
  for (const int p : {2, 4, 8}) {
    const auto t = chip(p);
    const double lg = std::log2(p);
    const auto ar = time_collective(collective::all_reduce, collective_algorithm::tree, s, p, t);
    CHECK(ar.ns == doctest::Approx(2 * lg * (1000 + s / 100.0)));
    const auto ag = time_collective(collective::all_gather, collective_algorithm::tree, s, p, t);
    CHECK(ag.ns == doctest::Approx(lg * 1000 + (p - 1.0) / p * s / 100.0));
    const auto a2a = time_collective(collective::all_to_all, collective_algorithm::tree, s, p, t);
    CHECK(a2a.ns == doctest::Approx(lg * (1000 + s / 2 / 100.0)));
  }
}

TEST_CASE("collectives: the chip's HBM is shared by the transfers on it (contention)") {
  auto t = chip(8);
  t.hbm_bytes_per_ns = 800;  // 8 ring transfers, each reading and writing: 50 each
  const double s = 1 << 20;
  const auto ar = time_collective(collective::all_reduce, collective_algorithm::ring, s, 8, t);
  CHECK(ar.ns == doctest::Approx(14 * (1000 + s / (8 * 50.0))));
  // two ranks: 200 each, the DMA's 100 bounds
  const auto two = time_collective(collective::all_reduce, collective_algorithm::ring, s, 2, t);
  CHECK(two.ns == doctest::Approx(2 * (1000 + s / (2 * 100.0))));
}

TEST_CASE("collectives: across chips the ring crosses a link; hierarchical shares the links") {
  const auto t = server();
  const double s = 1 << 24;
  const auto ring = time_collective(collective::all_gather, collective_algorithm::ring, s, 128, t);
  CHECK(ring.ns == doctest::Approx(127 * (1000 + 2000 + s / (128 * 50.0))));
  // 8 rings across 16 chips on 4 links each: half a link per ring
  const auto h =
      time_collective(collective::all_gather, collective_algorithm::hierarchical, s, 128, t);
  CHECK(h.ns == doctest::Approx(15 * (3000 + s / 128 / 25.0) + 7 * (1000 + s / 8 / 100.0)));
  // within one chip hierarchical is the ring
  const auto in_chip =
      time_collective(collective::all_reduce, collective_algorithm::hierarchical, s, 8, t);
  const auto ring8 = time_collective(collective::all_reduce, collective_algorithm::ring, s, 8, t);
  CHECK(in_chip.ns == doctest::Approx(ring8.ns));
  // large all-reduces across chips: hierarchical beats the flat ring's 254 link latencies
  const auto ar_ring =
      time_collective(collective::all_reduce, collective_algorithm::ring, s, 128, t);
  const auto ar_h =
      time_collective(collective::all_reduce, collective_algorithm::hierarchical, s, 128, t);
  CHECK(ar_h.ns < ar_ring.ns);
}

TEST_CASE("collectives: more bandwidth is never slower, more bytes never faster") {
  for (const auto c : all_kinds)
    for (const auto a : all_algorithms)
      for (const int p : {2, 3, 8, 16, 24, 128}) {
        INFO(std::string(to_string(c)), " ", std::string(to_string(a)), " p=", p);
        const auto base = server();
        double last = 0;
        for (const double s : {0.0, 1e3, 1e5, 1e6, 1e8}) {
          const double ns = time_collective(c, a, s, p, base).ns;
          CHECK(ns >= last);
          last = ns;
        }
        const double s = 1e6, ref = time_collective(c, a, s, p, base).ns;
        for (const double f : {1.5, 4.0}) {
          auto more = base;
          more.core_bytes_per_ns *= f;
          CHECK(time_collective(c, a, s, p, more).ns <= ref);
          more = base;
          more.hbm_bytes_per_ns = 1000 * f;
          auto less = base;
          less.hbm_bytes_per_ns = 1000;
          CHECK(time_collective(c, a, s, p, more).ns <= time_collective(c, a, s, p, less).ns);
          more = base;
          more.link_bytes_per_ns *= f;
          CHECK(time_collective(c, a, s, p, more).ns <= ref);
          more = base;
          more.chip_links *= 2;
          CHECK(time_collective(c, a, s, p, more).ns <= ref);
        }
      }
}

TEST_CASE("collectives: one rank is free; too many ranks or no link is an error") {
  const auto t = server();
  CHECK(time_collective(collective::all_reduce, collective_algorithm::ring, 1e6, 1, t).ns == 0);
  CHECK_THROWS_WITH_AS(
      (void)time_collective(collective::all_reduce, collective_algorithm::ring, 1e6, 129, t),
      "collective over 129 ranks, but the target has 128 (16 chips x 8 ranks)", error);
  auto no_link = t;
  no_link.link_bytes_per_ns = 0;
  CHECK_THROWS_AS(
      (void)time_collective(collective::all_gather, collective_algorithm::ring, 1e6, 16, no_link),
      error);
  CHECK(time_collective(collective::all_gather, collective_algorithm::ring, 1e6, 8, no_link).ns >
        0);
}

TEST_CASE("collectives: the built-in targets' topologies") {
  const auto core = machine_for("trn2").topo;
  CHECK(core.ranks() == 1);
  const auto chip_topo = machine_for("trn2_chip").topo;
  CHECK(chip_topo.ranks() == 8);
  CHECK(chip_topo.chips == 1);
  CHECK(chip_topo.core_bytes_per_ns == doctest::Approx(368));
  CHECK(chip_topo.hbm_bytes_per_ns == doctest::Approx(2900));
  const auto s = machine_for("trn2_server").topo;
  CHECK(s.ranks() == 128);
  CHECK(s.link_bytes_per_ns == doctest::Approx(320));
  CHECK(s.chip_links == 4);
  CHECK(s.torus_x * s.torus_y == s.chips);
}

TEST_CASE("collectives: algorithms parse by name") {
  for (const auto a : all_algorithms) CHECK(parse_collective_algorithm(to_string(a)) == a);
  CHECK_FALSE(parse_collective_algorithm("butterfly").has_value());
}
