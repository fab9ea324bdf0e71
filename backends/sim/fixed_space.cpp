// fixed_space.cpp: one-config spaces built in C++ (fixed_space.hpp).
#include "fixed_space.hpp"

#include "workload.hpp"

#include <tessel/error.hpp>

#include <algorithm>

namespace tessel::sim {

std::pair<space, config> fixed_space(const std::string& name, const target& t,
                                     const fixed_values& v) {
  space::definition def;
  def.name = name;
  def.target = t;
  // a flag of the workload (coalesce, causal, ...) given as 0/1 becomes a bool
  const auto chosen = v.symbols.find("workload");
  const workload* w = find_workload(chosen != v.symbols.end() ? chosen->second : name);
  for (const auto& [key, value] : v.integers) {
    const knob* k = w ? w->knobs().find(key) : nullptr;
    const bool flag = k && k->kind == knob_kind::flag;
    def.constants.push_back({key, flag ? value_type::boolean : value_type::integer, value});
  }
  for (const auto& [key, value] : v.symbols) {
    const auto id = def.intern(value);
    def.constants.push_back({key, value_type::symbol, id});
  }
  std::vector<config::index_type> indices;
  for (const auto& [perm_name, order] :
       {std::pair{"order", &v.order}, {"block_order", &v.block_order}}) {
    if (order->empty()) continue;
    parameter p;
    p.name = perm_name;
    p.dom.kind = param_kind::permutation;
    std::vector<std::string> sorted = *order;
    std::sort(sorted.begin(), sorted.end(), [](const std::string& a, const std::string& b) {
      // m, n, k: the matmul's natural element order
      static const std::vector<std::string> natural{"m", "n", "k"};
      const auto ia = std::find(natural.begin(), natural.end(), a),
                 ib = std::find(natural.begin(), natural.end(), b);
      if (ia != natural.end() || ib != natural.end()) return ia < ib;
      return a < b;
    });
    p.dom.labels = sorted;
    for (const auto& l : sorted) p.dom.element_ids.push_back(def.intern(l));
    std::int64_t count = 1;
    for (std::size_t i = 2; i <= sorted.size(); ++i) count *= static_cast<std::int64_t>(i);
    for (std::int64_t r = 0; r < count; ++r) p.dom.values.push_back(r);
    // the rank of the order among the lexicographic orders of element indices
    std::vector<std::size_t> idx;
    for (const auto& e : *order)
      idx.push_back(
          static_cast<std::size_t>(std::find(sorted.begin(), sorted.end(), e) - sorted.begin()));
    std::uint32_t rank = 0;
    for (std::uint32_t r = 0; r < static_cast<std::uint32_t>(count); ++r)
      if (p.dom.permutation(r) == idx) rank = r;
    def.parameters.push_back(p);
    indices.push_back(rank);
  }
  const config c(std::move(indices));
  return {space(std::move(def)), c};
}

}  // namespace tessel::sim
