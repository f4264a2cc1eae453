// Audio metrics (see media_audio.hpp); decoding through libsndfile.
#include "attest/metrics/media_audio.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include <sndfile.h>

#include "attest/core/status.hpp"

namespace attest::metrics {
namespace {

double db(double num, double den) {
  if (den == 0) return num == 0 ? std::numeric_limits<double>::quiet_NaN() : std::numeric_limits<double>::infinity();
  return 10.0 * std::log10(num / den);
}

struct SndCloser {
  SNDFILE* f;
  ~SndCloser() {
    if (f) sf_close(f);
  }
};

}  // namespace

Audio read_audio(const std::filesystem::path& path) {
  SF_INFO info{};
  SNDFILE* f = sf_open(path.c_str(), SFM_READ, &info);
  if (!f) throw Error("audio " + path.string() + ": " + sf_strerror(nullptr));
  SndCloser closer{f};
  if (info.channels <= 0 || info.samplerate <= 0)
    throw Error("audio " + path.string() + ": no channels or no sample rate");
  std::vector<double> interleaved(static_cast<std::size_t>(info.frames) * static_cast<std::size_t>(info.channels));
  // libsndfile scales integer PCM to [-1, 1) when reading doubles (SFC_SET_NORM_DOUBLE is on by default).
  const sf_count_t got = sf_readf_double(f, interleaved.data(), info.frames);
  if (got != info.frames)
    throw Error("audio " + path.string() + ": read " + std::to_string(got) + " of " + std::to_string(info.frames) +
                " frames (" + sf_strerror(f) + ")");
  Audio a;
  a.sample_rate = info.samplerate;
  a.channels.assign(static_cast<std::size_t>(info.channels), std::vector<double>(static_cast<std::size_t>(info.frames)));
  for (sf_count_t i = 0; i < info.frames; ++i)
    for (int c = 0; c < info.channels; ++c)
      a.channels[static_cast<std::size_t>(c)][static_cast<std::size_t>(i)] =
          interleaved[static_cast<std::size_t>(i) * static_cast<std::size_t>(info.channels) + static_cast<std::size_t>(c)];
  return a;
}

void write_audio_wav16(const std::filesystem::path& path, const Audio& audio) {
  if (audio.channels.empty() || audio.sample_rate <= 0) throw Error("audio " + path.string() + ": nothing to write");
  SF_INFO info{};
  info.samplerate = audio.sample_rate;
  info.channels = static_cast<int>(audio.channels.size());
  info.format = SF_FORMAT_WAV | SF_FORMAT_PCM_16;
  SNDFILE* f = sf_open(path.c_str(), SFM_WRITE, &info);
  if (!f) throw Error("audio " + path.string() + ": " + sf_strerror(nullptr));
  SndCloser closer{f};
  const std::int64_t n = audio.frames();
  // Quantised here as round(x * 32768), clipped: libsndfile reads 16-bit PCM as k / 32768, so
  // k / 32768 round-trips exactly (its own double writer scales by 32767).
  std::vector<short> interleaved(static_cast<std::size_t>(n) * audio.channels.size());
  for (std::int64_t i = 0; i < n; ++i)
    for (std::size_t c = 0; c < audio.channels.size(); ++c) {
      const double v = std::nearbyint(audio.channels[c].at(static_cast<std::size_t>(i)) * 32768.0);
      interleaved[static_cast<std::size_t>(i) * audio.channels.size() + c] =
          static_cast<short>(std::clamp(v, -32768.0, 32767.0));
    }
  if (sf_writef_short(f, interleaved.data(), n) != n) throw Error("audio " + path.string() + ": " + sf_strerror(f));
}

SignalComparison compare_signals(std::span<const double> test, std::span<const double> ref, double eps) {
  if (test.size() != ref.size())
    throw Error("signals differ in length (" + std::to_string(test.size()) + " vs " + std::to_string(ref.size()) + ")");
  SignalComparison s;
  s.samples = static_cast<std::int64_t>(ref.size());
  double tt = 0, pp = 0, pt = 0, noise = 0;
  for (std::size_t i = 0; i < ref.size(); ++i) {
    const double t = ref[i], p = test[i];
    tt += t * t;
    pp += p * p;
    pt += p * t;
    noise += (t - p) * (t - p);
    s.peak_ref = std::max(s.peak_ref, std::abs(t));
    s.peak_test = std::max(s.peak_test, std::abs(p));
  }
  s.snr = db(tt + eps, noise + eps);
  // SI-SDR: project the test onto the target; the residual of that projection is the distortion.
  const double alpha = (pt + eps) / (tt + eps);
  double target = 0, dist = 0;
  for (std::size_t i = 0; i < ref.size(); ++i) {
    const double st = alpha * ref[i];
    target += st * st;
    dist += (st - test[i]) * (st - test[i]);
  }
  s.si_sdr = db(target + eps, dist + eps);
  if (tt == 0 && pp == 0) s.cosine = 1;
  else if (tt == 0 || pp == 0) s.cosine = 0;
  else s.cosine = pt / (std::sqrt(tt) * std::sqrt(pp));
  const double n = std::max<double>(1.0, static_cast<double>(ref.size()));
  s.rms_ref = std::sqrt(tt / n);
  s.rms_test = std::sqrt(pp / n);
  return s;
}

AudioComparison compare_audio(const Audio& test, const Audio& ref, const AudioCompareOptions& o) {
  if (test.sample_rate != ref.sample_rate)
    throw Error("audio sample rates differ (" + std::to_string(test.sample_rate) + " Hz vs reference " +
                std::to_string(ref.sample_rate) + " Hz)");
  if (test.channels.size() != ref.channels.size())
    throw Error("audio channel counts differ (" + std::to_string(test.channels.size()) + " vs reference " +
                std::to_string(ref.channels.size()) + ")");
  AudioComparison c;
  c.sample_rate = ref.sample_rate;
  c.frames_test = test.frames();
  c.frames_ref = ref.frames();
  c.length_mismatch = c.frames_test != c.frames_ref;
  if (c.length_mismatch && !o.allow_truncate)
    throw Error("audio lengths differ (" + std::to_string(c.frames_test) + " vs reference " + std::to_string(c.frames_ref) +
                " frames); --allow-truncate compares the common prefix");
  c.frames_compared = std::min(c.frames_test, c.frames_ref);
  const auto n = static_cast<std::size_t>(c.frames_compared);
  std::vector<double> all_t, all_r;
  all_t.reserve(n * ref.channels.size());
  all_r.reserve(n * ref.channels.size());
  for (std::size_t ch = 0; ch < ref.channels.size(); ++ch) {
    const std::span<const double> t(test.channels[ch].data(), n), r(ref.channels[ch].data(), n);
    SignalComparison s = compare_signals(t, r, o.snr_eps);
    s.name = "ch" + std::to_string(ch);
    c.channels.push_back(s);
    all_t.insert(all_t.end(), t.begin(), t.end());
    all_r.insert(all_r.end(), r.begin(), r.end());
  }
  c.pooled = compare_signals(all_t, all_r, o.snr_eps);
  c.pooled.name = "pooled";
  return c;
}

AudioStats audio_stats(const Audio& a) {
  AudioStats s;
  double ss = 0, n = 0;
  for (const auto& ch : a.channels)
    for (const double x : ch) {
      ss += x * x;
      s.peak = std::max(s.peak, std::abs(x));
      n += 1;
    }
  s.rms = n > 0 ? std::sqrt(ss / n) : 0;
  return s;
}

}  // namespace attest::metrics
