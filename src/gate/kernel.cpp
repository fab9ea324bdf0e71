// kernel.cpp: gate_spec's defaults: which output elements to probe and the
// tolerance of each output.
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

/// The row width a larger output is seen with: its last dimension, or for a
/// vector (or a last dimension of 1) about the square root of its size.
std::int64_t row_width(const tensor_spec& s, std::int64_t n) {
  const std::int64_t last = s.shape.empty() ? 1 : s.shape.back();
  if (s.shape.size() >= 2 && last >= 2) return last;
  return std::max<std::int64_t>(2, static_cast<std::int64_t>(std::sqrt(static_cast<double>(n))));
}

/// Every row at a few columns (the first, the last and random ones, drawn
/// per row), and a few whole rows (the first, the last and random ones):
/// one wrong row, or one wrong column, is always among the probes.
std::vector<std::int64_t> probe_output(const tensor_spec& s, rng& r) {
  const std::int64_t n = std::max<std::int64_t>(s.elements(), 0);
  if (n <= gate_spec::whole_output_limit) {
    std::vector<std::int64_t> all(static_cast<std::size_t>(n));
    std::iota(all.begin(), all.end(), std::int64_t{0});
    return all;
  }
  const std::int64_t width = row_width(s, n);
  const std::int64_t rows = (n + width - 1) / width;
  const std::int64_t per_row = std::clamp<std::int64_t>(gate_spec::sample_size / rows, 2, width);
  const std::int64_t whole_rows = std::clamp<std::int64_t>(gate_spec::sample_size / width, 2, rows);
  std::vector<std::int64_t> flat;
  flat.reserve(static_cast<std::size_t>(rows * per_row + whole_rows * width));
  const auto add = [&](std::int64_t row, std::int64_t col) {
    if (row * width + col < n) flat.push_back(row * width + col);
  };
  for (std::int64_t row = 0; row < rows; ++row)
    for (const std::int64_t col : pick_indices(width, per_row, r)) add(row, col);
  for (const std::int64_t row : pick_indices(rows, whole_rows, r))
    for (std::int64_t col = 0; col < width; ++col) add(row, col);
  std::sort(flat.begin(), flat.end());
  flat.erase(std::unique(flat.begin(), flat.end()), flat.end());
  return flat;
}

}  // namespace

probe_points gate_spec::probes(rng& r) const {
  probe_points points;
  for (const tensor_spec& out : outputs()) points.push_back(probe_output(out, r));
  return points;
}

std::vector<double> gate_spec::tolerances() const {
  std::vector<double> tol;
  for (const tensor_spec& out : outputs()) tol.push_back(default_tolerance(out.type));
  return tol;
}

}  // namespace tessel
