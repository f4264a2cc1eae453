// Tests of the synthetic pipeline and the e2e study: determinism, the floor pair, a mutant kernel
// outside the floor, correct kernels within it, lossless files, bad input.
#include <omp.h>
#include <sndfile.h>

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <opencv2/core.hpp>
#include <opencv2/videoio.hpp>

#include "attest/core/output_files.hpp"
#include "attest/core/status.hpp"
#include "attest/e2e/matroska.hpp"
#include "attest/e2e/study.hpp"
#include "attest/e2e/synth.hpp"
#include "attest/e2e/synth_io.hpp"
#include "attest/e2e/video_io.hpp"
#include "attest/kernels/kernel.hpp"
#include "attest/testing/run_cli.hpp"
#include "attest/testing/temp_dir.hpp"

namespace attest::e2e {
namespace {

namespace fs = std::filesystem;

// The CI size: 2 frames of 32x32 (16 video tokens each) + 16 audio tokens = 48 tokens, 2 blocks,
// 6 steps. 48 % 64 != 0, so a mutant that drops a partial KV tile loses keys here. A few
// hundredths of a second per run in Release.
SynthConfig tiny() {
  SynthConfig c;
  c.frames = 2;
  c.width = 32;
  c.height = 32;
  c.steps = 6;
  c.blocks = 2;
  return c;
}

SynthResult run(const SynthConfig& c, const std::string& kernel, const std::string& recipe = "") {
  const auto kc = choose_kernel(kernel, recipe);
  return run_synth(c, *kc.kernel, kc.recipe);
}

using attest::testing::TempDir;

TEST(Synth, ConfigRefusesBadSizes) {
  SynthConfig c = tiny();
  c.width = 30;
  EXPECT_FALSE(c.validate());
  EXPECT_NE(c.validate().reason().find("width 30"), std::string::npos);
  c = tiny();
  c.steps = 0;
  EXPECT_FALSE(c.validate());
  EXPECT_THROW(run(c, "cpu.tiled.bf16"), Error);
  EXPECT_THROW(choose_kernel("cpu.nope", ""), Error);
}

TEST(Synth, Shapes) {
  const SynthConfig c = tiny();
  EXPECT_EQ(c.video_tokens(), 2 * 4 * 4);
  EXPECT_EQ(c.audio_tokens(), 2 * 8);
  EXPECT_EQ(to_string(c.attention_problem()), "b1h2s48d64");
  const auto r = run(c, "cpu.tiled.bf16");
  EXPECT_EQ(r.latents.size(), static_cast<std::size_t>(7 * 48 * 16));
  EXPECT_EQ(r.frames.size(), static_cast<std::size_t>(2 * 32 * 32 * 3));
  EXPECT_EQ(r.audio.size(), static_cast<std::size_t>(2 * 2000));
  EXPECT_EQ(r.attention_calls, 6 * 2);
  // Trust: the outputs carry signal (not constant, not clipped everywhere).
  double mean = 0, sq = 0;
  for (auto v : r.frames) mean += v;
  mean /= static_cast<double>(r.frames.size());
  for (auto v : r.frames) sq += (v - mean) * (v - mean);
  EXPECT_GT(std::sqrt(sq / static_cast<double>(r.frames.size())), 10.0);
  double rms = 0;
  for (auto v : r.audio) rms += static_cast<double>(v) * v;
  EXPECT_GT(std::sqrt(rms / static_cast<double>(r.audio.size())), 0.01);
}

// Same seed, same bits: twice, and with 1 and 2 OpenMP threads (rows are independent).
TEST(Synth, DeterministicBits) {
  const SynthConfig c = tiny();
  const auto a = run(c, "cpu.tiled.bf16");
  const int threads = omp_get_max_threads();
  omp_set_num_threads(1);
  const auto b = run(c, "cpu.tiled.bf16");
  omp_set_num_threads(2);
  const auto d = run(c, "cpu.tiled.bf16");
  omp_set_num_threads(threads);
  for (const auto* x : {&b, &d}) {
    EXPECT_EQ(0, std::memcmp(a.latents.data(), x->latents.data(), a.latents.size() * sizeof(float)));
    EXPECT_EQ(a.frames, x->frames);
    EXPECT_EQ(0, std::memcmp(a.audio.data(), x->audio.data(), a.audio.size() * sizeof(float)));
  }
  // Another noise seed gives another video.
  SynthConfig c2 = c;
  c2.seed = 2;
  EXPECT_NE(a.frames, run(c2, "cpu.tiled.bf16").frames);
}

// Per step, how far the K/V-reversed run of `kernel` (f32 recipe, tiny()) is from its natural run.
std::vector<StepDivergence> reversal_divergence(const std::string& kernel) {
  SynthConfig c = tiny();
  const auto natural = run(c, kernel, "f32");
  c.reverse_kv = true;
  const auto reversed = run(c, kernel, "f32");
  return latent_divergence(c, reversed.latents, natural.latents, natural.step_t);
}

// The floor pair: exact FP32 attention on natural and K/V-reversed tokens. Exact math is the
// same, so the first velocity evaluation differs only through summation order; the bf16
// activations turn sub-ulp differences into occasional flipped roundings, which then spread.
// Bounds (empirical, with headroom): the divergence exists (bits differ after the first step)
// and stays small: every step's latent rel-L2 <= 2^-8 (one bf16 unit roundoff) x steps taken,
// measured 5.0e-4 at step 1 and 3.9e-3 at step 6 of this size.
TEST(Synth, FloorPairDiffersWithinBounds) {
  const auto div = reversal_divergence("cpu.tiled.f32");
  ASSERT_EQ(div.size(), 7u);
  EXPECT_EQ(div[0].mismatches, 0);  // the same initial noise
  EXPECT_GT(div[1].mismatches, 0) << "reversing K/V changed no bit: the floor pair is degenerate";
  for (std::size_t s = 1; s < div.size(); ++s) {
    EXPECT_GT(div[s].rel_l2, 0.0);
    EXPECT_LE(div[s].rel_l2, 0x1p-8 * static_cast<double>(s)) << "step " << s;
  }
}

// Reversing K/V of the FP64 kernel changes essentially no bit: its output is rounded once from
// FP64, far below the float32 ulp. Documents why the study's default reference is FP32.
TEST(Synth, Ref64ReversalIsNearlyBitExact) {
  const auto div = reversal_divergence("cpu.ref64");
  EXPECT_LE(div.back().rel_l2, 1e-6);
}

TEST(Synth, LosslessFiles) {
  const SynthConfig c = tiny();
  const auto r = run(c, "cpu.tiled.bf16");
  const TempDir dir("synth");
  OutputFiles out;
  stage_video(out, dir / "v.mkv", c, r);
  stage_video(out, dir / "png", c, r);
  stage_audio(out, dir / "a.wav", r);
  stage_latents(out, dir / "l.npy", c, r);
  out.commit();
  for (const char* v : {"v.mkv", "png"}) {
    VideoReader rd(dir / v);
    cv::Mat m;
    int f = 0;
    while (rd.read(m)) {
      ASSERT_LT(f, c.frames);
      ASSERT_EQ(m.cols, c.width);
      ASSERT_EQ(m.rows, c.height);
      for (int y = 0; y < c.height; ++y)
        for (int x = 0; x < c.width; ++x)
          for (int ch = 0; ch < 3; ++ch)
            ASSERT_EQ(m.ptr<std::uint8_t>(y)[x * 3 + ch],
                      r.frames[((static_cast<std::size_t>(f) * c.height + y) * c.width + x) * 3 + (2 - ch)])
                << v << " frame " << f << " (" << x << ", " << y << ")";
      ++f;
    }
    EXPECT_EQ(f, c.frames) << v;
  }
  SF_INFO info{};
  SNDFILE* sf = sf_open((dir / "a.wav").c_str(), SFM_READ, &info);
  ASSERT_NE(sf, nullptr);
  EXPECT_EQ(info.samplerate, SynthArch::kSampleRate);
  EXPECT_EQ(info.channels, 1);
  std::vector<float> back(r.audio.size() + 16);
  EXPECT_EQ(sf_read_float(sf, back.data(), static_cast<sf_count_t>(back.size())), static_cast<sf_count_t>(r.audio.size()));
  sf_close(sf);
  back.resize(r.audio.size());
  EXPECT_EQ(0, std::memcmp(back.data(), r.audio.data(), back.size() * sizeof(float)));
  EXPECT_EQ(read_latents(dir / "l.npy", c), r.latents);
  SynthConfig other = c;
  other.steps = 5;
  EXPECT_THROW(read_latents(dir / "l.npy", other), Error);
  EXPECT_THROW(stage_video(out, dir / "v.mp4", c, r), Error);
}

TEST(Synth, RunsRoundTrip) {
  const SynthConfig c = tiny();
  const auto runs = execute_runs(c, study_runs("cpu.tiled.f32:f32", {"cpu.tiled.bf16"}));
  ASSERT_EQ(runs.specs.size(), 3u);
  EXPECT_EQ(runs.specs[1].label, "floor");
  EXPECT_TRUE(runs.specs[1].reverse_kv);
  EXPECT_EQ(runs.specs[2].label, "cpu.tiled.bf16:bf16");
  const TempDir dir("synth");
  OutputFiles out;
  write_runs(out, dir, runs);
  out.commit();
  const auto back = read_runs(dir);
  ASSERT_EQ(back.specs.size(), 3u);
  for (std::size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(back.specs[i].label, runs.specs[i].label);
    EXPECT_EQ(back.results[i].latents, runs.results[i].latents);
    EXPECT_EQ(back.results[i].frames, runs.results[i].frames);
    EXPECT_EQ(back.results[i].audio, runs.results[i].audio);
  }
  EXPECT_THROW(study_runs("cpu.tiled.f32:f32", {"cpu.tiled.bf16", "cpu.tiled.bf16:bf16"}), Error);
  EXPECT_THROW(study_runs("cpu.tiled.f32:f32", {":bf16"}), Error);
}

const RunReport* find_run(const StudyReport& r, const std::string& label) {
  for (const auto& x : r.compare.runs)
    if (x.label == label) return &x;
  return nullptr;
}

// The CI study: reference, floor, a correct kernel and two mutants, at 3 frames (72 tokens:
// the second KV tile holds 8 keys, so skip_last_kv_tile drops them and no_rescale misses the
// running max moving between tiles).
TEST(Study, CorrectWithinMutantOutside) {
  SynthConfig c = tiny();
  c.frames = 3;
  const auto runs = execute_runs(c, study_runs("cpu.tiled.f32:f32", {"cpu.tiled.bf16", "mutant.no_rescale", "mutant.skip_last_kv_tile"}));
  const TempDir tmp("synth");
  const fs::path dir = tmp / "study";  // run_study makes it
  OutputFiles out;
  const auto r = run_study(runs, dir, study_compare_defaults(), out);
  out.commit();
  EXPECT_FALSE(r.floor_degenerate);
  const auto* bf16 = find_run(r, "cpu.tiled.bf16:bf16");
  ASSERT_NE(bf16, nullptr);
  EXPECT_EQ(bf16->verdict, Verdict::within_floor) << (bf16->reasons.empty() ? "" : bf16->reasons[0]);
  for (const char* m : {"mutant.no_rescale:bf16", "mutant.skip_last_kv_tile:bf16"}) {
    const auto* mr = find_run(r, m);
    ASSERT_NE(mr, nullptr) << m;
    EXPECT_EQ(mr->verdict, Verdict::outside_floor) << m;
  }
  EXPECT_EQ(study_exit_code(r), 1);
  for (const char* f : {"study.md", "study.html", "study.json", "strip.png", "divergence.svg", "runs/0-reference.mkv",
                        "runs/1-floor.wav", "runs/2-cpu.tiled.bf16_bf16.mkv"})
    EXPECT_TRUE(fs::exists(dir / f)) << f;
  std::ifstream in(dir / "study.json");
  const auto j = nlohmann::json::parse(in);
  EXPECT_EQ(j.at("runs").size(), 5u);
  EXPECT_EQ(j.at("runs")[2].at("verdict"), "within floor");
  EXPECT_EQ(j.at("runs")[2].at("divergence").size(), 7u);
  EXPECT_EQ(j.at("runs")[3].at("verdict"), "outside floor");
  EXPECT_EQ(j.at("exit_code"), 1);
  // Nothing half-written is left behind: no work directory, no staged temporaries.
  for (const auto& e : fs::directory_iterator(dir)) EXPECT_NE(e.path().filename().string().rfind(".study-work", 0), 0u) << e.path();
}

#ifdef ATTEST_CLI
// The CLI: exit codes, all-or-nothing output, the trace against a reference, study --import.
using attest::testing::run_cli;

std::string slurp(const fs::path& p) {
  std::ifstream in(p);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

TEST(Cli, SynthBadInputExit2NothingWritten) {
  const TempDir dir("synth");
  const std::string outs = " --video " + (dir / "v.mkv").string() + " --audio " + (dir / "a.wav").string();
  auto r = run_cli("e2e synth --kernel cpu.tiled.bf16 --size 30x32" + outs);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find("width 30 is not a positive multiple of 8"), std::string::npos) << r.out;
  r = run_cli("e2e synth --kernel cpu.nope" + outs);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find("kernel 'cpu.nope' is not registered"), std::string::npos) << r.out;
  EXPECT_EQ(run_cli("e2e synth --kernel cpu.tiled.bf16 --size 32x32x" + outs).code, 2);
  // A video path OpenCV cannot encode: the audio must not be written either.
  EXPECT_EQ(run_cli("e2e synth --kernel cpu.tiled.bf16 --frames 1 --size 16x16 --steps 1 --blocks 1 --video " +
                    (dir / "v.mp4").string() + " --audio " + (dir / "a.wav").string())
                .code,
            2);
  EXPECT_FALSE(fs::exists(dir / "v.mkv"));
  EXPECT_FALSE(fs::exists(dir / "a.wav"));
  EXPECT_EQ(run_cli("e2e study --kernels cpu.tiled.bf16,cpu.nope --frames 1 --size 16x16 --steps 1 --out " +
                    (dir / "s").string())
                .code,
            2);
  EXPECT_FALSE(fs::exists(dir / "s" / "study.md"));
}

// The user report of issue 16: two runs with the same arguments must write the same bytes (video
// and audio). Negative control: OpenCV's writer alone (random Matroska UIDs, wall-clock date)
// does not, which is what make_matroska_reproducible removes; its CRCs are checked with zlib.
TEST(Cli, SynthIsByteDeterministic) {
  const TempDir dir("synth");
  const std::string cfg = "e2e synth --kernel cpu.tiled.bf16 --recipe bf16 --steps 4 --frames 4 --size 64x64 --seed 3 --quiet";
  for (const char* run : {"1", "2"}) {
    const auto r = run_cli(cfg + " --video " + (dir / (std::string(run) + ".mkv")).string() + " --audio " +
                           (dir / (std::string(run) + ".wav")).string());
    ASSERT_EQ(r.code, 0) << r.out;
  }
  const auto bytes = [](const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  const std::string v1 = bytes(dir / "1.mkv"), v2 = bytes(dir / "2.mkv");
  ASSERT_GT(v1.size(), 1000u);
  EXPECT_TRUE(v1 == v2) << "the two .mkv files differ";
  EXPECT_TRUE(matroska_crcs_valid(v1));
  EXPECT_EQ(bytes(dir / "1.wav"), bytes(dir / "2.wav"));
  // What OpenCV alone writes for the same frames: different bytes, and the rewrite makes them equal.
  std::vector<cv::Mat> frames;
  {
    VideoReader rd(dir / "1.mkv");
    cv::Mat m;
    while (rd.read(m)) frames.push_back(m.clone());
  }
  ASSERT_EQ(frames.size(), 4u);
  std::string raw[2];
  for (int i = 0; i < 2; ++i) {
    const fs::path p = dir / ("raw" + std::to_string(i) + ".mkv");
    cv::VideoWriter w(p.string(), cv::CAP_FFMPEG, cv::VideoWriter::fourcc('F', 'F', 'V', '1'), 24, frames[0].size(), true);
    ASSERT_TRUE(w.isOpened());
    for (const auto& f : frames) w.write(f);
    w.release();
    raw[i] = bytes(p);
  }
  EXPECT_NE(raw[0], raw[1]) << "OpenCV's Matroska writer became reproducible: the rewrite may be unnecessary";
  for (auto& r : raw) {
    ASSERT_TRUE(matroska_crcs_valid(r));
    make_matroska_reproducible(r);
    EXPECT_TRUE(matroska_crcs_valid(r));
  }
  EXPECT_EQ(raw[0], raw[1]);
  // A corrupted file is refused with the offset, not rewritten into something else.
  std::string broken = v1.substr(0, 60);
  EXPECT_THROW(make_matroska_reproducible(broken), Error);
}

TEST(Cli, SynthTraceAgainstReference) {
  const TempDir dir("synth");
  const std::string cfg = " --frames 1 --size 16x16 --steps 3 --blocks 1 --quiet";
  auto r = run_cli("e2e synth --kernel cpu.tiled.f32" + cfg + " --latents " + (dir / "ref.npy").string());
  ASSERT_EQ(r.code, 0) << r.out;
  r = run_cli("e2e synth --kernel cpu.tiled.f32 --reverse-kv" + cfg + " --video " + (dir / "png").string() +
              " --audio " + (dir / "a.wav").string() + " --trace " + (dir / "t.json").string() + " --trace-ref " +
              (dir / "ref.npy").string());
  ASSERT_EQ(r.code, 0) << r.out;
  std::ifstream in(dir / "t.json");
  const auto j = nlohmann::json::parse(in);
  EXPECT_EQ(j.at("kernel"), "cpu.tiled.f32");
  EXPECT_EQ(j.at("reverse_kv"), true);
  ASSERT_EQ(j.at("steps").size(), 4u);
  EXPECT_EQ(j.at("steps")[0].at("mismatches"), 0);
  EXPECT_TRUE(j.at("steps")[3].contains("rel_l2"));
  EXPECT_TRUE(fs::exists(dir / "png" / "frame_000000.png"));
  // A reference of another shape is refused before the run.
  r = run_cli("e2e synth --kernel cpu.tiled.f32 --frames 1 --size 16x16 --steps 2 --blocks 1 --trace " +
              (dir / "u.json").string() + " --trace-ref " + (dir / "ref.npy").string());
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find("expected [3, 12, 16]"), std::string::npos) << r.out;
}

TEST(Cli, StudyImport) {
  const TempDir dir("synth");
  fs::create_directories(dir / "runs");
  SynthConfig c = tiny();
  c.steps = 4;
  OutputFiles out;
  write_runs(out, dir / "runs", execute_runs(c, study_runs("cpu.tiled.f32:f32", {"cpu.tiled.bf16"})));
  out.commit();
  const auto r =
      run_cli("e2e study --import " + (dir / "runs").string() + " --quiet --out " + (dir / "study").string());
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(slurp(dir / "study" / "study.md").find("| cpu.tiled.bf16:bf16 | test |"), std::string::npos) << slurp(dir / "study" / "study.md");
  EXPECT_EQ(run_cli("e2e study --import " + (dir / "nope").string() + " --out " + (dir / "s2").string()).code, 2);
}
#endif

}  // namespace
}  // namespace attest::e2e
