// Global luma statistics of a run: mean and population standard deviation per frame (exact
// integer sums), then their means over frames.
#include <fmt/format.h>

#include "attest/metrics/media_registry.hpp"

namespace attest::metrics {
namespace {

MediaMetric luma(const char* name, const char* label, const char* cli_label, int order, double (*pick)(const MeanStd&),
                 const char* help) {
  MediaMetric m = statistic_metric(MetricScope::video_frame, name, help, order, cli_label, label, label, 3);
  m.per_frame = [pick](const Frame& f) { return pick(mean_std(f.luma)); };
  return m;
}

ATTEST_REGISTER_MEDIA_METRIC(luma("luma_mean", "luma mean", "luma mean", 10, [](const MeanStd& s) { return s.mean; },
                                  "mean luma (BT.601 full range) of each frame"));
ATTEST_REGISTER_MEDIA_METRIC(luma("luma_std", "luma std", "std", 20, [](const MeanStd& s) { return s.std; },
                                  "population standard deviation of each frame's luma"));

}  // namespace
}  // namespace attest::metrics
