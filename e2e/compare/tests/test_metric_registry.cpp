// "Adding a metric is one file": this file registers a metric that exists only in this test
// binary and finds it in the comparison, the verdict, the Markdown, the JSON and the HTML, with
// no other file touched. The clips are the flat grey frames of test_compare.cpp (grey_clips.hpp),
// whose errors follow by hand: frame t of the reference is v_t = 60 + 20 t everywhere; a run
// adding d to frame t has max |Y_test - Y_ref| = |d| there.
#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "attest/core/status.hpp"
#include "attest/e2e/compare.hpp"
#include "attest/e2e/video_io.hpp"
#include "attest/metrics/media_registry.hpp"
#include "attest/testing/temp_dir.hpp"
#include "grey_clips.hpp"

namespace {

namespace fs = std::filesystem;
namespace m = attest::metrics;
using namespace attest::e2e;

// The extra metric: worst absolute luma error per frame, lower is better, its own margin row.
m::MediaMetric make_max_abs_err() {
  m::MediaMetric mm;
  mm.name = "max_abs_err";
  mm.help = "largest |Y_test - Y_ref| of a frame (test-only metric)";
  mm.scope = m::MetricScope::video_pair;
  mm.higher_is_better = false;
  mm.order = 30;
  mm.series = {{"abs_err", "max abs err", [](double x) { return std::to_string(x); }}};
  mm.per_frame_pair = [](const m::FramePair& p, const m::MediaOptions&, double* out) {
    double lo = 0, hi = 0;
    cv::Mat d;
    cv::absdiff(p.test_luma, p.ref_luma, d);
    cv::minMaxLoc(d, &lo, &hi);
    out[0] = hi;
  };
  mm.summarize = [](const std::vector<std::vector<double>>& s, const m::MediaOptions&) {
    const auto it = std::max_element(s[0].begin(), s[0].end());
    return std::vector<m::Figure>{{"max", *it}, {"max_frame", static_cast<double>(it - s[0].begin()), true}};
  };
  mm.margin = "max_abs_err";
  mm.judged = {{"max", "max abs error"}};
  mm.margin_default = m::MarginRow{"max_abs_err", 1.0, "", "max abs error", "", "",
                                   "test-only: one grey level beyond the floor run"};
  mm.column = "max abs err (frame)";
  mm.cell = [](const std::vector<m::Figure>& f) {
    return std::to_string(static_cast<int>(m::MediaMetric::figure(f, "max"))) + " @ " +
           std::to_string(static_cast<int>(m::MediaMetric::figure(f, "max_frame")));
  };
  mm.plot_title = [](const m::MediaOptions&) { return std::string("max abs error per frame"); };
  mm.plot_y_label = "grey levels";
  return mm;
}
ATTEST_REGISTER_MEDIA_METRIC(make_max_abs_err());

using attest::e2e::test::clip;

TEST(MediaRegistry, ExtraMetricReachesCompareVerdictAndReports) {
  const attest::testing::TempDir dir("metric_registry");
  write_video(dir / "ref", clip({0, 0, 0, 0, 0, 0}));
  write_video(dir / "floor", clip({1, 1, 1, 1, 1, 1}));
  write_video(dir / "good", clip({1, -1, 1, -1, 1, -1}));
  write_video(dir / "bad", clip({0, 0, 0, 0, 3, 0}));
  CompareInputs in;
  in.reference = {"", dir / "ref", ""};
  in.floor = RunInput{"", dir / "floor", ""};
  in.tests = {{"good", dir / "good", ""}, {"bad", dir / "bad", ""}};
  CompareOptions o;
  o.threads = 2;
  EXPECT_EQ(o.margins.get("max_abs_err"), 1.0);  // the registration's margin row
  const CompareReport r = compare(in, o);

  // Computed per frame, summarised, judged (lower is better: 3 > floor's 1 + margin 1).
  const auto& bad = r.runs[3].metrics.at("max_abs_err");
  EXPECT_EQ(bad.frames.at(0), (std::vector<double>{0, 0, 0, 0, 3, 0}));
  EXPECT_EQ(m::MediaMetric::figure(bad.figures, "max"), 3.0);
  EXPECT_EQ(r.runs[2].verdict, Verdict::within_floor) << (r.runs[2].reasons.empty() ? "" : r.runs[2].reasons[0]);
  EXPECT_EQ(r.runs[3].verdict, Verdict::outside_floor);
  EXPECT_NE(std::find(r.runs[3].reasons.begin(), r.runs[3].reasons.end(),
                      "max abs error 3 is above the floor run's 1 by more than 1"),
            r.runs[3].reasons.end());

  // Markdown: its column after SSIM, before audio; its cell; its margin in the summary line.
  const std::string md = to_markdown(r);
  EXPECT_NE(md.find("| SSIM mean (min frame) | max abs err (frame) | audio SNR dB / cos | verdict |"), std::string::npos) << md;
  EXPECT_NE(md.find(" | 3 @ 4 | - | outside floor |"), std::string::npos) << md;
  EXPECT_NE(md.find("cosine 0.0001, max abs error 1, statistics"), std::string::npos) << md;
  // JSON: summary, per-frame array, margin.
  const nlohmann::json j = to_json(r);
  EXPECT_EQ(j["runs"][3]["video"]["max_abs_err"]["max"], 3.0);
  EXPECT_EQ(j["runs"][3]["video"]["max_abs_err"]["max_frame"], 4);
  EXPECT_EQ(j["runs"][1]["video"]["frames"]["abs_err"], nlohmann::json::array({1, 1, 1, 1, 1, 1}));
  EXPECT_EQ(j["options"]["margins"]["max_abs_err"], 1.0);
  // HTML: its column and its plot.
  const std::string html = to_html(r);
  EXPECT_NE(html.find("<th>max abs err (frame)</th>"), std::string::npos);
  EXPECT_NE(html.find("max abs error per frame"), std::string::npos);
}

TEST(MediaRegistry, BuiltInsAndMarginTable) {
  // The built-ins in registry order (scope, then order): the order of reasons and table columns.
  std::vector<std::string> names;
  for (const m::MediaMetric* mm : m::all_media_metrics()) names.push_back(mm->name);
  EXPECT_EQ(names, (std::vector<std::string>{"psnr", "ssim", "max_abs_err", "luma_mean", "luma_std", "laplacian_var",
                                             "mean_abs_diff", "snr", "si_sdr", "cosine", "rms", "peak"}));
  // Every margin row has a reason; the defaults are the documented ones (docs/e2e.md 'Verdict').
  for (const auto& row : m::margin_rows()) EXPECT_FALSE(row.reason.empty()) << row.key;
  const Margins mg;
  EXPECT_EQ(mg.psnr_db, 0.5);
  EXPECT_EQ(mg.ssim, 0.005);
  EXPECT_EQ(mg.snr_db, 0.5);
  EXPECT_EQ(mg.cosine, 1e-4);
  EXPECT_EQ(mg.stats_rel, 0.02);
  EXPECT_EQ(mg.stats_abs, 1e-9);
  EXPECT_THROW((void)mg.get("no_such_margin"), attest::Error);
  // A duplicate name is refused.
  EXPECT_THROW(m::register_media_metric(make_max_abs_err()), attest::Error);
}

}  // namespace
