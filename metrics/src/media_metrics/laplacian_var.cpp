// Sharpness: population variance of the luma Laplacian (ksize 1) of each frame.
#include <fmt/format.h>

#include "attest/metrics/media_registry.hpp"

namespace attest::metrics {
namespace {

MediaMetric make() {
  MediaMetric m = statistic_metric(MetricScope::video_frame, "laplacian_var",
                                   "sharpness: population variance of cv::Laplacian (ksize 1) of each frame's luma", 30,
                                   "Laplacian variance", "Laplacian variance", "Laplacian var", 2);
  m.per_frame = [](const Frame& f) { return laplacian_variance(f.luma); };
  return m;
}

ATTEST_REGISTER_MEDIA_METRIC(make());

}  // namespace
}  // namespace attest::metrics
