#include "attest/core/report/svg.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <iterator>

#include "attest/core/report/escape.hpp"

namespace attest::report::svg {
namespace {

// Layout numbers (margins, sizes, their sums) in their shortest form: 60, 117, 117.5.
std::string num(double v) { return fmt::format("{}", v); }

std::string coord(Coords c, double v) {
  return c == Coords::fixed1 ? fmt::format("{:.1f}", v) : fmt::format("{:.6g}", v);
}

const char* newline(Style s) { return s == Style::css ? "\n" : ""; }

// Attributes of axis text (after x and y), the grid, the reference line, the frame.
const char* axis_text(Style s) { return s == Style::css ? " class=\"ax\"" : ""; }
const char* grid_line(Style s) { return s == Style::css ? "class=\"grid\"" : "stroke=\"#ddd\""; }
const char* ref_line(Style s) {
  return s == Style::css ? "class=\"ref\"" : "stroke=\"#d62728\" stroke-dasharray=\"4 3\"";
}
const char* frame_rect(Style s) { return s == Style::css ? "class=\"frame\"" : "fill=\"none\" stroke=\"#888\""; }

// The <svg> element and the title at (x, baseline).
std::string open_svg(Style s, double width, double height, std::string_view title, double x, double baseline) {
  const std::string t = escape_html(title);
  if (s == Style::css)
    return fmt::format(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" role=\"img\" aria-label=\"{}\">\n"
        "<text x=\"{}\" y=\"{}\" class=\"t\">{}</text>\n",
        num(width), num(height), t, num(x), num(baseline), t);
  return fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" font-family=\"sans-serif\" "
      "font-size=\"11\">"
      "<text x=\"{}\" y=\"{}\" font-size=\"13\" font-weight=\"bold\">{}</text>",
      num(width), num(height), num(x), num(baseline), t);
}

}  // namespace

void Extent::add(double v) {
  if (!std::isfinite(v)) return;
  lo = std::min(lo, v);
  hi = std::max(hi, v);
}

void Extent::add_positive(double v) {
  if (v > 0) add(v);
}

Axis Axis::linear(Extent e) {
  double lo = e.lo, hi = e.hi;
  if (e.empty()) lo = 0, hi = 1;
  if (hi - lo < 1e-12) lo -= 0.5, hi += 0.5;
  const double pad = (hi - lo) * 0.05;
  return {false, lo - pad, hi + pad};
}

Axis Axis::log10(Extent e, double fallback) {
  if (e.empty()) e.lo = e.hi = fallback;
  const double l0 = std::floor(std::log10(e.lo));
  double l1 = std::ceil(std::log10(e.hi));
  if (l1 <= l0) l1 = l0 + 1;
  return {true, l0, l1};
}

double Axis::clamp(double v) const {
  if (!std::isfinite(v)) return v;
  return log_ ? std::clamp(v, std::pow(10, lo_), std::pow(10, hi_)) : std::clamp(v, lo_, hi_);
}

double Axis::fraction(double v) const { return ((log_ ? std::log10(v) : v) - lo_) / (hi_ - lo_); }

std::vector<Axis::Tick> Axis::ticks() const {
  std::vector<Tick> t;
  if (log_) {
    for (double e = lo_; e <= hi_; e += 1) t.push_back({std::pow(10, e), fmt::format("1e{}", e)});
  } else {
    for (int k = 0; k <= 4; ++k) {
      const double v = lo_ + (hi_ - lo_) * k / 4.0;
      t.push_back({v, fmt::format("{:.4g}", v)});
    }
  }
  return t;
}

Chart::Chart(Style style, Coords coords, double width, double height, Margins m, Axis y, std::size_t points)
    : style_(style),
      coords_(coords),
      width_(width),
      height_(height),
      m_(m),
      pw_(width - m.left - m.right),
      ph_(height - m.top - m.bottom),
      y_(y),
      points_(points) {}

double Chart::x(std::size_t i) const {
  return m_.left + (points_ <= 1 ? pw_ / 2 : pw_ * static_cast<double>(i) / static_cast<double>(points_ - 1));
}

double Chart::y(double v) const { return m_.top + ph_ * (1 - y_.fraction(v)); }

Chart& Chart::open(std::string_view title, double baseline) {
  out_ += open_svg(style_, width_, height_, title, m_.left, baseline);
  return *this;
}

Chart& Chart::frame() {
  out_ += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" {}/>{}", num(m_.left), num(m_.top), num(pw_),
                      num(ph_), frame_rect(style_), newline(style_));
  return *this;
}

Chart& Chart::y_ticks(bool grid) {
  for (const auto& t : y_.ticks()) {
    const double c = y(t.value);
    if (grid)
      out_ += fmt::format("<line x1=\"{}\" x2=\"{}\" y1=\"{}\" y2=\"{}\" {}/>", num(m_.left), num(m_.left + pw_),
                          coord(coords_, c), coord(coords_, c), grid_line(style_));
    out_ += fmt::format("<text x=\"{}\" y=\"{}\"{} text-anchor=\"end\">{}</text>{}", num(m_.left - 4),
                        coord(coords_, c + 4), axis_text(style_), escape_html(t.label), newline(style_));
  }
  return *this;
}

Chart& Chart::reference(double v, std::string_view label) {
  const double c = y(v);
  out_ += fmt::format("<line x1=\"{}\" x2=\"{}\" y1=\"{}\" y2=\"{}\" {}/><text x=\"{}\" y=\"{}\"{}>{}</text>{}",
                      num(m_.left), num(m_.left + pw_), coord(coords_, c), coord(coords_, c), ref_line(style_),
                      num(m_.left + pw_ + 4), coord(coords_, c + 4), axis_text(style_), escape_html(label),
                      newline(style_));
  return *this;
}

