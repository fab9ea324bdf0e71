// ranks.cpp: a kernel of one rank's plan joined to the others by
// nki.collectives (ranks.hpp, docs/nki.md "Ranks and collectives").
#include "ranks.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <map>
#include <string>
#include <vector>

namespace tessel::sim::nki {
namespace {

/// "A, B": the whole inputs' names, the kernel's and rank_inputs()'s arguments.
std::string input_names(const kernel_file& whole) {
  std::vector<std::string> names;
  for (const auto& t : whole.inputs) names.push_back(t.name);
  return fmt::format("{}", fmt::join(names, ", "));
}

}  // namespace

std::string assemble_ranks(const kernel_file& whole, const kernel_file& rank,
                           const rank_emission& e, const structure& s, const context& c) {
  kernel_file f = whole;
  f.workload = e.workload;
  f.notes.insert(f.notes.end(), e.notes.begin(), e.notes.end());
  f.constants.push_back({"RANKS", fmt::to_string(e.ranks),
                         fmt::format("ranks (NeuronCores), each running {}_kernel on its shard of "
                                     "the inputs (rank_inputs)",
                                     e.workload)});
  if (!e.signature.empty()) f.signature = e.signature;
  if (!e.sharded_outputs.empty())
    f.signature += fmt::format("\nSHARDED_OUTPUTS = (\"{}\",)  # each rank returns its part",
                               fmt::join(e.sharded_outputs, "\", \""));
  std::map<std::string, std::string> whole_values;
  for (const auto& k : whole.constants) whole_values[k.name] = k.value;

  writer w;
  w.open("def rank_inputs(rank, {}):", input_names(whole));
  w.line("\"\"\"Rank `rank`'s shard of each whole input (numpy, on the host): the rank's HBM");
  w.line("holds only its shard, as tensor-parallel weights are placed before a launch.\"\"\"");
  w.line("return {{{}}}", fmt::join(e.shards, ", "));
  w.close();
  std::string kernel = "import nki.collectives as ncc\n\n\n" + w.text() + "\n\n";
  // the rank's kernel, renamed: `def <inner>_program_0(...)` -> `def <inner>_rank(...)`
  const std::string& text = rank.kernel;
  const std::size_t def_end = text.find('\n') + 1;
  const std::string from = fmt::format("{}_program_0(", rank.workload);
  std::string def = text.substr(0, def_end);
  if (const auto at = def.find(from); at != std::string::npos)
    def.replace(at, from.size(), rank.workload + "_rank(");
  kernel += def;
  std::string own;  // the rank's plan where it differs from the whole problem's
  for (const auto& k : rank.constants)
    if (auto it = whole_values.find(k.name); it == whole_values.end() || it->second != k.value)
      own += fmt::format("    {} = {}{}\n", k.name, k.value,
                         k.meaning.empty() ? "" : "  # " + k.meaning);
  kernel += own.empty() ? "    # one rank's share, planned as the simulator planned and timed it\n"
                        : "    # one rank's share, planned as the simulator planned and timed "
                          "it; its plan\n    # where it differs from the whole problem's:\n" +
                              own;
  kernel += text.substr(def_end) + "\n\n";
  writer d;
  d.line("@nki.jit");
  d.open("def {}_kernel({}):", e.workload, input_names(whole));
  d.line("# this rank's shards in, its kernel, then the collectives that join the ranks");
  for (const auto& l : e.setup) d.line(l);
  d.line(e.rank_call);
  for (const auto& l : e.communicate) d.line(l);
  kernel += d.text();
  f.kernel = kernel;
  f.reference = whole.reference + e.reference;
  context with = c;
  with.capture = nullptr;
  with.structure = to_python(s);
  return assemble(f, with);
}

}  // namespace tessel::sim::nki
