// Audio against the reference, per channel and pooled (compare_signals: torchmetrics'
// conventions): SNR and cosine are judged on the pooled signal, SI-SDR is reported.
#include <fmt/format.h>

#include "attest/metrics/media_registry.hpp"

namespace attest::metrics {
namespace {

MediaMetric make_snr() {
  MediaMetric m;
  m.name = "snr";
  m.help = "SNR, 10 log10((sum t^2 + eps) / (sum (t - p)^2 + eps)), eps = --snr-eps";
  m.options = "--snr-eps";
  m.scope = MetricScope::audio_pair;
  m.order = 10;
  m.series = {{"snr", "SNR", [](double x) { return fixed_or_inf(x, 6) + " dB"; }}};
  m.per_signal = [](std::span<const double> t, std::span<const double> r, const MediaOptions& o) {
    return compare_signals(t, r, o.snr_eps).snr;
  };
  m.margin = "snr_db";
  m.label = "audio SNR";
  m.column = "audio SNR dB / cos";
  m.cell = [](const std::vector<Figure>& f) { return fixed_or_inf(MediaMetric::figure(f, "pooled"), 2); };
  return m;
}

MediaMetric make_si_sdr() {
  MediaMetric m;
  m.name = "si_sdr";
  m.help = "scale-invariant SDR (torchmetrics, zero_mean=False); reported, not judged";
  m.options = "--snr-eps";
  m.scope = MetricScope::audio_pair;
  m.order = 20;
  m.series = {{"si_sdr", "SI-SDR", [](double x) { return fixed_or_inf(x, 6) + " dB"; }}};
  m.per_signal = [](std::span<const double> t, std::span<const double> r, const MediaOptions& o) {
    return compare_signals(t, r, o.snr_eps).si_sdr;
  };
  return m;
}

MediaMetric make_cosine() {
  MediaMetric m;
  m.name = "cosine";
  m.help = "cosine similarity <p, t> / (|p| |t|) (1 when both are zero)";
  m.scope = MetricScope::audio_pair;
  m.order = 30;
  m.series = {{"cosine", "cosine", [](double x) { return fmt::format("{:.10f}", x); }}};
  m.per_signal = [](std::span<const double> t, std::span<const double> r, const MediaOptions& o) {
    return compare_signals(t, r, o.snr_eps).cosine;
  };
  m.margin = "cosine";
  m.label = "audio cosine";
  m.column = "audio SNR dB / cos";
  m.cell = [](const std::vector<Figure>& f) { return fmt::format("{:.6f}", MediaMetric::figure(f, "pooled")); };
  return m;
}

ATTEST_REGISTER_MEDIA_METRIC(make_snr());
ATTEST_REGISTER_MEDIA_METRIC(make_si_sdr());
ATTEST_REGISTER_MEDIA_METRIC(make_cosine());

}  // namespace
}  // namespace attest::metrics
