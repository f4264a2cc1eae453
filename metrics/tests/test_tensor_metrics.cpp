#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include <nlohmann/json.hpp>

#include "attest/metrics/tensor_metrics.hpp"

namespace attest::metrics {
namespace {

Tensor make(std::initializer_list<double> v, DType t = DType::f64) {
  Tensor x(t, {static_cast<std::int64_t>(v.size())});
  std::int64_t i = 0;
  for (double e : v) {
    if (t == DType::f64) x.data<double>()[i++] = e;
    else x.data<float>()[i++] = static_cast<float>(e);
  }
  return x;
}

TEST(TensorMetrics, ClosedForms) {
  // test = (1, 2, 2, 4), ref = (1, 2, 3, 4): one difference of 1.
  const auto c = compare(make({1, 2, 2, 4}), make({1, 2, 3, 4}));
  EXPECT_EQ(c.count, 4);
  EXPECT_DOUBLE_EQ(c.max_abs, 1.0);
  EXPECT_EQ(c.max_abs_index, (Shape{2}));
  EXPECT_DOUBLE_EQ(c.mean_abs, 0.25);
  EXPECT_DOUBLE_EQ(c.rel_l1, 1.0 / 10.0);
  EXPECT_DOUBLE_EQ(c.rel_l2, 1.0 / std::sqrt(30.0));
  EXPECT_DOUBLE_EQ(c.rmse, 0.5);
  EXPECT_DOUBLE_EQ(c.cosine, 27.0 / (5.0 * std::sqrt(30.0)));  // <t,r>=1+4+6+16, |t|=5
  EXPECT_EQ(c.bit_mismatches, 1);
  ASSERT_EQ(c.first_mismatches.size(), 1u);
  EXPECT_EQ(c.first_mismatches[0].index, (Shape{2}));
}

TEST(TensorMetrics, BitwiseSeesSignedZeroAndNanClasses) {
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  const auto c = compare(make({0.0, nan, inf, 1.0}, DType::f32), make({-0.0, nan, -inf, nan}, DType::f32));
  EXPECT_EQ(c.bit_mismatches, 3);  // -0 vs +0, +inf vs -inf, 1 vs nan
  EXPECT_EQ(c.nonfinite_mismatches, 2);
  EXPECT_EQ(c.nan_test, 1);
  EXPECT_EQ(c.nan_ref, 2);
  EXPECT_EQ(c.inf_test, 1);
  EXPECT_DOUBLE_EQ(c.max_abs, 0.0);  // only the finite pair (0, -0) counts
}

TEST(TensorMetrics, MixedDtypesHaveNoBitCount) {
  const auto c = compare(make({1, 2}, DType::f32), make({1, 2}));
  EXPECT_EQ(c.bit_mismatches, -1);
  EXPECT_EQ(c.rel_l2, 0.0);
  EXPECT_EQ(c.cosine, 1.0);
}

TEST(TensorMetrics, ZeroOutputHasZeroCosine) {
  const auto c = compare(make({0, 0}), make({1, 2}));
  EXPECT_EQ(c.cosine, 0.0);
  EXPECT_EQ(c.norm_test, 0.0);
  EXPECT_DOUBLE_EQ(c.rel_l2, 1.0);
}

TEST(TensorMetrics, StridedViewsCompareLogically) {
  Tensor a(DType::f32, {2, 3});
  for (int i = 0; i < 6; ++i) a.data<float>()[i] = static_cast<float>(i);
  const Tensor at = a.permute({1, 0});      // logical [3,2], strided
  const Tensor ac = at.contiguous();        // same logical values, contiguous
  EXPECT_EQ(compare(at, ac).bit_mismatches, 0);
  EXPECT_EQ(bit_mismatch_count(at, ac), 0);
  EXPECT_THROW(compare(a, ac), Error);      // [2,3] vs [3,2]
}

TEST(TensorMetrics, JsonWritesNonFiniteAsStrings) {
  const auto c = compare(make({1}), make({0}));
  nlohmann::json j = c;
  EXPECT_EQ(j["rel_l2"], "inf");
  EXPECT_EQ(j["max_abs"], 1.0);
}

}  // namespace
}  // namespace attest::metrics
