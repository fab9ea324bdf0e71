// Valid neighbours of a config: one parameter moved, or one swap in a permutation.
#include "space/impl.hpp"

#include <algorithm>

namespace tessel {
namespace {

std::uint32_t rank_of_order(const std::vector<std::size_t>& order) {
  // Lexicographic rank: Lehmer code digits times factorials.
  std::uint32_t rank = 0;
  for (std::size_t i = 0; i < order.size(); ++i) {
    std::uint32_t smaller_after = 0;
    for (std::size_t j = i + 1; j < order.size(); ++j) smaller_after += order[j] < order[i];
    rank = rank * static_cast<std::uint32_t>(order.size() - i) + smaller_after;
  }
  return rank;
}

/// Indices `c[p]` may move to: adjacent integers, every other symbol or
/// boolean, every single swap of a permutation.
std::vector<std::uint32_t> moves(const parameter& p, std::uint32_t index) {
  std::vector<std::uint32_t> out;
  const auto n = static_cast<std::uint32_t>(p.dom.size());
  switch (p.dom.kind) {
    case param_kind::integer:
      if (index > 0) out.push_back(index - 1);
      if (index + 1 < n) out.push_back(index + 1);
      break;
    case param_kind::boolean:
    case param_kind::symbol:
      for (std::uint32_t i = 0; i < n; ++i)
        if (i != index) out.push_back(i);
      break;
    case param_kind::permutation: {
      const auto order = p.dom.permutation(index);
      for (std::size_t i = 0; i < order.size(); ++i)
        for (std::size_t j = i + 1; j < order.size(); ++j) {
          auto swapped = order;
          std::swap(swapped[i], swapped[j]);
          out.push_back(rank_of_order(swapped));
        }
      break;
    }
  }
  return out;
}

}  // namespace

std::vector<config> space::neighbours(const config& c) const {
  const auto& s = *impl_;
  std::vector<config> out;
  if (!s.valid(c, nullptr)) return out;
  for (std::size_t p = 0; p < size(); ++p) {
    if (c[p] == config::inactive) continue;
    for (auto index : moves(parameters()[p], c[p])) {
      config next = c;
      next[p] = index;
      if (s.dependents[p].empty()) {
        if (s.valid(next, nullptr)) out.push_back(std::move(next));
        continue;
      }
      if (auto repaired = s.repair_conditionals(std::move(next)))
        out.push_back(std::move(*repaired));
    }
  }
  return out;
}

std::optional<config> space::impl::repair_conditionals(config c) const {
  // Settle activity in declaration order (a `when` reads earlier parameters
  // or ones it is tied to); a newly active parameter takes its default or
  // the first index that makes the config valid.
  std::vector<std::size_t> activated;
  for (std::size_t q = 0; q < whens.size(); ++q) {
    if (!whens[q]) continue;
    const auto values = values_of(c);
    const bool on = active(q, values.data());
    if (!on) {
      c[q] = config::inactive;
    } else if (c[q] == config::inactive) {
      c[q] = static_cast<config::index_type>(def.parameters[q].default_index.value_or(0));
      activated.push_back(q);
    }
  }
  if (valid(c, nullptr)) return c;
  for (auto q : activated) {
    for (config::index_type i = 0; i < def.parameters[q].dom.size(); ++i) {
      c[q] = i;
      if (valid(c, nullptr)) return c;
    }
  }
  return std::nullopt;
}

}  // namespace tessel
