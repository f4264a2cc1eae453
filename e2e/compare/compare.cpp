// The comparison itself (compare.hpp): decode every run in lockstep batches, metrics per frame in
// parallel, summaries and verdicts.
#include "attest/e2e/compare.hpp"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <exception>
#include <memory>
#include <set>
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

void compare_video(CompareReport& rep, const CompareOptions& o, int threads) {
  const std::size_t nr = rep.runs.size();
  std::vector<VideoRun> vr(nr);
  for (std::size_t r = 0; r < nr; ++r) vr[r].reader = std::make_unique<VideoReader>(rep.runs[r].input.video);
  rep.fps = vr[0].reader->fps();

  // Strip frames: explicit, or up to 4 spread over the reference's frame count (when known).
  std::vector<std::int64_t> strip = o.strip_frames;
  if (strip.empty()) {
    const std::int64_t n = std::max<std::int64_t>(1, vr[0].reader->frame_count_hint());
    const std::int64_t k = std::min<std::int64_t>(4, n);
    for (std::int64_t i = 0; i < k; ++i) strip.push_back(k == 1 ? 0 : i * (n - 1) / (k - 1));
  }
  for (std::int64_t f : strip)
    if (f < 0) throw Error("--strip-frames: frame " + std::to_string(f) + " is negative");
  const std::set<std::int64_t> strip_set(strip.begin(), strip.end());
  std::vector<std::vector<std::pair<std::int64_t, StripImage>>> strip_kept(nr);

  for (auto& run : rep.runs) {
    run.video_stats.emplace();
    if (run.role != Role::reference) run.video.emplace();
  }
  const std::int64_t batch = std::max(4, 2 * threads);
  for (auto& v : vr) {
    v.frames.resize(static_cast<std::size_t>(batch));
    v.luma.resize(static_cast<std::size_t>(batch));
  }
  const bool luma_only = o.channels == m::Channels::luma;
  m::ImageCompareOptions io;
  io.ssim = o.ssim;
  io.channels = o.channels;
  io.psnr_cap_db = o.psnr_cap_db;

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
    if (base == 0) {
      if (vr[0].count == 0) throw Error("video " + rep.runs[0].input.video.string() + ": no frames");
      const cv::Mat& f0 = vr[0].frames[0];
      rep.width = f0.cols;
      rep.height = f0.rows;
      for (std::size_t r = 1; r < nr; ++r) {
        if (vr[r].count == 0) throw Error("video " + rep.runs[r].input.video.string() + ": no frames");
        const cv::Mat& f = vr[r].frames[0];
        if (f.size() != f0.size())
          throw Error(fmt::format("video frame sizes differ: run {} is {}x{}, reference is {}x{}", label_q(rep.runs[r].label),
                                  f.cols, f.rows, f0.cols, f0.rows));
      }
    }
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
    for (auto& run : rep.runs) {
      auto& s = *run.video_stats;
      const auto n = static_cast<std::size_t>(base + mcount);
      s.frame_luma_mean.resize(n);
      s.frame_luma_std.resize(n);
      s.frame_laplacian_var.resize(n);
      s.frame_abs_diff.resize(n - 1);
      if (run.video) {
        run.video->frame_mse.resize(n);
        run.video->frame_psnr.resize(n);
        run.video->frame_ssim.resize(n);
      }
    }
    // Luma, statistics and comparisons against the reference: frames in parallel.
    parallel_for(mcount, threads, [&](std::int64_t i) {
      const auto ui = static_cast<std::size_t>(i);
      const auto g = static_cast<std::size_t>(base + i);
      for (std::size_t r = 0; r < nr; ++r) {
        cv::cvtColor(vr[r].frames[ui], vr[r].luma[ui], cv::COLOR_BGR2GRAY);
        const cv::Mat& y = vr[r].luma[ui];
        auto& s = *rep.runs[r].video_stats;
        const m::MeanStd ms = m::mean_std(y);
        s.frame_luma_mean[g] = ms.mean;
        s.frame_luma_std[g] = ms.std;
        s.frame_laplacian_var[g] = m::laplacian_variance(y);
      }
      for (std::size_t r = 1; r < nr; ++r) {
        auto& v = *rep.runs[r].video;
        if (luma_only) {
          const double e = m::mse(vr[r].luma[ui], vr[0].luma[ui]);
          v.frame_mse[g] = e;
          v.frame_psnr[g] = m::psnr_from_mse(e, 255.0, o.psnr_cap_db);
          v.frame_ssim[g] = m::ssim(vr[r].luma[ui], vr[0].luma[ui], o.ssim);
        } else {
          const m::ImageComparison c = m::compare_images(vr[r].frames[ui], vr[0].frames[ui], io);
          v.frame_mse[g] = c.mse;
          v.frame_psnr[g] = c.psnr;
          v.frame_ssim[g] = c.ssim;
        }
      }
    });
    // Frame-to-frame differences (needs the previous frame's luma, possibly from the last batch).
    parallel_for(mcount, threads, [&](std::int64_t i) {
      const auto ui = static_cast<std::size_t>(i);
      const std::int64_t g = base + i;
      if (g == 0) return;
      for (std::size_t r = 0; r < nr; ++r) {
        const cv::Mat& prev = i == 0 ? vr[r].prev_luma : vr[r].luma[ui - 1];
        rep.runs[r].video_stats->frame_abs_diff[static_cast<std::size_t>(g - 1)] = m::mean_abs_diff(vr[r].luma[ui], prev);
      }
    });
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

  for (auto& run : rep.runs) {
    auto& s = *run.video_stats;
    s.luma_mean = mean_of(s.frame_luma_mean);
    s.luma_std = mean_of(s.frame_luma_std);
    s.laplacian_var = mean_of(s.frame_laplacian_var);
    s.mean_abs_diff = mean_of(s.frame_abs_diff);
    if (run.video) {
      run.video->psnr = m::summarize_psnr(run.video->frame_mse, 255.0, o.psnr_cap_db);
      run.video->ssim = m::summarize_ssim(run.video->frame_ssim);
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
}

// |s_t - s_r| <= |s_f - s_r| + rel |s_r| + abs.
void check_stat(std::vector<std::string>& reasons, const char* name, double t, double r, double f, const Margins& mg) {
  const double allowed = std::abs(f - r) + mg.stats_rel * std::abs(r) + mg.stats_abs;
  if (!(std::abs(t - r) <= allowed))
    reasons.push_back(fmt::format("{} {:.6g} is {:.3g} from the reference {:.6g}; the floor run is {:.3g} from it "
                                  "(allowed {:.3g})",
                                  name, t, std::abs(t - r), r, std::abs(f - r), allowed));
}

void check_not_worse(std::vector<std::string>& reasons, const char* name, double t, double f, double margin,
                     const char* unit) {
  if (!(t >= f - margin))
    reasons.push_back(fmt::format("{} {:.6g}{} is below the floor run's {:.6g}{} by more than {:.3g}{}", name, t, unit, f,
                                  unit, margin, unit));
}

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
    if (run.video) {
      const auto &t = *run.video, &f = *floor->video;
      check_not_worse(why, "PSNR mean", t.psnr.mean_finite, f.psnr.mean_finite, mg.psnr_db, " dB");
      check_not_worse(why, "PSNR min frame", t.psnr.min, f.psnr.min, mg.psnr_db, " dB");
      check_not_worse(why, "SSIM mean", t.ssim.mean, f.ssim.mean, mg.ssim, "");
      check_not_worse(why, "SSIM min frame", t.ssim.min, f.ssim.min, mg.ssim, "");
      const auto &ts = *run.video_stats, &rs = *ref.video_stats, &fs = *floor->video_stats;
      check_stat(why, "luma mean", ts.luma_mean, rs.luma_mean, fs.luma_mean, mg);
      check_stat(why, "luma std", ts.luma_std, rs.luma_std, fs.luma_std, mg);
      check_stat(why, "Laplacian variance", ts.laplacian_var, rs.laplacian_var, fs.laplacian_var, mg);
      check_stat(why, "mean abs frame diff", ts.mean_abs_diff, rs.mean_abs_diff, fs.mean_abs_diff, mg);
    }
    if (run.audio) {
      check_not_worse(why, "audio SNR", run.audio->pooled.snr, floor->audio->pooled.snr, mg.snr_db, " dB");
      check_not_worse(why, "audio cosine", run.audio->pooled.cosine, floor->audio->pooled.cosine, mg.cosine, "");
      check_stat(why, "audio RMS", run.audio_stats->rms, ref.audio_stats->rms, floor->audio_stats->rms, mg);
      check_stat(why, "audio peak", run.audio_stats->peak, ref.audio_stats->peak, floor->audio_stats->peak, mg);
    }
    run.verdict = why.empty() ? Verdict::within_floor : Verdict::outside_floor;
    run.reasons = std::move(why);
  }
}

}  // namespace

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
  }
  judge(rep);
  return rep;
}

}  // namespace attest::e2e
