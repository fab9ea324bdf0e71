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
#include <map>
#include <string>
#include <vector>

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

namespace {

/// The header comment and the imports; `notes` are where the kernel differs.
std::string head(const kernel_file& f, const context& c, const std::vector<std::string>& notes) {
  std::string out = fmt::format("# {}.py: an NKI kernel emitted by tessel {} (tessel emit).\n",
                                f.workload, TESSEL_VERSION);
  for (const auto& h : c.header) out += "# " + h + "\n";
  out += fmt::format("# computes  {}\n", f.summary);
  out +=
      "#\n"
      "# The schedule is the simulator's plan of this config (docs/nki.md). It has been\n"
      "# checked on tessel's NKI interpreter (tests/nki/), never compiled by neuronx-cc or\n"
      "# run on a NeuronCore.\n";
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
      "import nki.language as nl\n";
  return out;
}

/// NAME = value  # meaning, one a line, the comments aligned; each line after `indent`.
std::string constant_lines(const std::vector<constant>& constants, std::string_view indent = {}) {
  std::size_t width = 0;
  for (const auto& k : constants) width = std::max(width, k.name.size() + 3 + k.value.size());
  std::string out;
  for (const auto& k : constants) {
    std::string text = k.name + " = " + k.value;
    if (!k.meaning.empty()) text += std::string(width - text.size() + 2, ' ') + "# " + k.meaning;
    out.append(indent).append(text) += "\n";
  }
  return out;
}

std::string names(const std::vector<hbm_tensor>& tensors) {
  std::vector<std::string> out;
  for (const auto& t : tensors) out.push_back(t.name);
  return fmt::format("{}", fmt::join(out, ", "));
}

/// `t` as program p sees it: its rows lo:hi on the split axis ("A[:, lo:hi]"), or whole.
std::string view(const hbm_tensor& t) {
  if (t.split_axis < 0) return t.name;
  std::vector<std::string> axes(static_cast<std::size_t>(t.rank), ":");
  axes.at(static_cast<std::size_t>(t.split_axis)) =
      t.unit.empty() ? "lo:hi" : fmt::format("lo * {0}:hi * {0}", t.unit);
  return fmt::format("{}[{}]", t.name, fmt::join(axes, ", "));
}

}  // namespace

void open_kernel(writer& w, const kernel_file& f, const context& c) {
  if (c.program >= 0) {
    w.open("def {}_program_{}({}, {}):", f.workload, c.program, names(f.inputs), names(f.outputs));
    return;
  }
  w.line("@nki.jit");
  w.open("def {}_kernel({}):", f.workload, names(f.inputs));
  for (const auto& o : f.outputs) w.line("{} = {}", o.name, o.allocation);
}

std::string assemble(const kernel_file& f, const context& c) {
  if (c.capture) {
    *c.capture = f;
    return "";
  }
  std::string out = head(f, c, f.notes);
  out += "\n# --- the plan ---------------------------------------------------------------\n";
  out += constant_lines(f.constants);
  out += "\n" + f.signature + "\n";
  if (!c.structure.empty()) out += "\n" + c.structure;
  out += "\n" + f.kernel + "\n\n" + f.reference;
  return out;
}

