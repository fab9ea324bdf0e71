// The product kernel of kernels.hpp: Matern-5/2 with per-dimension length
// scales on numeric dims, times the overlap and Kendall kernels.
#include "strategies/bayesian/kernels.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <optional>

namespace tessel::bayes {
namespace {

const double sqrt5 = std::sqrt(5.0);

// Defaults and bounds, in natural units (the vector holds their logs). Numeric
// dims live in [0, 1] (inactive at -1); y is standardised, so the signal
// variance is about 1.
constexpr double default_length = 0.5, min_length = 0.03, max_length = 30;
constexpr double default_overlap = 1, min_overlap = 0.01, max_overlap = 30;
constexpr double default_kendall = 3, min_kendall = 0.01, max_kendall = 60;
constexpr double default_signal = 1, min_signal = 0.05, max_signal = 20;
constexpr double default_noise = 1e-3, min_noise = 1e-6, max_noise = 1;

/// The largest power of two dividing v, as an exponent (capped at 20; 0 is
/// divisible by all).
int two_adic(std::int64_t v) {
  constexpr int cap = 20;
  if (v == 0) return cap;
  int k = 0;
  while (k < cap && v % 2 == 0) {
    v /= 2;
    ++k;
  }
  return k;
}

/// space::encode's value of v in an integer domain (src/space/encoding.cpp).
double encoded_value(const domain& d, std::int64_t v) {
  auto f = [&](std::int64_t x) {
    return d.log_scale && x > 0 ? std::log2(static_cast<double>(x)) : static_cast<double>(x);
  };
  const double lo = f(d.values.front()), hi = f(d.values.back());
  return hi > lo ? (f(v) - lo) / (hi - lo) : 0.0;
}

/// Whether a value map can add anything to a domain's encoding: an integer
/// domain of 3 or more values, not pow2 (whose log2 encoding is already its
/// values' positions and alignments).
bool mappable(const domain& d) {
  return d.kind == param_kind::integer && !d.log_scale && d.values.size() >= 3;
}

/// The alignment map of an integer domain, or nothing when it would add
/// nothing: fewer than 3 values, a pow2 domain (encoded as log2 already), or
/// every value aligned alike.
std::optional<kernel_layout::value_map> alignment_of(const domain& d) {
  if (!mappable(d)) return std::nullopt;

  std::vector<std::pair<double, int>> points;
  for (auto v : d.values) points.emplace_back(encoded_value(d, v), two_adic(v));
  // The least and greatest alignment as values, before the sort below moves
  // the elements; a loop, as GCC 12 at -O3 flags the dereferenced result of
  // minmax_element with -Wnull-dereference.
  int lo = std::numeric_limits<int>::max(), hi = std::numeric_limits<int>::min();
  for (const auto& point : points) {
    lo = std::min(lo, point.second);
    hi = std::max(hi, point.second);
  }
  if (lo == hi) return std::nullopt;
  std::sort(points.begin(), points.end());
  kernel_layout::value_map out;
  for (const auto& [at, k] : points) {
    out.encoded.push_back(at);
    out.value.push_back(static_cast<double>(k - lo) / static_cast<double>(hi - lo));
  }
  return out;
}

/// The ordinal map of an integer domain: each value's position, 0 for the
/// first and 1 for the last, or nothing when that is the encoded value
/// already (evenly spaced values, a pow2 domain).
std::optional<kernel_layout::value_map> ordinal_of(const domain& d) {
  if (!mappable(d)) return std::nullopt;
  kernel_layout::value_map out;
  const double last = static_cast<double>(d.values.size() - 1);
  bool differs = false;
  for (std::size_t i = 0; i < d.values.size(); ++i) {
    out.encoded.push_back(encoded_value(d, d.values[i]));
    out.value.push_back(static_cast<double>(i) / last);
    differs = differs || std::abs(out.encoded.back() - out.value.back()) > 1e-9;
  }
  if (!differs) return std::nullopt;
  return out;
}

}  // namespace

kernel_layout kernel_layout::of(const space& s, bool alignment, bool ordinal) {
  kernel_layout layout;
  std::map<std::size_t, block> permutations;  // by parameter, in encoding order of elements
  std::vector<std::size_t> permutation_order;
  const auto& encoding = s.encoding();
  for (std::size_t d = 0; d < encoding.size(); ++d) {
    const auto& dim = encoding[d];
    switch (dim.type) {
      case encoded_dimension::kind::numeric: layout.numeric.push_back(d); break;
      case encoded_dimension::kind::categorical:
        layout.blocks.push_back({block::kind::categorical, 0, dim.categories + 1, {d}, 0.5});
        break;
      case encoded_dimension::kind::rank: {
        auto [it, added] = permutations.try_emplace(dim.parameter);
        if (added) {
          it->second.type = block::kind::permutation;
          permutation_order.push_back(dim.parameter);
        }
        it->second.dims.push_back(d);
        break;
      }
    }
  }
  for (auto p : permutation_order) {
    auto& b = permutations[p];
    const std::size_t n = b.dims.size();
    if (n < 2) continue;  // one element: every config has the same order
    b.features = n * (n - 1) / 2;
    b.scale = 1.0 / (4.0 * static_cast<double>(b.features));
    layout.blocks.push_back(std::move(b));
  }
  layout.mapped.resize(layout.numeric.size());
  const auto values = layout.numeric.size();
  const auto domain_of = [&](std::size_t d) -> const domain& {
    return s.parameters()[encoding[d].parameter].dom;
  };
  if (ordinal)
    for (std::size_t i = 0; i < values; ++i)
      if (auto map = ordinal_of(domain_of(layout.numeric[i]))) layout.mapped[i] = std::move(*map);
  if (alignment)
    for (std::size_t i = 0; i < values; ++i) {
      const auto d = layout.numeric[i];
      if (auto map = alignment_of(domain_of(d))) {
        layout.numeric.push_back(d);
        layout.mapped.push_back(std::move(*map));
      }
    }
  std::size_t row = layout.numeric.size();
  for (auto& b : layout.blocks) {
    b.first_feature = row;
    row += b.features;
  }
  layout.features = row;
  return layout;
}

bool kernel_layout::encodable(const space& s, const config& c) {
  if (c.size() != s.size()) return false;
  for (std::size_t p = 0; p < c.size(); ++p)
    if (c[p] != config::inactive && c[p] >= s.parameters()[p].dom.size()) return false;
  return true;
}

Eigen::VectorXd kernel_layout::features_of(const std::vector<double>& encoded) const {
  Eigen::VectorXd f = Eigen::VectorXd::Zero(static_cast<Eigen::Index>(features));
  for (std::size_t i = 0; i < numeric.size(); ++i) {
    const double e = encoded[numeric[i]];
    const auto& map = mapped[i].encoded;
    if (map.empty() || e < 0) {  // the value itself, or inactive (-1)
      f[static_cast<Eigen::Index>(i)] = e;
      continue;
    }
    // The domain value nearest to e (e is one of them, up to rounding).
    auto at = std::lower_bound(map.begin(), map.end(), e);
    if (at == map.end() || (at != map.begin() && e - *(at - 1) < *at - e)) --at;
    f[static_cast<Eigen::Index>(i)] = mapped[i].value[static_cast<std::size_t>(at - map.begin())];
  }
  for (const auto& b : blocks) {
    const auto first = static_cast<Eigen::Index>(b.first_feature);
    if (b.type == block::kind::categorical) {
      const auto category = static_cast<Eigen::Index>(std::lround(encoded[b.dims[0]]));
      f[first + std::min<Eigen::Index>(category, static_cast<Eigen::Index>(b.features) - 1)] = 1;
      continue;
    }
    bool inactive = false;
    for (auto d : b.dims) inactive = inactive || encoded[d] < 0;
    if (inactive) continue;  // all zero: equally far from every order
    Eigen::Index pair = first;
    for (std::size_t a = 0; a < b.dims.size(); ++a)
      for (std::size_t c = a + 1; c < b.dims.size(); ++c)
        f[pair++] = encoded[b.dims[a]] < encoded[b.dims[c]] ? 1.0 : -1.0;
  }
  return f;
}

kernel::kernel(kernel_layout layout) : layout_(std::move(layout)) { set_theta(default_theta()); }

Eigen::VectorXd kernel::default_theta() const {
  Eigen::VectorXd t(static_cast<Eigen::Index>(layout_.hyper_parameters()));
  Eigen::Index i = 0;
  for (std::size_t d = 0; d < layout_.numeric.size(); ++d) t[i++] = std::log(default_length);
  for (const auto& b : layout_.blocks)
    t[i++] = std::log(b.type == kernel_layout::block::kind::categorical ? default_overlap
                                                                        : default_kendall);
  t[i++] = std::log(default_signal);
  t[i] = std::log(default_noise);
  return t;
}

Eigen::VectorXd kernel::lower() const {
  Eigen::VectorXd t(static_cast<Eigen::Index>(layout_.hyper_parameters()));
  Eigen::Index i = 0;
  for (std::size_t d = 0; d < layout_.numeric.size(); ++d) t[i++] = std::log(min_length);
  for (const auto& b : layout_.blocks)
    t[i++] =
        std::log(b.type == kernel_layout::block::kind::categorical ? min_overlap : min_kendall);
  t[i++] = std::log(min_signal);
  t[i] = std::log(min_noise);
  return t;
}

Eigen::VectorXd kernel::upper() const {
  Eigen::VectorXd t(static_cast<Eigen::Index>(layout_.hyper_parameters()));
  Eigen::Index i = 0;
  for (std::size_t d = 0; d < layout_.numeric.size(); ++d) t[i++] = std::log(max_length);
  for (const auto& b : layout_.blocks)
    t[i++] =
        std::log(b.type == kernel_layout::block::kind::categorical ? max_overlap : max_kendall);
  t[i++] = std::log(max_signal);
  t[i] = std::log(max_noise);
  return t;
}

void kernel::set_theta(const Eigen::VectorXd& theta) {
  theta_ = theta;
  const auto dn = static_cast<Eigen::Index>(layout_.numeric.size());
  inverse_length_ = (-theta.head(dn)).array().exp();
  block_weight_.resize(static_cast<Eigen::Index>(layout_.blocks.size()));
  for (std::size_t h = 0; h < layout_.blocks.size(); ++h) {
    const auto i = static_cast<Eigen::Index>(h);
    block_weight_[i] = std::exp(theta[dn + i]) * layout_.blocks[h].scale;
  }
  signal_ = std::exp(theta[static_cast<Eigen::Index>(index_signal())]);
  noise_ = std::exp(theta[static_cast<Eigen::Index>(index_noise())]);
}

Eigen::MatrixXd kernel::scale(const Eigen::Ref<const Eigen::MatrixXd>& raw) const {
  Eigen::MatrixXd z = raw;
  const auto dn = static_cast<Eigen::Index>(layout_.numeric.size());
  z.topRows(dn).array().colwise() *= inverse_length_.array();
  for (std::size_t h = 0; h < layout_.blocks.size(); ++h) {
    const auto& b = layout_.blocks[h];
    z.middleRows(static_cast<Eigen::Index>(b.first_feature), static_cast<Eigen::Index>(b.features))
        .array() *= std::sqrt(block_weight_[static_cast<Eigen::Index>(h)]);
  }
  return z;
}

namespace {

/// Squared distances between the columns of a and b, clamped at 0, into out.
void squared_distances(const Eigen::Ref<const Eigen::MatrixXd>& a,
                       const Eigen::Ref<const Eigen::MatrixXd>& b, Eigen::MatrixXd& out) {
  out.resize(a.cols(), b.cols());
  if (a.rows() == 0) {
    out.setZero();
    return;
  }
  out.noalias() = -2.0 * (a.transpose() * b);
  const Eigen::VectorXd na = a.colwise().squaredNorm().transpose();
  for (Eigen::Index j = 0; j < b.cols(); ++j) {
    const double nb = b.col(j).squaredNorm();
    out.col(j) = (out.col(j) + na).array().max(-nb) + nb;
  }
}

}  // namespace

/// Two products (numeric rows, block rows) and one pass per column: the
/// only n x m temporaries are the result and the block distances.
Eigen::MatrixXd kernel::cross(const Eigen::Ref<const Eigen::MatrixXd>& a,
                              const Eigen::Ref<const Eigen::MatrixXd>& b) const {
  const auto dn = static_cast<Eigen::Index>(layout_.numeric.size());
  const auto rest = a.rows() - dn;
  Eigen::MatrixXd k, c;
  squared_distances(a.topRows(dn), b.topRows(dn), k);
  if (rest > 0) squared_distances(a.bottomRows(rest), b.bottomRows(rest), c);
  Eigen::ArrayXd r(a.cols());
  for (Eigen::Index j = 0; j < b.cols(); ++j) {
    auto r2 = k.col(j).array();
    r = r2.sqrt();
    if (rest > 0)
      r2 = signal_ * (1.0 + sqrt5 * r + (5.0 / 3.0) * r2) * (-sqrt5 * r - c.col(j).array()).exp();
    else
      r2 = signal_ * (1.0 + sqrt5 * r + (5.0 / 3.0) * r2) * (-sqrt5 * r).exp();
  }
  return k;
}

Eigen::VectorXd kernel::trace_gradient(const Eigen::Ref<const Eigen::MatrixXd>& raw,
                                       const Eigen::MatrixXd& w) const {
  const auto dn = static_cast<Eigen::Index>(layout_.numeric.size());
  const auto nb = static_cast<Eigen::Index>(layout_.blocks.size());
  const auto n = raw.cols();
  Eigen::VectorXd grad = Eigen::VectorXd::Zero(theta_.size());
  Eigen::VectorXd delta2(dn), blocks(nb);
  for (Eigen::Index j = 0; j < n; ++j) {
    for (Eigen::Index i = 0; i < j; ++i) {
      double r2 = 0;
      for (Eigen::Index d = 0; d < dn; ++d) {
        const double t = (raw(d, i) - raw(d, j)) * inverse_length_[d];
        delta2[d] = t * t;
        r2 += delta2[d];
      }
      double c = 0;
      for (Eigen::Index h = 0; h < nb; ++h) {
        const auto& b = layout_.blocks[static_cast<std::size_t>(h)];
        const auto first = static_cast<Eigen::Index>(b.first_feature);
        const auto size = static_cast<Eigen::Index>(b.features);
        blocks[h] =
            block_weight_[h] *
            (raw.col(i).segment(first, size) - raw.col(j).segment(first, size)).squaredNorm();
        c += blocks[h];
      }
      const double r = std::sqrt(r2);
      const double e = signal_ * std::exp(-sqrt5 * r - c);
      const double k = (1.0 + sqrt5 * r + (5.0 / 3.0) * r2) * e;
      const double g = (5.0 / 3.0) * (1.0 + sqrt5 * r) * e;
      const double f = w(i, j);  // 0.5 * (w_ij + w_ji)
      grad.head(dn) += (f * g) * delta2;
      grad.segment(dn, nb) -= (f * k) * blocks;
      grad[dn + nb] += f * k;
    }
  }
  grad[dn + nb] += 0.5 * signal_ * w.diagonal().sum();
  grad[dn + nb + 1] += 0.5 * noise_ * w.diagonal().sum();
  return grad;
}

}  // namespace tessel::bayes
