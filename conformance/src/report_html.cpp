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
#include "attest/core/report/escape.hpp"
#include "attest/core/report/svg.hpp"

namespace attest::conformance::report {
namespace {

using nlohmann::json;
using ::attest::report::escape_html;
namespace svg = ::attest::report::svg;

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
        o += "<code>" + escape_html(s.substr(i + 1, e - i - 1)) + "</code>";
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
    o += escape_html(s.substr(i, 1));
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
        o += escape_html(b == std::string::npos ? "" : lines[i].substr(b)) + "\n";
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
            o += escape_html(c == std::string::npos ? "" : lines[i].substr(c)) + "\n";
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

struct Series {
  std::string name;
  std::vector<double> y;  ///< one per x index; NaN = absent
};

/// Dot plot: x = case index, y = value on a log10 axis, one colour per series, a reference
/// line at `ref` (the bound, or ratio 1).
std::string dot_plot(const std::string& title, const std::vector<Series>& series, std::size_t n, double ref, const std::string& ylabel,
                     const std::string& reflabel) {
  svg::Extent e;
  e.add_positive(ref);
  for (const auto& s : series)
    for (double v : s.y) e.add_positive(v);
  svg::Chart c(svg::Style::css, svg::Coords::fixed1, 760, 240, {60, 150, 24, 30}, svg::Axis::log10(e, ref), n);
  c.open(title, 15).frame().y_ticks(true).reference(ref, reflabel).y_label(ylabel, 12).x_label(fmt::format("case ({} cases)", n), 6);
  for (std::size_t k = 0; k < series.size(); ++k) {
    const auto colour = svg::kTab10[k % svg::kTab10.size()];
    c.dots(series[k].y, colour).legend(k, series[k].name, colour, {20, 34, 14});
  }
  return c.finish();
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
    std::vector<svg::Bar> bars;
    bars.reserve(counts.size());
    for (const auto& [v, n] : counts) bars.push_back({v, n, v != "passed" && v != "unsupported"});
    o += svg::bar_chart(svg::Style::css, "check " + c + ": verdicts", bars, "cases", 0);
  }
  return o;
}

std::string bench_plots(const json& results) {
  std::vector<svg::Bar> bars, qbars;
  for (const auto& r : results) {
    if (str(r, "status") != "timed") continue;
    if (str(r, "type") == "quantizer") qbars.push_back({str(r, "operand") + " " + str(r, "scheme") + " " + str(r, "shape"), r.value("gbs", 0.0)});
    else bars.push_back({str(r, "kernel") + " " + str(r, "recipe") + " " + str(r, "shape"), r.value("tflops", 0.0)});
  }
  std::string o = "<h2>Plots</h2>\n";
  if (!bars.empty()) o += svg::bar_chart(svg::Style::css, "TFLOP/s (median)", bars, "TFLOP/s", 0);
  if (!qbars.empty()) o += svg::bar_chart(svg::Style::css, "Quantizers: GB/s (median)", qbars, "GB/s", 0);
  return o;
}

std::string diff_plots(const json& j) {
  std::string o = "<h2>Plots</h2>\n";
  if (str(j, "of") == "bench") {
    std::vector<svg::Bar> bars;
    for (const auto& r : j["perf"]) {
      if (!r.contains("ratio")) continue;
      bars.push_back({str(r, "type") == "quantizer" ? "quantize " + str(r, "operand") + " " + str(r, "scheme") + " " + str(r, "shape")
                                                    : str(r, "kernel") + " " + str(r, "recipe") + " " + str(r, "shape"),
                      r["ratio"].get<double>(), str(r, "flag") == "regression"});
    }
    if (!bars.empty()) o += svg::bar_chart(svg::Style::css, "time ratio candidate / base (line: 1; red: regression)", bars, "ratio", 1.0);
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
  std::string o = "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>" + escape_html(title + " — " + doc.path) +
                  "</title>\n<style>\nbody{font:14px/1.45 system-ui,sans-serif;margin:24px auto;max-width:1100px;color:#222;padding:0 12px}\n"
                  "table{border-collapse:collapse;margin:8px 0 16px}th,td{border:1px solid #ccc;padding:3px 7px;text-align:left}"
                  "th{background:#f0f0f0}td.r{text-align:right;font-variant-numeric:tabular-nums}tr.bad td{background:#fde2e2}\n"
                  "code{background:#f4f4f4;padding:0 3px;border-radius:3px;font-size:12px}pre{background:#f4f4f4;padding:6px;overflow-x:auto}\n"
                  "svg{display:block;margin:8px 0 18px}svg .t{font:bold 13px sans-serif}svg .ax{font:11px sans-serif;fill:#333}"
                  ".frame{fill:none;stroke:#999}.grid{stroke:#e4e4e4}.ref{stroke:#d62728;stroke-dasharray:4 3}\n"
                  "</style></head><body>\n";
  o += "<p><small>Generated by <code>attest report html</code> from <code>" + escape_html(doc.path) + "</code>.</small></p>\n";
  o += markdown_to_html(markdown(doc));
  if (doc.kind == Kind::gate) o += gate_plots(doc.json["results"]);
  else if (doc.kind == Kind::bench) o += bench_plots(doc.json["results"]);
  else o += diff_plots(doc.json);
  return o + "</body></html>\n";
}

}  // namespace attest::conformance::report
