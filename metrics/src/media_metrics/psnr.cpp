// PSNR per frame against the reference (and the frame's MSE), summarised as FFmpeg and libvmaf
// report it; judged on mean_finite and the worst frame.
#include <vector>

#include <fmt/format.h>
#include <opencv2/core.hpp>

#include "attest/metrics/media_registry.hpp"

namespace attest::metrics {
namespace {

MediaMetric make() {
  MediaMetric m = media_metric(
      MetricScope::video_pair, "psnr",
      "PSNR per frame, 10 log10(255^2 / MSE) of the exact integer MSE; identical frames are +inf (or the cap)",
      "--channels, --psnr-cap", 10,
      {{"mse", "MSE", [](double x) { return fmt::format("{:.6f}", x); }},
       {"psnr", "PSNR", [](double x) { return fixed_or_inf(x, 6) + " dB"; }}});
  m.judged_series = 1;
  m.per_frame_pair = [](const FramePair& p, const MediaOptions& o, double* out) {
    // Colour: PSNR of the mean plane MSE.
    const double e = channel_mean(p, o, [](const cv::Mat& a, const cv::Mat& b) { return mse(a, b); });
    out[0] = e;
    out[1] = psnr_from_mse(e, 255.0, o.psnr_cap_db);
  };
  m.summarize = [](const std::vector<std::vector<double>>& s, const MediaOptions& o) {
    const PsnrSummary p = summarize_psnr(s[0], 255.0, o.psnr_cap_db);
    return std::vector<Figure>{{"mean", p.mean},
                               {"mean_finite", p.mean_finite},
                               {"min", p.min},
                               {"min_frame", static_cast<double>(p.min_frame), true},
                               {"pooled", p.pooled},
                               {"identical_frames", static_cast<double>(p.identical_frames), true}};
  };
  m.margin = "psnr_db";
  // mean_finite: one identical frame would make the plain mean +inf and hide every other frame.
  m.judged = {{"mean_finite", "PSNR mean"}, {"min", "PSNR min frame"}};
  m.column = "PSNR dB mean (min frame)";
  m.cell = [](const std::vector<Figure>& f) {
    auto F = [&](const char* k) { return MediaMetric::figure(f, k); };
    std::string s = fmt::format("{} ({} @ {})", fixed_or_inf(F("mean"), 2), fixed_or_inf(F("min"), 2),
                                static_cast<long long>(F("min_frame")));
    if (F("identical_frames") > 0) s += fmt::format(", {} identical", static_cast<long long>(F("identical_frames")));
    return s;
  };
  m.plot_title = [](const MediaOptions&) { return std::string("PSNR per frame"); };
  m.plot_y_label = "PSNR (dB)";
  return m;
}

ATTEST_REGISTER_MEDIA_METRIC(make());

}  // namespace
}  // namespace attest::metrics
