// SSIM per frame against the reference under the chosen preset (media.hpp); judged on the mean and
// the worst frame.
#include <vector>

#include <fmt/format.h>
#include <opencv2/core.hpp>

#include "attest/metrics/media_registry.hpp"

namespace attest::metrics {
namespace {

MediaMetric make() {
  MediaMetric m;
  m.name = "ssim";
  m.help = "mean SSIM per frame under --ssim (wang, skimage, opencv, ffmpeg); colour: mean over B, G, R";
  m.options = "--ssim, --channels";
  m.scope = MetricScope::video_pair;
  m.order = 20;
  m.series = {{"ssim", "SSIM", [](double x) { return fmt::format("{:.10f}", x); }}};
  m.per_frame_pair = [](const FramePair& p, const MediaOptions& o, double* out) {
    if (o.channels == Channels::luma) {
      out[0] = ssim(p.test_luma, p.ref_luma, o.ssim);
      return;
    }
    std::vector<cv::Mat> a, b;
    cv::split(p.test, a);
    cv::split(p.ref, b);
    double sum = 0;  // B, G, R in that order, as compare_images
    for (std::size_t c = 0; c < a.size(); ++c) sum += ssim(a[c], b[c], o.ssim);
    out[0] = sum / static_cast<double>(a.size());
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
