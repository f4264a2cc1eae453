// Audio against the reference, per channel and pooled (compare_signals: torchmetrics'
// conventions): SNR and cosine are judged on the pooled signal, SI-SDR is reported.
#include <fmt/format.h>

#include "attest/metrics/media_registry.hpp"

namespace attest::metrics {
namespace {

std::string decibels(double x) { return fixed_or_inf(x, 6) + " dB"; }

MediaMetric make_snr() {
  MediaMetric m = signal_metric("snr", "SNR, 10 log10((sum t^2 + eps) / (sum (t - p)^2 + eps)), eps = --snr-eps",
                                "--snr-eps", 10, {"snr", "SNR", decibels}, &SignalComparison::snr);
  m.margin = "snr_db";
  m.label = "audio SNR";
  m.column = "audio SNR dB / cos";
  m.cell = [](const std::vector<Figure>& f) { return fixed_or_inf(MediaMetric::figure(f, "pooled"), 2); };
  return m;
}

MediaMetric make_cosine() {
  MediaMetric m = signal_metric("cosine", "cosine similarity <p, t> / (|p| |t|) (1 when both are zero)", "", 30,
                                {"cosine", "cosine", [](double x) { return fmt::format("{:.10f}", x); }},
                                &SignalComparison::cosine);
  m.margin = "cosine";
  m.label = "audio cosine";
  m.column = "audio SNR dB / cos";
  m.cell = [](const std::vector<Figure>& f) { return fmt::format("{:.6f}", MediaMetric::figure(f, "pooled")); };
  return m;
}

ATTEST_REGISTER_MEDIA_METRIC(make_snr());
ATTEST_REGISTER_MEDIA_METRIC(signal_metric("si_sdr", "scale-invariant SDR (torchmetrics, zero_mean=False); reported, not judged",
                                           "--snr-eps", 20, {"si_sdr", "SI-SDR", decibels}, &SignalComparison::si_sdr));
ATTEST_REGISTER_MEDIA_METRIC(make_cosine());

}  // namespace
}  // namespace attest::metrics
