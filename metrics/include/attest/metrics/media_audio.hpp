#pragma once
/// Audio metrics: SNR, SI-SDR, cosine, RMS and peak, per channel and pooled. Samples are read
/// with libsndfile (any format it reads: wav, flac, ogg, aiff, ...) as doubles in [-1, 1].
#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace attest::metrics {

/// Decoded audio, planar: channels[c][i] is sample i of channel c.
struct Audio {
  int sample_rate = 0;
  std::vector<std::vector<double>> channels;
  [[nodiscard]] std::int64_t frames() const {
    return channels.empty() ? 0 : static_cast<std::int64_t>(channels[0].size());
  }
};

/// Reads an audio file with libsndfile; attest::Error names the file and libsndfile's reason.
Audio read_audio(const std::filesystem::path& path);
/// Writes 16-bit PCM wav (tests and the synthetic pipeline); attest::Error on failure.
void write_audio_wav16(const std::filesystem::path& path, const Audio& audio);

/// Figures of a test signal p against a target t (torchmetrics' conventions):
/// snr    = 10 log10((sum t^2 + eps) / (sum (t - p)^2 + eps))  (+inf when equal and eps = 0),
/// si_sdr = with alpha = (<p, t> + eps) / (<t, t> + eps):
///          10 log10((|alpha t|^2 + eps) / (|alpha t - p|^2 + eps)) (zero_mean=False),
/// cosine = <p, t> / (|p| |t|) (1 when both are zero, 0 when one is),
/// rms and peak of each signal.
struct SignalComparison {
  std::string name;  ///< "ch0", "ch1", ... or "pooled"
  std::int64_t samples = 0;
  double snr = 0, si_sdr = 0, cosine = 0;
  double rms_test = 0, rms_ref = 0, peak_test = 0, peak_ref = 0;
};
SignalComparison compare_signals(std::span<const double> test, std::span<const double> ref, double snr_eps = 0.0);

/// Comparison of two audio files: per channel and pooled (all channels as one signal).
struct AudioComparison {
  int sample_rate = 0;
  std::int64_t frames_test = 0, frames_ref = 0;
  std::int64_t frames_compared = 0;  ///< min of the two when truncation is allowed
  bool length_mismatch = false;
  std::vector<SignalComparison> channels;
  SignalComparison pooled;
};

struct AudioCompareOptions {
  double snr_eps = 0.0;
  /// Compare the common prefix when lengths differ (reported in length_mismatch); without it a
  /// length mismatch is an attest::Error. Sample rate and channel count must always match.
  bool allow_truncate = false;
};
AudioComparison compare_audio(const Audio& test, const Audio& ref, const AudioCompareOptions& o = {});

/// RMS and peak |x| of a whole recording (all channels), for global statistics.
struct AudioStats {
  double rms = 0, peak = 0;
};
AudioStats audio_stats(const Audio& a);

}  // namespace attest::metrics
