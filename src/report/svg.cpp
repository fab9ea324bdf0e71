#include "svg.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>

namespace tessel::report_detail {

std::string escape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  return out;
}

std::string label(double v) {
  if (v == 0) return "0";
  return fmt::format("{:.3g}", v);
}

double scale::operator()(double v) const {
  const double a = log ? std::log10(lo) : lo, b = log ? std::log10(hi) : hi;
  const double t = ((log ? std::log10(std::max(v, lo * 1e-3)) : v) - a) / (b - a);
  return from + t * (to - from);
}

std::vector<double> scale::ticks(int n) const {
  std::vector<double> out;
  if (log) {
    // Decades, and 2x and 5x when the range spans few of them.
    const int first = static_cast<int>(std::floor(std::log10(lo)));
    const int last = static_cast<int>(std::ceil(std::log10(hi)));
    const bool fine = last - first <= 2;
    for (int e = first; e <= last; ++e)
      for (const double m : {1.0, 2.0, 5.0}) {
        if (m != 1 && !fine) continue;
        const double v = m * std::pow(10.0, e);
        if (v >= lo && v <= hi) out.push_back(v);
      }
    return out;
  }
  const double raw = (hi - lo) / std::max(n, 1);
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  double step = magnitude;
  for (const double m : {1.0, 2.0, 2.5, 5.0, 10.0})
    if (m * magnitude >= raw) {
      step = m * magnitude;
      break;
    }
  for (double v = std::ceil(lo / step) * step; v <= hi + step * 1e-9; v += step)
    out.push_back(std::abs(v) < step * 1e-9 ? 0 : v);
  return out;
}

scale fit(const std::vector<double>& values, double from, double to, bool allow_log) {
  scale s{.from = from, .to = to};
  std::vector<double> finite;
  for (const double v : values)
    if (std::isfinite(v)) finite.push_back(v);
  if (finite.empty()) return s;
  const auto [lo, hi] = std::minmax_element(finite.begin(), finite.end());
  s.lo = *lo;
  s.hi = *hi;
  s.log = allow_log && s.lo > 0 && s.hi / s.lo > 4;
  if (s.log) {
    s.lo /= 1.15;
    s.hi *= 1.15;
    return s;
  }
  const double pad = s.hi > s.lo ? (s.hi - s.lo) * 0.04 : std::max(std::abs(s.hi) * 0.1, 1.0);
  s.lo -= pad;
  s.hi += pad;
  return s;
}

figure::figure(std::string name, double width, double height, double left, double bottom)
    : name_(std::move(name)), width_(width), height_(height), left_(left), bottom_(bottom) {}

void figure::text(double x, double y, std::string_view s, std::string_view attributes) {
  body_ += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" {}>{}</text>", x, y, attributes, escape(s));
}

void figure::title(std::string_view s) { text(x0(), 16, s, "class=\"title\""); }

void figure::axes(const scale& x, const scale& y, std::string_view x_title,
                  std::string_view y_title) {
  body_ += fmt::format(
      "<rect class=\"area\" x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\"/>", x0(),
      y1(), x1() - x0(), y0() - y1());
  for (const double v : x.from == x.to ? std::vector<double>{} : x.ticks()) {
    const double px = x(v);
    body_ += fmt::format(
        "<line class=\"grid\" x1=\"{0:.1f}\" x2=\"{0:.1f}\" y1=\"{1:.1f}\" "
        "y2=\"{2:.1f}\"/>",
        px, y1(), y0());
    text(px, y0() + 14, label(v), "class=\"tick\" text-anchor=\"middle\"");
  }
  for (const double v : y.from == y.to ? std::vector<double>{} : y.ticks()) {
    const double py = y(v);
    body_ += fmt::format(
        "<line class=\"grid\" x1=\"{0:.1f}\" x2=\"{1:.1f}\" y1=\"{2:.1f}\" "
        "y2=\"{2:.1f}\"/>",
        x0(), x1(), py);
    text(x0() - 4, py + 4, label(v), "class=\"tick\" text-anchor=\"end\"");
  }
  text((x0() + x1()) / 2, height_ - 8, x_title, "class=\"axis\" text-anchor=\"middle\"");
  body_ += fmt::format(
      "<text class=\"axis\" text-anchor=\"middle\" transform=\"translate(14 {:.1f}) "
      "rotate(-90)\">{}</text>",
      (y0() + y1()) / 2, escape(y_title));
}

void figure::x_categories(const std::vector<double>& at, const std::vector<std::string>& labels) {
  for (std::size_t i = 0; i < at.size() && i < labels.size(); ++i)
    text(at[i], y0() + 14, labels[i], "class=\"tick\" text-anchor=\"middle\"");
}

std::string figure::svg(bool standalone) const {
  static constexpr std::string_view style =
      "<style>text{font:11px sans-serif;fill:#333}.title{font-weight:bold;font-size:13px}"
      ".area{fill:#fafafa;stroke:#bbb}.grid{stroke:#e4e4e4}.axis{font-size:12px}"
      ".ok{fill:#4477aa;fill-opacity:.55}.fail{stroke:#cc3311;stroke-width:1.5}"
      ".best{fill:none;stroke:#222;stroke-width:2}.top{fill:none;stroke-width:1.5;"
      "stroke-opacity:.8}</style>";
  return fmt::format(
      "{}<svg {}class=\"plot\" data-plot=\"{}\" width=\"{:.0f}\" height=\"{:.0f}\" "
      "viewBox=\"0 0 {:.0f} {:.0f}\">{}{}</svg>\n",
      standalone ? "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n" : "",
      standalone ? "xmlns=\"http://www.w3.org/2000/svg\" " : "", name_, width_, height_, width_,
      height_, style, body_);
}

std::string figure::panel(double x, double y) const {
  return fmt::format(
      "<svg class=\"panel\" data-panel=\"{}\" x=\"{:.0f}\" y=\"{:.0f}\" width=\"{:.0f}\" "
      "height=\"{:.0f}\">{}</svg>",
      name_, x, y, width_, height_, body_);
}

std::string_view colour(std::size_t i) {
  static constexpr std::array<std::string_view, 7> tol{"#4477aa", "#ee6677", "#228833", "#ccbb44",
                                                       "#66ccee", "#aa3377", "#bbbbbb"};
  return tol[i % tol.size()];
}

}  // namespace tessel::report_detail
