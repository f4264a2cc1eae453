// Writers of synthetic runs (synth_io.hpp). OpenCV and libsndfile write to files, so each
// encoder writes a private temporary file whose bytes are then staged (all-or-nothing output).
#include "attest/e2e/synth_io.hpp"

#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>

#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/videoio.hpp>
#include <sndfile.h>

#include "attest/core/status.hpp"
#include "attest/core/tensor.hpp"
#include "attest/datasets/npy.hpp"
#include "attest/e2e/matroska.hpp"

namespace attest::e2e {
namespace {

namespace fs = std::filesystem;

// A temporary file removed when it goes out of scope.
struct TempFile {
  explicit TempFile(const std::string& ext) {
    static std::atomic<int> counter{0};
    path = fs::temp_directory_path() /
           ("attest-synth-" + std::to_string(::getpid()) + "-" + std::to_string(counter++) + ext);
  }
  ~TempFile() {
    std::error_code ec;
    fs::remove(path, ec);
  }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  [[nodiscard]] std::string bytes() const {
    std::ifstream in(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  }
  fs::path path;
};

cv::Mat frame_bgr(const SynthConfig& cfg, const SynthResult& res, int f) {
  cv::Mat m(cfg.height, cfg.width, CV_8UC3);
  const std::size_t fsz = static_cast<std::size_t>(cfg.height) * cfg.width * 3;
  const std::uint8_t* src = res.frames.data() + fsz * static_cast<std::size_t>(f);
  for (int y = 0; y < cfg.height; ++y) {
    auto* row = m.ptr<std::uint8_t>(y);
    for (int x = 0; x < cfg.width; ++x)
      for (int c = 0; c < 3; ++c) row[x * 3 + c] = src[(static_cast<std::size_t>(y) * cfg.width + x) * 3 + (2 - c)];  // RGB -> BGR
  }
  return m;
}

}  // namespace

void stage_video(OutputFiles& out, const fs::path& path, const SynthConfig& cfg, const SynthResult& res) {
  const std::string ext = path.extension().string();
  const bool dir = ext.empty() || path.string().back() == '/';
  if (dir) {
    std::error_code ec;
    fs::create_directories(path, ec);  // an empty directory is all a failure can leave
    if (ec) throw Error(path.string() + ": cannot create the frame directory: " + ec.message());
    for (int f = 0; f < cfg.frames; ++f) {
      std::vector<std::uint8_t> buf;
      if (!cv::imencode(".png", frame_bgr(cfg, res, f), buf)) throw Error(path.string() + ": cannot encode frame " + std::to_string(f) + " as PNG");
      char name[32];
      std::snprintf(name, sizeof name, "frame_%06d.png", f);
      out.stage(path / name, std::span<const std::byte>(reinterpret_cast<const std::byte*>(buf.data()), buf.size()));
    }
    return;
  }
  if (ext != ".mkv" && ext != ".avi")
    throw Error(path.string() + ": video extension '" + ext + "' is not supported (valid: .mkv, .avi, or a directory for PNG frames)");
  TempFile tmp(ext);
  {
    cv::VideoWriter w;
    if (!w.open(tmp.path.string(), cv::CAP_FFMPEG, cv::VideoWriter::fourcc('F', 'F', 'V', '1'), SynthArch::kFps,
                cv::Size(cfg.width, cfg.height), true))
      throw Error(path.string() + ": OpenCV's FFmpeg backend cannot open an FFV1 writer");
    for (int f = 0; f < cfg.frames; ++f) w.write(frame_bgr(cfg, res, f));
  }
  std::string b = tmp.bytes();
  if (b.empty()) throw Error(path.string() + ": FFV1 encoding produced no bytes");
  if (ext == ".mkv") make_matroska_reproducible(b);  // random UIDs and the date out (matroska.hpp)
  out.stage(path, b);
}

void stage_audio(OutputFiles& out, const fs::path& path, const SynthResult& res) {
  TempFile tmp(".wav");
  SF_INFO info{};
  info.samplerate = SynthArch::kSampleRate;
  info.channels = 1;
  info.format = SF_FORMAT_WAV | SF_FORMAT_FLOAT;
  SNDFILE* f = sf_open(tmp.path.c_str(), SFM_WRITE, &info);
  if (f == nullptr) throw Error(path.string() + ": libsndfile cannot write WAV: " + sf_strerror(nullptr));
  // libsndfile adds a PEAK chunk to float WAVs whose timestamp field is the wall clock: without
  // it two runs with the same arguments write the same bytes.
  sf_command(f, SFC_SET_ADD_PEAK_CHUNK, nullptr, SF_FALSE);
  const auto n = static_cast<sf_count_t>(res.audio.size());
  const sf_count_t wrote = sf_write_float(f, res.audio.data(), n);
  sf_close(f);
  if (wrote != n) throw Error(path.string() + ": libsndfile wrote " + std::to_string(wrote) + " of " + std::to_string(n) + " samples");
  out.stage(path, tmp.bytes());
}

void stage_latents(OutputFiles& out, const fs::path& path, const SynthConfig& cfg, const SynthResult& res) {
  Tensor t(DType::f32, {static_cast<std::int64_t>(res.step_t.size()), cfg.tokens(), SynthArch::kChannels});
  if (static_cast<std::size_t>(t.numel()) != res.latents.size()) throw Error("stage_latents: result does not match the configuration");
  std::copy(res.latents.begin(), res.latents.end(), t.data<float>());
  datasets::write_npy(out, path, t);
}

std::vector<float> read_latents(const fs::path& path, const SynthConfig& cfg) {
  const Tensor t = datasets::read_npy(path);
  const Shape want{cfg.steps + 1, cfg.tokens(), SynthArch::kChannels};
  if (t.dtype() != DType::f32 || t.shape() != want)
    throw Error(path.string() + ": latents of shape " + shape_string(t.shape()) + " " + std::string(dtype_name(t.dtype())) +
                ", expected " + shape_string(want) + " f32 (same --steps, --frames and --size as this run)");
  const Tensor c = t.contiguous();
  return {c.data<float>(), c.data<float>() + c.numel()};
}

}  // namespace attest::e2e
