// Lossless video I/O (see video_io.hpp): OpenCV's FFmpeg backend for files, imgcodecs for image
// directories.
#include "attest/e2e/video_io.hpp"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>

#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>
#include <opencv2/videoio.hpp>

#include "attest/core/status.hpp"
#include "attest/e2e/matroska.hpp"

namespace attest::e2e {
namespace fs = std::filesystem;

namespace {

bool is_image_file(const fs::path& p) {
  std::string e = p.extension().string();
  std::transform(e.begin(), e.end(), e.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return e == ".png" || e == ".jpg" || e == ".jpeg" || e == ".bmp" || e == ".tif" || e == ".tiff" || e == ".ppm" ||
         e == ".pgm" || e == ".webp";
}

std::string size_str(const cv::Mat& m) { return std::to_string(m.cols) + "x" + std::to_string(m.rows); }

}  // namespace

struct VideoReader::Impl {
  fs::path path;
  cv::VideoCapture cap;
  std::vector<fs::path> images;  // image-directory mode
  std::size_t next = 0;
  cv::Size size;
  std::int64_t index = 0;

  void to_bgr(cv::Mat& frame, const std::string& where) {
    if (frame.depth() != CV_8U) throw Error("video " + path.string() + ": " + where + " is not 8-bit");
    if (frame.channels() == 1) cv::cvtColor(frame, frame, cv::COLOR_GRAY2BGR);
    else if (frame.channels() == 4) cv::cvtColor(frame, frame, cv::COLOR_BGRA2BGR);
    if (index == 0) size = frame.size();
    else if (frame.size() != size)
      throw Error("video " + path.string() + ": " + where + " is " + size_str(frame) + ", earlier frames " +
                  std::to_string(size.width) + "x" + std::to_string(size.height));
  }
};

VideoReader::VideoReader(const fs::path& path) : impl_(std::make_unique<Impl>()) {
  impl_->path = path;
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    for (const auto& e : fs::directory_iterator(path))
      if (e.is_regular_file() && is_image_file(e.path())) impl_->images.push_back(e.path());
    std::sort(impl_->images.begin(), impl_->images.end());
    if (impl_->images.empty()) throw Error("video " + path.string() + ": directory holds no image files");
    return;
  }
  if (!fs::exists(path, ec)) throw Error("video " + path.string() + ": no such file or directory");
  if (!impl_->cap.open(path.string(), cv::CAP_FFMPEG) || !impl_->cap.isOpened())
    throw Error("video " + path.string() + ": OpenCV's FFmpeg backend cannot open it");
}

VideoReader::~VideoReader() = default;

bool VideoReader::read(cv::Mat& frame) {
  Impl& d = *impl_;
  if (!d.images.empty()) {
    if (d.next >= d.images.size()) return false;
    const fs::path& p = d.images[d.next++];
    frame = cv::imread(p.string(), cv::IMREAD_UNCHANGED);
    if (frame.empty()) throw Error("video " + d.path.string() + ": cannot decode image " + p.filename().string());
    d.to_bgr(frame, "image " + p.filename().string());
  } else {
    if (!d.cap.read(frame) || frame.empty()) return false;
    d.to_bgr(frame, "frame " + std::to_string(d.index));
  }
  ++d.index;
  return true;
}

std::int64_t VideoReader::frame_count_hint() const {
  if (!impl_->images.empty()) return static_cast<std::int64_t>(impl_->images.size());
  const double n = impl_->cap.get(cv::CAP_PROP_FRAME_COUNT);
  return n > 0 ? static_cast<std::int64_t>(n) : 0;
}

double VideoReader::fps() const {
  if (!impl_->images.empty()) return 0;
  const double f = impl_->cap.get(cv::CAP_PROP_FPS);
  return f > 0 ? f : 0;
}

const fs::path& VideoReader::path() const { return impl_->path; }

void write_video(const fs::path& path, const std::vector<cv::Mat>& frames, double fps) {
  if (frames.empty()) throw Error("video " + path.string() + ": no frames to write");
  const cv::Size size = frames[0].size();
  for (std::size_t i = 0; i < frames.size(); ++i)
    if (frames[i].type() != CV_8UC3 || frames[i].size() != size)
      throw Error("video " + path.string() + ": frame " + std::to_string(i) + " is not 8-bit BGR of " +
                  std::to_string(size.width) + "x" + std::to_string(size.height));
  const std::string ext = path.extension().string();
  if (ext == ".mkv" || ext == ".avi") {
    cv::VideoWriter w;
    if (!w.open(path.string(), cv::CAP_FFMPEG, cv::VideoWriter::fourcc('F', 'F', 'V', '1'), fps, size, true) ||
        !w.isOpened())
      throw Error("video " + path.string() + ": OpenCV's FFmpeg backend cannot write FFV1 here");
    for (const cv::Mat& f : frames) w.write(f);
    w.release();
    if (ext == ".mkv") {  // equal frames, equal bytes (matroska.hpp)
      std::string b;
      {
        std::ifstream in(path, std::ios::binary);
        b.assign(std::istreambuf_iterator<char>(in), {});
      }
      make_matroska_reproducible(b);
      std::ofstream o(path, std::ios::binary | std::ios::trunc);
      o.write(b.data(), static_cast<std::streamsize>(b.size()));
      if (!o) throw Error("video " + path.string() + ": cannot rewrite the Matroska file");
    }
    return;
  }
  fs::create_directories(path);
  for (std::size_t i = 0; i < frames.size(); ++i) {
    char name[32];
    std::snprintf(name, sizeof name, "frame_%06zu.png", i);
    if (!cv::imwrite((path / name).string(), frames[i]))
      throw Error("video " + path.string() + ": cannot write " + name);
  }
}

}  // namespace attest::e2e
