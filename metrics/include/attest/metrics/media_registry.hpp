#pragma once
/// The media-metric registry (issue 18): every figure that `attest e2e compare` judges or reports,
/// and that `attest metrics image|audio` prints, is one registered MediaMetric. The comparison,
/// the verdict, the Markdown / JSON / HTML reports and the CLI loop over all_media_metrics();
/// none of them names a metric.
///
/// Adding a metric is one file: a source under metrics/src/media_metrics/ (picked up by a glob in
/// metrics/media.cmake) with
///
///   ATTEST_REGISTER_MEDIA_METRIC([] {
///     attest::metrics::MediaMetric m;
///     m.name = "edge_density"; m.help = "..."; m.scope = MetricScope::video_frame;
///     m.per_frame = [](const Frame& f) { return ...; };
///     m.margin = "stats_rel";   // or a new key with m.margin_default = {...}
///     return m;
///   }());
///
/// Its margin row, when it needs its own margin, is data: metrics/media_margins.json (one row per
/// margin key with its value and the reason for it; rows are read at start-up), or, for a metric
/// kept outside the tree (a test, a plugin), `margin_default` in the registration itself.
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <opencv2/core.hpp>

#include "attest/metrics/media.hpp"
#include "attest/metrics/media_audio.hpp"

namespace attest::metrics {

/// What a metric is measured on, and so how it is judged against the floor.
enum class MetricScope {
  video_pair,   ///< per frame, a run against the reference; summarised; judged "not worse than the floor run"
  video_frame,  ///< per frame of one run (a global statistic: mean over frames); judged by the exact runs' spread
  audio_pair,   ///< per signal (each channel and pooled), a run against the reference; judged on pooled
  audio_stat,   ///< one figure of a whole recording; judged by the exact runs' spread
};
std::string_view scope_name(MetricScope s);  ///< "video_pair", "video_frame", "audio_pair", "audio_stat"

/// Options every metric function sees (the CLI's --ssim, --channels, --psnr-cap, --snr-eps).
struct MediaOptions {
  SsimPreset ssim = SsimPreset::wang;
  Channels channels = Channels::luma;
  std::optional<double> psnr_cap_db;
  double snr_eps = 0.0;
};

/// A frame of a run against the same frame of the reference: 8-bit images (BGR or grey) and
/// their luma planes (CV_8UC1).
struct FramePair {
  const cv::Mat& test;
  const cv::Mat& test_luma;
  const cv::Mat& ref;
  const cv::Mat& ref_luma;
};

/// One frame of one run; `prev_luma` is the previous frame's luma (nullptr on frame 0 or for a
/// single image).
struct Frame {
  const cv::Mat& image;
  const cv::Mat& luma;
  const cv::Mat* prev_luma = nullptr;
};

/// A named number of a summary (video_pair) or the single figure of a statistic ("value").
struct Figure {
  std::string key;
  double value = 0;
  bool integer = false;  ///< written as an integer (frame indices, counts)
};

/// How a value is printed: a label and a formatter (the CLI uses `cli`, the report tables `cell`).
struct Series {
  std::string key;    ///< JSON key of the per-frame array (video) or of the per-signal value (audio)
  std::string label;  ///< CLI label ("MSE", "PSNR", "SNR", "luma mean")
  std::function<std::string(double)> cli;  ///< full-precision text with its unit ("22.409353 dB")
};

/// A summary figure judged against the floor run (video_pair), with the reason's wording.
struct Judged {
  std::string figure;  ///< Figure::key ("mean_finite", "min")
  std::string label;   ///< "PSNR mean", "PSNR min frame"
};

/// A margin row: the value of one margin key and why it is that value (media_margins.json).
struct MarginRow {
  std::string key;      ///< "psnr_db", "stats_rel"
  double value = 0;
  std::string unit;     ///< appended to figures in reasons and the summary line (" dB" or "")
  std::string summary;  ///< label in the report's summary line ("PSNR"); empty: not listed there
  std::string flag;     ///< CLI flag of `attest e2e compare` ("--margin-psnr"); empty: none
  std::string help;     ///< that flag's help text
  std::string reason;   ///< why the value is what it is
};

struct MediaMetric {
  std::string name;     ///< registry key; the JSON key of its figures
  std::string help;     ///< one line: what it measures and its convention
  std::string options;  ///< the options it reads ("--ssim, --channels"), for `attest metrics list`
  MetricScope scope = MetricScope::video_pair;
  bool higher_is_better = true;
  int order = 100;      ///< position within its scope (reports, reasons and JSON arrays follow it)

  // --- computation (the one for its scope) ---
  /// video_pair: one value per entry of `series` for a frame pair, written to out[0..series.size()).
  std::function<void(const FramePair&, const MediaOptions&, double* out)> per_frame_pair;
  /// video_frame: the value of one frame (series[0]).
  std::function<double(const Frame&)> per_frame;
  bool needs_previous = false;  ///< video_frame: frame 0 has no value (frames - 1 values)
  /// audio_pair: the value of a test signal against its reference (one channel, or all pooled).
  std::function<double(std::span<const double> test, std::span<const double> ref, const MediaOptions&)> per_signal;
  /// audio_stat: the figure of a whole recording.
  std::function<double(const Audio&)> per_recording;
  /// video_pair: summary figures from the per-frame series. Default: mean, min, min_frame of the
  /// judged series (`judged_series`).
  std::function<std::vector<Figure>(const std::vector<std::vector<double>>& series, const MediaOptions&)> summarize;

