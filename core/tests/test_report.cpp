// The report library against facts that do not come from it: the HTML and XML escaping rules,
// pixel positions worked out by hand, Markdown tables written out literally.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "attest/core/report/escape.hpp"
#include "attest/core/report/svg.hpp"
#include "attest/core/report/table.hpp"

namespace attest::report {
namespace {

bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// HTML: the four characters that can end text or a double-quoted attribute value, as the named
// character references amp, lt, gt, quot; anything else (apostrophe, UTF-8) stays.
TEST(Escape, HtmlEachSpecialCharacter) {
  EXPECT_EQ(escape_html("&"), "&amp;");
  EXPECT_EQ(escape_html("<"), "&lt;");
  EXPECT_EQ(escape_html(">"), "&gt;");
  EXPECT_EQ(escape_html("\""), "&quot;");
  EXPECT_EQ(escape_html("'"), "'");
  EXPECT_EQ(escape_html(""), "");
  EXPECT_EQ(escape_html("a<b & \"c\">\xc3\xa9\n"), "a&lt;b &amp; &quot;c&quot;&gt;\xc3\xa9\n");
  EXPECT_EQ(escape_html("&amp;"), "&amp;amp;");  // not idempotent: text, not markup, goes in
}

// XML 1.0: the five predefined entities (section 4.6); a newline as a character reference, since
// attribute-value normalisation (3.3.3) would turn a literal one into a space; tab is a legal
// Char; other C0 controls are not Chars (2.2) and are dropped; DEL (0x7F) is a legal Char.
TEST(Escape, XmlEntitiesNewlineAndControls) {
  EXPECT_EQ(escape_xml("&<>\"'"), "&amp;&lt;&gt;&quot;&apos;");
  EXPECT_EQ(escape_xml("a\nb"), "a&#10;b");
  EXPECT_EQ(escape_xml("a\tb"), "a\tb");
  EXPECT_EQ(escape_xml(std::string("a\x01\x1f\x7f"
                                   "b",
                                   5)),
            "a\x7f"
            "b");
  EXPECT_EQ(escape_xml(std::string("a\0b", 3)), "ab");
  EXPECT_EQ(escape_xml("\xc3\xa9"), "\xc3\xa9");
}

TEST(Table, MarkdownExact) {
  Table t({{"name"}, {"n", Align::right}, {Cell::code("k v")}});
  t.add({"a", "1", Cell::code("x")});
  t.add({Cell::strong("total"), Cell::absent(), ""});
  EXPECT_EQ(t.markdown(),
            "| name | n | `k v` |\n"
            "|---|---:|---|\n"
            "| a | 1 | `x` |\n"
            "| **total** | |  |\n");
}

TEST(Table, MarkdownPlaceholderAndShortRows) {
  Table t({{"run"}, {"psnr"}, {"ssim"}}, "-");
  t.add({"a", Cell::absent(), "0.9"});
  t.add({"b"});
  EXPECT_EQ(t.markdown(), "| run | psnr | ssim |\n|---|---|---|\n| a | - | 0.9 |\n| b |\n");
  EXPECT_FALSE(t.empty());
  EXPECT_TRUE(Table(std::vector<Column>{Column{"x"}}).empty());
}

TEST(Table, HtmlEscapesAndClasses) {
  Table t({{"a<b"}, {"c"}});
  t.add({"x & y", Cell("ok").with_class("within")});
  t.add({Cell::code("<k>"), Cell("").with_class("")});
  t.add({Cell::strong("s"), Cell::absent()});
  EXPECT_EQ(t.html(),
            "<table><tr><th>a&lt;b</th><th>c</th></tr>\n"
            "<tr><td>x &amp; y</td><td class=\"within\">ok</td></tr>\n"
            "<tr><td><code>&lt;k&gt;</code></td><td class=\"\"></td></tr>\n"
            "<tr><td><strong>s</strong></td><td></td></tr>\n"
            "</table>\n");
}

TEST(Svg, ExtentKeepsFiniteValues) {
  svg::Extent e;
  EXPECT_TRUE(e.empty());
  for (double v : {NAN, INFINITY, -INFINITY}) e.add(v);
  EXPECT_TRUE(e.empty());
  e.add(-2), e.add(3);
  EXPECT_EQ(e.lo, -2);
  EXPECT_EQ(e.hi, 3);
  svg::Extent p;
  p.add_positive(0), p.add_positive(-1), p.add_positive(INFINITY), p.add_positive(0.5);
  EXPECT_EQ(p.lo, 0.5);
  EXPECT_EQ(p.hi, 0.5);
}

TEST(Svg, LinearAxisPadsFivePercent) {
  svg::Extent e;
  e.add(0), e.add(10);
  const auto a = svg::Axis::linear(e);
  EXPECT_FALSE(a.log());
  EXPECT_DOUBLE_EQ(a.lo(), -0.5);
  EXPECT_DOUBLE_EQ(a.hi(), 10.5);
  EXPECT_DOUBLE_EQ(a.fraction(5), 0.5);
  const auto t = a.ticks();
  ASSERT_EQ(t.size(), 5u);
  EXPECT_EQ(t[0].label, "-0.5");
  EXPECT_EQ(t[1].label, "2.25");
  EXPECT_EQ(t[2].label, "5");
  EXPECT_EQ(t[4].label, "10.5");
  // No values: [0, 1]; a constant: +-0.5 around it; both then padded.
  EXPECT_DOUBLE_EQ(svg::Axis::linear({}).lo(), -0.05);
  svg::Extent c;
  c.add(7);
  EXPECT_DOUBLE_EQ(svg::Axis::linear(c).hi(), 7.55);
}

TEST(Svg, LogAxisCoversWholeDecades) {
  svg::Extent e;
  e.add_positive(0.02), e.add_positive(0.5);
  const auto a = svg::Axis::log10(e, 1);
  EXPECT_TRUE(a.log());
  EXPECT_EQ(a.lo(), -2);
  EXPECT_EQ(a.hi(), 0);
  const auto t = a.ticks();
  ASSERT_EQ(t.size(), 3u);
  EXPECT_EQ(t[0].label, "1e-2");
  EXPECT_EQ(t[2].label, "1e0");
  EXPECT_DOUBLE_EQ(a.fraction(0.1), 0.5);
  EXPECT_DOUBLE_EQ(a.clamp(1e-5), 0.01);  // below the axis: its bottom
  EXPECT_DOUBLE_EQ(a.clamp(30), 1);
  EXPECT_TRUE(std::isnan(a.clamp(NAN)));
  svg::Extent one;
  one.add_positive(1);  // a single exact power of ten still gets one decade
  EXPECT_EQ(svg::Axis::log10(one, 1).lo(), 0);
  EXPECT_EQ(svg::Axis::log10(one, 1).hi(), 1);
  EXPECT_EQ(svg::Axis::log10({}, 1e-8).lo(), -8);  // empty: the fallback
  EXPECT_EQ(svg::Axis::log10({}, 1e-8).hi(), -7);
}

// A 200 x 100 chart with 10-pixel margins: plot area x 10..190, y 10..90.
svg::Chart small_chart(svg::Style style, svg::Coords coords, std::size_t points) {
  svg::Extent e;
  e.add_positive(0.01), e.add_positive(1);
  return {style, coords, 200, 100, {10, 10, 10, 10}, svg::Axis::log10(e, 1), points};
}

TEST(Svg, PixelPositionsOfKnownPoints) {
  const auto c = small_chart(svg::Style::css, svg::Coords::fixed1, 3);
  EXPECT_DOUBLE_EQ(c.x(0), 10);
  EXPECT_DOUBLE_EQ(c.x(1), 100);
  EXPECT_DOUBLE_EQ(c.x(2), 190);
  EXPECT_DOUBLE_EQ(c.y(1), 10);                                                      // top decade: top edge
  EXPECT_DOUBLE_EQ(c.y(0.01), 90);                                                   // bottom decade: bottom edge
  EXPECT_DOUBLE_EQ(c.y(0.1), 50);                                                    // one decade of two: half way
  EXPECT_DOUBLE_EQ(small_chart(svg::Style::css, svg::Coords::fixed1, 1).x(0), 100);  // one point: the middle
}

TEST(Svg, DotsAndLinesAtThosePositions) {
  auto c = small_chart(svg::Style::css, svg::Coords::fixed1, 3);
  const std::string s = c.dots({0.1, NAN, 1e-9}, "#123456").finish();
  EXPECT_TRUE(has(s, "<circle cx=\"10.0\" cy=\"50.0\" r=\"2.5\" fill=\"#123456\"/>")) << s;
  EXPECT_FALSE(has(s, "cx=\"100.0\"")) << s;                     // NaN: no dot
  EXPECT_TRUE(has(s, "<circle cx=\"190.0\" cy=\"90.0\"")) << s;  // clamped to the bottom
  auto l = small_chart(svg::Style::inline_attrs, svg::Coords::sig6, 3);
  const std::string p = l.line({0.1, INFINITY, 1}, "red", 1.5, true).finish();
  EXPECT_TRUE(has(p, "<circle cx=\"100\" cy=\"10\" r=\"2.5\" fill=\"red\"/>")) << p;  // non-finite: top edge, marked
  EXPECT_TRUE(has(p,
                  "<polyline fill=\"none\" stroke=\"red\" stroke-width=\"1.5\" stroke-dasharray=\"6 3\" points=\"10,50 "
                  "100,10 190,10 \"/>"))
      << p;
}

TEST(Svg, CoordinatePrecision) {
  auto c = small_chart(svg::Style::inline_attrs, svg::Coords::sig6, 4);    // x(1) = 10 + 180 / 3 = 70
  auto f = small_chart(svg::Style::inline_attrs, svg::Coords::fixed1, 7);  // x(1) = 10 + 180 / 6 = 40
  EXPECT_TRUE(has(c.line({1, 1}, "k", 1, false).finish(), "points=\"10,10 70,10 \""));
  svg::Extent e;
  e.add_positive(1), e.add_positive(1000);
  svg::Chart t(svg::Style::inline_attrs, svg::Coords::sig6, 200, 100, {10, 10, 10, 10}, svg::Axis::log10(e, 1), 2);
  // log10(2) / 3 of 80 pixels above the bottom: 90 - 80 * 0.30103 / 3 = 81.9725...
  EXPECT_TRUE(has(t.line({2}, "k", 1, false).finish(), "points=\"10,81.9725 \""));
  EXPECT_TRUE(has(f.dots({1, 1}, "k").finish(), "cx=\"40.0\" cy=\"10.0\""));
}

TEST(Svg, StylesAndParts) {
  auto css = small_chart(svg::Style::css, svg::Coords::fixed1, 2);
  const std::string s = css.open("a<b", 15)
                            .frame()
                            .y_ticks(true)
                            .reference(0.1, "ref")
                            .y_label("y", 12)
                            .x_label("x", 6)
                            .legend(1, "s&t", "#f00", {20, 34, 14})
                            .finish();
  EXPECT_EQ(s.rfind("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"200\" height=\"100\" role=\"img\" "
                    "aria-label=\"a&lt;b\">\n",
                    0),
            0u)
      << s;
  EXPECT_TRUE(has(s, "<text x=\"10\" y=\"15\" class=\"t\">a&lt;b</text>\n"));
  EXPECT_TRUE(has(s, "<rect x=\"10\" y=\"10\" width=\"180\" height=\"80\" class=\"frame\"/>\n"));
  EXPECT_TRUE(has(s,
                  "<line x1=\"10\" x2=\"190\" y1=\"50.0\" y2=\"50.0\" class=\"grid\"/><text x=\"6\" y=\"54.0\" "
                  "class=\"ax\" text-anchor=\"end\">1e-1</text>\n"));
  EXPECT_TRUE(has(s,
                  "<line x1=\"10\" x2=\"190\" y1=\"50.0\" y2=\"50.0\" class=\"ref\"/><text x=\"194\" y=\"54.0\" "
                  "class=\"ax\">ref</text>\n"));
  EXPECT_TRUE(
      has(s, "<text x=\"12\" y=\"50\" class=\"ax\" transform=\"rotate(-90 12 50)\" text-anchor=\"middle\">y</text>\n"));
  EXPECT_TRUE(has(s, "<text x=\"100\" y=\"94\" class=\"ax\" text-anchor=\"middle\">x</text>\n"));
  // Entry 1: baseline 10 + 34 + 14 = 58, text 20 right of the plot area, a dot 8 left and 4 up.
  EXPECT_TRUE(has(
      s, "<circle cx=\"202\" cy=\"54\" r=\"4\" fill=\"#f00\"/><text x=\"210\" y=\"58\" class=\"ax\">s&amp;t</text>\n"));
  EXPECT_EQ(s.substr(s.size() - 7), "</svg>\n");

  auto in = small_chart(svg::Style::inline_attrs, svg::Coords::fixed1, 2);
  const std::string t = in.open("T", 16).frame().y_ticks(false).legend(0, "n", "#0f0", {8, 14, 16}).finish();
  EXPECT_EQ(t.find('\n'), std::string::npos) << t;
  EXPECT_TRUE(has(t,
                  "font-family=\"sans-serif\" font-size=\"11\"><text x=\"10\" y=\"16\" font-size=\"13\" "
                  "font-weight=\"bold\">T</text>"));
  EXPECT_TRUE(has(t, "fill=\"none\" stroke=\"#888\"/>"));
  EXPECT_FALSE(has(t, "<line"));
  EXPECT_TRUE(has(t, "<text x=\"198\" y=\"24\" fill=\"#0f0\">n</text></svg>"));
}

TEST(Svg, IndexTicksThinOutPastTwenty) {
  auto few = small_chart(svg::Style::inline_attrs, svg::Coords::fixed1, 3);
  const std::string a = few.x_ticks(1).finish();
  EXPECT_TRUE(has(a, "<text x=\"10.0\" y=\"104\" text-anchor=\"middle\">1</text>"));
  EXPECT_TRUE(has(a, ">3</text>"));
  auto many = small_chart(svg::Style::inline_attrs, svg::Coords::fixed1, 25);  // every ceil(25 / 10) = 3rd label
  const std::string b = many.x_ticks(1).finish();
  std::string labels;
  for (std::size_t p = 0; (p = b.find("middle\">", p)) != std::string::npos; p += 8)
    labels += b.substr(p + 8, b.find('<', p) - p - 8) + ",";
  EXPECT_EQ(labels, "3,6,9,12,15,18,21,24,");
}

TEST(Svg, BarChart) {
  // 760 wide, bars from x = 330 over 360 pixels; the longest finite value (2) spans them all.
  const std::string s = svg::bar_chart(
      svg::Style::css, "t", {{"one", 1, false}, {std::string(60, 'x'), 2, true}, {"nan", NAN, false}}, "GB/s", 0);
  EXPECT_TRUE(has(s, "width=\"760\" height=\"96\""));  // 24 + 3 * 16 + 24
  EXPECT_TRUE(has(s,
                  "<rect x=\"330\" y=\"26.0\" width=\"180.0\" height=\"12\" fill=\"#1f77b4\"/><text x=\"513.0\" "
                  "y=\"36.0\" class=\"ax\">1</text>\n"));
  EXPECT_TRUE(has(s, "width=\"360.0\" height=\"12\" fill=\"#d62728\""));
  EXPECT_TRUE(has(s, ">" + std::string(49, 'x') + "...</text>"));
  EXPECT_TRUE(
      has(s, "width=\"0.0\" height=\"12\" fill=\"#1f77b4\"/><text x=\"333.0\" y=\"68.0\" class=\"ax\">nan</text>"));
  EXPECT_FALSE(has(s, "class=\"ref\""));
  EXPECT_TRUE(has(s, "<text x=\"330\" y=\"90\" class=\"ax\">GB/s</text>\n</svg>\n"));
  // ref 4 (beyond every bar) sets the scale: the line at the right end, the value-2 bar half way.
  const std::string r = svg::bar_chart(svg::Style::css, "t", {{"a", 2, false}}, "", 4);
  EXPECT_TRUE(has(r, "<line x1=\"690.0\" x2=\"690.0\" y1=\"24\" y2=\"44\" class=\"ref\"/>"));
  EXPECT_TRUE(has(r, "width=\"180.0\""));
}

}  // namespace
}  // namespace attest::report
