// The comparison itself (compare.hpp): decode every run in lockstep batches, metrics per frame in
// parallel, summaries and verdicts.
#include "attest/e2e/compare.hpp"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <exception>
#include <memory>
#include <set>
#include <span>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <opencv2/core/utility.hpp>
#include <opencv2/imgproc.hpp>

#include "attest/core/status.hpp"
#include "attest/e2e/video_io.hpp"

namespace attest::e2e {
namespace {

namespace m = attest::metrics;

std::string label_q(const std::string& label) { return "'" + label + "'"; }

double mean_of(const std::vector<double>& v) {
  if (v.empty()) return 0;
  double s = 0;
  for (double x : v) s += x;
  return s / static_cast<double>(v.size());
}

// Restores OpenCV's thread count: frames are the parallel dimension here, so each OpenCV call
// runs single-threaded inside our workers.
struct CvThreads {
  int saved = cv::getNumThreads();
  CvThreads() { cv::setNumThreads(1); }
  ~CvThreads() { cv::setNumThreads(saved); }
};

// Runs body(i) for i in [0, n) on `threads` OpenMP threads; the first exception is rethrown.
template <class Body>
void parallel_for(std::int64_t n, int threads, Body body) {
  std::exception_ptr err;
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads)
  for (std::int64_t i = 0; i < n; ++i) {
    try {
      body(i);
    } catch (...) {
#pragma omp critical(attest_e2e_compare_err)
      if (!err) err = std::current_exception();
    }
  }
  if (err) std::rethrow_exception(err);
}

StripImage to_strip_image(const cv::Mat& bgr, int max_width) {
  cv::Mat small = bgr;
  if (bgr.cols > max_width) {
    const int h = std::max(1, static_cast<int>(std::lround(static_cast<double>(bgr.rows) * max_width / bgr.cols)));
    cv::resize(bgr, small, {max_width, h}, 0, 0, cv::INTER_AREA);
  }
  StripImage s;
  s.width = small.cols;
  s.height = small.rows;
  s.bgr.resize(static_cast<std::size_t>(s.width) * static_cast<std::size_t>(s.height) * 3);
  for (int r = 0; r < small.rows; ++r)
    std::copy_n(small.ptr<std::uint8_t>(r), static_cast<std::size_t>(s.width) * 3, s.bgr.data() + static_cast<std::size_t>(r) * s.width * 3);
  return s;
}

// Per-run state while decoding.
struct VideoRun {
  std::unique_ptr<VideoReader> reader;
  std::vector<cv::Mat> frames, luma;  // the current batch
  cv::Mat prev_luma;                  // last luma of the previous batch
  std::int64_t count = 0;             // frames in the current batch
  bool ended = false;
};

// Strip frames: explicit, or up to 4 spread over the reference's frame count (when known).
std::vector<std::int64_t> strip_frames(const CompareOptions& o, const VideoReader& reference) {
  std::vector<std::int64_t> strip = o.strip_frames;
  if (strip.empty()) {
    const std::int64_t n = std::max<std::int64_t>(1, reference.frame_count_hint());
    const std::int64_t k = std::min<std::int64_t>(4, n);
    for (std::int64_t i = 0; i < k; ++i) strip.push_back(k == 1 ? 0 : i * (n - 1) / (k - 1));
  }
  for (std::int64_t f : strip)
    if (f < 0) throw Error("--strip-frames: frame " + std::to_string(f) + " is negative");
  return strip;
}

// The registered video metrics and each run's result slots, resolved once (map nodes are
// stable), so the frame loops do no look-ups.
struct VideoSlots {
  std::vector<const m::MediaMetric*> pair_metrics = m::media_metrics(m::MetricScope::video_pair);
  std::vector<const m::MediaMetric*> frame_metrics = m::media_metrics(m::MetricScope::video_frame);
  std::vector<std::vector<MetricResult*>> pair_slot, frame_slot;  // [run][metric]
  std::size_t max_series = 1;

