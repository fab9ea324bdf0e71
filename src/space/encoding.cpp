// The numeric encoding of configs for surrogate models (docs/space.md).
#include "space/impl.hpp"

#include <cmath>

namespace tessel {
namespace {

double scaled(const domain& d, std::int64_t v) {
  auto f = [&](std::int64_t x) {
    return d.log_scale && x > 0 ? std::log2(static_cast<double>(x)) : static_cast<double>(x);
  };
  const double lo = f(d.values.front());
  const double hi = f(d.values.back());
  return hi > lo ? (f(v) - lo) / (hi - lo) : 0.0;
}

}  // namespace

namespace detail {

void build_encoding(space::impl& s) {
  using kind = encoded_dimension::kind;
  s.encoding.clear();
  for (std::size_t p = 0; p < s.def.parameters.size(); ++p) {
    const auto& param = s.def.parameters[p];
    switch (param.dom.kind) {
      case param_kind::integer: s.encoding.push_back({kind::numeric, p, 0, 0, param.name}); break;
      case param_kind::boolean:
      case param_kind::symbol:
        s.encoding.push_back({kind::categorical, p, param.dom.size(), 0, param.name});
        break;
      case param_kind::permutation:
        for (std::size_t e = 0; e < param.dom.labels.size(); ++e)
          s.encoding.push_back({kind::rank, p, 0, e, param.name + "." + param.dom.labels[e]});
        break;
    }
  }
}

}  // namespace detail

std::vector<double> space::encode(const config& c) const {
  std::vector<double> out;
  out.reserve(encoding().size());
  for (const auto& dim : encoding()) {
    const auto& d = parameters()[dim.parameter].dom;
    const auto index = c[dim.parameter];
    const bool inactive = index == config::inactive;
    switch (dim.type) {
      case encoded_dimension::kind::numeric:
        out.push_back(inactive ? -1.0 : scaled(d, d.values[index]));
        break;
      case encoded_dimension::kind::categorical:
        out.push_back(static_cast<double>(inactive ? dim.categories : index));
        break;
      case encoded_dimension::kind::rank: {
        if (inactive) {
          out.push_back(-1.0);
          break;
        }
        const auto order = d.permutation(index);
        const auto n = order.size();
        std::size_t position = 0;
        while (order[position] != dim.element) ++position;
        out.push_back(n > 1 ? static_cast<double>(position) / static_cast<double>(n - 1) : 0.0);
        break;
      }
    }
  }
  return out;
}

}  // namespace tessel
