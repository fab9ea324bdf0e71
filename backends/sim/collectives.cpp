// collectives.cpp: the collective cost model (collectives.hpp). Each
// algorithm is a list of steps (alpha + bytes / beta, repeated); the
// formulas and their assumptions are in docs/topology.md, "Collectives".
#include "collectives.hpp"

#include <tessel/error.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace tessel::sim {

std::string_view to_string(collective c) noexcept {
  switch (c) {
    case collective::all_reduce: return "all-reduce";
    case collective::all_gather: return "all-gather";
    case collective::reduce_scatter: return "reduce-scatter";
    case collective::all_to_all: return "all-to-all";
  }
  return "?";
}

std::string_view to_string(collective_algorithm a) noexcept {
  switch (a) {
    case collective_algorithm::ring: return "ring";
    case collective_algorithm::tree: return "tree";
    case collective_algorithm::hierarchical: return "hierarchical";
  }
  return "?";
}

std::optional<collective_algorithm> parse_collective_algorithm(std::string_view name) noexcept {
  for (auto a :
       {collective_algorithm::ring, collective_algorithm::tree, collective_algorithm::hierarchical})
    if (to_string(a) == name) return a;
  return std::nullopt;
}

topology topology_of(const std::map<std::string, double, std::less<>>& constants) {
  const auto get = [&](std::string_view name, double fallback) {
    const auto it = constants.find(name);
    return it == constants.end() ? fallback : it->second;
  };
  topology t;
  t.chips = std::max(1, static_cast<int>(get("chips", 1)));
  t.ranks_per_chip = std::max(1, static_cast<int>(get("ranks_per_chip", 1)));
  t.torus_x = std::max(1, static_cast<int>(get("torus_x", 1)));
  t.torus_y = std::max(1, static_cast<int>(get("torus_y", 1)));
  t.core_bytes_per_ns = get("dma_bytes_per_us", 0) / 1000.0;
  t.hbm_bytes_per_ns = get("hbm_bytes_per_us", 0) / 1000.0;
  t.core_latency_ns = get("dma_fixed_latency_ns", 0);
  t.chip_links = static_cast<int>(get("chip_links", 0));
  t.link_bytes_per_ns = get("chip_link_bytes_per_us", 0) / 1000.0;
  t.link_latency_ns = get("chip_link_latency_ns", 0);
  return t;
}

namespace {

/// The ranks a collective spans: p in all, q on each chip, over c chips.
struct group {
  int p = 1, q = 1, c = 1;
};

/// Accumulates steps: `count` times alpha + bytes / beta.
struct tally {
  collective_time out;
  void add(int count, double alpha, double bytes, double beta) {
    if (count <= 0) return;
    out.steps += count;
    out.latency_ns += count * alpha;
    out.transfer_ns += count * bytes / beta;
  }
};

class model {
 public:
  model(const topology& t, int ranks) : t_(t) {
    g_.p = ranks;
    g_.q = std::min(ranks, t.ranks_per_chip);
    g_.c = (ranks + t.ranks_per_chip - 1) / t.ranks_per_chip;
  }

  [[nodiscard]] const group& span() const noexcept { return g_; }

  /// One rank's rate when `flows` transfers run on its chip at once: its
  /// DMA engines, or its share of the chip's HBM (each transfer reads and
  /// writes it).
  [[nodiscard]] double on_chip(double flows) const {
    return std::min(t_.core_bytes_per_ns, t_.hbm_bytes_per_ns / (2 * std::max(1.0, flows)));
  }
  /// Hops on the torus from chip 0 to chip d (chips row-major on it).
  [[nodiscard]] int hops(int d) const {
    const int x = d % t_.torus_x, y = (d / t_.torus_x) % t_.torus_y;
    return std::min(x, t_.torus_x - x) + std::min(y, t_.torus_y - y);
  }
  /// The mean hops between two distinct chips of the group.
  [[nodiscard]] double mean_hops() const {
    double sum = 0;
    for (int d = 1; d < g_.c; ++d) sum += hops(d);
    return g_.c > 1 ? sum / (g_.c - 1) : 0;
  }
  /// A ring step whose slowest edge crosses to the next chip (one hop).
  [[nodiscard]] double cross_alpha(double hop_count = 1) const {
    return t_.core_latency_ns + hop_count * t_.link_latency_ns;
  }
  /// The rate of one of `rings` rings across chips run at once, each using
  /// one outgoing link per chip: a link each while there are enough.
  [[nodiscard]] double ring_link(int rings) const {
    const double share = std::min(1.0, static_cast<double>(t_.chip_links) / std::max(1, rings));
    return std::min(on_chip(g_.q), t_.link_bytes_per_ns * share);
  }
  /// Every rank of a chip sending to other chips at once, spread over the
  /// chip's links, each transfer crossing mean_hops() links.
  [[nodiscard]] double all_to_all_link() const {
    const double links = std::max(1, t_.chip_links);
    return std::min(on_chip(g_.q), links * t_.link_bytes_per_ns / (g_.q * mean_hops()));
  }

  /// A ring over all p ranks: `laps` passes of p - 1 steps of bytes / p.
  collective_time ring(int laps, double bytes) const {
    tally t;
    const bool cross = g_.c > 1;
    const double alpha = cross ? cross_alpha() : t_.core_latency_ns;
    const double beta = cross ? ring_link(1) : on_chip(g_.p);
    t.add(laps * (g_.p - 1), alpha, bytes / g_.p, beta);
    return t.out;
  }