  explicit VideoSlots(CompareReport& rep) : pair_slot(rep.runs.size()), frame_slot(rep.runs.size()) {
    for (std::size_t r = 0; r < rep.runs.size(); ++r) {
      RunReport& run = rep.runs[r];
      run.video_stats.emplace();
      if (run.role != Role::reference) {
        run.video.emplace();
        for (const m::MediaMetric* mm : pair_metrics) {
          MetricResult& res = run.metrics[mm->name];
          res.frames.resize(mm->series.size());
          pair_slot[r].push_back(&res);
        }
      }
      for (const m::MediaMetric* mm : frame_metrics) {
        MetricResult& res = run.metrics[mm->name];
        res.frames.resize(1);
        frame_slot[r].push_back(&res);
      }
    }
    for (const m::MediaMetric* mm : pair_metrics) max_series = std::max(max_series, mm->series.size());
  }

  // Every series sized for n compared frames (metrics of a frame and its predecessor: n - 1).
  void resize(std::size_t n) {
    for (std::size_t r = 0; r < frame_slot.size(); ++r) {
      for (std::size_t k = 0; k < frame_metrics.size(); ++k)
        frame_slot[r][k]->frames[0].resize(frame_metrics[k]->needs_previous ? n - 1 : n);
      for (MetricResult* res : pair_slot[r])
        for (auto& series : res->frames) series.resize(n);
    }
  }

