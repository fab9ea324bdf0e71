// kernel.cpp: gate_spec's defaults: which output elements to compare, the
// tolerance of each output, and the bytes a run must move.
#include <tessel/gate.hpp>

#include <algorithm>
#include <cmath>
#include <numeric>

namespace tessel {
namespace {

/// The row width a larger output is seen with: its last dimension, or for a
/// vector (or a last dimension of 1) about the square root of its size.
std::int64_t row_width(const tensor_spec& s, std::int64_t n) {
  const std::int64_t last = s.shape.empty() ? 1 : s.shape.back();
  if (s.shape.size() >= 2 && last >= 2) return last;
  return std::max<std::int64_t>(2, static_cast<std::int64_t>(std::sqrt(static_cast<double>(n))));
}

/// Side of the square tiles a large output is compared on.
constexpr std::int64_t tile_side = 64;

/// Random tiles (the first and the last always), one random column and the
/// last column of every row, and the last element.
std::vector<std::int64_t> probe_output(const tensor_spec& s, rng& r) {
  const std::int64_t n = std::max<std::int64_t>(s.elements(), 0);
  if (n <= gate_spec::whole_output_limit) {
    std::vector<std::int64_t> all(static_cast<std::size_t>(n));
    std::iota(all.begin(), all.end(), std::int64_t{0});
    return all;
  }
  const std::int64_t width = row_width(s, n);
  const std::int64_t rows = (n + width - 1) / width;
  const std::int64_t tile_rows = std::min(tile_side, rows), tile_cols = std::min(tile_side, width);
  const std::int64_t row_tiles = (rows + tile_rows - 1) / tile_rows;
  const std::int64_t col_tiles = (width + tile_cols - 1) / tile_cols;
  const std::int64_t tiles =
      std::max<std::int64_t>(2, gate_spec::sample_size / (tile_rows * tile_cols));
  std::vector<std::int64_t> flat;
  flat.reserve(static_cast<std::size_t>(tiles * tile_rows * tile_cols + 2 * rows));
  const auto add = [&](std::int64_t row, std::int64_t col) {
    if (row < rows && col < width && row * width + col < n) flat.push_back(row * width + col);
  };
  const auto add_tile = [&](std::int64_t tr, std::int64_t tc) {
    for (std::int64_t i = 0; i < tile_rows; ++i)
      for (std::int64_t j = 0; j < tile_cols; ++j) add(tr * tile_rows + i, tc * tile_cols + j);
  };
  add_tile(0, 0);
  add_tile(row_tiles - 1, col_tiles - 1);
  for (std::int64_t t = 2; t < tiles; ++t)
    add_tile(static_cast<std::int64_t>(r.uniform(static_cast<std::uint64_t>(row_tiles))),
             static_cast<std::int64_t>(r.uniform(static_cast<std::uint64_t>(col_tiles))));
  for (std::int64_t row = 0; row < rows; ++row) {
    add(row, static_cast<std::int64_t>(r.uniform(static_cast<std::uint64_t>(width))));
    add(row, width - 1);
  }
  flat.push_back(n - 1);  // the last element, also when the last row is short
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
  for (const tensor_spec& out : outputs())
    tol.push_back(default_tolerance(out.type, out.reduction));
  return tol;
}

double gate_spec::min_bytes() const {
  double bytes = 0;
  for (const auto& list : {inputs(), outputs()})
    for (const tensor_spec& t : list)
      bytes += static_cast<double>(t.elements()) * static_cast<double>(bytes_of(t.type));
  return bytes;
}

}  // namespace tessel