  /// Pairwise exchange: p - 1 steps, each rank sending bytes / p to another.
  collective_time pairwise(double bytes) const {
    tally t;
    if (g_.c > 1)
      t.add(g_.p - 1, cross_alpha(mean_hops()), bytes / g_.p, all_to_all_link());
    else
      t.add(g_.p - 1, t_.core_latency_ns, bytes / g_.p, on_chip(g_.p));
    return t.out;
  }

  /// Partners at distance 2^l, l = 0 .. ceil(log2 p) - 1; `bytes_at(d)` is
  /// what a rank sends at distance d, `all_active` whether every rank sends
  /// (recursive doubling, Bruck) or one per pair of subtrees (a binary tree).
  template <class Bytes>
  collective_time levels(bool all_active, int repeats, Bytes bytes_at) const {
    tally t;
    for (int d = 1; d < g_.p; d *= 2) {
      const bool cross = d >= t_.ranks_per_chip;
      double alpha = t_.core_latency_ns, beta = 0;
      if (cross) {
        alpha = cross_alpha(hops(d / t_.ranks_per_chip));
        // one route per pair of chips: its link is shared by the chip's senders
        beta = all_active ? std::min(on_chip(g_.q), t_.link_bytes_per_ns / g_.q)
                          : std::min(on_chip(1), t_.link_bytes_per_ns);
      } else {
        beta = on_chip(all_active ? g_.q : std::max(1.0, g_.q / (2.0 * d)));
      }
      t.add(repeats, alpha, bytes_at(d), beta);
    }
    return t.out;
  }

  /// Within each chip (q ranks, every chip at once), then across chips.
  collective_time hierarchical(collective c, double bytes) const {
    tally t;
    const int q = g_.q, n = g_.c;
    const double alpha_in = t_.core_latency_ns;
    const double beta_in = on_chip(q);
    const double ring_across = ring_link(q);
    switch (c) {
      case collective::all_reduce:
        t.add(q - 1, alpha_in, bytes / q, beta_in);                     // reduce-scatter in chip
        t.add(2 * (n - 1), cross_alpha(), bytes / q / n, ring_across);  // all-reduce across
        t.add(q - 1, alpha_in, bytes / q, beta_in);                     // all-gather in chip
        break;
      case collective::all_gather:
        t.add(n - 1, cross_alpha(), bytes / g_.p, ring_across);  // gather across chips
        t.add(q - 1, alpha_in, bytes / q, beta_in);              // then within
        break;
      case collective::reduce_scatter:
        t.add(q - 1, alpha_in, bytes / q, beta_in);
        t.add(n - 1, cross_alpha(), bytes / g_.p, ring_across);
        break;
      case collective::all_to_all:
        t.add(q - 1, alpha_in, bytes / q, beta_in);  // regroup by destination chip
        t.add(n - 1, cross_alpha(mean_hops()), bytes / n, all_to_all_link());
        break;
    }
    return t.out;
  }

 private:
  const topology& t_;
  group g_;
};

void check(const topology& t, int ranks, bool crosses) {
  if (ranks > t.ranks())
    throw error(fmt::format("collective over {} ranks, but the target has {} ({} chips x {} ranks)",
                            ranks, t.ranks(), t.chips, t.ranks_per_chip));
  if (t.core_bytes_per_ns <= 0 || t.hbm_bytes_per_ns <= 0)
    throw error("collective: the target has no DMA or HBM bandwidth");
  if (crosses && (t.link_bytes_per_ns <= 0 || t.chip_links <= 0))
    throw error("collective across chips: the target has no chip-to-chip link bandwidth");
}

}  // namespace

collective_time time_collective(collective c, collective_algorithm a, double bytes, int ranks,
                                const topology& t) {
  if (ranks <= 1 || bytes <= 0) return {};
  const model m(t, ranks);
  const group& g = m.span();
  check(t, ranks, g.c > 1);
  collective_time out;
  if (a == collective_algorithm::hierarchical && g.c > 1) {
    out = m.hierarchical(c, bytes);
  } else if (a == collective_algorithm::tree) {
    const double p = g.p;
    switch (c) {
      case collective::all_reduce:  // reduce up a binary tree, then broadcast down it
        out = m.levels(false, 2, [&](int) { return bytes; });
        break;
      case collective::all_gather:      // recursive doubling
      case collective::reduce_scatter:  // recursive halving: the same steps reversed
        out = m.levels(true, 1, [&](int d) { return std::min(d, g.p - d) * bytes / p; });
        break;
      case collective::all_to_all:  // Bruck: half the buffer at each distance
        out = m.levels(true, 1, [&](int) { return bytes / 2; });
        break;
    }
  } else {  // ring (and hierarchical within one chip, which is a ring)
    switch (c) {
      case collective::all_reduce: out = m.ring(2, bytes); break;
      case collective::all_gather:
      case collective::reduce_scatter: out = m.ring(1, bytes); break;
      case collective::all_to_all: out = m.pairwise(bytes); break;
    }
  }
  out.ns = out.latency_ns + out.transfer_ns;
  return out;
}

}  // namespace tessel::sim