  // Statistics are means over frames; pair metrics summarise their series.
  void summarize(const m::MediaOptions& mo) {
    for (std::size_t r = 0; r < frame_slot.size(); ++r) {
      for (std::size_t k = 0; k < frame_metrics.size(); ++k)
        frame_slot[r][k]->figures = {{"value", mean_of(frame_slot[r][k]->frames[0])}};
      for (std::size_t k = 0; k < pair_slot[r].size(); ++k) {
        const m::MediaMetric& mm = *pair_metrics[k];
        MetricResult& res = *pair_slot[r][k];
        res.figures = mm.summarize ? mm.summarize(res.frames, mo) : m::mean_min_summary(res.frames[mm.judged_series]);
      }
    }
  }
};

// The first batch fixes the frame size; every run must match the reference's.
void check_frame_sizes(CompareReport& rep, const std::vector<VideoRun>& vr) {
  if (vr[0].count == 0) throw Error("video " + rep.runs[0].input.video.string() + ": no frames");
  const cv::Mat& f0 = vr[0].frames[0];
  rep.width = f0.cols;
  rep.height = f0.rows;
  for (std::size_t r = 1; r < vr.size(); ++r) {
    if (vr[r].count == 0) throw Error("video " + rep.runs[r].input.video.string() + ": no frames");
    const cv::Mat& f = vr[r].frames[0];
    if (f.size() != f0.size())
      throw Error(fmt::format("video frame sizes differ: run {} is {}x{}, reference is {}x{}", label_q(rep.runs[r].label),
                              f.cols, f.rows, f0.cols, f0.rows));
  }
}

// One decoded batch of frames [base, base + count) of every run: luma, per-frame statistics,
// comparisons against the reference, then the metrics of a frame and its predecessor (possibly
// the last frame of the previous batch). Frames in parallel.
void measure_batch(std::vector<VideoRun>& vr, VideoSlots& sl, const m::MediaOptions& mo, std::int64_t base,
                   std::int64_t count, int threads) {
  const std::size_t nr = vr.size();
  parallel_for(count, threads, [&](std::int64_t i) {
    const auto ui = static_cast<std::size_t>(i);
    const auto g = static_cast<std::size_t>(base + i);
    for (std::size_t r = 0; r < nr; ++r) {
      cv::cvtColor(vr[r].frames[ui], vr[r].luma[ui], cv::COLOR_BGR2GRAY);
      const m::Frame f{vr[r].frames[ui], vr[r].luma[ui], nullptr};
      for (std::size_t k = 0; k < sl.frame_metrics.size(); ++k)
        if (!sl.frame_metrics[k]->needs_previous) sl.frame_slot[r][k]->frames[0][g] = sl.frame_metrics[k]->per_frame(f);
    }
    std::vector<double> out(sl.max_series);
    for (std::size_t r = 1; r < nr; ++r) {
      const m::FramePair p{vr[r].frames[ui], vr[r].luma[ui], vr[0].frames[ui], vr[0].luma[ui]};
      for (std::size_t k = 0; k < sl.pair_metrics.size(); ++k) {
        sl.pair_metrics[k]->per_frame_pair(p, mo, out.data());
        for (std::size_t q = 0; q < sl.pair_metrics[k]->series.size(); ++q) sl.pair_slot[r][k]->frames[q][g] = out[q];
      }
    }
  });
  parallel_for(count, threads, [&](std::int64_t i) {
    const auto ui = static_cast<std::size_t>(i);
    const std::int64_t g = base + i;
    if (g == 0) return;
    for (std::size_t r = 0; r < nr; ++r) {
      const cv::Mat& prev = i == 0 ? vr[r].prev_luma : vr[r].luma[ui - 1];
      const m::Frame f{vr[r].frames[ui], vr[r].luma[ui], &prev};
      for (std::size_t k = 0; k < sl.frame_metrics.size(); ++k)
        if (sl.frame_metrics[k]->needs_previous)
          sl.frame_slot[r][k]->frames[0][static_cast<std::size_t>(g - 1)] = sl.frame_metrics[k]->per_frame(f);
    }
  });
}

void compare_video(CompareReport& rep, const CompareOptions& o, int threads) {
  const std::size_t nr = rep.runs.size();
  std::vector<VideoRun> vr(nr);
  for (std::size_t r = 0; r < nr; ++r) vr[r].reader = std::make_unique<VideoReader>(rep.runs[r].input.video);
  rep.fps = vr[0].reader->fps();

  const std::vector<std::int64_t> strip = strip_frames(o, *vr[0].reader);
  const std::set<std::int64_t> strip_set(strip.begin(), strip.end());
  std::vector<std::vector<std::pair<std::int64_t, StripImage>>> strip_kept(nr);
  VideoSlots sl(rep);
  const m::MediaOptions mo = media_options(o);
  const std::int64_t batch = std::max(4, 2 * threads);
  for (auto& v : vr) {
    v.frames.resize(static_cast<std::size_t>(batch));
    v.luma.resize(static_cast<std::size_t>(batch));
  }

  std::int64_t base = 0, last_m = 0;
  bool truncated = false;
  for (;;) {
    // Decode one batch of every run, runs in parallel (each decoder is sequential).
    parallel_for(static_cast<std::int64_t>(nr), std::min<int>(threads, static_cast<int>(nr)), [&](std::int64_t r) {
      VideoRun& v = vr[static_cast<std::size_t>(r)];
      v.count = 0;
      while (v.count < batch && !v.ended) {
        if (v.reader->read(v.frames[static_cast<std::size_t>(v.count)])) ++v.count;
        else v.ended = true;
      }
    });
    std::int64_t mcount = vr[0].count, maxcount = vr[0].count;
    for (const auto& v : vr) {
      mcount = std::min(mcount, v.count);
      maxcount = std::max(maxcount, v.count);
    }
    if (base == 0) check_frame_sizes(rep, vr);
    if (mcount != maxcount) {
      truncated = true;
      if (!o.allow_truncate) {
        std::size_t shortest = 0;
        for (std::size_t r = 0; r < nr; ++r)
          if (vr[r].count == mcount) shortest = r;
        throw Error(fmt::format("video frame counts differ: run {} ends after {} frames, others have more "
                                "(--allow-truncate compares the common prefix)",
                                label_q(rep.runs[shortest].label), base + mcount));
      }
    }
    last_m = mcount;
    if (mcount == 0) break;
    sl.resize(static_cast<std::size_t>(base + mcount));
    measure_batch(vr, sl, mo, base, mcount, threads);
    for (std::int64_t i = 0; i < mcount; ++i)
      if (strip_set.count(base + i))
        for (std::size_t r = 0; r < nr; ++r)
          strip_kept[r].emplace_back(base + i, to_strip_image(vr[r].frames[static_cast<std::size_t>(i)], o.strip_max_width));
    for (auto& v : vr) v.prev_luma = v.luma[static_cast<std::size_t>(mcount - 1)].clone();
    base += mcount;
    if (truncated || mcount < batch) break;
  }
  rep.frames_compared = base;
  rep.frame_count_mismatch = truncated;
  // Frames each run really holds: with truncation, the last batch decoded `count` frames of which
  // `last_m` were compared; the rest of each longer file is counted (not compared).
  for (std::size_t r = 0; r < nr; ++r) {
    std::int64_t n = base;
    if (truncated) {
      n = base - last_m + vr[r].count;
      cv::Mat f;
      while (!vr[r].ended && vr[r].reader->read(f)) ++n;
    }
    rep.runs[r].frames_read = n;
  }
  if (truncated) rep.warnings.push_back(fmt::format("video frame counts differ; the first {} frames are compared", base));

  std::vector<std::int64_t> kept;
  for (std::int64_t f : strip)
    if (f < base) kept.push_back(f);
    else if (!o.strip_frames.empty())
      throw Error(fmt::format("--strip-frames: frame {} is past the last compared frame {}", f, base - 1));
  rep.strip_frames = kept;
  for (std::size_t r = 0; r < nr; ++r)
    for (std::int64_t f : kept)
      for (auto& [idx, img] : strip_kept[r])
        if (idx == f) {
          rep.runs[r].strip.push_back(img);
          break;
        }
  sl.summarize(mo);
}

// The typed members of RunReport (VideoVsReference, VideoStats) are views of the built-in
// metrics, kept for callers of the C++ API; reports, JSON and verdicts read RunReport::metrics.
// A metric added to the registry needs nothing here.
const std::vector<double>& frames_of(const RunReport& run, std::string_view name, std::size_t series = 0) {
  static const std::vector<double> none;
  const auto it = run.metrics.find(name);
  return it == run.metrics.end() || series >= it->second.frames.size() ? none : it->second.frames[series];
}
double figure_of(const RunReport& run, std::string_view name, std::string_view key) {
  const auto it = run.metrics.find(name);
  return it == run.metrics.end() ? std::nan("") : m::MediaMetric::figure(it->second.figures, key);
}

void fill_video_views(CompareReport& rep) {
  for (auto& run : rep.runs) {
    auto& s = *run.video_stats;
    s.frame_luma_mean = frames_of(run, "luma_mean");
    s.frame_luma_std = frames_of(run, "luma_std");
    s.frame_laplacian_var = frames_of(run, "laplacian_var");
    s.frame_abs_diff = frames_of(run, "mean_abs_diff");
    s.luma_mean = mean_of(s.frame_luma_mean);
    s.luma_std = mean_of(s.frame_luma_std);
    s.laplacian_var = mean_of(s.frame_laplacian_var);
    s.mean_abs_diff = mean_of(s.frame_abs_diff);
    if (run.video) {
      auto& v = *run.video;
      v.frame_mse = frames_of(run, "psnr", 0);
      v.frame_psnr = frames_of(run, "psnr", 1);
      v.frame_ssim = frames_of(run, "ssim");
      v.psnr = m::summarize_psnr(v.frame_mse, 255.0, rep.options.psnr_cap_db);
      v.ssim = m::summarize_ssim(v.frame_ssim);
    }
  }
}

void compare_audio(CompareReport& rep, const CompareOptions& o) {
  std::vector<m::Audio> audio;
  audio.reserve(rep.runs.size());
  for (const auto& run : rep.runs) audio.push_back(m::read_audio(run.input.audio));
  m::AudioCompareOptions ao;
  ao.snr_eps = o.snr_eps;
  ao.allow_truncate = o.allow_truncate;
  rep.audio_sample_rate = audio[0].sample_rate;
  rep.audio_frames_compared = audio[0].frames();
  for (std::size_t r = 0; r < rep.runs.size(); ++r) {
    RunReport& run = rep.runs[r];
    run.audio_stats = m::audio_stats(audio[r]);
    if (r == 0) continue;
    try {
      run.audio = m::compare_audio(audio[r], audio[0], ao);
    } catch (const Error& e) {
      throw Error("run " + label_q(run.label) + " (" + run.input.audio.string() + "): " + e.what());
    }
    rep.audio_frames_compared = std::min(rep.audio_frames_compared, run.audio->frames_compared);
    if (run.audio->length_mismatch)
      rep.warnings.push_back(fmt::format("audio of run {} has {} frames, the reference {}; the first {} are compared",
                                         label_q(run.label), run.audio->frames_test, run.audio->frames_ref,
                                         run.audio->frames_compared));
  }
  // The registered audio metrics: statistics of every recording; pair metrics per channel and on
  // all channels pooled (the common prefix, channels in order, as compare_audio).
  const m::MediaOptions mo = media_options(o);
  for (std::size_t r = 0; r < rep.runs.size(); ++r) {
    RunReport& run = rep.runs[r];
    for (const m::MediaMetric* mm : m::media_metrics(m::MetricScope::audio_stat))
      run.metrics[mm->name].figures = {{"value", mm->per_recording(audio[r])}};
    if (r == 0) continue;
    const auto n = static_cast<std::size_t>(run.audio->frames_compared);
    std::vector<double> all_t, all_r;
    for (std::size_t ch = 0; ch < audio[0].channels.size(); ++ch) {
      all_t.insert(all_t.end(), audio[r].channels[ch].begin(), audio[r].channels[ch].begin() + static_cast<std::ptrdiff_t>(n));
      all_r.insert(all_r.end(), audio[0].channels[ch].begin(), audio[0].channels[ch].begin() + static_cast<std::ptrdiff_t>(n));
    }
    for (const m::MediaMetric* mm : m::media_metrics(m::MetricScope::audio_pair)) {
      MetricResult& res = run.metrics[mm->name];
      for (std::size_t ch = 0; ch < audio[0].channels.size(); ++ch)
        res.signals.push_back(mm->per_signal(std::span<const double>(audio[r].channels[ch].data(), n),
                                             std::span<const double>(audio[0].channels[ch].data(), n), mo));
      res.signals.push_back(mm->per_signal(all_t, all_r, mo));
      res.figures = {{"pooled", res.signals.back()}};
    }
  }
}

// |s_t - s_r| <= |s_f - s_r| + rel |s_r| + abs.
void check_stat(std::vector<std::string>& reasons, const std::string& name, double t, double r, double f, double rel,
                double abs) {
  const double allowed = std::abs(f - r) + rel * std::abs(r) + abs;
  if (!(std::abs(t - r) <= allowed))
    reasons.push_back(fmt::format("{} {:.6g} is {:.3g} from the reference {:.6g}; the floor run is {:.3g} from it "
                                  "(allowed {:.3g})",
                                  name, t, std::abs(t - r), r, std::abs(f - r), allowed));
}

// Higher is better: t >= f - margin; lower is better: t <= f + margin.
void check_not_worse(std::vector<std::string>& reasons, const std::string& name, double t, double f, double margin,
                     const std::string& unit, bool higher_is_better) {
  if (higher_is_better ? !(t >= f - margin) : !(t <= f + margin))
    reasons.push_back(fmt::format("{} {:.6g}{} is {} the floor run's {:.6g}{} by more than {:.3g}{}", name, t, unit,
                                  higher_is_better ? "below" : "above", f, unit, margin, unit));
}

// Every judged registered metric, in registry order (video pair, video statistics, audio pair,
// audio statistics), so the reasons come in that order.
void judge(CompareReport& rep) {
  const Margins& mg = rep.options.margins;
  const RunReport& ref = rep.runs[0];
  const RunReport* floor = rep.runs.size() > 1 && rep.runs[1].role == Role::floor ? &rep.runs[1] : nullptr;
  for (auto& run : rep.runs) {
    if (run.role != Role::test) continue;
    if (!floor) {
      run.verdict = Verdict::not_judged;
      run.reasons = {"no floor run to judge against"};
      continue;
    }
    std::vector<std::string> why;
    for (const m::MediaMetric* mm : m::all_media_metrics()) {
      if (mm->margin.empty() || !run.metrics.count(mm->name)) continue;
      const m::MarginRow* row = m::find_margin_row(mm->margin);
      const double margin = mg.get(mm->margin);
      const std::string unit = row ? row->unit : std::string();
      switch (mm->scope) {
        case m::MetricScope::video_pair:
          for (const auto& j : mm->judged)
            check_not_worse(why, j.label, figure_of(run, mm->name, j.figure), figure_of(*floor, mm->name, j.figure), margin,
                            unit, mm->higher_is_better);
          break;
        case m::MetricScope::audio_pair:
          check_not_worse(why, mm->label, figure_of(run, mm->name, "pooled"), figure_of(*floor, mm->name, "pooled"), margin,
                          unit, mm->higher_is_better);
          break;
        case m::MetricScope::video_frame:
        case m::MetricScope::audio_stat:
          check_stat(why, mm->label, figure_of(run, mm->name, "value"), figure_of(ref, mm->name, "value"),
                     figure_of(*floor, mm->name, "value"), margin, mg.get(mm->margin_abs));
          break;
      }
    }
    run.verdict = why.empty() ? Verdict::within_floor : Verdict::outside_floor;
    run.reasons = std::move(why);
  }
}

}  // namespace

