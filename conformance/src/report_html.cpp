// `attest report html`: one self-contained page (inline CSS and SVG, no scripts, no external
// resources) from a gate, bench or diff report. The tables are the report's own Markdown
// rendered by a converter for the subset our Markdown uses (headings, paragraphs, lists, pipe
// tables, code fences, `code`, **bold**): hand-written because no Debian-packaged C++ Markdown
// library exists (cmark is C and renders tables only with the GitHub extension, not packaged).
#include <algorithm>
#include <cmath>
#include <map>
#include <sstream>

#include <fmt/format.h>

#include "attest/conformance/report_tools.hpp"
#include "attest/conformance/verdict.hpp"

namespace attest::conformance::report {
namespace {

using nlohmann::json;

std::string esc(std::string_view s) {
  std::string o;
  for (char c : s) {
    switch (c) {
      case '&': o += "&amp;"; break;
      case '<': o += "&lt;"; break;
      case '>': o += "&gt;"; break;
      case '"': o += "&quot;"; break;
      default: o += c;
    }
  }
  return o;
}

std::string str(const json& j, const char* k) { return j.contains(k) && j[k].is_string() ? j[k].get<std::string>() : std::string(); }

bool num(const json& v, double& out) {
  if (v.is_number()) return out = v.get<double>(), true;
  if (v.is_string()) {
    const auto s = v.get<std::string>();
    if (s == "nan") return out = NAN, true;
    if (s == "inf") return out = INFINITY, true;
    if (s == "-inf") return out = -INFINITY, true;
  }
  return false;
}

/// Inline Markdown: `code`, **bold**; everything else escaped.
std::string inline_md(std::string_view s) {
  std::string o;
  for (std::size_t i = 0; i < s.size();) {
    if (s[i] == '`') {
      const auto e = s.find('`', i + 1);
      if (e != std::string_view::npos) {
        o += "<code>" + esc(s.substr(i + 1, e - i - 1)) + "</code>";
        i = e + 1;
        continue;
      }
    }
    if (s.substr(i, 2) == "**") {
      const auto e = s.find("**", i + 2);
      if (e != std::string_view::npos) {
        o += "<strong>" + inline_md(s.substr(i + 2, e - i - 2)) + "</strong>";
        i = e + 2;
        continue;
      }
    }
    o += esc(s.substr(i, 1));
    ++i;
  }
  return o;
}

std::vector<std::string> cells(const std::string& line) {
  std::vector<std::string> v;
  std::string cur;
  bool code = false;
  for (std::size_t i = 1; i < line.size(); ++i) {
    const char c = line[i];
    if (c == '`') code = !code;
    if (c == '|' && !code) {
      const auto b = cur.find_first_not_of(' '), e = cur.find_last_not_of(' ');
      v.push_back(b == std::string::npos ? std::string() : cur.substr(b, e - b + 1));
      cur.clear();
    } else {
      cur += c;
    }
  }
  return v;
}

std::string markdown_to_html(const std::string& md) {
  std::istringstream in(md);
  std::vector<std::string> lines;
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  std::string o;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    std::string l = lines[i];
    const auto lead = l.find_first_not_of(' ');
    const std::string t = lead == std::string::npos ? "" : l.substr(lead);
    if (t.empty()) continue;
    if (t.rfind("```", 0) == 0) {
      o += "<pre>";
      for (++i; i < lines.size() && lines[i].find("```") == std::string::npos; ++i) {
        const auto b = lines[i].find_first_not_of(' ');
        o += esc(b == std::string::npos ? "" : lines[i].substr(b)) + "\n";
      }
      o += "</pre>\n";
      continue;
    }
    if (t[0] == '#') {
      const auto n = t.find_first_not_of('#');
      const int level = std::min<int>(6, static_cast<int>(n));
      o += fmt::format("<h{0}>{1}</h{0}>\n", level, inline_md(t.substr(n + 1)));
      continue;
    }
    if (t[0] == '|') {
      o += "<table>\n";
      const auto head = cells(t);
      std::vector<bool> right;
      std::size_t j = i + 1;
      if (j < lines.size() && lines[j].rfind("|-", 0) == 0) {
        for (const auto& c : cells(lines[j])) right.push_back(!c.empty() && c.back() == ':');
        ++j;
      }
      o += "<tr>";
      for (const auto& c : head) o += "<th>" + inline_md(c) + "</th>";
      o += "</tr>\n";
      for (; j < lines.size() && !lines[j].empty() && lines[j][0] == '|'; ++j) {
        const auto row = cells(lines[j]);
        const bool bad = lines[j].find("REGRESSION") != std::string::npos || lines[j].find("not passed") != std::string::npos;
        o += bad ? "<tr class=\"bad\">" : "<tr>";
        for (std::size_t k = 0; k < row.size(); ++k)
          o += (k < right.size() && right[k] ? "<td class=\"r\">" : "<td>") + inline_md(row[k]) + "</td>";
        o += "</tr>\n";
      }
      o += "</table>\n";
      i = j - 1;
      continue;
    }
    if (t.rfind("- ", 0) == 0) {
      o += "<ul>\n";
      for (; i < lines.size(); ++i) {
        const auto b = lines[i].find_first_not_of(' ');
        if (b == std::string::npos) break;
        const std::string u = lines[i].substr(b);
        if (u.rfind("- ", 0) == 0) {
          o += "<li>" + inline_md(u.substr(2));
        } else if (u.rfind("```", 0) == 0) {
          o += "<pre>";
          for (++i; i < lines.size() && lines[i].find("```") == std::string::npos; ++i) {
            const auto c = lines[i].find_first_not_of(' ');
            o += esc(c == std::string::npos ? "" : lines[i].substr(c)) + "\n";
          }
          o += "</pre>";
        } else {
          break;
        }
        if (i + 1 >= lines.size() || lines[i + 1].find_first_not_of(' ') == std::string::npos ||
            lines[i + 1].substr(lines[i + 1].find_first_not_of(' ')).rfind("- ", 0) == 0)
          o += "</li>\n";
      }
      o += "</ul>\n";
      continue;
    }
    o += "<p>" + inline_md(t) + "</p>\n";
  }
  return o;
}

// ---- SVG ----

const char* kPalette[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};

struct Series {
  std::string name;
  std::vector<double> y;  ///< one per x index; NaN = absent
};

/// Dot plot: x = case index, y = value on a log10 axis, one colour per series, a reference
/// line at `ref` (the bound, or ratio 1).
std::string dot_plot(const std::string& title, const std::vector<Series>& series, std::size_t n, double ref, const std::string& ylabel,
                     const std::string& reflabel) {
  double lo = ref, hi = ref;
  for (const auto& s : series)
    for (double v : s.y)
      if (std::isfinite(v) && v > 0) lo = std::min(lo, v), hi = std::max(hi, v);
  double l0 = std::floor(std::log10(lo)), l1 = std::ceil(std::log10(hi));
  if (l1 <= l0) l1 = l0 + 1;
  const int W = 760, H = 240, ml = 60, mr = 150, mt = 24, mb = 30;
  const double pw = W - ml - mr, ph = H - mt - mb;
  auto X = [&](std::size_t i) { return ml + (n <= 1 ? pw / 2 : pw * static_cast<double>(i) / static_cast<double>(n - 1)); };
  auto Y = [&](double v) { return mt + ph * (1 - (std::log10(v) - l0) / (l1 - l0)); };
  std::string s = fmt::format("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" role=\"img\" aria-label=\"{}\">\n", W, H, esc(title));
  s += fmt::format("<text x=\"{}\" y=\"15\" class=\"t\">{}</text>\n", ml, esc(title));
  s += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" class=\"frame\"/>\n", ml, mt, pw, ph);
  for (double e = l0; e <= l1; e += 1) {
    s += fmt::format("<line x1=\"{}\" x2=\"{}\" y1=\"{:.1f}\" y2=\"{:.1f}\" class=\"grid\"/>", ml, ml + pw, Y(std::pow(10, e)), Y(std::pow(10, e)));
    s += fmt::format("<text x=\"{}\" y=\"{:.1f}\" class=\"ax\" text-anchor=\"end\">1e{}</text>\n", ml - 4, Y(std::pow(10, e)) + 4, e);
  }
  s += fmt::format("<line x1=\"{}\" x2=\"{}\" y1=\"{:.1f}\" y2=\"{:.1f}\" class=\"ref\"/><text x=\"{}\" y=\"{:.1f}\" class=\"ax\">{}</text>\n", ml,
                   ml + pw, Y(ref), Y(ref), ml + pw + 4, Y(ref) + 4, esc(reflabel));
  s += fmt::format("<text x=\"12\" y=\"{}\" class=\"ax\" transform=\"rotate(-90 12 {})\" text-anchor=\"middle\">{}</text>\n", mt + ph / 2,
                   mt + ph / 2, esc(ylabel));
  s += fmt::format("<text x=\"{}\" y=\"{}\" class=\"ax\" text-anchor=\"middle\">case ({} cases)</text>\n", ml + pw / 2, H - 6, n);
  for (std::size_t k = 0; k < series.size(); ++k) {
    const char* col = kPalette[k % 10];
    for (std::size_t i = 0; i < series[k].y.size(); ++i) {
      double v = series[k].y[i];
      if (!std::isfinite(v)) continue;
      v = std::clamp(v, std::pow(10, l0), std::pow(10, l1));
      s += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"2.5\" fill=\"{}\"/>", X(i), Y(v), col);
    }
    s += fmt::format("\n<circle cx=\"{}\" cy=\"{}\" r=\"4\" fill=\"{}\"/><text x=\"{}\" y=\"{}\" class=\"ax\">{}</text>\n", ml + pw + 12,
                     mt + 30 + 14 * static_cast<int>(k), col, ml + pw + 20, mt + 34 + 14 * static_cast<int>(k), esc(series[k].name));
  }
  return s + "</svg>\n";
}

