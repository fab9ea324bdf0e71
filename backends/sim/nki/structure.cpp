// structure.cpp: a lowered program counted the way the NKI interpreter
// counts an emitted kernel (nki.hpp, docs/nki.md "Structure").
#include "nki.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

namespace tessel::sim::nki {

structure structure_of(const program& p) {
  structure s;
  const auto& buffers = p.buffers();
  std::set<buffer_id> banks;
  for (const auto& in : p.instructions()) {
    if (in.kind == op::dma) {
      const memory from = buffers.at(in.src).where, to = buffers.at(in.dst).where;
      auto& d = s.dma[fmt::format("{}->{}", to_string(from), to_string(to))];
      d.transfers += in.count;
      d.bytes += std::uint64_t{in.count} * in.partitions * in.free;
      continue;
    }
    s.engines[engine_name(in.engine)] += in.count;
    if (in.kind == op::matmul) s.matmuls[{in.partitions, in.aux, in.free}] += in.count;
    if (in.kind == op::transpose) s.transposes[{in.partitions, in.free}] += in.count;
    if (buffers.at(in.dst).where == memory::psum) banks.insert(in.dst);
  }
  // a PSUM buffer is one bank (emit::psum_banks); one that is not counts as all of its banks
  for (const auto b : banks) {
    const auto& buf = buffers.at(b);
    s.psum_banks += static_cast<int>(std::max<std::int64_t>(1, buf.slots));
  }
  return s;
}

namespace {

/// A rank's collectives (ranks.hpp) as the dict's line, "" when it has none.
std::string collectives(const structure& s, const std::string& indent) {
  if (s.collectives.empty()) return "";
  std::vector<std::string> calls;
  for (const auto& [k, d] : s.collectives)
    calls.push_back(fmt::format("\"{}\": ({}, {})", k, d.transfers, d.bytes));
  return fmt::format(
      "{0}    # each rank's collectives: (calls, bytes of their destinations)\n"
      "{0}    \"collectives\": {{{1}}},\n",
      indent, fmt::join(calls, ", "));
}

/// The counts as a Python dict, its lines after `indent`.
std::string dict(const structure& s, const std::string& indent) {
  std::vector<std::string> mm, tr, dma;
  for (const auto& [k, n] : s.matmuls)
    mm.push_back(fmt::format("({}, {}, {}): {}", k[0], k[1], k[2], n));
  for (const auto& [k, n] : s.transposes) tr.push_back(fmt::format("({}, {}): {}", k[0], k[1], n));
  for (const auto& [k, d] : s.dma)
    dma.push_back(fmt::format("\"{}\": ({}, {})", k, d.transfers, d.bytes));
  const auto engine = [&](const char* e) {
    const auto it = s.engines.find(e);
    return it == s.engines.end() ? std::uint64_t{0} : it->second;
  };
  return fmt::format(
      "{{\n"
      "{0}    # instructions by (contraction, stationary free, moving free)\n"
      "{0}    \"matmul\": {{{1}}},\n"
      "{0}    # TensorE transposes by the input's (partitions, free)\n"
      "{0}    \"transpose\": {{{2}}},\n"
      "{0}    # (transfers, bytes) per direction\n"
      "{0}    \"dma\": {{{3}}},\n"
      "{0}    \"psum_banks\": {4},  # PSUM banks written\n"
      "{0}    \"engines\": {{\"tensor\": {5}, \"vector\": {6}, \"scalar\": {7}, \"gpsimd\": "
      "{8}}},  # instructions\n"
      "{9}"
      "{0}}}",
      indent, fmt::join(mm, ", "), fmt::join(tr, ", "), fmt::join(dma, ", "), s.psum_banks,
      engine("tensor"), engine("vector"), engine("scalar"), engine("gpsimd"),
      collectives(s, indent));
}

constexpr const char* structure_comment =
    "# What the simulator timed: its lowering of this plan, counted (docs/nki.md, "
    "\"Structure\").\n"
    "# The NKI interpreter counts the kernel the same way; the tests require equal counts.\n";

}  // namespace

std::string to_python(const structure& s) {
  return fmt::format("{}STRUCTURE = {}\n", structure_comment, dict(s, ""));
}

std::string to_python(const std::vector<structure>& programs) {
  std::vector<std::string> dicts;
  for (const auto& s : programs) dicts.push_back("    " + dict(s, "    "));
  return fmt::format(
      "{}# An SPMD kernel: one entry per program id, each the lowering of that physical\n"
      "# core's share.\n"
      "STRUCTURE = [\n{},\n]\n",
      structure_comment, fmt::join(dicts, ",\n"));
}

}  // namespace tessel::sim::nki
