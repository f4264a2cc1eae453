// Temporal change: mean |Y_t - Y_{t-1}| per frame t >= 1 (a frozen or flickering run moves it).
#include <fmt/format.h>

#include "attest/metrics/media_registry.hpp"

namespace attest::metrics {
namespace {

MediaMetric make() {
  MediaMetric m;
  m.name = "mean_abs_diff";
  m.help = "frame-to-frame difference: mean over pixels of |Y_t - Y_{t-1}| for t >= 1";
  m.scope = MetricScope::video_frame;
  m.order = 40;
  m.series = {{"abs_diff", "mean abs frame diff", [](double x) { return fmt::format("{:.6f}", x); }}};
  m.needs_previous = true;
  m.per_frame = [](const Frame& f) { return mean_abs_diff(f.luma, *f.prev_luma); };
  m.margin = "stats_rel";
  m.margin_abs = "stats_abs";
  m.label = "mean abs frame diff";
  m.stat_column = "mean abs frame diff";
  m.stat_precision = 4;
  return m;
}

ATTEST_REGISTER_MEDIA_METRIC(make());

}  // namespace
}  // namespace attest::metrics
