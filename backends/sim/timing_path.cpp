// timing_path.cpp: where the time on the critical path went
// (timing_parts.hpp): one walk back from the last instruction along what
// made each start when it did.
#include "timing_parts.hpp"

#include <algorithm>

namespace tessel::sim::timing_detail {

void critical_path(const program& p, const start_record& s, std::uint32_t last, timing_result& r,
                   std::vector<double>& shares) {
  // phases: 0..3 compute engines (tensor, vector, scalar, gpsimd), 4 dma issue, 5 dma data, 6 dma
  // latency
  static constexpr std::array<const char*, 7> phase_names{
      "tensor", "vector", "scalar", "gpsimd", "dma issue", "dma data", "dma latency"};
  const auto& ins = p.instructions();
  const std::size_t tags = p.tags().size();
  shares.assign(phase_names.size() * std::max<std::size_t>(tags, 1), 0.0);
  auto add = [&](std::size_t phase, std::uint16_t tag, double ns) {
    if (ns > 0) shares[phase * tags + tag] += ns;
  };
  std::uint32_t cur = last;
  double until = last == program::none ? 0 : s.done[last];
  while (cur != program::none) {
    const auto& in = ins[cur];
    const auto next = s.cause[cur];
    double next_until = 0;  // where the cause's share ends
    if (next != program::none) {
      switch (s.kind[cur]) {
        case cause_kind::engine:
        case cause_kind::port: next_until = s.end[next]; break;
        default: next_until = s.done[next]; break;
      }
    }
    if (is_dma(in.engine)) {
      // [next_until, until] splits into the issue (or the wait it
      // overlapped), the data phase and the completion latency
      const double lo = std::min(next_until, until);
      const double data_start = std::max(s.data_start[cur], lo), data_end = s.end[cur];
      add(4, in.tag, std::min(until, data_start) - lo);
      add(5, in.tag, std::min(until, data_end) - data_start);
      add(6, in.tag, until - std::max(data_end, lo));
    } else {
      add(static_cast<std::size_t>(in.engine - tensor_engine), in.tag, until - s.start[cur]);
    }
    if (next != program::none) until = next_until;
    cur = next;
  }
  for (std::size_t ph = 0; ph < phase_names.size(); ++ph)
    for (std::size_t t = 0; t < tags; ++t)
      if (shares[ph * tags + t] > 0)
        r.critical_path.push_back({phase_names[ph], p.tags()[t], shares[ph * tags + t]});
  std::stable_sort(r.critical_path.begin(), r.critical_path.end(),
                   [](const path_share& a, const path_share& b) { return a.ns > b.ns; });
}

}  // namespace tessel::sim::timing_detail
