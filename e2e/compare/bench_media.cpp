// attest_media_bench: throughput of the media metrics on real clips, for scripts/bench-media.
//   attest_media_bench compare REF TEST [--ssim P] [--threads N]  e2e::compare end to end (decode,
//                                                                  luma, PSNR, SSIM, statistics)
//   attest_media_bench decode REF TEST                            decoding both files only
//   attest_media_bench ssim REF_DIR TEST_DIR [--ssim P] [--threads N] [--repeat R]
//                                                                  SSIM only, on grey images already
//                                                                  in memory, frames in parallel
// Prints one JSON line: {mode, ssim, threads, frames, seconds, fps, cpu_seconds, frames_per_cpu_second}.
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include <opencv2/core/utility.hpp>
#include <opencv2/imgcodecs.hpp>

#include "attest/core/status.hpp"
#include "attest/e2e/compare.hpp"
#include "attest/e2e/video_io.hpp"
#include "attest/metrics/media.hpp"

namespace {

namespace fs = std::filesystem;
using clk = std::chrono::steady_clock;

// CPU seconds of the whole process (all threads): on a shared machine the fair measure of work.
double cpu_now() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

std::vector<cv::Mat> load_grey(const fs::path& dir) {
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().extension() == ".png") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  std::vector<cv::Mat> out;
  for (const auto& f : files) out.push_back(cv::imread(f.string(), cv::IMREAD_GRAYSCALE));
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: %s compare|ssim REF TEST [--ssim P] [--threads N] [--repeat R]\n", argv[0]);
    return 2;
  }
  const std::string mode = argv[1];
  std::string preset = "wang";
  int threads = omp_get_max_threads(), repeat = 1;
  for (int i = 4; i + 1 < argc; i += 2) {
    const std::string k = argv[i];
    if (k == "--ssim") preset = argv[i + 1];
    else if (k == "--threads") threads = std::atoi(argv[i + 1]);
    else if (k == "--repeat") repeat = std::atoi(argv[i + 1]);
  }
  try {
    const auto p = attest::metrics::parse_ssim_preset(preset);
    double seconds = 0, cpu0 = 0, cpu = 0;
    long long frames = 0;
    if (mode == "compare") {
      attest::e2e::CompareInputs in;
      in.reference = {"reference", argv[2], ""};
      in.tests = {{"test", argv[3], ""}};
      attest::e2e::CompareOptions o;
      o.ssim = p;
      o.threads = threads;
      const auto t0 = clk::now();
      cpu0 = cpu_now();
      const auto r = attest::e2e::compare(in, o);
      cpu = cpu_now() - cpu0;
      seconds = std::chrono::duration<double>(clk::now() - t0).count();
      frames = r.frames_compared;
      std::fprintf(stderr, "ssim mean %.6f, psnr mean %.4f\n", r.runs[1].video->ssim.mean, r.runs[1].video->psnr.mean);
    } else if (mode == "decode") {
      // Decoding alone (both files, one after the other, as BGR frames): the floor of `compare`.
      const auto t0 = clk::now();
      cpu0 = cpu_now();
      for (const char* f : {argv[2], argv[3]}) {
        attest::e2e::VideoReader rd(f);
        cv::Mat m;
        while (rd.read(m)) ++frames;
      }
      cpu = cpu_now() - cpu0;
      seconds = std::chrono::duration<double>(clk::now() - t0).count();
      frames /= 2;
    } else if (mode == "ssim") {
      const auto a = load_grey(argv[2]), b = load_grey(argv[3]);
      const auto n = static_cast<long long>(std::min(a.size(), b.size()));
      if (n == 0) throw attest::Error("no PNG frames");
      std::vector<double> v(static_cast<std::size_t>(n));
      cv::setNumThreads(1);
      const auto t0 = clk::now();
      cpu0 = cpu_now();
      for (int rep = 0; rep < repeat; ++rep) {
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads)
        for (long long i = 0; i < n; ++i)
          v[static_cast<std::size_t>(i)] = attest::metrics::ssim(a[static_cast<std::size_t>(i)], b[static_cast<std::size_t>(i)], p);
      }
      cpu = cpu_now() - cpu0;
      seconds = std::chrono::duration<double>(clk::now() - t0).count();
      frames = n * repeat;
      double s = 0;
      for (double x : v) s += x;
      std::fprintf(stderr, "ssim mean %.7f\n", s / static_cast<double>(n));
    } else {
      throw attest::Error("unknown mode " + mode);
    }
    std::printf("{\"mode\": \"%s\", \"ssim\": \"%s\", \"threads\": %d, \"frames\": %lld, \"seconds\": %.4f, \"fps\": %.2f, "
                "\"cpu_seconds\": %.4f, \"frames_per_cpu_second\": %.2f}\n",
                mode.c_str(), preset.c_str(), threads, frames, seconds, static_cast<double>(frames) / seconds, cpu,
                static_cast<double>(frames) / cpu);
  } catch (const attest::Error& e) {
    std::fprintf(stderr, "attest_media_bench: error: %s\n", e.what());
    return 2;
  }
  return 0;
}
