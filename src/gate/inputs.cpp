// inputs.cpp: the hidden suite's distributions and the lazily drawn input
// tensor. Each element hashes (seed, flat index) with splitmix64, turns the
// word into a draw (Box-Muller for the normal, using the word's two 32-bit
// halves) and rounds it into the spec's type, so every value is reproducible,
// O(1) to compute and exactly representable.
#include <tessel/error.hpp>
#include <tessel/gate.hpp>

#include "gate/hash.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <memory>
#include <numbers>
#include <utility>

namespace tessel {
namespace {

constexpr std::array<distribution, 16> all_kinds{
    distribution::normal,      distribution::uniform,      distribution::large,
    distribution::tiny,        distribution::constant,     distribution::structured,
    distribution::outliers,    distribution::shifted,      distribution::positive,
    distribution::sparse,      distribution::padded,       distribution::mask,
    distribution::bf16_valued, distribution::heavy_tailed, distribution::shared_prefix,
    distribution::late_terms,
};

/// Counters of the disguise's, the shift's, the padding's and the prefix's
/// draws (elements use their index).
constexpr std::uint64_t scale_stream = ~0ULL - 3, offset_stream = ~0ULL - 4,
                        shift_stream = ~0ULL - 5, padding_stream = ~0ULL - 6,
                        prefix_stream = ~0ULL - 7, base_stream = ~0ULL - 8, late_stream = ~0ULL - 9;

/// An outlier is one element in 1024, multiplied by outlier_factor().
constexpr std::uint64_t outlier_mask = 1023;
/// |z| below this is raised to it for `large`, `tiny` and `constant`, so
/// those draws are never zero (and tiny ones stay in the normal range).
constexpr double min_magnitude = 0.125;

/// Scale of `large`: 2^12 for fp32 and bf16, so products of up to five
/// inputs (SwiGLU's x * W_gate * x * W_up * W_down) summed over 2^17 terms
/// stay finite in fp32 ((6.3 * 2^12)^5 * 2^17 < 2^100); for the narrow types
/// the largest draw (|z| <= 6.3) stays below the type's max with room for
/// products (fp16, fp8: 2^4).
double large_scale(element_type t) noexcept {
  switch (t) {
    case element_type::fp16:
    case element_type::fp8_e4m3:
    case element_type::fp8_e5m2: return 0x1p4;
    default: return 0x1p12;
  }
}

/// Scale of `tiny`: 8 x the type's smallest normal for the narrow types (so
/// |z| >= 1/8 keeps every draw normal); 2^-12 for fp32 and bf16, where
/// products of up to five inputs must stay normal in fp32
/// ((2^-12 / 8)^5 = 2^-75 >> 2^-126).
double tiny_scale(element_type t) noexcept {
  switch (t) {
    case element_type::fp16:
    case element_type::fp8_e4m3:
    case element_type::fp8_e5m2: return 8 * min_normal(t);
    default: return 0x1p-12;
  }
}

/// fp8 tops out at 448 (e4m3): its outliers are x64 so the largest stays
/// finite; e5m2 (57344) is drawn alike so the two formats see the same values.
double outlier_factor(element_type t) noexcept {
  return t == element_type::fp8_e4m3 || t == element_type::fp8_e5m2 ? 64 : 1000;
}

/// heavy_tailed: one element in 64 is multiplied by 2^(low + span u): up to
/// 2^16 for fp32 and bf16 (products of five such inputs summed over 2^17
/// terms stay finite in fp32), 2^6 for fp16 and 2^4 for fp8 (the largest,
/// 6.3 x 2^6 or 6.3 x 2^4, stays below the type's maximum).
constexpr std::uint64_t heavy_mask = 63;
std::pair<double, double> heavy_exponents(element_type t) noexcept {
  switch (t) {
    case element_type::fp16: return {2, 4};
    case element_type::fp8_e4m3:
    case element_type::fp8_e5m2: return {1, 3};
    default: return {4, 12};
  }
}

double uniform01(std::uint64_t h) noexcept { return static_cast<double>(h >> 11) * 0x1p-53; }

/// late_terms: what fills a row's negligible stretch (drawn per row).
enum class stretch : unsigned char { zeros, tiny, masked };

/// late_terms' tiny stretch: 2^-20 of the terms that matter for fp32 and
/// bf16 (products of five stay normal in fp32: (2^-23)^5 = 2^-115); 16 x
/// fp16's smallest normal (a disguise of 1/2 and |z| >= 1/8 keep it normal);
/// none for fp8, whose normal range is too short for a value to be
/// negligible (its tiny rows are zeros).
double late_tiny_scale(element_type t) noexcept {
  switch (t) {
    case element_type::fp16: return 16 * min_normal(t);
    case element_type::fp8_e4m3:
    case element_type::fp8_e5m2: return 0;
    default: return 0x1p-20;
  }
}

/// late_terms' masked stretch: one value per row, -2^(5 + span u), as an
/// additive mask leaves (e^-32 or less of the terms that matter): down to
/// -2^14 for fp32 and bf16 (a mask of -1e4), -2^6 for the narrow types (x2
/// disguised: inside fp8 e4m3's 448). One value, not a draw per element: a
/// block of rows near -M with a spread of their own left honest
/// Newton-Schulz schedules (tests/sim) beyond their bound.
double late_mask_span(element_type t) noexcept {
  switch (t) {
    case element_type::fp16:
    case element_type::fp8_e4m3:
    case element_type::fp8_e5m2: return 1;
    default: return 9;
  }
}

/// N(0, 1) by inversion: Acklam's rational approximation of the normal
/// quantile (absolute error < 1.2e-8; the coefficients are his published
/// ones) at u from the top 32 bits of `h`, so |z| <= 6.3. Drawing inputs is
/// most of a gate check, and 95% of draws here take two short polynomials
/// and a division, no transcendental (Box-Muller took a log, a sqrt and a
/// cosine per draw: about 4x the time).
double standard_normal(std::uint64_t h) noexcept {
  constexpr double a[] = {-3.969683028665376e+01, 2.209460984245205e+02,  -2.759285104469687e+02,
                          1.383577518672690e+02,  -3.066479806614716e+01, 2.506628277459239e+00};
  constexpr double b[] = {-5.447609879822406e+01, 1.615858368580409e+02, -1.556989798598866e+02,
                          6.680131188771972e+01, -1.328068155288572e+01};
  constexpr double c[] = {-7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e+00,
                          -2.549732539343734e+00, 4.374664141464968e+00,  2.938163982698783e+00};
  constexpr double d[] = {7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e+00,
                          3.754408661907416e+00};
  constexpr double tail = 0.02425;
  const double u = (static_cast<double>(h >> 32) + 0.5) * 0x1p-32;  // in (0, 1)
  if (u > tail && u < 1 - tail) {
    const double q = u - 0.5, r = q * q;
    return (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * q /
           (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1);
  }
  const double q = std::sqrt(-2 * std::log(u < tail ? u : 1 - u));
  const double z = (((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
                   ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1);
  return u < tail ? z : -z;
}

double away_from_zero(double z) noexcept {
  return std::abs(z) < min_magnitude ? std::copysign(min_magnitude, z) : z;
}

/// Smooth in the index: a sine along the last dimension, a cosine along the
/// rows, and a ramp, with periods and phases drawn from the seed.
double structured_value(std::uint64_t seed, std::int64_t flat, std::int64_t last) noexcept {
  const std::int64_t row_index = flat / last;  // integer: the row of the last dimension
  const auto col = static_cast<double>(flat % last);
  const auto row = static_cast<double>(row_index);
  const std::uint64_t h1 = detail::hash(seed, ~0ULL - 1), h2 = detail::hash(seed, ~0ULL - 2);
  const double period_col = 5 + static_cast<double>(h1 % 60), phase_col = uniform01(h1);
  const double period_row = 3 + static_cast<double>(h2 % 40), phase_row = uniform01(h2);
  constexpr double two_pi = 2 * std::numbers::pi;
  return 0.75 * std::sin(two_pi * (col / period_col + phase_col)) +
         0.5 * std::cos(two_pi * (row / period_row + phase_row)) +
         0.5 * (2 * col / static_cast<double>(last) - 1);
}

/// Where an element of a late_terms row lies. One row in four (every row of
/// a vector; from `row_bits`): a head of 1 to cols/8 + 1 ordinary draws,
/// then a negligible stretch to the row's end, broken by 1 to 4 terms that
/// matter at positions drawn in the stretch's second half, and by the row's
/// last element in half the rows. The other rows are ordinary draws, so a
/// matrix of such rows keeps a dense, well-conditioned bulk (Newton-Schulz
/// on a matrix of sparse rows is honest only to within its rounding).
enum class late_part : unsigned char { head, stretch, term };
late_part late_layout(std::uint64_t row_bits, std::int64_t col, std::int64_t cols,
                      bool every_row) noexcept {
  if (!every_row && (row_bits & 3) != 0) return late_part::head;
  const auto head =
      1 + static_cast<std::int64_t>(uniform01(row_bits) * static_cast<double>(cols / 8));
  if (col < head) return late_part::head;
  const std::uint64_t w = detail::mix64(row_bits);
  if (col == cols - 1 && ((w >> 2) & 1) != 0) return late_part::term;
  const std::int64_t start = head + (cols - head) / 2, width = cols - start;
  const auto terms = static_cast<int>(1 + (w & 3));
  for (int i = 0; i < terms; ++i) {
    const auto bits = static_cast<double>((w >> (8 + 14 * i)) & 0x3fff) * 0x1p-14;
    if (col == start + static_cast<std::int64_t>(bits * static_cast<double>(width)))
      return late_part::term;
  }
  return late_part::stretch;
}

}  // namespace

std::string_view to_string(distribution d) noexcept {
  switch (d) {
    case distribution::normal: return "normal";
    case distribution::uniform: return "uniform";
    case distribution::large: return "large";
    case distribution::tiny: return "tiny";
    case distribution::constant: return "constant";
    case distribution::structured: return "structured";
    case distribution::outliers: return "outliers";
    case distribution::shifted: return "shifted";
    case distribution::positive: return "positive";
    case distribution::sparse: return "sparse";
    case distribution::padded: return "padded";
    case distribution::mask: return "mask";
    case distribution::bf16_valued: return "bf16_valued";
    case distribution::heavy_tailed: return "heavy_tailed";
    case distribution::shared_prefix: return "shared_prefix";
    case distribution::late_terms: return "late_terms";
  }
  return "unknown";
}

std::span<const distribution> all_distributions() noexcept { return all_kinds; }

std::int64_t tensor_spec::elements() const noexcept {
  std::int64_t n = 1;
  for (const std::int64_t extent : shape) n *= extent;
  return n;
}

std::vector<std::int64_t> index_of(const tensor_spec& s, std::int64_t flat) {
  std::vector<std::int64_t> index(s.shape.size());
  for (std::size_t d = s.shape.size(); d-- > 0;) {
    const std::int64_t extent = std::max<std::int64_t>(s.shape[d], 1);
    index[d] = flat % extent;
    flat /= extent;
  }
  return index;
}

std::int64_t bytes_of(element_type t) noexcept {
  switch (t) {
    case element_type::bf16:
    case element_type::fp16: return 2;
    case element_type::fp8_e4m3:
    case element_type::fp8_e5m2: return 1;
    case element_type::fp32:
    case element_type::int32: break;
  }
  return 4;
}

input_tensor::input_tensor(const tensor_spec& spec, distribution d, std::uint64_t seed,
                           bool disguised, const input_tensor* base)
    : spec_(&spec), kind_(d), seed_(seed) {
  const element_type t = spec.type;
  if (t == element_type::int32 && spec.label_range <= 0)
    throw options_error(
        fmt::format("tensor_spec '{}'", spec.name),
        "an int32 input needs label_range > 0 (labels are drawn from [0, label_range))");
  if (d == distribution::shared_prefix) {
    // Equal to the base on the first 3/4 to 63/64 of the elements (at least one differs).
    const std::int64_t n = std::max<std::int64_t>(spec.elements(), 1);
    const double tail = 0x1p-6 + (0.25 - 0x1p-6) * uniform01(detail::hash(seed, prefix_stream));
    prefix_ =
        n - std::max<std::int64_t>(1, static_cast<std::int64_t>(tail * static_cast<double>(n)));
    if (base != nullptr)
      base_.push_back(*base);
    else
      base_.emplace_back(spec, distribution::normal, detail::hash(seed, base_stream), true);
    return;
  }
  if (d == distribution::padded) {
    // The trailing 1/16 to 1/8 of the rows (at least one) are zero; every
    // other row is padded on both sides by lengths of its own (zero_at). A
    // vector is one row.
    const std::int64_t cols = spec.shape.empty() ? 1 : std::max<std::int64_t>(spec.shape.back(), 1);
    const std::int64_t rows = std::max<std::int64_t>(spec.elements() / cols, 1);
    padding_ = detail::hash(seed, padding_stream);
    const double share = 0.0625 + 0.0625 * uniform01(padding_);
    zero_rows_ = rows > 1 ? std::max<std::int64_t>(
                                1, static_cast<std::int64_t>(share * static_cast<double>(rows)))
                          : 0;
  }
  if (d == distribution::late_terms) padding_ = detail::hash(seed, late_stream);
  if (t == element_type::int32) {
    if (d == distribution::constant)
      offset_ = static_cast<double>(detail::hash(seed, ~0ULL) %
                                    static_cast<std::uint64_t>(spec.label_range));
    return;
  }
  switch (d) {
    case distribution::large: scale_ = large_scale(t); break;
    case distribution::tiny: scale_ = tiny_scale(t); break;
    case distribution::constant:
      scale_ = 0;
      offset_ = round_to(t, away_from_zero(standard_normal(detail::hash(seed, ~0ULL))));
      break;
    case distribution::shifted: {
      const std::uint64_t h = detail::hash(seed, shift_stream);
      offset_ = std::copysign(1 + 2 * uniform01(h), (h & 1) != 0 ? 1.0 : -1.0);
      break;
    }
    default: break;
  }
  if (disguised) disguise();
  if (spec.scale != 1 && d != distribution::tiny) {  // honest magnitude (tensor_spec::scale)
    scale_ *= spec.scale;
    offset_ =
        d == distribution::constant ? round_to(t, offset_ * spec.scale) : offset_ * spec.scale;
  }
}

void input_tensor::disguise() noexcept {
  // A scale of 2^U(-1, 1) (large and outliers: 2^U(-1, 0), tiny: 2^U(0, 1),
  // so all stay in their type's range) and an offset of U(-1/2, 1/2) x the draw's spread
  // (none for large, tiny and positive: their magnitude is the point).
  const double u = uniform01(detail::hash(seed_, scale_stream));
  double exponent = 2 * u - 1;
  if (kind_ == distribution::large || kind_ == distribution::outliers) exponent = -u;
  if (kind_ == distribution::tiny) exponent = u;
  if (kind_ == distribution::heavy_tailed) exponent = -u;
  const double factor = std::exp2(exponent);
  const double shift = uniform01(detail::hash(seed_, offset_stream)) - 0.5;
  switch (kind_) {
    case distribution::constant: offset_ = round_to(spec_->type, offset_ * factor); return;
    case distribution::large:
    case distribution::tiny:
    case distribution::positive:
    case distribution::sparse:
    case distribution::padded:
    case distribution::mask:
    case distribution::late_terms: scale_ *= factor; return;
    default:
      offset_ = (offset_ + shift) * factor;
      scale_ *= factor;
      return;
  }
}

bool input_tensor::zero_at(std::int64_t flat) const noexcept {
  const std::int64_t cols =
      spec_->shape.empty() ? 1 : std::max<std::int64_t>(spec_->shape.back(), 1);
  const std::int64_t rows = std::max<std::int64_t>(spec_->elements() / cols, 1);
  const std::int64_t row = (flat / cols) % rows, col = flat % cols;
  if (row >= rows - zero_rows_) return true;
  // Ragged, on both sides: each row's own left padding (1/16 to 1/4 of the
  // columns) and right padding (1/8 to 1/2, always longer than the zero rows'
  // share, so that one input's zero rows cannot cover what another's right
  // padding leaves out): neither a zero prefix nor the first row's padding
  // says where a row's data is.
  const std::uint64_t h = detail::hash(padding_, static_cast<std::uint64_t>(row));
  const auto run = [cols](std::uint64_t bits, double low) {
    return static_cast<std::int64_t>((low + 3 * low * uniform01(bits)) * static_cast<double>(cols));
  };
  return col < run(h, 0.0625) || col >= cols - run(detail::mix64(h), 0.125);
}

double input_tensor::at(std::int64_t flat) const noexcept {
  if (values_) return (*values_)[static_cast<std::size_t>(flat)];
  const element_type t = spec_->type;
  if (kind_ == distribution::shared_prefix)
    return flat < prefix_ ? base_[0].at(flat) : base_[0].at(flat + spec_->elements());
  if (kind_ == distribution::constant) return offset_;
  if (kind_ == distribution::padded && zero_at(flat)) return 0;
  const std::uint64_t h = detail::hash(seed_, static_cast<std::uint64_t>(flat));
  if (kind_ == distribution::late_terms) return late_value(flat, h);
  if (t == element_type::int32) {
    const auto range = static_cast<std::uint64_t>(spec_->label_range);
    if (kind_ == distribution::structured)
      return static_cast<double>(static_cast<std::uint64_t>(flat) % range);
    if ((kind_ == distribution::sparse || kind_ == distribution::mask) && (h >> 63) != 0) return 0;
    if (kind_ == distribution::mask) return range > 1 ? 1 : 0;
    return static_cast<double>(h % range);  // bias < range / 2^64: negligible
  }
  double v = 0;
  switch (kind_) {
    case distribution::normal:
    case distribution::padded:
    case distribution::shifted: v = standard_normal(h); break;
    case distribution::uniform: v = 2 * uniform01(h) - 1; break;
    case distribution::large:
    case distribution::tiny: v = away_from_zero(standard_normal(h)); break;
    case distribution::structured:
      v = structured_value(
          seed_, flat, spec_->shape.empty() ? 1 : std::max<std::int64_t>(spec_->shape.back(), 1));
      break;
    case distribution::outliers:
      v = standard_normal(h);
      if ((detail::mix64(h) & outlier_mask) == 0) v *= outlier_factor(t);
      break;
    case distribution::positive: v = std::exp(0.5 * standard_normal(h)); break;
    case distribution::sparse: return round_to(t, std::max(0.0, standard_normal(h)) * scale_);
    case distribution::mask: return round_to(t, (h >> 63) != 0 ? 0.0 : scale_);
    case distribution::bf16_valued:
      return round_to(t, round_to(element_type::bf16, standard_normal(h) * scale_ + offset_));
    case distribution::heavy_tailed: {
      v = standard_normal(h);
      const std::uint64_t g = detail::mix64(h);
      if ((g & heavy_mask) == 0) {
        const auto [low, span] = heavy_exponents(t);
        v *= std::exp2(low + span * uniform01(detail::mix64(g)));
      }
      break;
    }
    case distribution::constant:
    case distribution::shared_prefix:
    case distribution::late_terms: break;
  }
  return round_to(t, v * scale_ + offset_);
}

double input_tensor::late_value(std::int64_t flat, std::uint64_t h) const noexcept {
  // A row of negligible values with the terms that matter after them: an
  // additive mask in the middle of a row, zeros, tiny magnitudes (docs/gate.md,
  // "Round ten (a)"). The row's layout and what fills its stretch derive from
  // padding_ and the row, the values from the element's own hash.
  const element_type t = spec_->type;
  const std::int64_t cols =
      spec_->shape.empty() ? 1 : std::max<std::int64_t>(spec_->shape.back(), 1);
  const std::uint64_t row_bits = detail::hash(padding_, static_cast<std::uint64_t>(flat / cols));
  const late_part part = late_layout(row_bits, flat % cols, cols, spec_->elements() <= cols);
  if (t == element_type::int32) {
    if (part == late_part::stretch) return 0;
    return static_cast<double>(h % static_cast<std::uint64_t>(spec_->label_range));
  }
  const double z = standard_normal(h);
  double v = z;
  if (part == late_part::term) {
    v = away_from_zero(z) * std::exp2(2 * uniform01(detail::mix64(h)));
  } else if (part == late_part::stretch) {
    const std::uint64_t fill = detail::mix64(detail::mix64(row_bits));
    auto kind = static_cast<stretch>(fill % 3);
    if (kind == stretch::tiny && late_tiny_scale(t) == 0) kind = stretch::zeros;
    switch (kind) {
      case stretch::zeros: return 0;
      case stretch::tiny: v = late_tiny_scale(t) * away_from_zero(z); break;
      case stretch::masked: v = -std::exp2(5 + late_mask_span(t) * uniform01(fill)); break;
    }
  }
  return round_to(t, v * scale_);
}

input_tensor input_tensor::rebound(const tensor_spec& s) const {
  input_tensor copy = *this;
  copy.spec_ = &s;
  for (input_tensor& b : copy.base_) b = b.rebound(s);
  return copy;
}

hidden_input::hidden_input(std::shared_ptr<const tensor_spec> spec, const input_tensor& t)
    : spec_(std::move(spec)), tensor_(t.rebound(*spec_)) {}

input_tensor input_tensor::with_values(std::vector<double> values, std::uint64_t tag) const {
  if (static_cast<std::int64_t>(values.size()) != spec_->elements())
    throw error(fmt::format("input {}: {} values for {} elements", spec_->name, values.size(),
                            spec_->elements()));
  input_tensor copy = *this;
  copy.values_ = std::make_shared<const std::vector<double>>(std::move(values));
  copy.seed_ = detail::hash(detail::hash(seed_, 0x10095e75), tag);
  copy.base_.clear();
  return copy;
}

std::vector<double> input_tensor::values() const {
  if (values_) return *values_;
  std::vector<double> out(static_cast<std::size_t>(std::max<std::int64_t>(spec().elements(), 0)));
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = at(static_cast<std::int64_t>(i));
  return out;
}

}  // namespace tessel
