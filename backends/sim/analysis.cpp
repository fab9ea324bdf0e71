// analysis.cpp: metrics, roofline, bottleneck words and the trace (analysis.hpp).
#include "analysis.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>

namespace tessel::sim {
namespace {

/// Peak matmul rate for `t` relative to BF16 (neuroncore.md).
double peak_factor(dtype t, const machine& m) {
  switch (t) {
    case dtype::fp8: return m.fp8_speedup;
    case dtype::fp32: return 1.0 / m.fp32_cost_factor;
    default: return 1.0;
  }
}

std::string engine_title(std::string_view e) {
  if (e == "tensor") return "TensorE";
  if (e == "vector") return "VectorE";
  if (e == "scalar") return "ScalarE";
  if (e == "gpsimd") return "GpSimdE";
  return std::string(e);
}

int percent(double f) { return static_cast<int>(std::lround(100.0 * f)); }

}  // namespace

std::map<std::string, double> category_split(const timing_result& t) {
  double matmul = 0, elementwise = 0, hbm = 0;
  for (const auto& s : t.critical_path) {
    if (s.phase == "tensor") matmul += s.ns;
    if (s.phase == "vector" || s.phase == "scalar" || s.phase == "gpsimd") elementwise += s.ns;
    if (s.phase == "dma issue" || s.phase == "dma data") hbm += s.ns;
  }
  // DMA completion latency, and any part of the latency off the path, is waiting
  const double stall = std::max(0.0, t.latency_ns - matmul - elementwise - hbm);
  return {{"time_matmul_s", matmul * 1e-9},
          {"time_elementwise_s", elementwise * 1e-9},
          {"time_hbm_s", hbm * 1e-9},
          {"time_collective_s", 0.0},
          {"time_stall_s", stall * 1e-9}};
}

roofline_parts roofline_of(const workload_totals& t, const machine& m) {
  const double peak = m.bf16_peak_flops_per_ns * peak_factor(t.compute_type, m);
  return {peak > 0 ? t.flops / peak : 0, t.min_hbm_bytes / m.dma_peak_bytes_per_ns()};
}

analysis::analysis(const program& p, const timing_result& t, const machine& m)
    : p_(p), t_(t), m_(m) {
  const roofline_parts roof = roofline_of(p.totals, m);
  compute_ns_ = roof.compute_ns;
  memory_ns_ = roof.memory_ns;
  std::map<std::pair<std::string, std::string>, std::map<std::string, double>> grouped;
  for (const auto& s : t.critical_path) {
    const bool dma = s.phase.rfind("dma", 0) == 0;
    grouped[{dma ? "dma" : s.phase, s.tag}][s.phase] += s.ns;
  }
  for (const auto& [key, phases] : grouped) {
    resource_share r{key.first, key.second, 0, ""};
    double best = -1;
    for (const auto& [phase, ns] : phases) {
      r.ns += ns;
      if (phase == "dma issue") r.issue_ns = ns;
      if (phase == "dma data") r.data_ns = ns;
      if (phase == "dma latency") r.latency_ns = ns;
      if (ns > best) {
        best = ns;
        r.main_phase = phase;
      }
    }
    shares_.push_back(r);
  }
  std::stable_sort(shares_.begin(), shares_.end(),
                   [](const auto& a, const auto& b) { return a.ns > b.ns; });
}

std::map<std::string, double> analysis::metrics() const {
  const double lat = std::max(t_.latency_ns, 1e-12);
  std::map<std::string, double> out{
      {"latency_s", t_.latency_ns * 1e-9},
      {"tensor_busy", t_.busy_ns[tensor_engine] / lat},
      {"vector_busy", t_.busy_ns[vector_engine] / lat},
      {"scalar_busy", t_.busy_ns[scalar_engine] / lat},
      {"gpsimd_busy", t_.busy_ns[gpsimd_engine] / lat},
      {"dma_busy", t_.dma_active_ns / lat},
      {"dma_engine_utilization", t_.dma_work_ns / (lat * m_.dma_engines)},
      {"hbm_read_bytes", t_.hbm_read_bytes},
      {"hbm_write_bytes", t_.hbm_write_bytes},
      {"sbuf_dma_bytes", t_.sbuf_dma_bytes},
      {"psum_write_bytes", t_.psum_write_bytes},
      {"flops", p_.totals.flops},
      {"roofline_s", roofline_s()},
      {"roofline_compute_s", compute_ns_ * 1e-9},
      {"roofline_memory_s", memory_ns_ * 1e-9},
      {"roofline_fraction", std::max(compute_ns_, memory_ns_) / lat},
      {"instructions", static_cast<double>(t_.instructions)},
      {"tensor_warmup_s", t_.tensor_warmup_ns * 1e-9},
  };
  for (const auto& [name, seconds] : category_split(t_)) out[name] = seconds;
  std::int64_t sbuf = 0;
  for (const auto& b : p_.buffers())
    sbuf += b.where == memory::sbuf ? b.sbuf_bytes_per_partition() : 0;
  out["sbuf_bytes_per_partition"] = static_cast<double>(sbuf);
  if (!shares_.empty()) out["bound_share"] = shares_.front().ns / lat;
  return out;
}

std::string analysis::bottleneck_text() const {
  if (shares_.empty()) return "nothing to time";
  const auto& top = shares_.front();
  const int pct = percent(top.ns / std::max(t_.latency_ns, 1e-12));
  if (top.resource == "dma") {
    std::string what = top.tag;
    if (top.tag.rfind("load ", 0) == 0)
      what = "HBM loads of " + top.tag.substr(5);
    else if (top.tag.rfind("store ", 0) == 0)
      what = "stores of " + top.tag.substr(6) + " to HBM";
    std::string how;
    if (top.main_phase == "dma issue") how = " (mostly the fixed issue cost of each transfer)";
    if (top.main_phase == "dma latency") how = " (mostly DMA completion latency)";
    return fmt::format("DMA-bound: {}% of time waiting on {}{}", pct, what, how);
  }
  return fmt::format("{}-bound: {}% of time in {} on {}", engine_title(top.resource), pct, top.tag,
                     engine_title(top.resource));
}

std::string analysis::headline() const {
  const double lat = std::max(t_.latency_ns, 1e-12);
  return fmt::format("{}; {:.0f}% of the roofline bound ({}-bound at peak)", bottleneck_text(),
                     100.0 * std::max(compute_ns_, memory_ns_) / lat,
                     compute_ns_ >= memory_ns_ ? "compute" : "memory");
}

bottleneck analysis::bottleneck_info() const {
  bottleneck b;
  if (shares_.empty()) return b;
  b.phase =
      shares_.front().resource == "dma" ? shares_.front().main_phase : shares_.front().resource;
  b.tag = shares_.front().tag;
  const double lat = std::max(t_.latency_ns, 1e-12);
  b.share = shares_.front().ns / lat;
  b.issue_share = shares_.front().issue_ns / lat;
  b.data_share = shares_.front().data_ns / lat;
  b.latency_share = shares_.front().latency_ns / lat;
  return b;
}

std::string suggestion_knob(const std::string& suggestion) {
  for (const std::string_view verb : {"raise ", "lower ", "set ", "try "}) {
    if (!suggestion.starts_with(verb)) continue;
    const auto start = verb.size();
    auto end = start;
    while (end < suggestion.size() &&
           (std::isalnum(static_cast<unsigned char>(suggestion[end])) || suggestion[end] == '_'))
      ++end;
    return suggestion.substr(start, end - start);
  }
  return {};
}

std::vector<std::string> analysis::generic_suggestions() const {
  std::vector<std::string> out;
  const double lat = std::max(t_.latency_ns, 1e-12);
  const double roof = std::max(compute_ns_, memory_ns_);
  if (roof >= 0.9 * lat)
    out.push_back(fmt::format("within {}% of the roofline bound: little is left to gain",
                              percent(1 - roof / lat)));
  if (t_.tensor_warmup_ns > 0.05 * lat)
    out.push_back(fmt::format(
        "the TensorE warm-up throttle costs {}% of the time: keep TensorE busy without gaps",
        percent(t_.tensor_warmup_ns / lat)));
  const double tensor_busy = t_.busy_ns[tensor_engine];
  if (tensor_busy > 0.3 * lat && t_.tensor_ideal_ns < 0.8 * (tensor_busy - t_.tensor_warmup_ns))
    out.push_back(fmt::format(
        "small or partial matmul tiles cost {}% of TensorE time",
        percent(1 - t_.tensor_ideal_ns / std::max(tensor_busy - t_.tensor_warmup_ns, 1e-12))));
  return out;
}

sim_explanation analysis::explanation() const {
  sim_explanation e;
  const double lat = std::max(t_.latency_ns, 1e-12);
  e.latency_s = t_.latency_ns * 1e-9;
  e.roofline_s = roofline_s();
  e.roofline_bound = compute_ns_ >= memory_ns_ ? "compute" : "memory";
  e.bottleneck = bottleneck_text();
  e.busy = {{"tensor", t_.busy_ns[tensor_engine] / lat},
            {"vector", t_.busy_ns[vector_engine] / lat},
            {"scalar", t_.busy_ns[scalar_engine] / lat},
            {"gpsimd", t_.busy_ns[gpsimd_engine] / lat},
            {"dma", t_.dma_active_ns / lat}};
  for (const auto& s : t_.critical_path)
    e.critical_path.emplace_back(s.phase + " (" + s.tag + ")", s.ns / lat);
  return e;
}

// --- trace -------------------------------------------------------------------------------

std::string trace_json(const program& p, const timing_result& t, std::string_view title) {
  std::string out;
  out.reserve(p.size() * 160 + 1024);
  auto it = std::back_inserter(out);
  fmt::format_to(
      it,
      R"j({{"displayTimeUnit":"ns","otherData":{{"title":"{}","latency_ns":{:.1f}}},"traceEvents":[)j",
      title, t.latency_ns);
  fmt::format_to(
      it,
      R"j({{"name":"process_name","ph":"M","pid":1,"tid":0,"args":{{"name":"NeuronCore ({})"}}}})j",
      title);
  std::array<bool, engine_count> used{};
  for (const auto& in : p.instructions()) used[in.engine] = true;
  for (int e = 0; e < engine_count; ++e) {
    if (!used[static_cast<std::size_t>(e)]) continue;
    const auto id = static_cast<engine_id>(e);
    const std::string name =
        is_dma(id) ? "DMA queue " + std::to_string(e) : engine_title(engine_name(id));
    const int order = is_dma(id) ? 100 + e : e - tensor_engine;
    fmt::format_to(
        it, R"j(,{{"name":"thread_name","ph":"M","pid":1,"tid":{},"args":{{"name":"{}"}}}})j",
        e + 1, name);
    fmt::format_to(
        it,
        R"j(,{{"name":"thread_sort_index","ph":"M","pid":1,"tid":{},"args":{{"sort_index":{}}}}})j",
        e + 1, order);
  }
  const auto& ins = p.instructions();
  const bool have = t.start_ns.size() == ins.size();
  for (std::size_t i = 0; have && i < ins.size(); ++i) {
    const auto& in = ins[i];
    const std::string& tag = p.tags().at(in.tag);
    const int tid = in.engine + 1;
    if (is_dma(in.engine)) {
      const double issue = t.data_start_ns[i] - t.start_ns[i];
      if (issue > 0)
        fmt::format_to(
            it,
            R"j(,{{"name":"issue {}","cat":"dma issue","ph":"X","ts":{:.4f},"dur":{:.4f},"pid":1,"tid":{}}})j",
            tag, t.start_ns[i] * 1e-3, issue * 1e-3, tid);
      fmt::format_to(
          it,
          R"j(,{{"name":"{}","cat":"dma","ph":"X","ts":{:.4f},"dur":{:.4f},"pid":1,"tid":{},"args":{{"id":{},"partitions":{},"bytes_per_partition":{},"done_us":{:.4f}}}}})j",
          tag, t.data_start_ns[i] * 1e-3, (t.end_ns[i] - t.data_start_ns[i]) * 1e-3, tid, i,
          in.partitions, in.free, t.done_ns[i] * 1e-3);
    } else {
      fmt::format_to(
          it,
          R"j(,{{"name":"{}","cat":"{}","ph":"X","ts":{:.4f},"dur":{:.4f},"pid":1,"tid":{},"args":{{"id":{},"op":"{}","count":{},"partitions":{},"free":{},"aux":{}}}}})j",
          tag, engine_name(in.engine), t.start_ns[i] * 1e-3, (t.end_ns[i] - t.start_ns[i]) * 1e-3,
          tid, i, to_string(in.kind), in.count, in.partitions, in.free, in.aux);
    }
  }
  out += "]}\n";
  return out;
}

}  // namespace tessel::sim

