// Media metrics on 8-bit planes (see media.hpp). Filters come from OpenCV; the FFmpeg preset and
// the integer sums are hand-written because no library exposes FFmpeg's block-sum SSIM.
#include "attest/metrics/media.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include <opencv2/imgproc.hpp>

#include "attest/core/status.hpp"

namespace attest::metrics {
namespace {

// n^2 * variance = n * sum x^2 - (sum x)^2, computed exactly in 128-bit integers, then divided once.
__extension__ typedef __int128 Int128;
double exact_variance(std::int64_t n, std::int64_t sum, std::int64_t sum_sq) {
  const Int128 num = static_cast<Int128>(n) * sum_sq - static_cast<Int128>(sum) * sum;
  return static_cast<double>(static_cast<long double>(num) / (static_cast<long double>(n) * static_cast<long double>(n)));
}

void require_plane_pair(const cv::Mat& a, const cv::Mat& b, const char* what) {
  if (a.type() != CV_8UC1 || b.type() != CV_8UC1)
    throw Error(std::string(what) + ": planes must be 8-bit single channel");
  if (a.size() != b.size())
    throw Error(std::string(what) + ": plane sizes differ (" + std::to_string(a.cols) + "x" + std::to_string(a.rows) +
                " vs " + std::to_string(b.cols) + "x" + std::to_string(b.rows) + ")");
}

void require_min_size(const cv::Mat& a, int min_side, SsimPreset p) {
  if (a.cols < min_side || a.rows < min_side)
    throw Error("ssim " + std::string(ssim_preset_name(p)) + ": image " + std::to_string(a.cols) + "x" +
                std::to_string(a.rows) + " is smaller than its " + std::to_string(min_side) + " px window");
}

// Mean SSIM over the valid region (windows fully inside the image) for a separable window `w` of
// K taps, in float64: one pass over the image, no full-size temporaries. Per output row: the
// vertical window sums of x, y, x^2, y^2, xy (exact integer products) for every column, then the
// horizontal window and the map. The column loops are vectorised across columns with the K taps
// unrolled in registers (omp simd); each sum still runs over its taps in order, and the map is
// summed sequentially, so the result does not depend on the vector width.
// `cov_norm` turns population into sample covariance (N/(N-1)).
template <int K>
double ssim_valid(const cv::Mat& a, const cv::Mat& b, const std::array<double, K>& w, double c1, double c2,
                  double cov_norm) {
  const int width = a.cols, ow = a.cols - K + 1, oh = a.rows - K + 1;
  std::vector<double> buf(static_cast<std::size_t>(width) * 5 + static_cast<std::size_t>(ow));
  double* vx = buf.data();
  double* vy = vx + width;
  double* vxx = vy + width;
  double* vyy = vxx + width;
  double* vxy = vyy + width;
  double* map = vxy + width;
  double total = 0;
  for (int r = 0; r < oh; ++r) {
    const std::uint8_t* pa[K];
    const std::uint8_t* pb[K];
    for (int i = 0; i < K; ++i) {
      pa[i] = a.ptr<std::uint8_t>(r + i);
      pb[i] = b.ptr<std::uint8_t>(r + i);
    }
#pragma omp simd
    for (int c = 0; c < width; ++c) {
      double sx = 0, sy = 0, sxx = 0, syy = 0, sxy = 0;
      for (int i = 0; i < K; ++i) {
        const double x = pa[i][c], y = pb[i][c];
        sx += w[i] * x;
        sy += w[i] * y;
        sxx += w[i] * (x * x);
        syy += w[i] * (y * y);
        sxy += w[i] * (x * y);
      }
      vx[c] = sx;
      vy[c] = sy;
      vxx[c] = sxx;
      vyy[c] = syy;
      vxy[c] = sxy;
    }
#pragma omp simd
    for (int c = 0; c < ow; ++c) {
      double mx = 0, my = 0, mxx = 0, myy = 0, mxy = 0;
      for (int j = 0; j < K; ++j) {
        mx += w[j] * vx[c + j];
        my += w[j] * vy[c + j];
        mxx += w[j] * vxx[c + j];
        myy += w[j] * vyy[c + j];
        mxy += w[j] * vxy[c + j];
      }
      const double sx = cov_norm * (mxx - mx * mx);
      const double sy = cov_norm * (myy - my * my);
      const double sxy = cov_norm * (mxy - mx * my);
      map[c] = ((2 * mx * my + c1) * (2 * sxy + c2)) / ((mx * mx + my * my + c1) * (sx + sy + c2));
    }
    double row = 0;
    for (int c = 0; c < ow; ++c) row += map[c];
    total += row;
  }
  return total / (static_cast<double>(ow) * static_cast<double>(oh));
}

// FFmpeg's ssim filter (libavfilter/vf_ssim.c, 8-bit): sums over 4x4 blocks, SSIM of each 8x8
// window made of 2x2 neighbouring blocks (windows on a 4 px grid), in float as FFmpeg computes
// them; pixels past the last full 4 px block are ignored as FFmpeg does.
double ssim_ffmpeg(const cv::Mat& a, const cv::Mat& b) {
  const int bw = a.cols / 4, bh = a.rows / 4;
  // Per 4x4 block: s1, s2, ss (sum a^2 + b^2), s12. Max ss over an 8x8 window: 2*64*255^2 < 2^31.
  struct Sums {
    std::vector<std::int32_t> s1, s2, ss, s12;
    explicit Sums(int n) : s1(n), s2(n), ss(n), s12(n) {}
  };
  std::vector<std::int32_t> c1(static_cast<std::size_t>(bw) * 4), c2(c1.size()), css(c1.size()), c12(c1.size());
  auto block_row = [&](int by, Sums& out) {
    std::fill(c1.begin(), c1.end(), 0);
    std::fill(c2.begin(), c2.end(), 0);
    std::fill(css.begin(), css.end(), 0);
    std::fill(c12.begin(), c12.end(), 0);
    // Column sums over the 4 rows first (vectorises), then groups of 4 columns.
    for (int r = 0; r < 4; ++r) {
      const std::uint8_t* pa = a.ptr<std::uint8_t>(4 * by + r);
      const std::uint8_t* pb = b.ptr<std::uint8_t>(4 * by + r);
      const int n = bw * 4;
      for (int x = 0; x < n; ++x) {
        const std::int32_t va = pa[x], vb = pb[x];
        c1[x] += va;
        c2[x] += vb;
        css[x] += va * va + vb * vb;
        c12[x] += va * vb;
      }
    }
    for (int z = 0; z < bw; ++z) {
      const int x = 4 * z;
      out.s1[z] = c1[x] + c1[x + 1] + c1[x + 2] + c1[x + 3];
      out.s2[z] = c2[x] + c2[x + 1] + c2[x + 2] + c2[x + 3];
      out.ss[z] = css[x] + css[x + 1] + css[x + 2] + css[x + 3];
      out.s12[z] = c12[x] + c12[x + 1] + c12[x + 2] + c12[x + 3];
    }
  };
  // FFmpeg's constants for 8 bits: (int)(.01^2 * 255^2 * 64 + .5), (int)(.03^2 * 255^2 * 64 * 63 + .5).
  constexpr std::int64_t k_c1 = 416, k_c2 = 235963;
  auto end1 = [](std::int64_t s1, std::int64_t s2, std::int64_t ss, std::int64_t s12) {
    const std::int64_t vars = ss * 64 - s1 * s1 - s2 * s2;
    const std::int64_t covar = s12 * 64 - s1 * s2;
    return static_cast<float>(2 * s1 * s2 + k_c1) * static_cast<float>(2 * covar + k_c2) /
           (static_cast<float>(s1 * s1 + s2 * s2 + k_c1) * static_cast<float>(vars + k_c2));
  };
  Sums prev(bw), cur(bw);
  block_row(0, prev);
  double total = 0;
  for (int by = 1; by < bh; ++by) {
    block_row(by, cur);
    double line = 0;
    for (int z = 0; z + 1 < bw; ++z) {
      line += end1(prev.s1[z] + prev.s1[z + 1] + cur.s1[z] + cur.s1[z + 1],
                   prev.s2[z] + prev.s2[z + 1] + cur.s2[z] + cur.s2[z + 1],
                   prev.ss[z] + prev.ss[z + 1] + cur.ss[z] + cur.ss[z + 1],
                   prev.s12[z] + prev.s12[z + 1] + cur.s12[z] + cur.s12[z + 1]);
    }
    total += line;
    std::swap(prev, cur);
  }
  return total / (static_cast<double>(bh - 1) * static_cast<double>(bw - 1));
}

// OpenCV's tutorial / quality-module SSIM, in float32 as OpenCV computes it: a float64 pipeline
// moves the camera pair by 1.5e-6, more than the printed precision of OpenCV's own values. Only
// the final map mean is accumulated in double (cv::mean does so too).
double ssim_opencv(const cv::Mat& a, const cv::Mat& b) {
  constexpr float c1 = 6.5025f, c2 = 58.5225f;
  cv::Mat x, y;
  a.convertTo(x, CV_32F);
  b.convertTo(y, CV_32F);
  auto blur = [](const cv::Mat& in) {
    cv::Mat out;
    cv::GaussianBlur(in, out, {11, 11}, 1.5, 1.5, cv::BORDER_REFLECT_101);
    return out;
  };
  const cv::Mat mx = blur(x), my = blur(y), sxx = blur(x.mul(x)), syy = blur(y.mul(y)), sxy = blur(x.mul(y));
  // The map in float, element by element in the tutorial's order (2 a + c rather than OpenCV's
  // fused scale-add, so identical inputs give exactly 1 on every pixel).
  double total = 0;
  for (int r = 0; r < a.rows; ++r) {
    const float *px = mx.ptr<float>(r), *py = my.ptr<float>(r);
    const float *pxx = sxx.ptr<float>(r), *pyy = syy.ptr<float>(r), *pxy = sxy.ptr<float>(r);
    double row = 0;
    for (int c = 0; c < a.cols; ++c) {
      const float mx2 = px[c] * px[c], my2 = py[c] * py[c], mxy = px[c] * py[c];
      const float vx = pxx[c] - mx2, vy = pyy[c] - my2, vxy = pxy[c] - mxy;
      const float num = (2.0f * mxy + c1) * (2.0f * vxy + c2);
      const float den = (mx2 + my2 + c1) * (vx + vy + c2);
      row += static_cast<double>(num / den);
    }
    total += row;
  }
  return total / (static_cast<double>(a.rows) * static_cast<double>(a.cols));
}

}  // namespace

SsimPreset parse_ssim_preset(std::string_view name) {
  if (name == "wang") return SsimPreset::wang;
  if (name == "skimage") return SsimPreset::skimage;
  if (name == "opencv") return SsimPreset::opencv;
  if (name == "ffmpeg") return SsimPreset::ffmpeg;
  throw Error("unknown SSIM preset '" + std::string(name) + "' (valid: wang, skimage, opencv, ffmpeg)");
}

std::string_view ssim_preset_name(SsimPreset p) {
  switch (p) {
    case SsimPreset::wang: return "wang";
    case SsimPreset::skimage: return "skimage";
    case SsimPreset::opencv: return "opencv";
    case SsimPreset::ffmpeg: return "ffmpeg";
  }
  return "?";
}

Channels parse_channels(std::string_view name) {
  if (name == "luma") return Channels::luma;
  if (name == "bgr") return Channels::bgr;
  throw Error("unknown channels '" + std::string(name) + "' (valid: luma, bgr)");
}

std::string_view channels_name(Channels c) { return c == Channels::luma ? "luma" : "bgr"; }

cv::Mat to_luma(const cv::Mat& image) {
  if (image.depth() != CV_8U) throw Error("image is not 8-bit (depth " + std::to_string(image.depth()) + ")");
  if (image.channels() == 1) return image;
  if (image.channels() == 3) {
    cv::Mat y;
    cv::cvtColor(image, y, cv::COLOR_BGR2GRAY);
    return y;
  }
  if (image.channels() == 4) {
    cv::Mat y;
    cv::cvtColor(image, y, cv::COLOR_BGRA2GRAY);
    return y;
  }
  throw Error("image has " + std::to_string(image.channels()) + " channels (valid: 1, 3, 4)");
}

double mse(const cv::Mat& a, const cv::Mat& b) {
  require_plane_pair(a, b, "mse");
  // Exact: each row's sum of squared 8-bit differences fits in 64 bits.
  std::uint64_t total = 0;
  for (int r = 0; r < a.rows; ++r) {
    const std::uint8_t* pa = a.ptr<std::uint8_t>(r);
    const std::uint8_t* pb = b.ptr<std::uint8_t>(r);
    std::uint32_t row = 0;  // <= 65025 * cols; cols < 66000 keeps it in 32 bits
    for (int c = 0; c < a.cols; ++c) {
      const int d = static_cast<int>(pa[c]) - static_cast<int>(pb[c]);
      row += static_cast<std::uint32_t>(d * d);
    }
    total += row;
  }
  return static_cast<double>(total) / (static_cast<double>(a.rows) * static_cast<double>(a.cols));
}

double psnr_from_mse(double m, double peak, std::optional<double> cap_db) {
  const double v = m == 0 ? std::numeric_limits<double>::infinity() : 10.0 * std::log10(peak * peak / m);
  return cap_db ? std::min(v, *cap_db) : v;
}

double ssim(const cv::Mat& a, const cv::Mat& b, SsimPreset preset) {
  require_plane_pair(a, b, "ssim");
  switch (preset) {
    case SsimPreset::wang: {
      require_min_size(a, 11, preset);
      // scipy's gaussian_filter(sigma 1.5, truncate 3.5) has radius 5: the same 11 normalised taps
      // as getGaussianKernel(11, 1.5).
      static const std::array<double, 11> gauss = [] {
        const cv::Mat k = cv::getGaussianKernel(11, 1.5, CV_64F);
        std::array<double, 11> t{};
        for (int i = 0; i < 11; ++i) t[static_cast<std::size_t>(i)] = k.at<double>(i);
        return t;
      }();
      return ssim_valid<11>(a, b, gauss, 6.5025, 58.5225, 1.0);
    }
    case SsimPreset::skimage: {
      require_min_size(a, 7, preset);
      static constexpr std::array<double, 7> box = {1.0 / 7, 1.0 / 7, 1.0 / 7, 1.0 / 7, 1.0 / 7, 1.0 / 7, 1.0 / 7};
      return ssim_valid<7>(a, b, box, 6.5025, 58.5225, 49.0 / 48.0);
    }
    case SsimPreset::opencv:
      require_min_size(a, 11, preset);
      return ssim_opencv(a, b);
    case SsimPreset::ffmpeg:
      require_min_size(a, 8, preset);
      return ssim_ffmpeg(a, b);
  }
  throw Error("ssim: invalid preset");
}

double laplacian_variance(const cv::Mat& plane) {
  if (plane.type() != CV_8UC1) throw Error("laplacian_variance: plane must be 8-bit single channel");
  // cv::Laplacian(ksize 1) of 8-bit data is an integer in [-1020, 1020]: CV_16S holds it exactly
  // (the same values as CV_64F, at a quarter of the memory traffic), and the variance follows
  // from exact integer sums: n^2 var = n sum l^2 - (sum l)^2.
  cv::Mat lap;
  cv::Laplacian(plane, lap, CV_16S, 1);
  std::int64_t s = 0, ss = 0;
  for (int r = 0; r < lap.rows; ++r) {
    const std::int16_t* p = lap.ptr<std::int16_t>(r);
    std::int64_t rs = 0, rss = 0;
    for (int c = 0; c < lap.cols; ++c) {
      rs += p[c];
      rss += static_cast<std::int32_t>(p[c]) * p[c];
    }
    s += rs;
    ss += rss;
  }
  return exact_variance(static_cast<std::int64_t>(lap.rows) * lap.cols, s, ss);
}

MeanStd mean_std(const cv::Mat& plane) {
  if (plane.type() != CV_8UC1) throw Error("mean_std: plane must be 8-bit single channel");
  // Exact integer sums of x and x^2, then one rounding each.
  std::uint64_t s = 0, ss = 0;
  for (int r = 0; r < plane.rows; ++r) {
    const std::uint8_t* p = plane.ptr<std::uint8_t>(r);
    std::uint32_t rs = 0, rss = 0;  // <= 65025 * cols: 32 bits suffice below 66000 columns
    for (int c = 0; c < plane.cols; ++c) {
      rs += p[c];
      rss += static_cast<std::uint32_t>(p[c]) * p[c];
    }
    s += rs;
    ss += rss;
  }
  const double n = static_cast<double>(plane.rows) * static_cast<double>(plane.cols);
  const double mean = static_cast<double>(s) / n;
  const double var = exact_variance(static_cast<std::int64_t>(plane.rows) * plane.cols, static_cast<std::int64_t>(s),
                                    static_cast<std::int64_t>(ss));
  return {mean, std::sqrt(std::max(0.0, var))};
}

double mean_abs_diff(const cv::Mat& a, const cv::Mat& b) {
  require_plane_pair(a, b, "mean_abs_diff");
  std::uint64_t total = 0;
  for (int r = 0; r < a.rows; ++r) {
    const std::uint8_t* pa = a.ptr<std::uint8_t>(r);
    const std::uint8_t* pb = b.ptr<std::uint8_t>(r);
    std::uint32_t row = 0;
    for (int c = 0; c < a.cols; ++c) row += static_cast<std::uint32_t>(std::abs(static_cast<int>(pa[c]) - static_cast<int>(pb[c])));
    total += row;
  }
  return static_cast<double>(total) / (static_cast<double>(a.rows) * static_cast<double>(a.cols));
}

ImageComparison compare_images(const cv::Mat& a, const cv::Mat& b, const ImageCompareOptions& o) {
  if (a.depth() != CV_8U || b.depth() != CV_8U) throw Error("compare_images: images must be 8-bit");
  if (a.size() != b.size())
    throw Error("image sizes differ (" + std::to_string(a.cols) + "x" + std::to_string(a.rows) + " vs " +
                std::to_string(b.cols) + "x" + std::to_string(b.rows) + ")");
  ImageComparison out;
  if (o.channels == Channels::luma) {
    const cv::Mat ya = to_luma(a), yb = to_luma(b);
    const double m = mse(ya, yb);
    out.planes.push_back({"Y", m, psnr_from_mse(m, 255.0, o.psnr_cap_db), ssim(ya, yb, o.ssim)});
  } else {
    if (a.channels() != 3 || b.channels() != 3)
      throw Error("--channels bgr needs colour images (channels " + std::to_string(a.channels()) + " and " +
                  std::to_string(b.channels()) + ")");
    std::vector<cv::Mat> pa, pb;
    cv::split(a, pa);
    cv::split(b, pb);
    static const char* names[] = {"B", "G", "R"};
    for (int c = 0; c < 3; ++c) {
      const double m = mse(pa[c], pb[c]);
      out.planes.push_back({names[c], m, psnr_from_mse(m, 255.0, o.psnr_cap_db), ssim(pa[c], pb[c], o.ssim)});
    }
  }
  double msum = 0, ssum = 0;
  for (const auto& p : out.planes) {
    msum += p.mse;
    ssum += p.ssim;
  }
  out.mse = msum / static_cast<double>(out.planes.size());
  out.psnr = psnr_from_mse(out.mse, 255.0, o.psnr_cap_db);
  out.ssim = ssum / static_cast<double>(out.planes.size());
  return out;
}

ImageStats image_stats(const cv::Mat& image) {
  const cv::Mat y = to_luma(image);
  const MeanStd ms = mean_std(y);
  return {ms.mean, ms.std, laplacian_variance(y)};
}

PsnrSummary summarize_psnr(const std::vector<double>& frame_mse, double peak, std::optional<double> cap_db) {
  PsnrSummary s;
  const double inf = std::numeric_limits<double>::infinity();
  if (frame_mse.empty()) return s;
  double sum = 0, sum_finite = 0, mse_sum = 0;
  std::int64_t finite = 0;
  s.min = inf;
  for (std::size_t i = 0; i < frame_mse.size(); ++i) {
    const double p = psnr_from_mse(frame_mse[i], peak, cap_db);
    if (frame_mse[i] == 0) ++s.identical_frames;
    else {
      sum_finite += p;
      ++finite;
    }
    sum += p;
    mse_sum += frame_mse[i];
    if (p < s.min || s.min_frame < 0) {
      s.min = p;
      s.min_frame = static_cast<std::int64_t>(i);
    }
  }
  const double n = static_cast<double>(frame_mse.size());
  s.mean = sum / n;
  s.mean_finite = finite ? sum_finite / static_cast<double>(finite) : psnr_from_mse(0, peak, cap_db);
  s.pooled = psnr_from_mse(mse_sum / n, peak, cap_db);
  return s;
}

SsimSummary summarize_ssim(const std::vector<double>& frame_ssim) {
  SsimSummary s;
  if (frame_ssim.empty()) return s;
  double sum = 0;
  for (std::size_t i = 0; i < frame_ssim.size(); ++i) {
    sum += frame_ssim[i];
    if (s.min_frame < 0 || frame_ssim[i] < s.min) {
      s.min = frame_ssim[i];
      s.min_frame = static_cast<std::int64_t>(i);
    }
  }
  s.mean = sum / static_cast<double>(frame_ssim.size());
  return s;
}

}  // namespace attest::metrics