/// Horizontal bars with labels; `ref` draws a vertical line (ratio 1) when > 0.
std::string bar_chart(const std::string& title, const std::vector<std::pair<std::string, double>>& bars, const std::string& unit, double ref,
                      const std::vector<bool>& bad) {
  double hi = ref;
  for (const auto& b : bars)
    if (std::isfinite(b.second)) hi = std::max(hi, b.second);
  if (hi <= 0) hi = 1;
  const int W = 760, bh = 16, ml = 330, mr = 70, mt = 24;
  const int H = mt + bh * static_cast<int>(bars.size()) + 24;
  const double pw = W - ml - mr;
  std::string s = fmt::format("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" role=\"img\" aria-label=\"{}\">\n", W, H, esc(title));
  s += fmt::format("<text x=\"4\" y=\"15\" class=\"t\">{}</text>\n", esc(title));
  for (std::size_t i = 0; i < bars.size(); ++i) {
    const double y = mt + bh * static_cast<double>(i);
    const double v = std::isfinite(bars[i].second) ? bars[i].second : 0;
    std::string label = bars[i].first;
    if (label.size() > 52) label = label.substr(0, 49) + "...";
    s += fmt::format("<text x=\"{}\" y=\"{:.1f}\" class=\"ax\" text-anchor=\"end\">{}</text>", ml - 4, y + 12, esc(label));
    s += fmt::format("<rect x=\"{}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{}\" fill=\"{}\"/>", ml, y + 2, pw * v / hi, bh - 4,
                     i < bad.size() && bad[i] ? "#d62728" : "#1f77b4");
    s += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" class=\"ax\">{:.3g}</text>\n", ml + pw * v / hi + 3, y + 12, bars[i].second);
  }
  if (ref > 0)
    s += fmt::format("<line x1=\"{0:.1f}\" x2=\"{0:.1f}\" y1=\"{1}\" y2=\"{2}\" class=\"ref\"/>", ml + pw * ref / hi, mt, H - 20);
  s += fmt::format("<text x=\"{}\" y=\"{}\" class=\"ax\">{}</text>\n", ml, H - 6, esc(unit));
  return s + "</svg>\n";
}

