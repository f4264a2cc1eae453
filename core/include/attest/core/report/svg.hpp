#pragma once
/// SVG plots for reports: a value axis (linear or log10), a chart over point indices built part
/// by part (frame, ticks, reference line, labels, dots, lines, legend), and horizontal bars.
// Hand-written: no Debian-packaged C++ library writes SVG charts; these are string templates.
#include <array>
#include <cstddef>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

namespace attest::report::svg {

/// `css`: elements carry the class names a page's stylesheet styles (t: title, ax: axis text,
/// frame, grid, ref) and each part ends in a newline; `inline_attrs`: presentation attributes
/// on the elements, so the SVG stands alone, and no newlines.
enum class Style { css, inline_attrs };

/// How coordinates computed from data print: `fixed1` one decimal ("{:.1f}"); `sig6` six
/// significant digits (printf's %g, iostream's default). Layout numbers (margins, sizes) print
/// in their shortest form.
enum class Coords { fixed1, sig6 };

/// matplotlib's tab10, in its order.
inline constexpr std::array<std::string_view, 10> kTab10 = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                                                            "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};
/// tab10 with red second (reference/floor first, then the runs under test).
inline constexpr std::array<std::string_view, 10> kRuns10 = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd",
                                                             "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};
/// kRuns10 without grey and olive.
inline constexpr std::array<std::string_view, 8> kRuns8 = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e",
                                                           "#9467bd", "#8c564b", "#e377c2", "#17becf"};

/// The range of the values added: finite ones (`add`) or finite positive ones (`add_positive`,
/// for log axes).
struct Extent {
  double lo = std::numeric_limits<double>::infinity();
  double hi = -std::numeric_limits<double>::infinity();
  void add(double v);
  void add_positive(double v);
  [[nodiscard]] bool empty() const { return !(lo <= hi); }
};

/// A value axis, mapped onto [0, 1] from bottom to top.
class Axis {
 public:
  /// Linear over `e` padded by 5% of its width on each side; [0, 1] when empty, +-0.5 around a
  /// constant (width < 1e-12).
  static Axis linear(Extent e);
  /// Log10 over the whole decades that cover `e` (at least one); `fallback` stands for `e` when
  /// it is empty.
  static Axis log10(Extent e, double fallback);

  [[nodiscard]] bool log() const { return log_; }
  /// Linear: the values at the ends; log10: the exponents of the end decades.
  [[nodiscard]] double lo() const { return lo_; }
  [[nodiscard]] double hi() const { return hi_; }
  /// `v` clamped into the axis (finite values only; others pass through).
  [[nodiscard]] double clamp(double v) const;
  /// Fraction of the axis from the bottom (not clamped): (v - lo) / (hi - lo), of log10(v) on a
  /// log axis.
  [[nodiscard]] double fraction(double v) const;

  struct Tick {
    double value;
    std::string label;
  };
  /// Linear: 5 evenly spaced values labelled "{:.4g}"; log10: every decade 10^k, labelled "1e<k>".
  [[nodiscard]] std::vector<Tick> ticks() const;

 private:
  Axis(bool log, double lo, double hi) : log_(log), lo_(lo), hi_(hi) {}
  bool log_;
  double lo_, hi_;
};

struct Margins {
  double left, right, top, bottom;
};

/// Where the legend's entries go: entry k's text baseline at top margin + first + k * pitch, its
/// text dx right of the plot area (with Style::css a dot of the series colour precedes the text).
struct Legend {
  double dx, first, pitch;
};

/// A chart of series over point indices 0..points-1 (spread evenly across the plot area; one
/// point sits in the middle) against a value axis. Parts are written in the order called.
class Chart {
 public:
  Chart(Style style, Coords coords, double width, double height, Margins m, Axis y, std::size_t points);

  /// Pixel position of point index i / of value v (v not clamped).
  [[nodiscard]] double x(std::size_t i) const;
  [[nodiscard]] double y(double v) const;

  /// The <svg> element and its title (left-aligned with the plot area, baseline at `baseline`).
  Chart& open(std::string_view title, double baseline);
  /// The plot area's outline.
  Chart& frame();
  /// A label at each of the axis's ticks, left of the plot area; `grid` adds a line across.
  Chart& y_ticks(bool grid);
  /// A dashed line across at value v, `label` right of the plot area.
  Chart& reference(double v, std::string_view label);
  /// The value axis's title, rotated, centred on the plot area's height at x = `x`.
  Chart& y_label(std::string_view text, double x);
  /// Index labels `first + i` under the plot area: all of them up to 20 points, else those
  /// divisible by ceil(points / 10).
  Chart& x_ticks(std::size_t first);
  /// The index axis's title, centred under the plot area, baseline `above_bottom` above the edge.
  Chart& x_label(std::string_view text, double above_bottom);
  /// A dot per finite value, clamped into the axis; other values are not drawn.
  Chart& dots(const std::vector<double>& values, std::string_view colour);
  /// A polyline through the values, finite ones clamped into the axis; a non-finite value is
  /// drawn on the top edge and marked with a dot.
  Chart& line(const std::vector<double>& values, std::string_view colour, double stroke_width, bool dashed);
  /// Legend entry k.
  Chart& legend(std::size_t k, std::string_view name, std::string_view colour, const Legend& at);
  /// Closes the <svg> element and returns the document.
  std::string finish();

 private:
  Style style_;
  Coords coords_;
  double width_, height_;
  Margins m_;
  double pw_, ph_;
  Axis y_;
  std::size_t points_;
  std::string out_;
};

struct Bar {
  std::string label;
  double value = 0;
  bool highlight = false;  ///< drawn red instead of blue
};

/// Horizontal bars, one 16-pixel row each, on a 760-pixel-wide chart: the label right-aligned
/// before the bar (cut to 52 characters), the value ("{:.3g}") after it; lengths scale to the
/// largest finite value (or `ref`); a non-finite value draws no bar. `ref` > 0 adds a dashed line
/// at that value; `unit` goes under the bars.
std::string bar_chart(Style style, std::string_view title, const std::vector<Bar>& bars, std::string_view unit,
                      double ref);

}  // namespace attest::report::svg
