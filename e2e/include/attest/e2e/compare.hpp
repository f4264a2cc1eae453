#pragma once
/// End-to-end comparison of generated media: one reference run, an optional floor run (an exact
/// run whose only difference is summation order, e.g. K/V reversed) and labelled test runs. Each
/// run is a video (any file OpenCV's FFmpeg backend reads: mkv, mp4, avi, ...; or a directory of
/// images read in name order) and/or an audio file (anything libsndfile reads).
///
/// A test run is `within floor` when each of its metrics against the reference is no worse than
/// the floor run's by the configured margin and each global statistic lies within the spread of
/// the exact runs (reference, floor) widened by the margin; otherwise `outside floor`, with the
/// reasons. docs/e2e.md documents the rule, the outputs and every JSON key.
///
/// Use from C++ (the `attest e2e compare` and `attest e2e study` commands do exactly this):
///
///   attest::e2e::CompareInputs in;
///   in.reference = {"reference", "ref.mkv", "ref.wav"};
///   in.floor = attest::e2e::RunInput{"floor", "floor.mkv", "floor.wav"};
///   in.tests.push_back({"sage_int8", "sage.mkv", "sage.wav"});
///   attest::e2e::CompareOptions opt;            // defaults: wang SSIM on luma, margins below
///   opt.strip_frames = {0, 12, 23};
///   const attest::e2e::CompareReport r = attest::e2e::compare(in, opt);
///   attest::OutputFiles out;                    // all-or-nothing
///   attest::e2e::write_outputs(r, {.json = "r.json", .markdown = "r.md", .html = "r.html",
///                                  .strip = "strip.png"}, out);
///   out.commit();
///   return attest::e2e::any_outside_floor(r) ? 1 : 0;
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "attest/core/output_files.hpp"
#include "attest/metrics/media.hpp"
#include "attest/metrics/media_audio.hpp"
#include "attest/metrics/media_registry.hpp"

