// Global luma statistics of a run: mean and population standard deviation per frame (exact
// integer sums), then their means over frames.
#include <fmt/format.h>

#include "attest/metrics/media_registry.hpp"

namespace attest::metrics {
namespace {

MediaMetric luma(const char* name, const char* label, const char* cli_label, int order, double (*pick)(const MeanStd&),
                 const char* help) {
  MediaMetric m;
  m.name = name;
  m.help = help;
  m.scope = MetricScope::video_frame;
  m.order = order;
  m.series = {{name, cli_label, [](double x) { return fmt::format("{:.6f}", x); }}};
  m.per_frame = [pick](const Frame& f) { return pick(mean_std(f.luma)); };
  m.margin = "stats_rel";
  m.margin_abs = "stats_abs";
  m.label = label;
  m.stat_column = label;
  m.stat_precision = 3;
  return m;
}

ATTEST_REGISTER_MEDIA_METRIC(luma("luma_mean", "luma mean", "luma mean", 10, [](const MeanStd& s) { return s.mean; },
                                  "mean luma (BT.601 full range) of each frame"));
ATTEST_REGISTER_MEDIA_METRIC(luma("luma_std", "luma std", "std", 20, [](const MeanStd& s) { return s.std; },
                                  "population standard deviation of each frame's luma"));

}  // namespace
}  // namespace attest::metrics
