// A model's step time by kernel and by category (tessel/model.hpp).
#include <tessel/model.hpp>

#include <algorithm>
#include <map>

namespace tessel {
namespace {

constexpr std::array<time_category, time_category_count> categories = {
    time_category::matmul,     time_category::elementwise, time_category::hbm,
    time_category::collective, time_category::stall,       time_category::other};

double metric(const measurement& m, std::string_view name) {
  const auto it = m.metrics.find(std::string(name));
  return it == m.metrics.end() ? 0.0 : it->second;
}

}  // namespace

std::vector<std::vector<std::size_t>> distinct_kernels(const model_definition& m) {
  std::vector<std::vector<std::size_t>> out;
  std::map<std::string, std::size_t> by_key;  // identity -> index into out
  for (std::size_t i = 0; i < m.kernels.size(); ++i) {
    // the space after its sets: its file and name, and every const's value
    const auto& def = m.kernels[i].space.def();
    std::string key = m.kernels[i].space_file + '\n' + def.name;
    for (const auto& c : def.constants)
      key += '\n' + c.name + '=' +
             (c.type == value_type::symbol ? def.symbols.at(static_cast<std::size_t>(c.value))
                                           : std::to_string(c.value));
    const auto [it, fresh] = by_key.emplace(key, out.size());
    if (fresh) out.emplace_back();
    out[it->second].push_back(i);
  }
  return out;
}

std::string_view to_string(time_category c) noexcept {
  switch (c) {
    case time_category::matmul: return "matmul";
    case time_category::elementwise: return "elementwise";
    case time_category::hbm: return "hbm";
    case time_category::collective: return "collective";
    case time_category::stall: return "stall";
    case time_category::other: return "other";
  }
  return "?";
}

const std::array<time_category, time_category_count>& all_time_categories() noexcept {
  return categories;
}

std::string_view metric_of(time_category c) noexcept {
  switch (c) {
    case time_category::matmul: return "time_matmul_s";
    case time_category::elementwise: return "time_elementwise_s";
    case time_category::hbm: return "time_hbm_s";
    case time_category::collective: return "time_collective_s";
    case time_category::stall: return "time_stall_s";
    case time_category::other: return "";
  }
  return "";
}

category_seconds categories_of(const measurement& m) {
  category_seconds out{};
  if (!m.ok()) return out;
  double split = 0;
  for (std::size_t i = 0; i + 1 < time_category_count; ++i) {
    out[i] = std::max(0.0, metric(m, metric_of(categories[i])));
    split += out[i];
  }
  // A split that overshoots the objective (rounding) is scaled back to it.
  if (split > m.objective && split > 0)
    for (std::size_t i = 0; i + 1 < time_category_count; ++i) out[i] *= m.objective / split;
  const double rest = m.objective - std::min(split, m.objective);
  // rounding in the backend's split is not time
  out.back() = rest > 1e-9 * m.objective ? rest : 0.0;
  return out;
}

step_breakdown step_of(std::span<const kernel_result> kernels) {
  step_breakdown out;
  for (const auto& k : kernels) {
    kernel_step row;
    row.name = k.name;
    row.calls = k.calls;
    if (k.result && k.result->ok()) {
      const auto& m = *k.result;
      const auto calls = static_cast<double>(k.calls);
      row.timed = true;
      row.per_call_s = m.objective;
      row.step_s = calls * m.objective;
      row.by_category = categories_of(m);
      for (auto& s : row.by_category) s *= calls;
      row.flops = calls * metric(m, "flops");
      row.hbm_bytes = calls * (metric(m, "hbm_read_bytes") + metric(m, "hbm_write_bytes"));
      row.roofline_s = calls * metric(m, "roofline_s");
      out.step_s += row.step_s;
      for (std::size_t i = 0; i < time_category_count; ++i)
        out.by_category[i] += row.by_category[i];
      out.flops += row.flops;
      out.hbm_bytes += row.hbm_bytes;
      out.roofline_s += row.roofline_s;
    } else {
      out.untimed.push_back(k.name);
    }
    out.kernels.push_back(std::move(row));
  }
  for (auto& row : out.kernels) row.share = out.step_s > 0 ? row.step_s / out.step_s : 0;
  return out;
}

}  // namespace tessel