std::string assemble_spmd(const kernel_file& whole, const std::vector<kernel_file>& programs,
                          const spmd_split& split, const std::vector<structure>& structures,
                          const context& c) {
  std::string out = head(whole, c, whole.notes);
  std::vector<std::int64_t> bounds{0};
  for (const auto s : split.shares) bounds.push_back(bounds.back() + s);
  while (bounds.size() < static_cast<std::size_t>(c.m.cores) + 1) bounds.push_back(bounds.back());
  std::vector<constant> constants = whole.constants;
  constants.push_back({"LNC", fmt::to_string(c.m.cores),
                       fmt::format("physical cores: launch as {}_kernel[LNC](...), one program "
                                   "each (nl.program_id(0))",
                                   whole.workload)});
  const bool cut = !split.dimension.empty();  // else program 0 runs it all, as timed
  if (cut)
    constants.push_back(
        {"SPLIT", fmt::format("({})", fmt::join(bounds, ", ")),
         fmt::format("program p's share of {}: SPLIT[p]:SPLIT[p + 1] (the simulator's split)",
                     split.dimension)});
  out += "\n# --- the plan (the whole problem; each program's own share below) ----------\n";
  out += constant_lines(constants);
  out += "\n" + whole.signature + "\n";
  out += "\n" + to_python(structures);
  const std::map<std::string, std::string> whole_values = [&] {
    std::map<std::string, std::string> v;
    for (const auto& k : whole.constants) v[k.name] = k.value;
    return v;
  }();
  for (std::size_t p = 0; p < programs.size(); ++p) {
    std::vector<constant> own;  // the share's plan where it differs from the whole's
    for (const auto& k : programs[p].constants)
      if (auto it = whole_values.find(k.name); it == whole_values.end() || it->second != k.value)
        own.push_back(k);
    const std::string& text = programs[p].kernel;
    const std::size_t def_end = text.find('\n') + 1;
    out += "\n\n" + text.substr(0, def_end);
    if (!programs[p].share.empty())
      out += fmt::format(
          "    # program {0} (physical core {0}): {1};\n"
          "    # its plan where it differs from the whole problem's:\n",
          p, programs[p].share);
    else if (cut)
      out += fmt::format(
          "    # program {0} (physical core {0}): its share of {1}, {2}:{3} of {4}, planned as "
          "the\n    # simulator planned that core's; its plan where it differs from the whole "
          "problem's:\n",
          p, split.dimension, bounds[p], bounds[p + 1], bounds.back());
    else
      out += fmt::format(
          "    # program {0} (physical core {0}): the whole problem; the simulator does not "
          "split\n    # {1}, so the other core idles\n",
          p, whole.workload);
    out += constant_lines(own, "    ");
    out += text.substr(def_end);
  }
  writer w;
  w.line("@nki.jit");
  w.open("def {}_kernel({}):", whole.workload, names(whole.inputs));
  for (const auto& o : whole.outputs) w.line("{} = {}", o.name, o.allocation);
  const bool own = !programs.empty() && !programs.front().share.empty();
  if (own) {
    w.line("# SPMD: one program per physical core, each running the share its plan gives it");
    w.line("# (above) over the shared HBM tensors (docs/nki.md, \"Two physical cores\")");
  } else if (cut) {
    w.line("# SPMD: one program per physical core, each its share of {} through views of the",
           split.dimension);
    w.line("# shared HBM tensors (docs/nki.md, \"Two physical cores\")");
  } else {
    w.line("# SPMD: one program per physical core; program 0 runs it all (docs/nki.md,");
    w.line("# \"Two physical cores\")");
  }
  w.line("p = nl.program_id(0)");
  if (cut) w.line("lo, hi = SPLIT[p], SPLIT[p + 1]");
  std::vector<std::string> args;
  for (const auto* list : {&whole.inputs, &whole.outputs})
    for (const auto& t : *list) args.push_back(view(t));
  for (std::size_t p = 0; p < programs.size(); ++p) {
    w.open("if p == {}:", p);
    w.line("{}_program_{}({})", whole.workload, p, fmt::join(args, ", "));
    w.close();
  }
  w.line("return {}", names(whole.outputs));
  out += "\n\n" + w.text() + "\n\n" + whole.reference;
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
  else if (o.fault == "drop_collective")
    injected = nki::fault::drop_collective;
  else if (!o.fault.empty())
    throw options_error("nki_options.fault",
                        fmt::format("unknown fault '{}' (drop_tail, skip_accumulation, "
                                    "drop_collective, or empty)",
                                    o.fault));
  target t = s.def().target;
  if (!o.target.empty()) {
    const auto named = builtin_target(o.target);
    if (!named)
      throw options_error("nki_options.target",
                          fmt::format("unknown target '{}' (built-in: {})", o.target,
                                      fmt::join(builtin_target_names(), ", ")));
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
