// Sharpness: population variance of the luma Laplacian (ksize 1) of each frame.
#include <fmt/format.h>

#include "attest/metrics/media_registry.hpp"

namespace attest::metrics {
namespace {

MediaMetric make() {
  MediaMetric m;
  m.name = "laplacian_var";
  m.help = "sharpness: population variance of cv::Laplacian (ksize 1) of each frame's luma";
  m.scope = MetricScope::video_frame;
  m.order = 30;
  m.series = {{"laplacian_var", "Laplacian variance", [](double x) { return fmt::format("{:.6f}", x); }}};
  m.per_frame = [](const Frame& f) { return laplacian_variance(f.luma); };
  m.margin = "stats_rel";
  m.margin_abs = "stats_abs";
  m.label = "Laplacian variance";
  m.stat_column = "Laplacian var";
  m.stat_precision = 2;
  return m;
}

ATTEST_REGISTER_MEDIA_METRIC(make());

}  // namespace
}  // namespace attest::metrics