namespace attest::e2e {

/// One run's files. `video` or `audio` may be empty (not given); every run of one comparison must
/// give the same kinds (a reference with audio needs audio on every run that is compared).
struct RunInput {
  std::string label;
  std::filesystem::path video;  ///< video file or image-sequence directory; empty = none
  std::filesystem::path audio;  ///< audio file; empty = none
};

struct CompareInputs {
  RunInput reference;             ///< label defaults to "reference" when empty
  std::optional<RunInput> floor;  ///< label defaults to "floor" when empty
  std::vector<RunInput> tests;    ///< labels must be unique and non-empty
};

/// Margins of the verdict (a test run may be this much worse than the floor run). The defaults are
/// the rows of metrics/media_margins.json (each with its reason); the named fields are the
/// built-in rows, `other` holds the rows of any further registered metric (media_registry.hpp).
struct Margins {
  Margins();  ///< every value from the margin table
  double psnr_db = 0;    ///< mean and min-frame PSNR, dB
  double ssim = 0;       ///< mean and min-frame SSIM
  double snr_db = 0;     ///< audio SNR (pooled), dB
  double cosine = 0;     ///< audio cosine (pooled)
  /// Global statistics: |s_test - s_ref| <= |s_floor - s_ref| + stats_rel * |s_ref| + stats_abs.
  double stats_rel = 0;
  double stats_abs = 0;
  std::map<std::string, double, std::less<>> other;  ///< by margin key, beyond the six above
  /// The value of a margin key (a MarginRow key); attest::Error for an unknown key.
  [[nodiscard]] double get(std::string_view key) const;
  double& at(std::string_view key);
};

struct CompareOptions {
  metrics::SsimPreset ssim = metrics::SsimPreset::wang;
  metrics::Channels channels = metrics::Channels::luma;
  std::optional<double> psnr_cap_db;  ///< e.g. 60 for libvmaf's convention; none = +inf kept
  double snr_eps = 0.0;               ///< added to the audio noise energy
  /// Compare the common prefix when frame counts or audio lengths differ (reported); frame size,
  /// channel count and sample rate must match regardless. Without it any mismatch is an
  /// attest::Error.
  bool allow_truncate = false;
  Margins margins;
  /// Frames kept for the strip (rows), one column per run; out-of-range indices are an
  /// attest::Error. Empty: up to 4 frames evenly spread over the clip.
  std::vector<std::int64_t> strip_frames;
  int strip_max_width = 320;  ///< each strip cell is downscaled to at most this width
  int threads = 0;            ///< frame-parallel workers; 0 = all hardware threads
};

/// The options every registered metric sees.
metrics::MediaOptions media_options(const CompareOptions& o);

enum class Role { reference, floor, test };
enum class Verdict { within_floor, outside_floor, not_judged };  ///< not_judged: no floor run
std::string_view role_name(Role r);
std::string_view verdict_name(Verdict v);  ///< "within floor", "outside floor", "not judged"

/// The values of one registered metric (media_registry.hpp) for one run. The reports, the JSON
/// and the verdict read these; the typed members below are views of the built-in metrics.
struct MetricResult {
  std::vector<std::vector<double>> frames;  ///< video: per frame, one vector per MediaMetric::series
  std::vector<double> signals;              ///< audio_pair: one per channel, then pooled
  /// video_pair: the summary; audio_pair: {"pooled"}; statistics: {"value"} (mean over frames for video).
  std::vector<metrics::Figure> figures;
};

/// Per-frame metrics of one run against the reference, and their summaries.
struct VideoVsReference {
  std::vector<double> frame_mse, frame_psnr, frame_ssim;  ///< one per compared frame
  metrics::PsnrSummary psnr;
  metrics::SsimSummary ssim;
};

/// Global statistics of one run (luma), per frame and pooled over frames.
struct VideoStats {
  std::vector<double> frame_luma_mean, frame_luma_std, frame_laplacian_var;
  std::vector<double> frame_abs_diff;  ///< mean |Y_t - Y_{t-1}|, for t >= 1 (frames - 1 values)
  double luma_mean = 0;       ///< mean of frame means
  double luma_std = 0;        ///< mean of frame standard deviations
  double laplacian_var = 0;   ///< mean of frame Laplacian variances
  double mean_abs_diff = 0;   ///< mean of frame_abs_diff (0 for one frame)
};

/// An 8-bit BGR image kept for the strip (no OpenCV types in this API).
struct StripImage {
  int width = 0, height = 0;
  std::vector<std::uint8_t> bgr;  ///< row-major, 3 bytes per pixel
};

struct RunReport {
  std::string label;
  Role role = Role::test;
  RunInput input;
  // Video (when given).
  std::int64_t frames_read = 0;           ///< frames decoded from this run's video
  std::optional<VideoStats> video_stats;
  std::optional<VideoVsReference> video;  ///< absent for the reference run itself
  std::vector<StripImage> strip;          ///< one per CompareReport::strip_frames
  // Audio (when given).
  std::optional<metrics::AudioStats> audio_stats;
  std::optional<metrics::AudioComparison> audio;  ///< absent for the reference run itself
  /// Every registered metric that applies to this run, by name (pair metrics are absent on the
  /// reference; video metrics without video, audio metrics without audio).
  std::map<std::string, MetricResult, std::less<>> metrics;
  // Verdict (test runs; the reference and floor are not judged).
  Verdict verdict = Verdict::not_judged;
  std::vector<std::string> reasons;  ///< why outside floor (one line each), or why not judged
};

struct CompareReport {
  CompareOptions options;
  int width = 0, height = 0;
  double fps = 0;                   ///< from the reference video's container (0 if unknown)
  std::int64_t frames_compared = 0;  ///< frames in every run (the minimum with allow_truncate)
  bool frame_count_mismatch = false;
  int audio_sample_rate = 0;
  std::int64_t audio_frames_compared = 0;
  std::vector<std::int64_t> strip_frames;
  std::vector<RunReport> runs;  ///< reference first, then floor (if any), then tests in order
  std::vector<std::string> warnings;  ///< truncations and other notes worth a reader's attention
};

/// Decodes every run, computes all metrics (frames in parallel) and the verdicts.
/// attest::Error (one line naming the file and the defect) for unreadable or mismatched inputs.
CompareReport compare(const CompareInputs& inputs, const CompareOptions& options = {});

/// True when any test run is `outside floor` (the CLI then exits 1).
bool any_outside_floor(const CompareReport& r);

/// Markdown in the shape of a PR comment: per run video PSNR mean (min frame), SSIM mean
/// (min frame), audio SNR / cosine, verdict; then global statistics per run.
std::string to_markdown(const CompareReport& r);
/// JSON with every per-frame value (keys documented in docs/e2e.md).
nlohmann::json to_json(const CompareReport& r);
/// The frame strip as PNG bytes: one row per strip frame, one column per run, labelled.
/// attest::Error when the report has no video.
std::vector<std::uint8_t> strip_png(const CompareReport& r);
/// A self-contained HTML page: the tables, per-frame PSNR and SSIM plots (inline SVG) and the
/// strip (base64 PNG). `extra_html` is inserted verbatim before the closing </body> (e.g. the
/// per-step divergence plot of `attest e2e study`).
std::string to_html(const CompareReport& r, const std::string& extra_html = {});

/// Output paths; empty ones are not written.
struct OutputPaths {
  std::filesystem::path json, markdown, html, strip;
};
/// Stages every requested output into `out` (the caller commits).
void write_outputs(const CompareReport& r, const OutputPaths& paths, OutputFiles& out,
                   const std::string& extra_html = {});

/// Minimal SVG line plot used by the HTML report (also handy for `attest e2e study`): one series
/// per entry, x = index, non-finite values are drawn at the top edge and marked.
struct PlotSeries {
  std::string label;
  std::vector<double> values;
};
std::string svg_line_plot(const std::string& title, const std::string& y_label,
                          const std::vector<PlotSeries>& series, int width = 720, int height = 260);

}  // namespace attest::e2e
