// attest_e2e_compare on generated lossless videos (FFV1 in Matroska and PNG sequences) whose
// metrics follow by hand, and the `attest e2e compare` / `attest metrics` commands end to end.
//
// Clips: frame t of the reference is a constant grey v_t = 60 + 20 t (BGR with B = G = R, whose
// BT.601 luma is v_t exactly: the fixed-point weights 1868 + 9617 + 4899 sum to 2^14). A run
// that adds d to frame t has MSE d^2 there, PSNR 20 log10(255 / |d|), and on flat frames
// (variances 0) every preset's SSIM window reduces to
// (2 v (v + d) + C1) / (v^2 + (v + d)^2 + C1), C1 = (0.01 * 255)^2.
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <opencv2/imgcodecs.hpp>

#include "attest/core/status.hpp"
#include "attest/e2e/compare.hpp"
#include "attest/e2e/video_io.hpp"
#include "attest/testing/run_cli.hpp"
#include "attest/testing/temp_dir.hpp"
#include "grey_clips.hpp"

namespace {

namespace fs = std::filesystem;
using namespace attest::e2e;
using namespace attest::e2e::test;  // grey_clips.hpp: clip, v_of, k_w, k_h

constexpr int k_frames = 6;

double flat_ssim(double v, double d) {
  const double c1 = 6.5025;
  return (2 * v * (v + d) + c1) / (v * v + (v + d) * (v + d) + c1);
}

class Compare : public ::testing::Test {
 protected:
  attest::testing::TempDir dir_{"e2e_compare"};
};

TEST_F(Compare, HandDerivedVerdictsOnFfv1AndPngSequences) {
  // floor: +1 everywhere; good: +1 / -1 alternating (same error); bad: frame 4 off by 3.
  write_video(dir_ / "ref.mkv", clip({0, 0, 0, 0, 0, 0}));
  write_video(dir_ / "floor.mkv", clip({1, 1, 1, 1, 1, 1}));
  write_video(dir_ / "good", clip({1, -1, 1, -1, 1, -1}));  // PNG sequence
  write_video(dir_ / "bad.mkv", clip({0, 0, 0, 0, 3, 0}));
  CompareInputs in;
  in.reference = {"", dir_ / "ref.mkv", ""};
  in.floor = RunInput{"", dir_ / "floor.mkv", ""};
  in.tests = {{"good", dir_ / "good", ""}, {"bad", dir_ / "bad.mkv", ""}};
  CompareOptions o;
  o.strip_frames = {0, 5};
  o.threads = 2;
  const CompareReport r = compare(in, o);
  ASSERT_EQ(r.runs.size(), 4u);
  EXPECT_EQ(r.frames_compared, k_frames);
  EXPECT_EQ(r.width, k_w);
  EXPECT_EQ(r.height, k_h);
  EXPECT_FALSE(r.frame_count_mismatch);
  const double p1 = 20 * std::log10(255.0), p3 = 20 * std::log10(255.0 / 3);

  const RunReport& fl = r.runs[1];
  EXPECT_EQ(fl.role, Role::floor);
  for (int t = 0; t < k_frames; ++t) {
    EXPECT_EQ(fl.video->frame_mse[t], 1.0);
    EXPECT_NEAR(fl.video->frame_psnr[t], p1, 1e-12);
    EXPECT_NEAR(fl.video->frame_ssim[t], flat_ssim(v_of(t), 1), 1e-12) << t;
  }
  const RunReport& bad = r.runs[3];
  EXPECT_EQ(bad.video->psnr.identical_frames, 5);
  EXPECT_EQ(bad.video->psnr.mean, std::numeric_limits<double>::infinity());
  EXPECT_NEAR(bad.video->psnr.min, p3, 1e-12);
  EXPECT_EQ(bad.video->psnr.min_frame, 4);
  EXPECT_NEAR(bad.video->psnr.pooled, 10 * std::log10(255.0 * 255.0 / (9.0 / 6)), 1e-12);
  EXPECT_EQ(bad.video->frame_ssim[0], 1.0);
  EXPECT_EQ(r.runs[2].verdict, Verdict::within_floor) << (r.runs[2].reasons.empty() ? "" : r.runs[2].reasons[0]);
  EXPECT_EQ(bad.verdict, Verdict::outside_floor);
  ASSERT_FALSE(bad.reasons.empty());
  EXPECT_NE(bad.reasons[0].find("PSNR"), std::string::npos);
  EXPECT_TRUE(any_outside_floor(r));

  // Statistics: flat frames have std 0 and Laplacian 0; luma steps by 20 between frames.
  const VideoStats& rs = *r.runs[0].video_stats;
  EXPECT_DOUBLE_EQ(rs.luma_mean, (60.0 + 160.0) / 2);
  EXPECT_EQ(rs.luma_std, 0.0);
  EXPECT_EQ(rs.laplacian_var, 0.0);
  ASSERT_EQ(rs.frame_abs_diff.size(), static_cast<std::size_t>(k_frames - 1));
  EXPECT_DOUBLE_EQ(rs.mean_abs_diff, 20.0);
  // good: diffs alternate 22 and 18.
  EXPECT_DOUBLE_EQ(r.runs[2].video_stats->frame_abs_diff[0], 18.0);
  EXPECT_DOUBLE_EQ(r.runs[2].video_stats->frame_abs_diff[1], 22.0);

  // Outputs.
  EXPECT_EQ(r.strip_frames, (std::vector<std::int64_t>{0, 5}));
  ASSERT_EQ(r.runs[0].strip.size(), 2u);
  const auto png = strip_png(r);
  const cv::Mat strip = cv::imdecode(png, cv::IMREAD_COLOR);
  ASSERT_FALSE(strip.empty());
  EXPECT_GT(strip.cols, 4 * k_w);
  EXPECT_GT(strip.rows, 2 * k_h);
  const std::string md = to_markdown(r);
  EXPECT_NE(md.find("| good | test |"), std::string::npos) << md;
  EXPECT_NE(md.find("within floor"), std::string::npos);
  EXPECT_NE(md.find("outside floor"), std::string::npos);
  const nlohmann::json j = to_json(r);
  EXPECT_EQ(j["runs"][3]["video"]["psnr"]["mean"], "inf");
  EXPECT_EQ(j["runs"][3]["video"]["frames"]["psnr"][0], "inf");
  EXPECT_EQ(j["runs"][1]["video"]["frames"]["mse"].size(), static_cast<std::size_t>(k_frames));
  EXPECT_EQ(j["runs"][3]["verdict"], "outside floor");
  const std::string html = to_html(r, "<p id=\"extra\"></p>");
  EXPECT_NE(html.find("<svg"), std::string::npos);
  EXPECT_NE(html.find("data:image/png;base64,"), std::string::npos);
  EXPECT_NE(html.find("<p id=\"extra\"></p></body>"), std::string::npos);
}

TEST_F(Compare, IdenticalRunsAreInfAndOne) {
  write_video(dir_ / "a", clip({0, 0, 0}));
  write_video(dir_ / "b", clip({0, 0, 0}));
  CompareInputs in;
  in.reference = {"", dir_ / "a", ""};
  in.tests = {{"same", dir_ / "b", ""}};
  for (const auto p : {attest::metrics::SsimPreset::wang, attest::metrics::SsimPreset::skimage,
                       attest::metrics::SsimPreset::opencv, attest::metrics::SsimPreset::ffmpeg}) {
    CompareOptions o;
    o.ssim = p;
    const CompareReport r = compare(in, o);
    const auto& v = *r.runs[1].video;
    EXPECT_EQ(v.psnr.identical_frames, 3);
    EXPECT_EQ(v.psnr.min, std::numeric_limits<double>::infinity());
    EXPECT_EQ(v.ssim.mean, 1.0);
    EXPECT_EQ(v.ssim.min, 1.0);
    EXPECT_EQ(r.runs[1].verdict, Verdict::not_judged);
  }
}

TEST_F(Compare, MismatchesAreErrorsUnlessTruncating) {
  write_video(dir_ / "ref", clip({0, 0, 0, 0}));
  write_video(dir_ / "short", clip({0, 0, 0}));
  std::vector<cv::Mat> big{cv::Mat(k_h + 2, k_w, CV_8UC3, cv::Scalar::all(9))};
  write_video(dir_ / "big", big);
  CompareInputs in;
  in.reference = {"", dir_ / "ref", ""};
  in.tests = {{"short", dir_ / "short", ""}};
  try {
    compare(in);
    ADD_FAILURE() << "frame count mismatch accepted";
  } catch (const attest::Error& e) {
    EXPECT_NE(std::string(e.what()).find("frame counts differ"), std::string::npos) << e.what();
  }
  CompareOptions t;
  t.allow_truncate = true;
  const CompareReport r = compare(in, t);
  EXPECT_EQ(r.frames_compared, 3);
  EXPECT_TRUE(r.frame_count_mismatch);
  EXPECT_EQ(r.runs[0].frames_read, 4);
  EXPECT_EQ(r.runs[1].frames_read, 3);
  EXPECT_FALSE(r.warnings.empty());

  in.tests = {{"big", dir_ / "big", ""}};
  EXPECT_THROW(compare(in, t), attest::Error);
  in.tests = {{"missing", dir_ / "nope.mkv", ""}};
  EXPECT_THROW(compare(in), attest::Error);
  in.tests = {{"x", dir_ / "short", ""}, {"x", dir_ / "short", ""}};
  EXPECT_THROW(compare(in), attest::Error);
}

TEST_F(Compare, AudioVerdicts) {
  using attest::metrics::Audio;
  const int n = 800;
  Audio ref{8000, {std::vector<double>(n)}}, floor = ref, good = ref, bad = ref;
  for (int i = 0; i < n; ++i) {
    const double s = std::round(8000 * std::sin(0.05 * i)) / 32768;
    ref.channels[0][i] = s;
    floor.channels[0][i] = s + ((i % 2) ? 1.0 : -1.0) / 32768;  // +-1 LSB
    good.channels[0][i] = s + ((i % 3) ? 0.0 : 1.0) / 32768;
    bad.channels[0][i] = s + ((i % 2) ? 64.0 : -64.0) / 32768;
  }
  attest::metrics::write_audio_wav16(dir_ / "ref.wav", ref);
  attest::metrics::write_audio_wav16(dir_ / "floor.wav", floor);
  attest::metrics::write_audio_wav16(dir_ / "good.wav", good);
  attest::metrics::write_audio_wav16(dir_ / "bad.wav", bad);
  CompareInputs in;
  in.reference = {"", "", dir_ / "ref.wav"};
  in.floor = RunInput{"", "", dir_ / "floor.wav"};
  in.tests = {{"good", "", dir_ / "good.wav"}, {"bad", "", dir_ / "bad.wav"}};
  const CompareReport r = compare(in);
  EXPECT_EQ(r.runs[2].verdict, Verdict::within_floor);
  EXPECT_EQ(r.runs[3].verdict, Verdict::outside_floor);
  // bad: noise energy 64^2 per sample vs floor's 1: SNR lower by 10 log10(4096) = 36.1 dB.
  EXPECT_NEAR(r.runs[1].audio->pooled.snr - r.runs[3].audio->pooled.snr, 10 * std::log10(4096.0), 1e-9);
  EXPECT_THROW(strip_png(r), attest::Error);
}

// The CLI end to end: exit codes, outputs written all-or-nothing, one-line errors.
using attest::testing::run_cli;

TEST_F(Compare, Cli) {
  write_video(dir_ / "ref", clip({0, 0, 0, 0, 0, 0}));
  write_video(dir_ / "floor", clip({1, 1, 1, 1, 1, 1}));
  write_video(dir_ / "good", clip({1, -1, 1, -1, 1, -1}));
  write_video(dir_ / "bad", clip({0, 0, 0, 0, 3, 0}));
  write_video(dir_ / "short", clip({0, 0}));
  const std::string d = dir_.string();
  const std::string outs = " --json " + d + "/r.json --markdown " + d + "/r.md --html " + d + "/r.html --strip " + d +
                           "/s.png --strip-frames 0,2,5";
  EXPECT_EQ(run_cli("e2e compare --ref " + d + "/ref --floor " + d + "/floor --test good=" + d + "/good" + outs).code,
            0);
  EXPECT_TRUE(fs::exists(dir_ / "r.json") && fs::exists(dir_ / "r.md") && fs::exists(dir_ / "r.html") && fs::exists(dir_ / "s.png"));
  std::ifstream jf(dir_ / "r.json");
  const nlohmann::json j = nlohmann::json::parse(jf);
  EXPECT_EQ(j["strip_frames"], nlohmann::json::array({0, 2, 5}));
  EXPECT_EQ(run_cli("e2e compare --ref " + d + "/ref --floor " + d + "/floor --test bad=" + d + "/bad").code, 1);
  fs::remove(dir_ / "r.json");
  EXPECT_EQ(run_cli("e2e compare --ref " + d + "/ref --test short=" + d + "/short --json " + d + "/r.json").code, 2);
  EXPECT_FALSE(fs::exists(dir_ / "r.json"));  // nothing half-written
  EXPECT_EQ(run_cli("e2e compare --ref " + d + "/ref --test short=" + d + "/short --allow-truncate").code, 0);
  EXPECT_EQ(run_cli("e2e compare --ref " + d + "/ref --test bad=" + d + "/bad --ssim gauss").code, 2);
  const std::string data = ATTEST_MEDIA_TEST_DATA;
  EXPECT_EQ(run_cli("metrics image " + data + "/camera.png " + data + "/camera_noisy.png --json " + d + "/i.json").code,
            0);
  std::ifstream jf2(dir_ / "i.json");
  const nlohmann::json ji = nlohmann::json::parse(jf2);
  EXPECT_NEAR(ji["psnr"].get<double>(), 22.409353, 5e-7);
  EXPECT_NEAR(ji["ssim"].get<double>(), 0.3579642, 5e-8);
  EXPECT_EQ(run_cli("metrics image " + data + "/camera.png " + data + "/astronaut_small.png").code, 2);
  EXPECT_EQ(run_cli("metrics image " + data + "/camera.png " + d + "/missing.png").code, 2);
  attest::metrics::write_audio_wav16(dir_ / "a.wav", {8000, {{0.5, -0.25, 0.125}}});
  attest::metrics::write_audio_wav16(dir_ / "b.wav", {8000, {{0.5, -0.25}}});
  EXPECT_EQ(run_cli("metrics audio " + d + "/a.wav " + d + "/a.wav --json " + d + "/a.json").code, 0);
  EXPECT_EQ(run_cli("metrics audio " + d + "/a.wav " + d + "/b.wav").code, 2);
  EXPECT_EQ(run_cli("metrics audio " + d + "/a.wav " + d + "/b.wav --allow-truncate").code, 0);
}

}  // namespace