  /// Values per frame (video) or per signal (audio): key, label and format. video_frame,
  /// audio_pair and audio_stat metrics have exactly one.
  std::vector<Series> series;
  std::size_t judged_series = 0;  ///< video_pair: the series the default summary and the plot use

  // --- verdict ---
  /// Margin key (a MarginRow): video_pair / audio_pair: how much worse than the floor run a test
  /// run may be; video_frame / audio_stat: the relative widening of the exact runs' spread (with
  /// `margin_abs` as the absolute term). Empty: reported, never judged.
  std::string margin;
  std::string margin_abs;  ///< statistics only: the absolute term's key ("stats_abs")
  std::vector<Judged> judged;  ///< video_pair: the summary figures judged
  std::string label;           ///< reason and statistics-column label ("audio SNR", "luma mean")
  std::optional<MarginRow> margin_default;  ///< used when media_margins.json has no row for `margin`

  // --- reports ---
  /// The per-run table column (video_pair, audio_pair); metrics with the same column share it,
  /// their cells joined by " / ". Empty: no column.
  std::string column;
  std::function<std::string(const std::vector<Figure>& figures)> cell;  ///< that column's cell
  std::string stat_column;  ///< statistics: header in the global-statistics table
  int stat_precision = 4;   ///< statistics: decimals in that table
  /// video_pair: the HTML plot of `judged_series` per frame (empty title: none).
  std::function<std::string(const MediaOptions&)> plot_title;
  std::string plot_y_label;

  /// A figure by key (NaN when absent).
  static double figure(const std::vector<Figure>& figures, std::string_view key);
};

/// Every registered metric, ordered by scope (as declared above), then `order`, then name.
const std::vector<const MediaMetric*>& all_media_metrics();
/// The registered metrics of one scope, in that order.
std::vector<const MediaMetric*> media_metrics(MetricScope scope);
const MediaMetric* find_media_metric(std::string_view name);  ///< nullptr when absent

/// Adds a metric; attest::Error (at start-up) for a duplicate name, a missing function for its
/// scope or a series count that its scope does not allow. Use ATTEST_REGISTER_MEDIA_METRIC.
void register_media_metric(MediaMetric m);

/// The margin table: media_margins.json's rows (in their order), then the `margin_default` rows
/// of registered metrics whose key the table lacks. attest::Error when a judged metric's margin
/// key has no row, or a row has no reason.
const std::vector<MarginRow>& margin_rows();
const MarginRow* find_margin_row(std::string_view key);

/// `x` with `decimals` fixed decimals; infinities as "inf" / "-inf" (PSNR of identical frames).
std::string fixed_or_inf(double x, int decimals);

/// The default summary: mean, min, min_frame (first minimum) of one series.
std::vector<Figure> mean_min_summary(const std::vector<double>& v);

// --- factories for the kinds of metric that several metric files share ---

/// A metric's identity: every field a metric states whatever its kind (the rest at defaults).
MediaMetric media_metric(MetricScope scope, std::string name, std::string help, std::string options, int order,
                         std::vector<Series> series);

/// A global statistic (scope video_frame or audio_stat) judged by the exact runs' spread (margins
/// stats_rel and stats_abs); one series `cli_label` printed with 6 decimals, `label` in reasons,
/// `stat_column` with `stat_precision` decimals in the statistics table. The caller sets
/// per_frame (and needs_previous) or per_recording.
MediaMetric statistic_metric(MetricScope scope, std::string name, std::string help, int order, std::string cli_label,
                             std::string label, std::string stat_column, int stat_precision);

/// An audio_pair metric reporting one figure of compare_signals (under --snr-eps) per signal.
MediaMetric signal_metric(std::string name, std::string help, std::string options, int order, Series series,
                          double SignalComparison::*figure);

/// A figure of a frame pair under --channels: `f` of the luma planes, or the mean of `f` over the
/// B, G, R planes (summed in that order, as compare_images).
double channel_mean(const FramePair& p, const MediaOptions& o, const std::function<double(const cv::Mat&, const cv::Mat&)>& f);

struct MediaMetricRegistrar {
  explicit MediaMetricRegistrar(MediaMetric m) { register_media_metric(std::move(m)); }
};

}  // namespace attest::metrics

#define ATTEST_MEDIA_METRIC_CAT2(a, b) a##b
#define ATTEST_MEDIA_METRIC_CAT(a, b) ATTEST_MEDIA_METRIC_CAT2(a, b)
/// ATTEST_REGISTER_MEDIA_METRIC(metric): registers a MediaMetric before main. Built-in metric
/// sources are linked whole (metrics/media.cmake), so the registrar is never dropped.
#define ATTEST_REGISTER_MEDIA_METRIC(metric)                                                              \
  static const ::attest::metrics::MediaMetricRegistrar ATTEST_MEDIA_METRIC_CAT(attest_media_metric_, \
                                                                               __LINE__) {               \
    metric                                                                                                \
  }
