// Temporal change: mean |Y_t - Y_{t-1}| per frame t >= 1 (a frozen or flickering run moves it).
#include <fmt/format.h>

#include "attest/metrics/media_registry.hpp"

namespace attest::metrics {
namespace {

MediaMetric make() {
  MediaMetric m = statistic_metric(MetricScope::video_frame, "mean_abs_diff",
                                   "frame-to-frame difference: mean over pixels of |Y_t - Y_{t-1}| for t >= 1", 40,
                                   "mean abs frame diff", "mean abs frame diff", "mean abs frame diff", 4);
  m.series[0].key = "abs_diff";  // the per-frame array's JSON key, not the metric's name
  m.needs_previous = true;
  m.per_frame = [](const Frame& f) { return mean_abs_diff(f.luma, *f.prev_luma); };
  return m;
}

ATTEST_REGISTER_MEDIA_METRIC(make());

}  // namespace
}  // namespace attest::metrics
