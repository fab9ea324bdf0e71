// timing_parts.hpp: what the event model's pieces share (timing.cpp runs the
// events; timing_setup.cpp is the set-up pass over the program;
// dma_sharing.cpp shares the DMA engines; timing_path.cpp attributes the
// critical path). Internal to the simulator.
#pragma once

#include "dma_sharing.hpp"
#include "machine.hpp"
#include "program.hpp"
#include "timing.hpp"

#include <array>
#include <cstdint>
#include <tuple>
#include <type_traits>
#include <vector>

namespace tessel::sim::timing_detail {

/// What made an instruction start when it did.
enum class cause_kind : std::uint8_t { none, engine, dependency, port };

/// The last value of a cost rule and the instruction fields it reads:
/// streams repeat one shape for long runs, and the rules are pure, so the
/// value is the rule's to the bit.
template <auto rule, auto... fields>
struct last_value {
  decltype(rule(instruction{}, machine{})) value{};
  std::tuple<std::remove_cvref_t<decltype(instruction{}.*fields)>...> key{};
  bool known = false;

  auto get(const instruction& in, const machine& m) {
    const auto k = std::tuple{in.*fields...};
    if (!known || k != key) {
      value = rule(in, m);
      key = k;
      known = true;
    }
    return value;
  }
};

/// The byte and instruction tallies of a program (timing_result's fields of
/// the same names), summed in program order.
struct program_tallies {
  std::uint64_t instructions = 0;
  double hbm_read_bytes = 0, hbm_write_bytes = 0, sbuf_dma_bytes = 0, psum_write_bytes = 0;
};

using engine_streams = std::array<std::vector<std::uint32_t>, engine_count>;

/// The set-up pass: fills `streams` with each engine's instructions in
/// program order, describes every transfer to `sharing` (already reset) and
/// returns the tallies. Throws std::out_of_range on a buffer id the program
/// does not have.
program_tallies prepare(const program& p, const machine& m, engine_streams& streams,
                        dma_sharing& sharing, std::vector<memory>& buffer_memory);

/// What the critical-path walk reads: per instruction, what made it start,
/// and its start, end, data-phase start and done times (ns).
struct start_record {
  const std::vector<std::uint32_t>& cause;
  const std::vector<cause_kind>& kind;
  const std::vector<double>&start, &end, &data_start, &done;
};

/// Walks back from `last` along the causes of each start and appends the
/// time per (phase, tag) to r.critical_path, largest first; `shares` is scratch.
void critical_path(const program& p, const start_record& s, std::uint32_t last, timing_result& r,
                   std::vector<double>& shares);

}  // namespace tessel::sim::timing_detail
