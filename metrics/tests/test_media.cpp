// Media metrics against independent oracles: scikit-image / numpy / the ffmpeg CLI values in
// tests/data/media_vectors.json (make_media_vectors.py, provenance inside), the public vectors of
// ../shared/ANCHORS.md, OpenCV's rubberwhale expectations (when opencv-doc's images exist), and
// hand-derived values.
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <opencv2/imgcodecs.hpp>

#include "attest/core/status.hpp"
#include "attest/metrics/media.hpp"

namespace {

using namespace attest::metrics;
namespace fs = std::filesystem;

const fs::path k_data = ATTEST_MEDIA_TEST_DATA;

cv::Mat load(const std::string& name, int flags = cv::IMREAD_UNCHANGED) {
  cv::Mat m = cv::imread((k_data / name).string(), flags);
  if (m.empty()) throw std::runtime_error("cannot read test image " + name);
  return m;
}

ImageCompareOptions opts(SsimPreset p, Channels c) {
  ImageCompareOptions o;
  o.ssim = p;
  o.channels = c;
  return o;
}

const nlohmann::json& vectors() {
  static const nlohmann::json j = [] {
    std::ifstream f(k_data / "media_vectors.json");
    return nlohmann::json::parse(f);
  }();
  return j;
}

// Public vectors (ANCHORS.md; scikit-image's own tests) at their printed precision.
TEST(MediaCamera, PublicVectors) {
  const cv::Mat a = load("camera.png"), b = load("camera_noisy.png");
  ASSERT_EQ(a.type(), CV_8UC1);
  EXPECT_NEAR(psnr_from_mse(mse(a, b)), 22.409353, 5e-7);
  EXPECT_NEAR(ssim(a, b, SsimPreset::wang), 0.3579642, 5e-8);
  EXPECT_NEAR(ssim(a, b, SsimPreset::skimage), 0.3674518327910367, 1e-12);
  EXPECT_NEAR(ssim(a, b, SsimPreset::opencv), 0.3561161, 5e-8);
}

// Full-precision scikit-image values and the ffmpeg CLI's (printed to 6 decimals).
TEST(MediaCamera, OracleVectors) {
  const auto& v = vectors()["camera"];
  const cv::Mat a = load("camera.png"), b = load("camera_noisy.png");
  EXPECT_NEAR(psnr_from_mse(mse(a, b)), v["psnr"].get<double>(), 1e-12);
  EXPECT_NEAR(ssim(a, b, SsimPreset::wang), v["ssim_wang"].get<double>(), 1e-12);
  EXPECT_NEAR(ssim(b, a, SsimPreset::ffmpeg), v["ssim_ffmpeg_cli"].get<double>(), 5e-7);
  const ImageStats sa = image_stats(a), sb = image_stats(b);
  EXPECT_NEAR(sa.luma_mean, v["luma_mean"].get<double>(), 1e-12);
  EXPECT_NEAR(sa.luma_std, v["luma_std"].get<double>(), 1e-11);
  EXPECT_NEAR(sa.laplacian_var, v["laplacian_var"].get<double>(), 1e-9);
  EXPECT_NEAR(sb.luma_mean, v["noisy_luma_mean"].get<double>(), 1e-12);
  EXPECT_NEAR(sb.luma_std, v["noisy_luma_std"].get<double>(), 1e-11);
  EXPECT_NEAR(sb.laplacian_var, v["noisy_laplacian_var"].get<double>(), 1e-8);
  EXPECT_NEAR(mean_abs_diff(a, b), v["mean_abs_diff"].get<double>(), 1e-12);
}

// Per-channel values on a colour pair (scikit-image with channel_axis).
TEST(MediaColour, PerChannelAgainstScikitImage) {
  const auto& v = vectors()["astronaut_small"];
  const cv::Mat a = load("astronaut_small.png", cv::IMREAD_COLOR), b = load("astronaut_small_noisy.png", cv::IMREAD_COLOR);
  for (const SsimPreset p : {SsimPreset::skimage, SsimPreset::wang}) {
    const ImageComparison c = compare_images(a, b, opts(p, Channels::bgr));
    ASSERT_EQ(c.planes.size(), 3u);
    double ssum = 0;
    for (const auto& pl : c.planes) {
      const auto& e = v["channels"][pl.name];
      EXPECT_NEAR(pl.mse, e["mse"].get<double>(), 1e-12) << pl.name;
      EXPECT_NEAR(pl.ssim, e[p == SsimPreset::wang ? "ssim_wang" : "ssim_skimage"].get<double>(), 1e-12) << pl.name;
      ssum += pl.ssim;
    }
    EXPECT_NEAR(c.psnr, v["psnr_pooled"].get<double>(), 1e-12);
    EXPECT_DOUBLE_EQ(c.ssim, ssum / 3);
    if (p == SsimPreset::skimage) {
      EXPECT_NEAR(c.ssim, v["ssim_skimage_mean"].get<double>(), 1e-12);
    }
  }
}

// OpenCV's own quality-module expectations (opencv_contrib quality tests, ANCHORS.md) on
// samples/data/rubberwhale1/2.png, copied from Debian's opencv-doc 4.6.0+dfsg-12 (tests/data/README.md).
TEST(MediaColour, OpenCvRubberwhale) {
  const fs::path dir = k_data;
  const cv::Mat a = cv::imread((dir / "rubberwhale1.png").string(), cv::IMREAD_COLOR);
  const cv::Mat b = cv::imread((dir / "rubberwhale2.png").string(), cv::IMREAD_COLOR);
  const ImageComparison c = compare_images(a, b, opts(SsimPreset::opencv, Channels::bgr));
  const double mse_e[] = {92.8235, 109.4104, 121.4000}, psnr_e[] = {28.4542, 27.7402, 27.2886},
               ssim_e[] = {.7541, .7742, .8095};
  for (int i = 0; i < 3; ++i) {
    EXPECT_NEAR(c.planes[i].mse, mse_e[i], 5e-5) << c.planes[i].name;
    EXPECT_NEAR(c.planes[i].psnr, psnr_e[i], 5e-5) << c.planes[i].name;
    EXPECT_NEAR(c.planes[i].ssim, ssim_e[i], 5e-5) << c.planes[i].name;
  }
}

TEST(MediaIdentity, IdenticalInputsGiveInfAndExactlyOne) {
  const cv::Mat a = load("camera.png");
  EXPECT_EQ(psnr_from_mse(mse(a, a)), std::numeric_limits<double>::infinity());
  EXPECT_EQ(psnr_from_mse(mse(a, a), 255.0, 60.0), 60.0);
  for (const SsimPreset p : {SsimPreset::wang, SsimPreset::skimage, SsimPreset::opencv, SsimPreset::ffmpeg})
    EXPECT_EQ(ssim(a, a, p), 1.0) << ssim_preset_name(p);
  EXPECT_EQ(mean_abs_diff(a, a), 0.0);
  const cv::Mat c = load("astronaut_small.png", cv::IMREAD_COLOR);
  const ImageComparison ic = compare_images(c, c, opts(SsimPreset::wang, Channels::bgr));
  EXPECT_EQ(ic.psnr, std::numeric_limits<double>::infinity());
  EXPECT_EQ(ic.ssim, 1.0);
}

// BT.601 full range, as cv::COLOR_BGR2GRAY documents: Y = 0.299 R + 0.587 G + 0.114 B, rounded.
TEST(MediaLuma, Bt601FullRange) {
  struct C { int b, g, r; };
  for (const C c : {C{0, 0, 255}, C{0, 255, 0}, C{255, 0, 0}, C{255, 255, 255}, C{10, 200, 30}, C{128, 64, 32}}) {
    const cv::Mat m(4, 4, CV_8UC3, cv::Scalar(c.b, c.g, c.r));
    const double y = 0.299 * c.r + 0.587 * c.g + 0.114 * c.b;
    EXPECT_NEAR(to_luma(m).at<std::uint8_t>(0, 0), y, 0.5 + 1e-9) << c.b << "," << c.g << "," << c.r;
  }
}

// Hand-derived: a plane of 0/255 stripes one pixel wide has Laplacian +-510 on every pixel away
// from the left/right edges (reflect-101 keeps the pattern there too): variance 510^2.
TEST(MediaStats, HandDerived) {
  cv::Mat s(8, 8, CV_8UC1);
  for (int r = 0; r < 8; ++r)
    for (int c = 0; c < 8; ++c) s.at<std::uint8_t>(r, c) = (c % 2) ? 255 : 0;
  EXPECT_DOUBLE_EQ(laplacian_variance(s), 510.0 * 510.0);
  const MeanStd ms = mean_std(s);
  EXPECT_DOUBLE_EQ(ms.mean, 127.5);
  EXPECT_DOUBLE_EQ(ms.std, 127.5);
  const cv::Mat z(8, 8, CV_8UC1, cv::Scalar(3));
  EXPECT_DOUBLE_EQ(mean_abs_diff(s, z), (252.0 + 3.0) / 2.0);
  EXPECT_DOUBLE_EQ(mse(s, z), (252.0 * 252.0 + 9.0) / 2.0);
}

TEST(MediaSummary, PsnrPoolingAndIdenticalFrames) {
  const std::vector<double> m = {0.0, 1.0, 4.0};
  const PsnrSummary s = summarize_psnr(m);
  const double p1 = 20 * std::log10(255.0), p4 = 20 * std::log10(255.0 / 2.0);
  EXPECT_EQ(s.identical_frames, 1);
  EXPECT_EQ(s.mean, std::numeric_limits<double>::infinity());
  EXPECT_NEAR(s.mean_finite, (p1 + p4) / 2, 1e-12);
  EXPECT_NEAR(s.min, p4, 1e-12);
  EXPECT_EQ(s.min_frame, 2);
  EXPECT_NEAR(s.pooled, 10 * std::log10(255.0 * 255.0 / (5.0 / 3.0)), 1e-12);
  const PsnrSummary c = summarize_psnr(m, 255.0, 60.0);
  EXPECT_NEAR(c.mean, (60 + p1 + p4) / 3, 1e-12);
  const SsimSummary ss = summarize_ssim({0.9, 0.5, 0.7});
  EXPECT_DOUBLE_EQ(ss.mean, (0.9 + 0.5 + 0.7) / 3);
  EXPECT_EQ(ss.min, 0.5);
  EXPECT_EQ(ss.min_frame, 1);
}

TEST(MediaErrors, MismatchedAndTooSmall) {
  const cv::Mat a(16, 16, CV_8UC1, cv::Scalar(1)), b(16, 17, CV_8UC1, cv::Scalar(1));
  EXPECT_THROW(mse(a, b), attest::Error);
  EXPECT_THROW(ssim(a, b), attest::Error);
  const cv::Mat t(6, 6, CV_8UC1, cv::Scalar(1));
  EXPECT_THROW(ssim(t, t, SsimPreset::wang), attest::Error);
  EXPECT_THROW(parse_ssim_preset("gauss"), attest::Error);
  EXPECT_EQ(parse_ssim_preset("ffmpeg"), SsimPreset::ffmpeg);
}

}  // namespace
