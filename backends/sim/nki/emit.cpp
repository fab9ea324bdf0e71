// emit.cpp: tessel::emit_nki (tessel/sim.hpp) and the parts every
// workload's emitter shares (nki.hpp): it resolves the workload and the
// target, writes the header comment, and lets the workload write its plan.
#include "nki.hpp"

#include "../workload.hpp"

#include <tessel/error.hpp>
#include <tessel/sim.hpp>
#include <tessel/target.hpp>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#ifndef TESSEL_VERSION
#define TESSEL_VERSION "unknown"
#endif

namespace tessel {

namespace sim::nki {

std::string nl_dtype(dtype t) { return "nl." + dtype_name(t); }

std::string dtype_name(dtype t) {
  switch (t) {
    case dtype::bf16: return "bfloat16";
    case dtype::fp8: return "float8_e4m3";
    case dtype::fp32: return "float32";
    case dtype::fp16: return "float16";
  }
  return "bfloat16";
}

std::string engine_word(engine_id e) {
  if (e == scalar_engine) return "scalar";
  if (e == gpsimd_engine) return "gpsimd";
  if (e == tensor_engine) return "tensor";
  return "vector";
}

std::string engine(engine_id e) { return "nisa.engine." + engine_word(e); }

double tolerance(dtype t) {
  // unit roundoff: 2^-(significand bits): bf16 8, fp16 11, fp32 24, fp8 e4m3 4
  const int bits = t == dtype::bf16 ? 8 : t == dtype::fp16 ? 11 : t == dtype::fp8 ? 4 : 24;
  return std::max(4 * std::ldexp(1.0, -bits), std::ldexp(1.0, -12));
}

std::string py_float(double v) {
  for (int digits = 1; digits <= 17; ++digits) {
    const std::string s = fmt::format("{:.{}g}", v, digits);
    if (std::strtod(s.c_str(), nullptr) == v)
      return s.find_first_of(".e") == std::string::npos && s.find("inf") == std::string::npos
                 ? s + ".0"
                 : s;
  }
  return fmt::format("{:.17g}", v);
}

void kernel_file::note_dma_queues(int queues) {
  if (queues > 1)
    notes.push_back(fmt::format("dma_queues = {}: NKI assigns DMA queues itself", queues));
}

std::string assemble(const kernel_file& f, const context& c) {
  std::string out = fmt::format("# {}.py: an NKI kernel emitted by tessel {} (tessel emit).\n",
                                f.workload, TESSEL_VERSION);
  for (const auto& h : c.header) out += "# " + h + "\n";
  out += fmt::format("# computes  {}\n", f.summary);
  out +=
      "#\n"
      "# The schedule is the simulator's plan of this config (docs/nki.md). It has been\n"
      "# checked on tessel's NKI interpreter (tests/nki/), never compiled by neuronx-cc or\n"
      "# run on a NeuronCore.\n";
  std::vector<std::string> notes = f.notes;
  if (c.m.cores > 1)  // every workload: the split is timed, not emitted (docs/nki.md)
    notes.push_back(fmt::format(
        "lnc = {}: the simulator splits the work over {} physical cores and times each share; "
        "this kernel runs it all as one instance (no split over nl.program_id yet)",
        c.m.cores, c.m.cores));
  if (!notes.empty()) {
    out += "# Where this kernel differs from the simulated plan:\n";
    for (const auto& n : notes) out += "#   - " + n + "\n";
  }
  out +=
      "\n"
      "import numpy as np\n"
      "\n"
      "import nki\n"
      "import nki.isa as nisa\n"
      "import nki.language as nl\n"
      "\n"
      "# --- the plan ---------------------------------------------------------------\n";
  std::size_t width = 0;
  for (const auto& k : f.constants) width = std::max(width, k.name.size() + 3 + k.value.size());
  for (const auto& k : f.constants) {
    std::string text = k.name + " = " + k.value;
    if (!k.meaning.empty()) text += std::string(width - text.size() + 2, ' ') + "# " + k.meaning;
    out += text + "\n";
  }
  out += "\n" + f.signature + "\n";
  if (!c.structure.empty()) out += "\n" + c.structure;
  out += "\n" + f.kernel + "\n\n" + f.reference;
  return out;
}

}  // namespace sim::nki

using namespace tessel::sim;

std::string emit_nki(const space& s, const config& c, const nki_options& o) {
  const workload* w = workload_for_space(s, o.workload);
  nki::fault injected = nki::fault::none;
  if (o.fault == "drop_tail")
    injected = nki::fault::drop_tail;
  else if (o.fault == "skip_accumulation")
    injected = nki::fault::skip_accumulation;
  else if (!o.fault.empty())
    throw options_error(fmt::format(
        "nki_options.fault: unknown fault '{}' (drop_tail, skip_accumulation, or empty)", o.fault));
  target t = s.def().target;
  if (!o.target.empty()) {
    const auto named = builtin_target(o.target);
    if (!named)
      throw options_error(fmt::format("nki_options.target: unknown target '{}' (built-in: {})",
                                      o.target, fmt::join(builtin_target_names(), ", ")));
    t = *named;
  }
  const machine m = resolve_machine(t);
  if (!s.is_valid(c))
    throw error(
        fmt::format("emit: the config is not valid in space '{}': {}", s.name(), s.why_invalid(c)));
  nki::context ctx{m, injected, {}, {}};
  ctx.header.push_back(fmt::format("space     {}{}", s.name(),
                                   o.source.empty() ? "" : fmt::format(" ({})", o.source)));
  ctx.header.push_back(fmt::format("config    {}", s.to_json(c)));
  ctx.header.push_back(fmt::format("target    {}", m.target_name));
  if (injected != nki::fault::none)
    ctx.header.push_back(fmt::format("FAULT     {}: deliberately wrong, for tests", o.fault));
  std::string out;
  if (auto e = w->emit_nki(s, c, ctx, out); !e.empty()) throw error(fmt::format("emit: {}", e));
  return out;
}

}  // namespace tessel