std::string gate_plots(const json& results) {
  // Per check: measured / bound of every judged figure, per case.
  std::vector<std::string> checks;
  for (const auto& r : results)
    if (std::find(checks.begin(), checks.end(), str(r, "check")) == checks.end()) checks.push_back(str(r, "check"));
  std::string o = "<h2>Per-check plots</h2>\n<p>Judged figures as measured / bound (log scale; above 1 fails). Checks without "
                  "figures show verdict counts.</p>\n";
  for (const auto& c : checks) {
    std::vector<const json*> rs;
    for (const auto& r : results)
      if (str(r, "check") == c) rs.push_back(&r);
    std::map<std::string, Series> series;
    std::vector<std::string> names;
    for (std::size_t i = 0; i < rs.size(); ++i) {
      const json& fig = rs[i]->value("figures", json::object());
      std::function<void(const json&, const std::string&)> walk = [&](const json& j, const std::string& path) {
        if (!j.is_object()) return;
        if (j.contains("measured") && j.contains("ok")) {
          double m = 0, b = 0;
          const bool hib = j.contains("min");
          if (!num(j["measured"], m)) return;
          if (!(j.contains("bound") ? num(j["bound"], b) : j.contains("max") ? num(j["max"], b) : hib ? num(j["min"], b) : false)) return;
          // Similarity figures (cosine >= min) plot as (1 - measured) / (1 - min).
          const double ratio = hib ? (1 - m) / std::max(1e-300, 1 - b) : b > 0 ? m / b : (m > 0 ? INFINITY : NAN);
          std::string name = path.rfind("judgement.metrics.", 0) == 0 ? path.substr(18) : path;
          if (!series.count(name)) {
            names.push_back(name);
            series[name] = {name, std::vector<double>(rs.size(), NAN)};
          }
          series[name].y[i] = ratio;
          return;
        }
        for (const auto& [k, v] : j.items()) walk(v, path.empty() ? k : path + "." + k);
      };
      walk(fig, "");
    }
    if (!names.empty()) {
      std::vector<Series> v;
      for (const auto& n : names) v.push_back(series[n]);
      o += dot_plot("check " + c + ": measured / bound", v, rs.size(), 1.0, "measured / bound", "bound");
      continue;
    }
    std::map<std::string, double> counts;
    for (const auto* r : rs) counts[str(*r, "verdict")] += 1;
    std::vector<std::pair<std::string, double>> bars(counts.begin(), counts.end());
    std::vector<bool> bad;
    for (const auto& b : bars) bad.push_back(b.first != "passed" && b.first != "unsupported");
    o += bar_chart("check " + c + ": verdicts", bars, "cases", 0, bad);
  }
  return o;
}

