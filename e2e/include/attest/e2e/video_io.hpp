#pragma once
/// Lossless video I/O for end-to-end runs: FFV1 in Matroska/AVI through OpenCV's FFmpeg backend,
/// or a directory of PNG images (frame_000000.png, ...). Frames are 8-bit BGR (CV_8UC3).
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <opencv2/core.hpp>

namespace attest::e2e {

/// Sequential reader of a video file or an image directory (files with an image extension
/// OpenCV reads, in name order). attest::Error names the path when it cannot be opened.
class VideoReader {
 public:
  explicit VideoReader(const std::filesystem::path& path);
  ~VideoReader();
  VideoReader(const VideoReader&) = delete;
  VideoReader& operator=(const VideoReader&) = delete;

  /// Next frame as CV_8UC3 BGR (grey images are expanded); false at the end.
  /// attest::Error when a frame has a different size from the first one or cannot be decoded.
  bool read(cv::Mat& frame);
  /// Frames the container claims (image directories: exact; files: may be an estimate, 0 unknown).
  [[nodiscard]] std::int64_t frame_count_hint() const;
  [[nodiscard]] double fps() const;  ///< 0 when unknown (image directories)
  [[nodiscard]] const std::filesystem::path& path() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// Writes frames losslessly: a path ending in .mkv or .avi gets FFV1 (OpenCV's FFmpeg backend),
/// any other path is a directory that receives frame_000000.png, ... All frames must be CV_8UC3
/// of one size. attest::Error when the writer cannot be opened (e.g. no FFV1 encoder).
void write_video(const std::filesystem::path& path, const std::vector<cv::Mat>& frames, double fps = 24.0);

}  // namespace attest::e2e