Margins::Margins() {
  for (const auto& row : m::margin_rows()) at(row.key) = row.value;
}

double& Margins::at(std::string_view key) {
  // The built-in rows have named members (the CLI and callers set them by name); others live in `other`.
  if (key == "psnr_db") return psnr_db;
  if (key == "ssim") return ssim;
  if (key == "snr_db") return snr_db;
  if (key == "cosine") return cosine;
  if (key == "stats_rel") return stats_rel;
  if (key == "stats_abs") return stats_abs;
  return other[std::string(key)];
}

double Margins::get(std::string_view key) const {
  if (key == "psnr_db") return psnr_db;
  if (key == "ssim") return ssim;
  if (key == "snr_db") return snr_db;
  if (key == "cosine") return cosine;
  if (key == "stats_rel") return stats_rel;
  if (key == "stats_abs") return stats_abs;
  const auto it = other.find(key);
  if (it == other.end()) throw Error("margin '" + std::string(key) + "' is not in the margin table (metrics/media_margins.json)");
  return it->second;
}

metrics::MediaOptions media_options(const CompareOptions& o) {
  metrics::MediaOptions mo;
  mo.ssim = o.ssim;
  mo.channels = o.channels;
  mo.psnr_cap_db = o.psnr_cap_db;
  mo.snr_eps = o.snr_eps;
  return mo;
}

