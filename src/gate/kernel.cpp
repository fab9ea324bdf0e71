// kernel.cpp: gated_kernel's defaults: which output elements to probe and
// the tolerance of each output.
#include <tessel/gate.hpp>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <set>

namespace tessel {
namespace {

/// `count` distinct indices of [0, extent), always 0 and extent - 1, sorted.
std::vector<std::int64_t> pick_indices(std::int64_t extent, std::int64_t count, rng& r) {
  std::vector<std::int64_t> all;
  if (extent <= count) {
    all.resize(static_cast<std::size_t>(extent));
    std::iota(all.begin(), all.end(), std::int64_t{0});
    return all;
  }
  std::set<std::int64_t> picked{0, extent - 1};
  while (static_cast<std::int64_t>(picked.size()) < count)
    picked.insert(static_cast<std::int64_t>(r.uniform(static_cast<std::uint64_t>(extent))));
  return {picked.begin(), picked.end()};
}

/// Every combination of one index per dimension, as row-major flat indices.
std::vector<std::int64_t> grid(const tensor_spec& s,
                               const std::vector<std::vector<std::int64_t>>& picks) {
  std::vector<std::int64_t> flat{0};
  for (std::size_t d = 0; d < s.shape.size(); ++d) {
    std::vector<std::int64_t> next;
    next.reserve(flat.size() * picks[d].size());
    for (const std::int64_t outer : flat)
      for (const std::int64_t i : picks[d]) next.push_back(outer * s.shape[d] + i);
    flat = std::move(next);
  }
  return flat;
}

std::vector<std::int64_t> probe_output(const tensor_spec& s, rng& r) {
  const std::int64_t n = s.elements();
  if (n <= gated_kernel::whole_output_limit) {
    std::vector<std::int64_t> all(static_cast<std::size_t>(std::max<std::int64_t>(n, 0)));
    std::iota(all.begin(), all.end(), std::int64_t{0});
    return all;
  }
  // n > whole_output_limit implies at least one dimension and no zero extent.
  const auto dims = static_cast<double>(s.shape.size());
  const auto per_dimension = std::max<std::int64_t>(
      2, static_cast<std::int64_t>(
             std::ceil(std::pow(static_cast<double>(gated_kernel::sample_size), 1 / dims) - 1e-9)));
  std::vector<std::vector<std::int64_t>> picks;
  picks.reserve(s.shape.size());
  for (const std::int64_t extent : s.shape) picks.push_back(pick_indices(extent, per_dimension, r));
  return grid(s, picks);
}

}  // namespace

probe_points gated_kernel::probes(rng& r) const {
  probe_points points;
  for (const tensor_spec& out : outputs()) points.push_back(probe_output(out, r));
  return points;
}

std::vector<double> gated_kernel::tolerances() const {
  std::vector<double> tol;
  for (const tensor_spec& out : outputs()) tol.push_back(default_tolerance(out.type));
  return tol;
}

}  // namespace tessel