std::string bench_plots(const json& results) {
  std::vector<std::pair<std::string, double>> bars, qbars;
  for (const auto& r : results) {
    if (str(r, "status") != "timed") continue;
    if (str(r, "type") == "quantizer") qbars.emplace_back(str(r, "operand") + " " + str(r, "scheme") + " " + str(r, "shape"), r.value("gbs", 0.0));
    else bars.emplace_back(str(r, "kernel") + " " + str(r, "recipe") + " " + str(r, "shape"), r.value("tflops", 0.0));
  }
  std::string o = "<h2>Plots</h2>\n";
  if (!bars.empty()) o += bar_chart("TFLOP/s (median)", bars, "TFLOP/s", 0, {});
  if (!qbars.empty()) o += bar_chart("Quantizers: GB/s (median)", qbars, "GB/s", 0, {});
  return o;
}

std::string diff_plots(const json& j) {
  std::string o = "<h2>Plots</h2>\n";
  if (str(j, "of") == "bench") {
    std::vector<std::pair<std::string, double>> bars;
    std::vector<bool> bad;
    for (const auto& r : j["perf"]) {
      if (!r.contains("ratio")) continue;
      bars.emplace_back(str(r, "type") == "quantizer" ? "quantize " + str(r, "operand") + " " + str(r, "scheme") + " " + str(r, "shape")
                                                  : str(r, "kernel") + " " + str(r, "recipe") + " " + str(r, "shape"),
                        r["ratio"].get<double>());
      bad.push_back(str(r, "flag") == "regression");
    }
    if (!bars.empty()) o += bar_chart("time ratio candidate / base (line: 1; red: regression)", bars, "ratio", 1.0, bad);
    return o;
  }
  std::map<std::string, std::map<std::string, Series>> per_check;
  std::map<std::string, std::vector<std::string>> cases;
  for (const auto& r : j["accuracy"]) {
    auto& cs = cases[str(r, "check")];
    if (std::find(cs.begin(), cs.end(), str(r, "case")) == cs.end()) cs.push_back(str(r, "case"));
  }
  for (const auto& r : j["accuracy"]) {
    const auto c = str(r, "check");
    std::string f = str(r, "figure");
    if (f.rfind("judgement.metrics.", 0) == 0) f = f.substr(18);
    auto& s = per_check[c][f];
    if (s.y.empty()) s = {f, std::vector<double>(cases[c].size(), NAN)};
    const auto idx = static_cast<std::size_t>(std::find(cases[c].begin(), cases[c].end(), str(r, "case")) - cases[c].begin());
    double v = NAN;
    num(r["ratio"], v);
    s.y[idx] = v;
  }
  for (const auto& [c, m] : per_check) {
    std::vector<Series> v;
    for (const auto& [_, s] : m) v.push_back(s);
    o += dot_plot("check " + c + ": figure ratio candidate / base", v, cases[c].size(), 1.0, "candidate / base", "equal");
  }
  return o;
}

}  // namespace

