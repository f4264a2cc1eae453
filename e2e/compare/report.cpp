// Outputs of a comparison (compare.hpp): Markdown, JSON, the frame strip and the HTML page.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include "attest/core/report/escape.hpp"
#include "attest/core/report/svg.hpp"
#include "attest/core/report/table.hpp"
#include "attest/core/status.hpp"
#include "attest/e2e/compare.hpp"

namespace attest::e2e {
namespace {

using nlohmann::json;
using report::Cell;
using report::escape_html;
using report::Table;
namespace m = attest::metrics;
namespace svg = report::svg;

// JSON has no infinities: non-finite numbers are written as the strings "inf", "-inf", "nan".
json num(double x) {
  if (std::isnan(x)) return "nan";
  if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
  return x;
}

json nums(const std::vector<double>& v) {
  json a = json::array();
  for (double x : v) a.push_back(num(x));
  return a;
}

// Base64 for the embedded PNG: ten lines, where a library dependency would be larger.
std::string base64(const std::vector<std::uint8_t>& in) {
  static const char* t = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string o;
  o.reserve((in.size() + 2) / 3 * 4);
  for (std::size_t i = 0; i < in.size(); i += 3) {
    const std::uint32_t v = (std::uint32_t{in[i]} << 16) | (i + 1 < in.size() ? std::uint32_t{in[i + 1]} << 8 : 0u) |
                            (i + 2 < in.size() ? std::uint32_t{in[i + 2]} : 0u);
    o += t[(v >> 18) & 63];
    o += t[(v >> 12) & 63];
    o += i + 1 < in.size() ? t[(v >> 6) & 63] : '=';
    o += i + 2 < in.size() ? t[v & 63] : '=';
  }
  return o;
}

bool has_video(const CompareReport& r) { return !r.runs.empty() && r.runs[0].video_stats.has_value(); }
bool has_audio(const CompareReport& r) { return !r.runs.empty() && r.runs[0].audio_stats.has_value(); }

json figures_json(const std::vector<m::Figure>& figures) {
  json j = json::object();
  for (const auto& f : figures) j[f.key] = f.integer ? json(static_cast<std::int64_t>(f.value)) : num(f.value);
  return j;
}

// The per-run table's metric columns: the registered pair metrics' columns, in registry order;
// metrics sharing a column share its cell (" / ").
std::vector<std::string> metric_columns() {
  std::vector<std::string> cols;
  for (const m::MediaMetric* mm : m::all_media_metrics())
    if (!mm->column.empty() && std::find(cols.begin(), cols.end(), mm->column) == cols.end()) cols.push_back(mm->column);
  return cols;
}

// The per-run table (Markdown and HTML): run, role, the metric columns, verdict. A run without
// any metric of a column has no cell there ("-" in Markdown).
Table metric_table(const CompareReport& r) {
  const auto cols = metric_columns();
  std::vector<report::Column> header = {{"run"}, {"role"}};
  for (const auto& c : cols) header.push_back({c});
  header.push_back({"verdict"});
  Table t(std::move(header), "-");
  for (const auto& run : r.runs) {
    if (run.role == Role::reference) continue;
    std::vector<Cell> row = {run.label, std::string(role_name(run.role))};
    for (const auto& col : cols) {
      std::string cell;
      for (const m::MediaMetric* mm : m::all_media_metrics()) {
        if (mm->column != col) continue;
        const auto it = run.metrics.find(mm->name);
        if (it == run.metrics.end()) continue;
        cell += (cell.empty() ? "" : " / ") + mm->cell(it->second.figures);
      }
      row.push_back(cell.empty() ? Cell::absent() : Cell(cell));
    }
    const std::string verdict = run.role == Role::floor ? "exact run (floor)" : std::string(verdict_name(run.verdict));
    row.push_back(Cell(verdict).with_class(verdict == "within floor" ? "within" : verdict == "outside floor" ? "outside" : ""));
    t.add(std::move(row));
  }
  return t;
}

// The statistics shown: video ones when the runs have video, then audio ones when they have audio.
std::vector<const m::MediaMetric*> stat_metrics(const CompareReport& r) {
  std::vector<const m::MediaMetric*> out;
  if (has_video(r))
    for (const m::MediaMetric* mm : m::media_metrics(m::MetricScope::video_frame)) out.push_back(mm);
  if (has_audio(r))
    for (const m::MediaMetric* mm : m::media_metrics(m::MetricScope::audio_stat)) out.push_back(mm);
  return out;
}

// The global statistics of every run, the reference and floor included.
Table stat_table(const CompareReport& r) {
  std::vector<report::Column> header = {{"run"}};
  for (const m::MediaMetric* mm : stat_metrics(r)) header.push_back({mm->stat_column.empty() ? mm->name : mm->stat_column});
  Table t(std::move(header));
  for (const auto& run : r.runs) {
    std::vector<Cell> row = {run.label};
    for (const m::MediaMetric* mm : stat_metrics(r)) {
      const auto it = run.metrics.find(mm->name);
      if (it == run.metrics.end()) continue;
      row.push_back(fmt::format("{:.{}f}", m::MediaMetric::figure(it->second.figures, "value"), mm->stat_precision));
    }
    t.add(std::move(row));
  }
  return t;
}

std::string summary_line(const CompareReport& r) {
  std::string s;
  if (has_video(r))
    s += fmt::format("Video: {} frames of {}x{}{}; SSIM preset `{}` on {}{}. ", r.frames_compared, r.width, r.height,
                     r.fps > 0 ? fmt::format(" at {:.3g} fps", r.fps) : std::string(), m::ssim_preset_name(r.options.ssim),
                     m::channels_name(r.options.channels),
                     r.options.psnr_cap_db ? fmt::format(", PSNR capped at {} dB", *r.options.psnr_cap_db) : std::string());
  if (has_audio(r)) s += fmt::format("Audio: {} frames at {} Hz. ", r.audio_frames_compared, r.audio_sample_rate);
  const Margins& mg = r.options.margins;
  s += "Margins: ";
  for (const auto& row : m::margin_rows())
    if (!row.summary.empty()) s += fmt::format("{} {}{}, ", row.summary, mg.get(row.key), row.unit);
  s += fmt::format("statistics {}% of the reference beyond the floor spread.", mg.stats_rel * 100);
  return s;
}

json run_json(const RunReport& run) {
  json j;
  j["label"] = run.label;
  j["role"] = role_name(run.role);
  j["video_path"] = run.input.video.string();
  j["audio_path"] = run.input.audio.string();
  auto result = [&](const m::MediaMetric* mm) -> const MetricResult* {
    const auto it = run.metrics.find(mm->name);
    return it == run.metrics.end() ? nullptr : &it->second;
  };
  if (run.video_stats) {
    j["frames_read"] = run.frames_read;
    json vs = json::object(), frames = json::object();
    for (const m::MediaMetric* mm : m::media_metrics(m::MetricScope::video_frame))
      if (const MetricResult* res = result(mm)) {
        vs[mm->name] = num(m::MediaMetric::figure(res->figures, "value"));
        frames[mm->series[0].key] = nums(res->frames[0]);
      }
    vs["frames"] = frames;
    j["video_stats"] = vs;
  }
  if (run.video) {
    json v = json::object(), frames = json::object();
    for (const m::MediaMetric* mm : m::media_metrics(m::MetricScope::video_pair))
      if (const MetricResult* res = result(mm)) {
        v[mm->name] = figures_json(res->figures);
        for (std::size_t q = 0; q < mm->series.size(); ++q) frames[mm->series[q].key] = nums(res->frames[q]);
      }
    v["frames"] = frames;
    j["video"] = v;
  }
  if (run.audio_stats) {
    json as = json::object();
    for (const m::MediaMetric* mm : m::media_metrics(m::MetricScope::audio_stat))
      if (const MetricResult* res = result(mm)) as[mm->name] = num(m::MediaMetric::figure(res->figures, "value"));
    j["audio_stats"] = as;
  }
  if (run.audio) {
    const auto& a = *run.audio;
    // Per signal: what compare_audio reports of it, and every registered audio pair metric.
    auto sig = [&](const m::SignalComparison& s, std::size_t index) {
      json o{{"name", s.name},         {"samples", s.samples},          {"rms_test", num(s.rms_test)},
             {"rms_ref", num(s.rms_ref)}, {"peak_test", num(s.peak_test)}, {"peak_ref", num(s.peak_ref)}};
      for (const m::MediaMetric* mm : m::media_metrics(m::MetricScope::audio_pair))
        if (const MetricResult* res = result(mm); res && index < res->signals.size())
          o[mm->series[0].key] = num(res->signals[index]);
      return o;
    };
    json ch = json::array();
    for (std::size_t c = 0; c < a.channels.size(); ++c) ch.push_back(sig(a.channels[c], c));
    j["audio"] = {{"sample_rate", a.sample_rate},         {"frames_test", a.frames_test},
                  {"frames_ref", a.frames_ref},           {"frames_compared", a.frames_compared},
                  {"length_mismatch", a.length_mismatch}, {"pooled", sig(a.pooled, a.channels.size())},
                  {"channels", ch}};
  }
  j["verdict"] = verdict_name(run.verdict);
  j["reasons"] = run.reasons;
  return j;
}

}  // namespace

std::string to_markdown(const CompareReport& r) {
  std::string s = "### attest e2e compare\n\n" + summary_line(r) + "\n\n";
  s += metric_table(r).markdown();
  s += "\nGlobal statistics (luma; the reference and floor are the exact runs):\n\n" + stat_table(r).markdown();
  bool any = false;
  for (const auto& run : r.runs)
    if (run.verdict == Verdict::outside_floor) {
      if (!any) s += "\nWhy outside the floor:\n\n";
      any = true;
      for (const auto& why : run.reasons) s += "- `" + run.label + "`: " + why + "\n";
    }
  for (const auto& w : r.warnings) s += "\n> " + w + "\n";
  return s;
}

nlohmann::json to_json(const CompareReport& r) {
  json j;
  j["tool"] = "attest e2e compare";
  j["schema"] = 1;
  const auto& o = r.options;
  j["options"] = {{"ssim", m::ssim_preset_name(o.ssim)},
                  {"channels", m::channels_name(o.channels)},
                  {"psnr_cap_db", o.psnr_cap_db ? json(*o.psnr_cap_db) : json(nullptr)},
                  {"snr_eps", o.snr_eps},
                  {"allow_truncate", o.allow_truncate},
                  {"margins", json::object()}};
  for (const auto& row : m::margin_rows()) j["options"]["margins"][row.key] = o.margins.get(row.key);
  if (has_video(r))
    j["video"] = {{"width", r.width},
                  {"height", r.height},
                  {"fps", r.fps},
                  {"frames_compared", r.frames_compared},
                  {"frame_count_mismatch", r.frame_count_mismatch}};
  if (has_audio(r)) j["audio"] = {{"sample_rate", r.audio_sample_rate}, {"frames_compared", r.audio_frames_compared}};
  j["strip_frames"] = r.strip_frames;
  j["warnings"] = r.warnings;
  j["outside_floor"] = any_outside_floor(r);
  json runs = json::array();
  for (const auto& run : r.runs) runs.push_back(run_json(run));
  j["runs"] = runs;
  return j;
}

std::vector<std::uint8_t> strip_png(const CompareReport& r) {
  if (!has_video(r) || r.strip_frames.empty()) throw Error("frame strip: the comparison has no video frames");
  const int cw = r.runs[0].strip.at(0).width, ch = r.runs[0].strip.at(0).height;
  const int header = 28, left = 70, gap = 4;
  const int cols = static_cast<int>(r.runs.size()), rows = static_cast<int>(r.strip_frames.size());
  cv::Mat canvas(header + rows * (ch + gap), left + cols * (cw + gap), CV_8UC3, cv::Scalar(255, 255, 255));
  const auto font = cv::FONT_HERSHEY_SIMPLEX;
  for (int c = 0; c < cols; ++c) {
    const RunReport& run = r.runs[static_cast<std::size_t>(c)];
    std::string label = run.label;
    if (run.role == Role::test && run.verdict != Verdict::not_judged)
      label += run.verdict == Verdict::within_floor ? " (within)" : " (OUTSIDE)";
    // Shrink the text until it fits its column.
    double scale = 0.5;
    int base = 0;
    while (scale > 0.25 && cv::getTextSize(label, font, scale, 1, &base).width > cw) scale -= 0.05;
    cv::putText(canvas, label, {left + c * (cw + gap), header - 9}, font, scale, cv::Scalar(0, 0, 0), 1, cv::LINE_AA);
    for (int i = 0; i < rows; ++i) {
      const StripImage& s = run.strip.at(static_cast<std::size_t>(i));
      const cv::Mat img(s.height, s.width, CV_8UC3, const_cast<std::uint8_t*>(s.bgr.data()));
      img.copyTo(canvas(cv::Rect(left + c * (cw + gap), header + i * (ch + gap), s.width, s.height)));
    }
  }
  for (int i = 0; i < rows; ++i)
    cv::putText(canvas, fmt::format("f {}", r.strip_frames[static_cast<std::size_t>(i)]), {6, header + i * (ch + gap) + ch / 2},
                font, 0.5, cv::Scalar(0, 0, 0), 1, cv::LINE_AA);
  std::vector<std::uint8_t> png;
  if (!cv::imencode(".png", canvas, png)) throw Error("frame strip: PNG encoding failed");
  return png;
}

std::string svg_line_plot(const std::string& title, const std::string& y_label, const std::vector<PlotSeries>& series,
                          int width, int height) {
  svg::Extent e;
  std::size_t n = 0;
  for (const auto& s : series) {
    n = std::max(n, s.values.size());
    for (double v : s.values) e.add(v);
  }
  svg::Chart c(svg::Style::inline_attrs, svg::Coords::fixed1, width, height, {60, 150, 28, 36}, svg::Axis::linear(e), n);
  c.open(title, 16).frame().y_ticks(false).x_label(fmt::format("frame (0 .. {})", n > 0 ? n - 1 : 0), 8).y_label(y_label, 14);
  for (std::size_t k = 0; k < series.size(); ++k) {
    const auto colour = svg::kRuns8[k % svg::kRuns8.size()];
    c.line(series[k].values, colour, 1.5, false).legend(k, series[k].label, colour, {8, 14, 16});
  }
  return c.finish();
}

std::string to_html(const CompareReport& r, const std::string& extra_html) {
  std::string h =
      "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>attest e2e compare</title><style>"
      "body{font-family:sans-serif;margin:24px;color:#222}table{border-collapse:collapse;margin:8px 0 16px}"
      "td,th{border:1px solid #ccc;padding:4px 8px;text-align:right}td:first-child,th:first-child{text-align:left}"
      ".within{color:#1a7f37;font-weight:bold}.outside{color:#cf222e;font-weight:bold}img{max-width:100%}"
      "</style></head><body>\n<h1>attest e2e compare</h1>\n";
  h += "<p>" + escape_html(summary_line(r)) + "</p>\n";
  h += metric_table(r).html() + "<h2>Global statistics</h2>\n" + stat_table(r).html();
  for (const auto& run : r.runs)
    if (run.verdict == Verdict::outside_floor) {
      h += "<p class=\"outside\">" + escape_html(run.label) + " is outside the floor:</p><ul>";
      for (const auto& why : run.reasons) h += "<li>" + escape_html(why) + "</li>";
      h += "</ul>\n";
    }
  for (const auto& w : r.warnings) h += "<p><em>" + escape_html(w) + "</em></p>\n";
  if (has_video(r)) {
    h += "<h2>Per-frame metrics against the reference</h2>\n";
    const m::MediaOptions mo = media_options(r.options);
    for (const m::MediaMetric* mm : m::media_metrics(m::MetricScope::video_pair)) {
      if (!mm->plot_title) continue;
      std::vector<PlotSeries> series;
      for (const auto& run : r.runs)
        if (const auto it = run.metrics.find(mm->name); run.video && it != run.metrics.end())
          series.push_back({run.label, it->second.frames[mm->judged_series]});
      h += svg_line_plot(mm->plot_title(mo), mm->plot_y_label, series) + "\n";
    }
    if (!r.strip_frames.empty()) {
      h += "<h2>Frame strip</h2>\n<p>Rows: frames; columns: runs.</p>\n";
      h += "<img alt=\"frame strip\" src=\"data:image/png;base64," + base64(strip_png(r)) + "\">\n";
    }
  }
  h += extra_html;
  h += "</body></html>\n";
  return h;
}

void write_outputs(const CompareReport& r, const OutputPaths& p, OutputFiles& out, const std::string& extra_html) {
  if (!p.json.empty()) out.stage(p.json, to_json(r).dump(1) + "\n");
  if (!p.markdown.empty()) out.stage(p.markdown, to_markdown(r));
  if (!p.html.empty()) out.stage(p.html, to_html(r, extra_html));
  if (!p.strip.empty()) {
    const auto png = strip_png(r);
    out.stage(p.strip, std::span<const std::byte>(reinterpret_cast<const std::byte*>(png.data()), png.size()));
  }
}

}  // namespace attest::e2e
