#include "format.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>
#include <vector>

namespace tessel::cli {

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

namespace {

/// `first .. last` or `first .. last step s` when the values are evenly spaced.
std::string arithmetic_preview(const std::vector<std::int64_t>& v) {
  if (v.size() < 3) return {};
  const std::int64_t step = v[1] - v[0];
  for (std::size_t i = 2; i < v.size(); ++i)
    if (v[i] - v[i - 1] != step) return {};
  if (step == 1) return fmt::format("{} .. {}", v.front(), v.back());
  return fmt::format("{} .. {} step {}", v.front(), v.back(), step);
}

/// `pow2(first .. last)` when the values are consecutive powers of two.
std::string pow2_preview(const std::vector<std::int64_t>& v) {
  if (v.size() < 2 || v.front() <= 0) return {};
  for (std::size_t i = 1; i < v.size(); ++i)
    if (v[i] != v[i - 1] * 2) return {};
  if ((v.front() & (v.front() - 1)) != 0) return {};
  return fmt::format("pow2({} .. {})", v.front(), v.back());
}

/// `{a, b, c}`, or `{a, b, ..., z}` keeping the first max_items - 1 and the last.
std::string set_preview(const domain& dom, std::size_t max_items) {
  const std::size_t n = dom.size();
  std::string out = "{";
  const bool elide = n > max_items && max_items >= 2;
  const std::size_t head = elide ? max_items - 1 : n;
  for (std::size_t i = 0; i < head; ++i) {
    if (i > 0) out += ", ";
    out += dom.label(i);
  }
  if (elide) out += ", ..., " + dom.label(n - 1);
  return out + "}";
}

}  // namespace

std::string domain_preview(const domain& dom, std::size_t max_items) {
  if (dom.kind == param_kind::permutation)
    return fmt::format("perm({})", fmt::join(dom.labels, ", "));
  if (dom.kind == param_kind::integer) {
    if (dom.log_scale) {
      if (auto p = pow2_preview(dom.values); !p.empty()) return p;
    }
    if (auto a = arithmetic_preview(dom.values); !a.empty()) return a;
  }
  return set_preview(dom, max_items);
}

}  // namespace tessel::cli
