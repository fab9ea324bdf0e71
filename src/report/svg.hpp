// src/report/svg.hpp: the few drawing pieces the report's plots share: XML
// escaping, linear and log scales with ticks, and a figure (an <svg> with a
// plot area, axes and labels) that plots append elements to.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace tessel::report_detail {

/// `text` with &, <, >, " and ' escaped for XML text and attributes.
[[nodiscard]] std::string escape(std::string_view text);
/// A short label of a value: 3 significant digits, no trailing noise.
[[nodiscard]] std::string label(double v);

/// Maps data values in [lo, hi] to pixels in [from, to] (to < from for a y
/// axis), linearly or on log10 (all values > 0). figure::axes draws no
/// ticks for a scale with from == to (an axis left out).
struct scale {
  double lo = 0, hi = 1, from = 0, to = 1;
  bool log = false;
  [[nodiscard]] double operator()(double v) const;
  /// About `n` round tick values inside [lo, hi].
  [[nodiscard]] std::vector<double> ticks(int n = 5) const;
};
/// A scale over `values` (min to max, padded by 4%), log when every value
/// is > 0 and they span more than a factor of 4 (timings do).
[[nodiscard]] scale fit(const std::vector<double>& values, double from, double to,
                        bool allow_log = true);

/// One plot: an <svg> of `width` x `height` px whose plot area leaves
/// `left`/`bottom` px for the axes' labels.
class figure {
 public:
  figure(std::string name, double width, double height, double left = 64, double bottom = 44);
  [[nodiscard]] double x0() const { return left_; }
  [[nodiscard]] double x1() const { return width_ - 14; }
  [[nodiscard]] double y0() const { return height_ - bottom_; }  ///< the bottom (y grows down)
  [[nodiscard]] double y1() const { return 24; }
  /// Tick marks, grid lines and labels of `x` (ticks given or scale's own)
  /// and `y`, and the axis titles.
  void axes(const scale& x, const scale& y, std::string_view x_title, std::string_view y_title);
  /// x ticks at given positions with text labels (categories).
  void x_categories(const std::vector<double>& at, const std::vector<std::string>& labels);
  void title(std::string_view text);
  void text(double x, double y, std::string_view s, std::string_view attributes = {});
  /// Appends raw SVG (an element the caller built).
  void add(std::string element) { body_ += std::move(element); }
  /// The figure: a standalone document (XML declaration and namespace) or
  /// inline in HTML.
  [[nodiscard]] std::string svg(bool standalone) const;
  /// The figure as a panel of a larger one, its top left corner at (x, y).
  [[nodiscard]] std::string panel(double x, double y) const;

 private:
  std::string name_;
  double width_, height_, left_, bottom_;
  std::string body_;
};

/// A palette colour for series i (colour-blind safe, Paul Tol's "bright").
[[nodiscard]] std::string_view colour(std::size_t i);

}  // namespace tessel::report_detail
