#pragma once
// The clips of the e2e compare tests, whose metrics follow by hand: frame t of the reference is a
// constant grey v_t = 60 + 20 t, 48 x 32, BGR with B = G = R (BT.601 luma v_t exactly); a run
// given offsets adds offsets[t] to every pixel of frame t.
#include <cstddef>
#include <vector>

#include <opencv2/core.hpp>

namespace attest::e2e::test {

constexpr int k_w = 48, k_h = 32;
inline double v_of(int t) { return 60.0 + 20.0 * t; }

inline std::vector<cv::Mat> clip(const std::vector<int>& offsets) {
  std::vector<cv::Mat> f;
  for (int t = 0; t < static_cast<int>(offsets.size()); ++t)
    f.emplace_back(k_h, k_w, CV_8UC3, cv::Scalar::all(v_of(t) + offsets[static_cast<std::size_t>(t)]));
  return f;
}

}  // namespace attest::e2e::test