Chart& Chart::y_label(std::string_view text, double x) {
  const std::string mid = num(m_.top + ph_ / 2);
  out_ +=
      fmt::format("<text x=\"{0}\" y=\"{1}\"{2} transform=\"rotate(-90 {0} {1})\" text-anchor=\"middle\">{3}</text>{4}",
                  num(x), mid, axis_text(style_), escape_html(text), newline(style_));
  return *this;
}

Chart& Chart::x_ticks(std::size_t first) {
  const std::size_t every = (points_ + 9) / 10;
  for (std::size_t i = 0; i < points_; ++i) {
    const std::size_t label = first + i;
    if (points_ <= 20 || label % every == 0)
      out_ += fmt::format("<text x=\"{}\" y=\"{}\"{} text-anchor=\"middle\">{}</text>", coord(coords_, x(i)),
                          num(m_.top + ph_ + 14), axis_text(style_), label);
  }
  out_ += newline(style_);
  return *this;
}

Chart& Chart::x_label(std::string_view text, double above_bottom) {
  out_ += fmt::format("<text x=\"{}\" y=\"{}\"{} text-anchor=\"middle\">{}</text>{}", num(m_.left + pw_ / 2),
                      num(height_ - above_bottom), axis_text(style_), escape_html(text), newline(style_));
  return *this;
}

Chart& Chart::dots(const std::vector<double>& values, std::string_view colour) {
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (!std::isfinite(values[i])) continue;
    out_ += fmt::format("<circle cx=\"{}\" cy=\"{}\" r=\"2.5\" fill=\"{}\"/>", coord(coords_, x(i)),
                        coord(coords_, y(y_.clamp(values[i]))), colour);
  }
  out_ += newline(style_);
  return *this;
}

Chart& Chart::line(const std::vector<double>& values, std::string_view colour, double stroke_width, bool dashed) {
  std::string points;
  for (std::size_t i = 0; i < values.size(); ++i) {
    const bool finite = std::isfinite(values[i]);
    const std::string cx = coord(coords_, x(i)), cy = coord(coords_, finite ? y(y_.clamp(values[i])) : m_.top);
    fmt::format_to(std::back_inserter(points), "{},{} ", cx, cy);
    if (!finite) out_ += fmt::format("<circle cx=\"{}\" cy=\"{}\" r=\"2.5\" fill=\"{}\"/>", cx, cy, colour);
  }
  out_ += fmt::format("<polyline fill=\"none\" stroke=\"{}\" stroke-width=\"{}\"{} points=\"{}\"/>{}", colour,
                      num(stroke_width), dashed ? " stroke-dasharray=\"6 3\"" : "", points, newline(style_));
  return *this;
}

Chart& Chart::legend(std::size_t k, std::string_view name, std::string_view colour, const Legend& at) {
  const double tx = m_.left + pw_ + at.dx, ty = m_.top + at.first + at.pitch * static_cast<double>(k);
  if (style_ == Style::css)
    out_ +=
        fmt::format("<circle cx=\"{}\" cy=\"{}\" r=\"4\" fill=\"{}\"/><text x=\"{}\" y=\"{}\" class=\"ax\">{}</text>\n",
                    num(tx - 8), num(ty - 4), colour, num(tx), num(ty), escape_html(name));
  else
    out_ += fmt::format("<text x=\"{}\" y=\"{}\" fill=\"{}\">{}</text>", num(tx), num(ty), colour, escape_html(name));
  return *this;
}

std::string Chart::finish() {
  out_ += "</svg>";
  out_ += newline(style_);
  return std::move(out_);
}

std::string bar_chart(Style style, std::string_view title, const std::vector<Bar>& bars, std::string_view unit,
                      double ref) {
  double hi = ref;
  for (const auto& b : bars)
    if (std::isfinite(b.value)) hi = std::max(hi, b.value);
  if (hi <= 0) hi = 1;
  constexpr double W = 760, bh = 16, ml = 330, mr = 70, mt = 24, pw = W - ml - mr;
  const double H = mt + bh * static_cast<double>(bars.size()) + 24;
  constexpr Coords c = Coords::fixed1;
  std::string s = open_svg(style, W, H, title, 4, 15);
  for (std::size_t i = 0; i < bars.size(); ++i) {
    const double y = mt + bh * static_cast<double>(i);
    const double v = std::isfinite(bars[i].value) ? bars[i].value : 0;
    std::string label = bars[i].label;
    if (label.size() > 52) label = label.substr(0, 49) + "...";
    s += fmt::format("<text x=\"{}\" y=\"{}\"{} text-anchor=\"end\">{}</text>", num(ml - 4), coord(c, y + 12),
                     axis_text(style), escape_html(label));
    s += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"{}\"/>", num(ml), coord(c, y + 2),
                     coord(c, pw * v / hi), num(bh - 4), bars[i].highlight ? kTab10[3] : kTab10[0]);
    s += fmt::format("<text x=\"{}\" y=\"{}\"{}>{:.3g}</text>{}", coord(c, ml + pw * v / hi + 3), coord(c, y + 12),
                     axis_text(style), bars[i].value, newline(style));
  }
  if (ref > 0) {
    const std::string x = coord(c, ml + pw * ref / hi);
    s += fmt::format("<line x1=\"{}\" x2=\"{}\" y1=\"{}\" y2=\"{}\" {}/>", x, x, num(mt), num(H - 20), ref_line(style));
  }
  s += fmt::format("<text x=\"{}\" y=\"{}\"{}>{}</text>{}", num(ml), num(H - 6), axis_text(style), escape_html(unit),
                   newline(style));
  return s + "</svg>" + newline(style);
}

}  // namespace attest::report::svg