std::string_view role_name(Role r) {
  switch (r) {
    case Role::reference: return "reference";
    case Role::floor: return "floor";
    case Role::test: return "test";
  }
  return "?";
}

std::string_view verdict_name(Verdict v) {
  switch (v) {
    case Verdict::within_floor: return "within floor";
    case Verdict::outside_floor: return "outside floor";
    case Verdict::not_judged: return "not judged";
  }
  return "?";
}

bool any_outside_floor(const CompareReport& r) {
  return std::any_of(r.runs.begin(), r.runs.end(), [](const RunReport& x) { return x.verdict == Verdict::outside_floor; });
}

CompareReport compare(const CompareInputs& inputs, const CompareOptions& options) {
  CompareReport rep;
  rep.options = options;
  auto add = [&](const RunInput& in, Role role, const char* default_label) {
    RunReport r;
    r.input = in;
    r.label = in.label.empty() ? default_label : in.label;
    r.role = role;
    rep.runs.push_back(std::move(r));
  };
  add(inputs.reference, Role::reference, "reference");
  if (inputs.floor) add(*inputs.floor, Role::floor, "floor");
  for (const auto& t : inputs.tests) {
    if (t.label.empty()) throw Error("a test run needs a label (LABEL=PATH)");
    add(t, Role::test, "");
  }
  std::set<std::string> labels;
  for (const auto& r : rep.runs)
    if (!labels.insert(r.label).second) throw Error("run label " + label_q(r.label) + " is given twice");
  if (rep.runs.size() < 2) throw Error("nothing to compare: give a floor run or at least one test run");

  const bool video = !rep.runs[0].input.video.empty(), audio = !rep.runs[0].input.audio.empty();
  if (!video && !audio) throw Error("the reference run has neither video nor audio");
  for (const auto& r : rep.runs) {
    if (r.input.video.empty() == video)
      throw Error("run " + label_q(r.label) + (video ? " has no video but the reference does" : " has video but the reference has none"));
    if (r.input.audio.empty() == audio)
      throw Error("run " + label_q(r.label) + (audio ? " has no audio but the reference does" : " has audio but the reference has none"));
  }
  const int threads = options.threads > 0 ? options.threads : std::max(1, omp_get_max_threads());
  if (audio) compare_audio(rep, options);  // first: cheap, and its errors come before a long decode
  if (video) {
    CvThreads guard;
    compare_video(rep, options, threads);
    fill_video_views(rep);
  }
  judge(rep);
  return rep;
}

}  // namespace attest::e2e
