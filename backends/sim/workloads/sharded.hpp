// sharded.hpp: what the sharded workloads share (sharded_matmul,
// sharded_attention, sharded_moe; docs/topology.md): a rank's part of the
// work is another workload's plan (the inner workload), and the ranks are
// joined by collectives timed over the target's topology (collectives.hpp),
// after the compute or overlapped with it chunk by chunk (overlap.hpp).
// sharded_workload<Plan> wires the plan, the lowering, the steady estimate
// and the communicate hook to the inner workload; a sharded workload writes
// how it reads its split and plans one rank.
#pragma once

#include <tessel/error.hpp>

#include "../cloning_ptr.hpp"
#include "../collectives.hpp"
#include "../nki/nki.hpp"
#include "../typed_workload.hpp"
#include "overlap.hpp"

#include <fmt/format.h>

#include <algorithm>

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace tessel::sim {

/// How a sharded plan splits over the ranks and what joins them.
struct rank_split {
  int ranks = 1;     ///< the parallel degree (tp, ep)
  std::string what;  ///< "all-gather of C"; "" when the ranks need no collective
  collective kind = collective::all_gather;
  collective_algorithm algorithm = collective_algorithm::ring;
  bool overlap = false;
  double bytes = 0;         ///< what the collectives move per rank, for the message
  std::int64_t chunks = 1;  ///< overlap: one collective per chunk of the rank's work
  const char* chunk_noun = "blocks";
  double whole_ns = 0, chunk_ns = 0;  ///< the collectives of all the bytes, of one chunk's
};

/// The knobs of the split every sharded workload reads: `collective` (the
/// algorithm, documented as `what`'s) and `overlap` (`overlap_doc`).
[[nodiscard]] inline std::vector<knob> split_knobs(std::string_view what, std::string overlap_doc) {
  return {knob::symbol("collective", {"ring", "tree", "hierarchical"}, "ring",
                       fmt::format("{} algorithm (docs/topology.md)", what)),
          knob::flag("overlap", false, std::move(overlap_doc))};
}

/// Reads the degree `degree` ("tp"), `collective` and `overlap` into `r` and
/// checks the degree against `m`'s ranks: "" or why it does not compile.
[[nodiscard]] inline std::string read_split(const knob_reader& v, const machine& m,
                                            const char* degree, rank_split& r) {
  r.ranks = static_cast<int>(v.integer(degree));
  r.algorithm = *parse_collective_algorithm(v.symbol("collective"));
  r.overlap = v.flag("overlap");
  if (r.ranks < 1) return fmt::format("{} = {} must be at least 1", degree, r.ranks);
  if (r.ranks > m.topo.ranks())
    return fmt::format("{} = {} exceeds the {} ranks of target '{}'", degree, r.ranks,
                       m.topo.ranks(), m.target_name);
  return "";
}

/// Times `r`'s collectives, one of each of `bytes` (per rank; all of
/// r.kind): all of them (whole_ns) and each of their chunk's share
/// (chunk_ns). "" or why the topology cannot run them.
[[nodiscard]] inline std::string time_split(const machine& m, rank_split& r,
                                            std::initializer_list<double> bytes) {
  r.whole_ns = r.chunk_ns = 0;
  try {
    for (const double b : bytes) {
      r.whole_ns += time_collective(r.kind, r.algorithm, b, r.ranks, m.topo).ns;
      r.chunk_ns +=
          time_collective(r.kind, r.algorithm, b / static_cast<double>(r.chunks), r.ranks, m.topo)
              .ns;
    }
  } catch (const error& e) {
    return e.what();
  }
  return "";
}

/// The explanation's hints for a collective-bound rank: overlap (in the
/// workload's words), the hierarchical algorithm, a lower degree.
[[nodiscard]] inline std::vector<std::string> split_suggestions(const knob_reader& v,
                                                                std::string overlap_hint,
                                                                std::string lower_hint) {
  std::vector<std::string> out;
  if (!v.flag("overlap")) out.push_back(std::move(overlap_hint));
  if (v.symbol("collective") != "hierarchical")
    out.emplace_back(
        "try collective = hierarchical: within each chip first, so fewer transfers cross "
        "NeuronLink");
  out.push_back(std::move(lower_hint));
  return out;
}

/// `r`'s collectives as an emitted rank calls them (nki/ranks.hpp): one call
/// of each of `bytes` (what its destination holds, per rank), or with overlap
/// one per chunk, counted into `s` under the NKI call's name ("all_gather").
inline void count_collectives(const rank_split& r, std::initializer_list<double> bytes,
                              nki::structure& s) {
  std::string name(to_string(r.kind));
  std::replace(name.begin(), name.end(), '-', '_');
  auto& c = s.collectives[name];
  for (const double b : bytes) {
    c.transfers += static_cast<std::uint64_t>(r.overlap ? r.chunks : 1);
    c.bytes += static_cast<std::uint64_t>(b);
  }
}

/// A workload whose plan `Plan` holds `split` (a rank_split) and `core` (the
/// inner workload's plan of one rank's part, a cloning_ptr<workload_plan>:
/// the Plan copies with the compiler's copy constructor, for
/// workload_plan::clone): that part is lowered, timed and estimated as the
/// inner workload does, and the split's collectives are added by
/// communicate().
template <class Plan>
class sharded_workload : public typed_workload<Plan> {
  static_assert(std::is_copy_constructible_v<Plan>,
                "a sharded plan copies (workload_plan::clone): hold `core` in a cloning_ptr");

 public:
  sharded_workload(workload_info info, const workload& inner)
      : typed_workload<Plan>(std::move(info)), inner_(inner) {}

  [[nodiscard]] std::optional<communication> communicate(const workload_plan& p,
                                                         double compute_ns) const override {
    const rank_split& r = this->typed(p).split;
    if (r.ranks == 1 || r.what.empty()) return std::nullopt;
    return communication_of(
        fmt::format("{} ({}, {} ranks, {:.2f} MiB{})", r.what, to_string(r.algorithm), r.ranks,
                    r.bytes / (1 << 20),
                    r.overlap ? fmt::format(", {} {} overlapped", r.chunks, r.chunk_noun) : ""),
        r.whole_ns, r.chunk_ns, r.chunks, r.overlap, compute_ns);
  }

 protected:
  [[nodiscard]] const workload& inner() const noexcept { return inner_; }

  [[nodiscard]] std::string lower_program(const Plan& p, const machine& m,
                                          program& out) const override {
    return inner_.lower_plan(*p.core, m, out);
  }
  [[nodiscard]] std::optional<steady_estimate> steady(const Plan& p,
                                                      const machine& m) const override {
    return inner_.steady_plan(*p.core, m);
  }

 private:
  const workload& inner_;
};

}  // namespace tessel::sim
