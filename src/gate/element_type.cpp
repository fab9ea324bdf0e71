// element_type.cpp: names, rounding and unit roundoff of the element types
// the gate knows. Every float format is described by its precision (p, the
// significand bits including the implicit one), its smallest normal exponent
// and its largest finite value; rounding is done in double, which holds every
// value of these formats exactly.
#include <tessel/gate.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <utility>

namespace tessel {
namespace {

struct float_format {
  int precision;     ///< significand bits, the implicit bit included
  int min_exponent;  ///< exponent of the smallest normal value (2^min_exponent)
  double max_finite;
};

constexpr float_format format_of(element_type t) noexcept {
  switch (t) {
    case element_type::fp32: return {24, -126, 0x1.fffffep127};
    case element_type::bf16: return {8, -126, 0x1.fep127};
    case element_type::fp16: return {11, -14, 65504.0};
    case element_type::fp8_e4m3: return {4, -6, 448.0};
    case element_type::fp8_e5m2: return {3, -14, 57344.0};
    case element_type::int32: break;
  }
  return {53, -1022, std::numeric_limits<double>::max()};
}

constexpr std::array<std::pair<element_type, std::string_view>, 6> type_names{{
    {element_type::fp32, "fp32"},
    {element_type::bf16, "bf16"},
    {element_type::fp16, "fp16"},
    {element_type::fp8_e4m3, "fp8_e4m3"},
    {element_type::fp8_e5m2, "fp8_e5m2"},
    {element_type::int32, "int32"},
}};

/// Nearest-even rounding to the integer grid, saturating to int32's range.
double round_int32(double x) noexcept {
  constexpr double lo = std::numeric_limits<std::int32_t>::min();
  constexpr double hi = std::numeric_limits<std::int32_t>::max();
  if (std::isnan(x)) return x;
  if (x <= lo) return lo;
  if (x >= hi) return hi;
  return std::nearbyint(x);  // the default rounding mode: ties to even
}

}  // namespace

std::string_view to_string(element_type t) noexcept {
  for (const auto& [value, name] : type_names)
    if (value == t) return name;
  return "unknown";
}

std::optional<element_type> parse_element_type(std::string_view name) noexcept {
  if (name == "fp8") return element_type::fp8_e4m3;
  for (const auto& [value, text] : type_names)
    if (text == name) return value;
  return std::nullopt;
}

double round_to(element_type t, double x) noexcept {
  if (t == element_type::int32) return round_int32(x);
  if (x == 0 || !std::isfinite(x)) return x;  // ±0, NaN and ±inf pass through
  const float_format f = format_of(t);
  // The quantum (spacing) of x's binade; subnormals share the smallest
  // normal binade's quantum. x / quantum is exact (a power-of-two scaling),
  // and nearbyint rounds it to nearest, ties to even.
  const int exponent = std::max(std::ilogb(x), f.min_exponent);
  const int quantum = exponent - (f.precision - 1);
  const double r = std::ldexp(std::nearbyint(std::ldexp(x, -quantum)), quantum);
  if (r > f.max_finite) return f.max_finite;
  if (r < -f.max_finite) return -f.max_finite;
  return r;
}

double unit_roundoff(element_type t) noexcept {
  if (t == element_type::int32) return 0;
  return std::ldexp(1.0, -format_of(t).precision);
}

double max_finite(element_type t) noexcept {
  if (t == element_type::int32) return std::numeric_limits<std::int32_t>::max();
  return format_of(t).max_finite;
}

double min_normal(element_type t) noexcept {
  if (t == element_type::int32) return 1;
  return std::ldexp(1.0, format_of(t).min_exponent);
}

double default_tolerance(element_type t, std::int64_t reduction) noexcept {
  if (t == element_type::int32) return 0;
  // fp32 accumulation's error grows like u sqrt(terms): 2^-12 covers 2^20 terms.
  const double accumulation =
      4 * 0x1p-24 * std::sqrt(static_cast<double>(std::max<std::int64_t>(reduction, 1)));
  return std::max({4 * unit_roundoff(t), 0x1p-12, accumulation});
}

}  // namespace tessel