// --- sim_explanation::text --------------------------------------------------------------------

namespace tessel {

std::string sim_explanation::text() const {
  std::string out;
  auto it = std::back_inserter(out);
  fmt::format_to(
      it, "{} on {}: {:.4g} ms; roofline bound {:.4g} ms ({}-bound at peak), {:.0f}% of it\n",
      workload, target, latency_s * 1e3, roofline_s * 1e3, roofline_bound,
      latency_s > 0 ? 100.0 * roofline_s / latency_s : 0.0);
  fmt::format_to(it, "Bottleneck: {}\n", bottleneck);
  fmt::format_to(
      it, "Busy: TensorE {:.0f}%, VectorE {:.0f}%, ScalarE {:.0f}%, GpSimdE {:.0f}%, DMA {:.0f}%\n",
      100 * busy.at("tensor"), 100 * busy.at("vector"), 100 * busy.at("scalar"),
      100 * busy.at("gpsimd"), 100 * busy.at("dma"));
  out += "Critical path:";
  int shown = 0;
  for (const auto& [what, share] : critical_path) {
    if (shown == 5 || share < 0.01) break;
    fmt::format_to(it, "{} {} {:.0f}%", shown++ ? "," : "", what, 100 * share);
  }
  out += "\n";
  if (!suggestions.empty()) {
    out += "Suggestions:\n";
    for (std::size_t i = 0; i < suggestions.size(); ++i)
      fmt::format_to(it, "  {}. {}\n", i + 1, suggestions[i]);
  }
  if (!outside_space.empty()) {
    out += "Outside this space (a space change would unlock; add the parameter to try it):\n";
    for (const auto& [knob, text] : outside_space) fmt::format_to(it, "  - {}: {}\n", knob, text);
  }
  return out;
}

}  // namespace tessel