std::string html(const Doc& doc) {
  const std::string title = doc.kind == Kind::diff ? "attest report diff" : doc.kind == Kind::bench ? "attest bench" : "attest gate";
  std::string o = "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>" + esc(title + " — " + doc.path) +
                  "</title>\n<style>\nbody{font:14px/1.45 system-ui,sans-serif;margin:24px auto;max-width:1100px;color:#222;padding:0 12px}\n"
                  "table{border-collapse:collapse;margin:8px 0 16px}th,td{border:1px solid #ccc;padding:3px 7px;text-align:left}"
                  "th{background:#f0f0f0}td.r{text-align:right;font-variant-numeric:tabular-nums}tr.bad td{background:#fde2e2}\n"
                  "code{background:#f4f4f4;padding:0 3px;border-radius:3px;font-size:12px}pre{background:#f4f4f4;padding:6px;overflow-x:auto}\n"
                  "svg{display:block;margin:8px 0 18px}svg .t{font:bold 13px sans-serif}svg .ax{font:11px sans-serif;fill:#333}"
                  ".frame{fill:none;stroke:#999}.grid{stroke:#e4e4e4}.ref{stroke:#d62728;stroke-dasharray:4 3}\n"
                  "</style></head><body>\n";
  o += "<p><small>Generated by <code>attest report html</code> from <code>" + esc(doc.path) + "</code>.</small></p>\n";
  o += markdown_to_html(markdown(doc));
  if (doc.kind == Kind::gate) o += gate_plots(doc.json["results"]);
  else if (doc.kind == Kind::bench) o += bench_plots(doc.json["results"]);
  else o += diff_plots(doc.json);
  return o + "</body></html>\n";
}

}  // namespace attest::conformance::report
