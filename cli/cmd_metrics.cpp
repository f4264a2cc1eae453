// `attest metrics image A B` and `attest metrics audio TEST REF`: the media metrics of one pair.
#include <cmath>
#include <cstdio>
#include <memory>
#include <optional>
#include <span>
#include <vector>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include "attest/core/output_files.hpp"
#include "attest/core/status.hpp"
#include "attest/metrics/media.hpp"
#include "attest/metrics/media_audio.hpp"
#include "attest/metrics/media_registry.hpp"
#include "commands.hpp"

namespace attest::cli {
namespace {

using nlohmann::json;

// JSON has no infinities: written as "inf" / "-inf" / "nan" (docs/e2e.md).
json num(double x) {
  if (std::isnan(x)) return "nan";
  if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
  return x;
}


struct ImageArgs {
  std::string a, b, ssim = "wang", channels = "luma", json;
  std::optional<double> psnr_cap;
};

cv::Mat read_image(const std::string& path) {
  cv::Mat m = cv::imread(path, cv::IMREAD_UNCHANGED);
  if (m.empty()) throw Error("image " + path + ": cannot be read (missing or not an image OpenCV decodes)");
  if (m.depth() != CV_8U) throw Error("image " + path + ": not 8-bit per sample");
  if (m.channels() == 4) cv::cvtColor(m, m, cv::COLOR_BGRA2BGR);
  return m;
}

void run_image(const ImageArgs& a) {
  const cv::Mat A = read_image(a.a), B = read_image(a.b);
  metrics::ImageCompareOptions o;
  o.ssim = metrics::parse_ssim_preset(a.ssim);
  o.channels = metrics::parse_channels(a.channels);
  o.psnr_cap_db = a.psnr_cap;
  if (A.size() != B.size())
    throw Error(fmt::format("image sizes differ: {} is {}x{}, {} is {}x{}", a.a, A.cols, A.rows, a.b, B.cols, B.rows));
  if (o.channels == metrics::Channels::bgr && (A.channels() != 3 || B.channels() != 3))
    throw Error("--channels bgr needs two colour images (" + a.a + ": " + std::to_string(A.channels()) + " channels, " + a.b +
                ": " + std::to_string(B.channels()) + ")");
  // Every registered pair metric on each plane (luma, or B, G, R), then pooled on the colour
  // image; every single-frame statistic of each image (media_registry.hpp).
  metrics::MediaOptions mo;
  mo.ssim = o.ssim;
  mo.channels = o.channels;
  mo.psnr_cap_db = o.psnr_cap_db;
  metrics::MediaOptions plane_o = mo;
  plane_o.channels = metrics::Channels::luma;
  const auto pair_metrics = metrics::media_metrics(metrics::MetricScope::video_pair);
  // Prints "NAME: LABEL VALUE  LABEL VALUE ..." and returns the values by series key.
  auto pair_line = [&](const std::string& name, const metrics::FramePair& p, const metrics::MediaOptions& opt) {
    json vals = json::object();
    std::string line = name + ":";
    std::string sep = " ";
    for (const metrics::MediaMetric* mm : pair_metrics) {
      std::vector<double> out(mm->series.size());
      mm->per_frame_pair(p, opt, out.data());
      for (std::size_t q = 0; q < out.size(); ++q) {
        line += sep + mm->series[q].label + " " + mm->series[q].cli(out[q]);
        sep = "  ";
        vals[mm->series[q].key] = num(out[q]);
      }
    }
    std::printf("%s\n", line.c_str());
    return vals;
  };
  std::printf("SSIM preset %s on %s\n", std::string(metrics::ssim_preset_name(o.ssim)).c_str(),
              std::string(metrics::channels_name(o.channels)).c_str());
  const cv::Mat LA = metrics::to_luma(A), LB = metrics::to_luma(B);
  json planes = json::array(), pooled;
  if (o.channels == metrics::Channels::luma) {
    pooled = pair_line("Y", {A, LA, B, LB}, mo);
    json pj = pooled;
    pj["name"] = "Y";
    planes.push_back(pj);
  } else {
    std::vector<cv::Mat> pa, pb;
    cv::split(A, pa);
    cv::split(B, pb);
    static const char* names[] = {"B", "G", "R"};
    for (std::size_t c = 0; c < pa.size(); ++c) {
      json pj = pair_line(names[c], {pa[c], pa[c], pb[c], pb[c]}, plane_o);
      pj["name"] = names[c];
      planes.push_back(pj);
    }
    pooled = pair_line("pooled", {A, LA, B, LB}, mo);
  }
  auto stats = [&](const std::string& path, const cv::Mat& img, const cv::Mat& luma) {
    json j = {{"path", path}};
    std::string line = path + ":";
    std::string sep = " ";
    for (const metrics::MediaMetric* mm : metrics::media_metrics(metrics::MetricScope::video_frame)) {
      if (mm->needs_previous) continue;  // a single image has no previous frame
      const double v = mm->per_frame({img, luma, nullptr});
      line += sep + mm->series[0].label + " " + mm->series[0].cli(v);
      sep = "  ";
      j[mm->name] = num(v);
    }
    std::printf("%s\n", line.c_str());
    return j;
  };
  const json ja = stats(a.a, A, LA), jb = stats(a.b, B, LB);
  if (!a.json.empty()) {
    json j = {{"tool", "attest metrics image"},
              {"ssim_preset", metrics::ssim_preset_name(o.ssim)},
              {"channels", metrics::channels_name(o.channels)},
              {"psnr_cap_db", a.psnr_cap ? json(*a.psnr_cap) : json(nullptr)},
              {"width", A.cols},
              {"height", A.rows},
              {"planes", planes},
              {"images", json::array({ja, jb})}};
    for (const auto& [k, v] : pooled.items()) j[k] = v;
    OutputFiles out;
    out.stage(a.json, j.dump(1) + "\n");
    out.commit();
  }
  set_exit(0);
}

struct AudioArgs {
  std::string test, ref, json;
  double snr_eps = 0;
  bool allow_truncate = false;
};

// compare_audio's own figures of a signal, and every registered audio pair metric on it.
json signal_json(const metrics::SignalComparison& s, const json& registered) {
  json j = {{"name", s.name},          {"samples", s.samples},          {"rms_test", num(s.rms_test)},
            {"rms_ref", num(s.rms_ref)}, {"peak_test", num(s.peak_test)}, {"peak_ref", num(s.peak_ref)}};
  for (const auto& [k, v] : registered.items()) j[k] = v;
  return j;
}

void run_audio(const AudioArgs& a) {
  const metrics::Audio t = metrics::read_audio(a.test), r = metrics::read_audio(a.ref);
  metrics::AudioCompareOptions o;
  o.snr_eps = a.snr_eps;
  o.allow_truncate = a.allow_truncate;
  const metrics::AudioComparison c = metrics::compare_audio(t, r, o);
  metrics::MediaOptions mo;
  mo.snr_eps = a.snr_eps;
  std::printf("%d Hz, %lld frames compared (test %lld, reference %lld)%s\n", c.sample_rate,
              static_cast<long long>(c.frames_compared), static_cast<long long>(c.frames_test),
              static_cast<long long>(c.frames_ref), c.length_mismatch ? ", LENGTHS DIFFER" : "");
  // One line per signal: the registered audio pair metrics, then RMS and peak of both signals.
  auto line = [&](const metrics::SignalComparison& s, std::span<const double> ts, std::span<const double> rs) {
    json vals = json::object();
    std::string text = s.name + ":";
    for (const metrics::MediaMetric* mm : metrics::media_metrics(metrics::MetricScope::audio_pair)) {
      const double v = mm->per_signal(ts, rs, mo);
      text += " " + mm->series[0].label + " " + mm->series[0].cli(v) + " ";
      vals[mm->series[0].key] = num(v);
    }
    std::printf("%s RMS %.6f / %.6f  peak %.6f / %.6f (test / reference)\n", text.c_str(), s.rms_test, s.rms_ref,
                s.peak_test, s.peak_ref);
    return signal_json(s, vals);
  };
  const auto n = static_cast<std::size_t>(c.frames_compared);
  std::vector<double> all_t, all_r;
  json ch = json::array();
  for (std::size_t k = 0; k < c.channels.size(); ++k) {
    const std::span<const double> ts(t.channels[k].data(), n), rs(r.channels[k].data(), n);
    ch.push_back(line(c.channels[k], ts, rs));
    all_t.insert(all_t.end(), ts.begin(), ts.end());
    all_r.insert(all_r.end(), rs.begin(), rs.end());
  }
  const json pooled = line(c.pooled, all_t, all_r);
  if (!a.json.empty()) {
    json j = {{"tool", "attest metrics audio"}, {"test", a.test},           {"reference", a.ref},
              {"sample_rate", c.sample_rate},   {"frames_test", c.frames_test}, {"frames_ref", c.frames_ref},
              {"frames_compared", c.frames_compared}, {"length_mismatch", c.length_mismatch},
              {"snr_eps", a.snr_eps},           {"channels", ch},           {"pooled", pooled}};
    OutputFiles out;
    out.stage(a.json, j.dump(1) + "\n");
    out.commit();
  }
  set_exit(0);
}

}  // namespace

static void add_metrics_commands(CLI::App& app) {
  auto* m = app.add_subcommand("metrics", "Media metrics of one pair: images (PSNR, SSIM, statistics) or audio (SNR, SI-SDR, cosine)");
  m->require_subcommand(1);
  auto ia = std::make_shared<ImageArgs>();
  auto* img = m->add_subcommand("image", "PSNR and SSIM of two 8-bit images, and each image's luma mean / std and Laplacian variance");
  img->add_option("a", ia->a, "First image")->required();
  img->add_option("b", ia->b, "Second image")->required();
  img->add_option("--ssim", ia->ssim, "SSIM preset: wang (default), skimage, opencv, ffmpeg");
  img->add_option("--channels", ia->channels, "luma (default) or bgr (per channel and pooled)");
  img->add_option("--psnr-cap", ia->psnr_cap, "Cap PSNR at this many dB");
  img->add_option("--json", ia->json, "Also write the figures as JSON here");
  img->callback([ia] { run_image(*ia); });
  auto aa = std::make_shared<AudioArgs>();
  auto* aud = m->add_subcommand("audio", "SNR, SI-SDR, cosine, RMS and peak of a test recording against a reference");
  aud->add_option("test", aa->test, "Test audio (any format libsndfile reads)")->required();
  aud->add_option("reference", aa->ref, "Reference audio (the target)")->required();
  aud->add_option("--snr-eps", aa->snr_eps, "Added to signal and noise energies (torchmetrics: float32 epsilon)");
  aud->add_flag("--allow-truncate", aa->allow_truncate, "Compare the common prefix when lengths differ");
  aud->add_option("--json", aa->json, "Also write the figures as JSON here");
  aud->callback([aa] { run_audio(*aa); });
}

ATTEST_REGISTER_COMMAND(130, add_metrics_commands);

}  // namespace attest::cli
