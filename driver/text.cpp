// text.cpp: numbers for people (tessel/text.hpp).
#include <tessel/text.hpp>

#include <fmt/format.h>

#include <cmath>

namespace tessel {

std::string with_separators(std::uint64_t number) {
  std::string digits = std::to_string(number);
  std::string out;
  out.reserve(digits.size() + digits.size() / 3);
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out.push_back(',');
    out.push_back(digits[i]);
  }
  return out;
}

std::string percent(double fraction) {
  const double p = fraction * 100.0;
  if (p == 0.0 || p == 100.0) return fmt::format("{:g}%", p);
  if (p >= 10.0) return fmt::format("{:.1f}%", p);
  if (p >= 0.1) return fmt::format("{:.2f}%", p);
  return fmt::format("{:.2g}%", p);
}

std::string milliseconds(double ms) {
  if (ms >= 1000.0) return with_separators(static_cast<std::uint64_t>(std::llround(ms))) + " ms";
  if (ms >= 100.0) return fmt::format("{:.0f} ms", ms);
  if (ms >= 10.0) return fmt::format("{:.1f} ms", ms);
  if (ms >= 1.0) return fmt::format("{:.2f} ms", ms);
  return fmt::format("{:.3g} ms", ms);
}

std::string seconds_as_ms(double seconds) { return milliseconds(seconds * 1e3); }

}  // namespace tessel
