// Global statistics of a whole recording (all channels): RMS and peak |x|.
#include <fmt/format.h>

#include "attest/metrics/media_registry.hpp"

namespace attest::metrics {
namespace {

MediaMetric stat(const char* name, const char* label, int order, double (*pick)(const AudioStats&), const char* help) {
  MediaMetric m = statistic_metric(MetricScope::audio_stat, name, help, order, label, label, label, 6);
  m.per_recording = [pick](const Audio& a) { return pick(audio_stats(a)); };
  return m;
}

ATTEST_REGISTER_MEDIA_METRIC(stat("rms", "audio RMS", 10, [](const AudioStats& s) { return s.rms; },
                                  "RMS of the whole recording, all channels: sqrt(mean x^2)"));
ATTEST_REGISTER_MEDIA_METRIC(stat("peak", "audio peak", 20, [](const AudioStats& s) { return s.peak; },
                                  "peak |x| of the whole recording, all channels"));

}  // namespace
}  // namespace attest::metrics
