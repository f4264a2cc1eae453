// `attest metrics image A B` and `attest metrics audio TEST REF`: the media metrics of one pair.
#include <cmath>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include "attest/core/output_files.hpp"
#include "attest/core/status.hpp"
#include "attest/metrics/media.hpp"
#include "attest/metrics/media_audio.hpp"
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

std::string db(double x) { return std::isinf(x) ? (x > 0 ? "inf" : "-inf") : fmt::format("{:.6f}", x); }

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
  const metrics::ImageComparison c = metrics::compare_images(A, B, o);
  const metrics::ImageStats sa = metrics::image_stats(A), sb = metrics::image_stats(B);
  std::printf("SSIM preset %s on %s\n", std::string(metrics::ssim_preset_name(o.ssim)).c_str(),
              std::string(metrics::channels_name(o.channels)).c_str());
  json planes = json::array();
  for (const auto& p : c.planes) {
    std::printf("%s: MSE %.6f  PSNR %s dB  SSIM %.10f\n", p.name.c_str(), p.mse, db(p.psnr).c_str(), p.ssim);
    planes.push_back({{"name", p.name}, {"mse", num(p.mse)}, {"psnr", num(p.psnr)}, {"ssim", num(p.ssim)}});
  }
  if (c.planes.size() > 1) std::printf("pooled: MSE %.6f  PSNR %s dB  SSIM %.10f\n", c.mse, db(c.psnr).c_str(), c.ssim);
  auto stats = [](const std::string& path, const metrics::ImageStats& s) {
    std::printf("%s: luma mean %.6f  std %.6f  Laplacian variance %.6f\n", path.c_str(), s.luma_mean, s.luma_std, s.laplacian_var);
    return json{{"path", path}, {"luma_mean", num(s.luma_mean)}, {"luma_std", num(s.luma_std)}, {"laplacian_var", num(s.laplacian_var)}};
  };
  const json ja = stats(a.a, sa), jb = stats(a.b, sb);
  if (!a.json.empty()) {
    json j = {{"tool", "attest metrics image"},
              {"ssim_preset", metrics::ssim_preset_name(o.ssim)},
              {"channels", metrics::channels_name(o.channels)},
              {"psnr_cap_db", a.psnr_cap ? json(*a.psnr_cap) : json(nullptr)},
              {"width", A.cols},
              {"height", A.rows},
              {"planes", planes},
              {"mse", num(c.mse)},
              {"psnr", num(c.psnr)},
              {"ssim", num(c.ssim)},
              {"images", json::array({ja, jb})}};
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

json signal_json(const metrics::SignalComparison& s) {
  return {{"name", s.name},         {"samples", s.samples},       {"snr", num(s.snr)},
          {"si_sdr", num(s.si_sdr)}, {"cosine", num(s.cosine)},   {"rms_test", num(s.rms_test)},
          {"rms_ref", num(s.rms_ref)}, {"peak_test", num(s.peak_test)}, {"peak_ref", num(s.peak_ref)}};
}

void run_audio(const AudioArgs& a) {
  const metrics::Audio t = metrics::read_audio(a.test), r = metrics::read_audio(a.ref);
  metrics::AudioCompareOptions o;
  o.snr_eps = a.snr_eps;
  o.allow_truncate = a.allow_truncate;
  const metrics::AudioComparison c = metrics::compare_audio(t, r, o);
  std::printf("%d Hz, %lld frames compared (test %lld, reference %lld)%s\n", c.sample_rate,
              static_cast<long long>(c.frames_compared), static_cast<long long>(c.frames_test),
              static_cast<long long>(c.frames_ref), c.length_mismatch ? ", LENGTHS DIFFER" : "");
  auto line = [](const metrics::SignalComparison& s) {
    std::printf("%s: SNR %s dB  SI-SDR %s dB  cosine %.10f  RMS %.6f / %.6f  peak %.6f / %.6f (test / reference)\n",
                s.name.c_str(), db(s.snr).c_str(), db(s.si_sdr).c_str(), s.cosine, s.rms_test, s.rms_ref, s.peak_test,
                s.peak_ref);
  };
  json ch = json::array();
  for (const auto& s : c.channels) {
    line(s);
    ch.push_back(signal_json(s));
  }
  line(c.pooled);
  if (!a.json.empty()) {
    json j = {{"tool", "attest metrics audio"}, {"test", a.test},           {"reference", a.ref},
              {"sample_rate", c.sample_rate},   {"frames_test", c.frames_test}, {"frames_ref", c.frames_ref},
              {"frames_compared", c.frames_compared}, {"length_mismatch", c.length_mismatch},
              {"snr_eps", a.snr_eps},           {"channels", ch},           {"pooled", signal_json(c.pooled)}};
    OutputFiles out;
    out.stage(a.json, j.dump(1) + "\n");
    out.commit();
  }
  set_exit(0);
}

}  // namespace

void add_metrics_commands(CLI::App& app) {
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

}  // namespace attest::cli
