// functional.cpp: what the functional executors share (functional.hpp).
#include "functional.hpp"

#include <algorithm>
#include <array>
#include <set>
#include <utility>

namespace tessel::sim {
namespace {

constexpr std::array<std::pair<fault, std::string_view>, 6> fault_names{{
    {fault::none, "none"},
    {fault::drop_tail, "drop_tail"},
    {fault::skip_accumulation, "skip_accumulation"},
    {fault::truncate_output, "truncate_output"},
    {fault::constant_output, "constant_output"},
    {fault::ignore_input, "ignore_input"},
}};

/// The seed of the tensor that replaces an ignored input: fixed, so the
/// output no longer depends on what the gate drew.
constexpr std::uint64_t ignored_input_seed = 0x5eed'0f'f1ced'1ULL;

}  // namespace

std::optional<fault> parse_fault(std::string_view name) noexcept {
  if (name.empty()) return fault::none;
  for (const auto& [f, text] : fault_names)
    if (text == name) return f;
  return std::nullopt;
}

std::string_view to_string(fault f) noexcept {
  for (const auto& [value, text] : fault_names)
    if (value == f) return text;
  return "none";
}

element_type element_of(dtype t) noexcept {
  switch (t) {
    case dtype::bf16: return element_type::bf16;
    case dtype::fp8: return element_type::fp8_e4m3;
    case dtype::fp16: return element_type::fp16;
    case dtype::fp32: break;
  }
  return element_type::fp32;
}

probe_values functional_kernel::run(std::span<const input_tensor> in,
                                    const probe_points& where) const {
  if (fault_ == fault::constant_output) {
    probe_values out;
    for (const auto& points : where) out.emplace_back(points.size(), 0.5);
    return out;
  }
  std::vector<input_tensor> swapped;
  if (fault_ == fault::ignore_input && !in.empty()) {
    swapped.assign(in.begin(), in.end());
    swapped.back() = input_tensor(in.back().spec(), distribution::normal, ignored_input_seed);
    in = swapped;
  }
  probe_values out = execute(in, where);
  if (fault_ == fault::truncate_output) {
    const auto specs = outputs();
    for (std::size_t k = 0; k < out.size() && k < specs.size(); ++k) {
      const element_type narrower =
          specs[k].type == element_type::fp32 ? element_type::bf16 : element_type::fp8_e4m3;
      for (auto& v : out[k]) v = round_to(narrower, v);
    }
  }
  return out;
}

std::vector<std::int64_t> pick_indices(std::int64_t extent, std::int64_t tile, std::int64_t want,
                                       rng& r) {
  std::vector<std::int64_t> out;
  if (extent <= 0) return out;
  tile = std::clamp<std::int64_t>(tile, 1, extent);
  want = std::clamp<std::int64_t>(want, 1, extent);
  std::set<std::int64_t> seen;
  const auto add = [&](std::int64_t i) {
    if (i >= 0 && i < extent && static_cast<std::int64_t>(out.size()) < want &&
        seen.insert(i).second)
      out.push_back(i);
  };
  const std::int64_t tiles = (extent + tile - 1) / tile, last = (tiles - 1) * tile;
  add(0);
  add(extent - 1);
  add(tile - 1);
  add(last);
  // random elements of random interior tiles (any tile when there is none)
  const std::int64_t randoms = std::max<std::int64_t>(2, want / 4);
  for (std::int64_t n = 0; n < 4 * randoms && static_cast<std::int64_t>(seen.size()) < want &&
                           static_cast<std::int64_t>(out.size()) < 4 + randoms;
       ++n) {
    const std::int64_t t =
        tiles > 2 ? 1 + static_cast<std::int64_t>(r.uniform(static_cast<std::uint64_t>(tiles - 2)))
                  : static_cast<std::int64_t>(r.uniform(static_cast<std::uint64_t>(tiles)));
    add(t * tile + static_cast<std::int64_t>(r.uniform(static_cast<std::uint64_t>(tile))));
  }
  for (std::int64_t i = 0; i < tile; ++i) add(i);
  for (std::int64_t i = last; i < extent; ++i) add(i);
  for (std::int64_t n = 0; n < 4 * want && static_cast<std::int64_t>(out.size()) < want; ++n)
    add(static_cast<std::int64_t>(r.uniform(static_cast<std::uint64_t>(extent))));
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<std::int64_t> grid(const std::vector<std::int64_t>& rows,
                               const std::vector<std::int64_t>& cols, std::int64_t width) {
  std::vector<std::int64_t> out;
  out.reserve(rows.size() * cols.size());
  for (const auto i : rows)
    for (const auto j : cols) out.push_back(i * width + j);
  return out;
}

}  // namespace tessel::sim
