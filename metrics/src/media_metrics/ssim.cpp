// SSIM per frame against the reference under the chosen preset (media.hpp); judged on the mean and
// the worst frame.
#include <vector>

#include <fmt/format.h>
#include <opencv2/core.hpp>

#include "attest/metrics/media_registry.hpp"

namespace attest::metrics {
namespace {

MediaMetric make() {
  MediaMetric m = media_metric(MetricScope::video_pair, "ssim",
                               "mean SSIM per frame under --ssim (wang, skimage, opencv, ffmpeg); colour: mean over B, G, R",
                               "--ssim, --channels", 20, {{"ssim", "SSIM", [](double x) { return fmt::format("{:.10f}", x); }}});
  m.per_frame_pair = [](const FramePair& p, const MediaOptions& o, double* out) {
    out[0] = channel_mean(p, o, [&o](const cv::Mat& a, const cv::Mat& b) { return ssim(a, b, o.ssim); });
  };
  m.summarize = [](const std::vector<std::vector<double>>& s, const MediaOptions&) { return mean_min_summary(s[0]); };
  m.margin = "ssim";
  m.judged = {{"mean", "SSIM mean"}, {"min", "SSIM min frame"}};
  m.column = "SSIM mean (min frame)";
  m.cell = [](const std::vector<Figure>& f) {
    return fmt::format("{:.4f} ({:.4f} @ {})", MediaMetric::figure(f, "mean"), MediaMetric::figure(f, "min"),
                       static_cast<long long>(MediaMetric::figure(f, "min_frame")));
  };
  m.plot_title = [](const MediaOptions& o) { return "SSIM per frame (" + std::string(ssim_preset_name(o.ssim)) + ")"; };
  m.plot_y_label = "SSIM";
  return m;
}

ATTEST_REGISTER_MEDIA_METRIC(make());

}  // namespace
}  // namespace attest::metrics
