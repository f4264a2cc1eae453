#pragma once
/// Media metrics on decoded images and video frames: PSNR, SSIM (four tool conventions),
/// Laplacian-variance sharpness, luma statistics, frame-to-frame difference. Images are OpenCV
/// matrices of 8-bit samples (CV_8UC1 grey/luma or CV_8UC3 BGR, as cv::imread and
/// cv::VideoCapture give them). Every sum is accumulated in double (integer sums where exact).
/// ../shared/ANCHORS.md and docs/e2e.md say which tool each convention reproduces.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <opencv2/core.hpp>

namespace attest::metrics {

/// SSIM conventions. The same image pair scores 0.356 to 0.628 across tools, so a number is
/// meaningless without its preset.
enum class SsimPreset {
  wang,     ///< Wang et al. 2004: Gaussian 11x11 sigma 1.5, population statistics, K1 .01, K2 .03,
            ///< L 255, mean over the valid region (windows fully inside the image). Default.
  skimage,  ///< scikit-image default: uniform 7x7 window, sample covariance N/(N-1), valid region.
  opencv,   ///< OpenCV tutorial / quality module: GaussianBlur 11 / 1.5, BORDER_REFLECT_101,
            ///< C1 6.5025, C2 58.5225, mean over the whole map.
  ffmpeg,   ///< FFmpeg's ssim filter: integer 8x8 windows on a 4 px grid, its integer constants.
};

/// Parses "wang", "skimage", "opencv" or "ffmpeg"; attest::Error names the valid ones otherwise.
SsimPreset parse_ssim_preset(std::string_view name);
std::string_view ssim_preset_name(SsimPreset p);

/// Which planes a comparison uses: luma (BT.601 full range, cv::COLOR_BGR2GRAY; the default for
/// video and images) or each of B, G, R separately.
enum class Channels { luma, bgr };
Channels parse_channels(std::string_view name);  ///< "luma" or "bgr"
std::string_view channels_name(Channels c);

/// The luma plane (CV_8UC1) of an 8-bit BGR image (cv::COLOR_BGR2GRAY, BT.601 full range:
/// Y = 0.299 R + 0.587 G + 0.114 B, rounded); a grey image is returned as is (shallow copy).
cv::Mat to_luma(const cv::Mat& image);

/// Mean squared error of two CV_8UC1 planes of one size (exact integer sum, then one division).
double mse(const cv::Mat& a, const cv::Mat& b);

/// 10 log10(peak^2 / mse); +inf for mse == 0 unless `cap_db` is given, which bounds the result
/// (libvmaf caps at 60 dB for 8-bit).
double psnr_from_mse(double mse, double peak = 255.0, std::optional<double> cap_db = std::nullopt);

/// Mean SSIM of two CV_8UC1 planes of one size under `preset`. Identical planes give exactly 1.
/// attest::Error when the planes are smaller than the preset's window.
double ssim(const cv::Mat& a, const cv::Mat& b, SsimPreset preset = SsimPreset::wang);

/// Variance (population) of cv::Laplacian(ksize 1, CV_64F) of a CV_8UC1 plane: sharpness.
double laplacian_variance(const cv::Mat& plane);

struct MeanStd {
  double mean = 0, std = 0;  ///< population standard deviation
};
MeanStd mean_std(const cv::Mat& plane);

/// Mean |a - b| over the pixels of two CV_8UC1 planes (frame-to-frame difference).
double mean_abs_diff(const cv::Mat& a, const cv::Mat& b);

/// One plane of an image comparison.
struct PlaneComparison {
  std::string name;  ///< "Y", "B", "G" or "R"
  double mse = 0, psnr = 0, ssim = 0;
};

/// Comparison of two images (or two frames). With Channels::bgr, `planes` holds B, G, R and the
/// pooled figures follow scikit-image on a colour image: PSNR of the mean MSE over planes, mean
/// SSIM over planes. With Channels::luma there is one plane "Y" and pooled == that plane.
struct ImageComparison {
  std::vector<PlaneComparison> planes;
  double mse = 0, psnr = 0, ssim = 0;
};

struct ImageCompareOptions {
  SsimPreset ssim = SsimPreset::wang;
  Channels channels = Channels::luma;
  std::optional<double> psnr_cap_db;
};

/// Compares two 8-bit images of one size (grey or BGR; with Channels::bgr both must be BGR).
/// attest::Error names the mismatch (size, channel count, depth).
ImageComparison compare_images(const cv::Mat& a, const cv::Mat& b, const ImageCompareOptions& o = {});

/// Global statistics of one image (on its luma plane).
struct ImageStats {
  double luma_mean = 0, luma_std = 0, laplacian_var = 0;
};
ImageStats image_stats(const cv::Mat& image);

/// Summary of per-frame PSNR values (dB, +inf for identical frames) and their MSEs.
struct PsnrSummary {
  double mean = 0;         ///< mean of per-frame PSNR; +inf when any frame is identical (no cap)
  double mean_finite = 0;  ///< mean over the frames that are not identical (+inf if none)
  double min = 0;          ///< worst frame
  std::int64_t min_frame = -1;
  double pooled = 0;       ///< FFmpeg's "average": PSNR of the mean of frame MSEs
  std::int64_t identical_frames = 0;  ///< frames with MSE 0 (PSNR +inf, or the cap)
};
PsnrSummary summarize_psnr(const std::vector<double>& frame_mse, double peak = 255.0,
                           std::optional<double> cap_db = std::nullopt);

/// Summary of per-frame SSIM values.
struct SsimSummary {
  double mean = 0, min = 0;
  std::int64_t min_frame = -1;
};
SsimSummary summarize_ssim(const std::vector<double>& frame_ssim);

}  // namespace attest::metrics
