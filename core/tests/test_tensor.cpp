#include <gtest/gtest.h>

#include <string>

#include "attest/core/tensor.hpp"

namespace attest {
namespace {

TEST(Tensor, ContiguousStridesAndViews) {
  Tensor t(DType::f32, {2, 3, 4});
  EXPECT_EQ(t.strides(), (Shape{12, 4, 1}));
  EXPECT_TRUE(t.is_contiguous());
  auto v = t.view<float, 3>();
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j)
      for (int k = 0; k < 4; ++k) v(i, j, k) = static_cast<float>(100 * i + 10 * j + k);
  const Tensor p = t.permute({2, 0, 1});
  EXPECT_EQ(p.shape(), (Shape{4, 2, 3}));
  EXPECT_FALSE(p.is_contiguous());
  EXPECT_EQ(p.get({3, 1, 2}), 123.0);
  const Tensor c = p.contiguous();
  EXPECT_TRUE(c.is_contiguous());
  EXPECT_EQ(c.data<float>()[1 * 6 + 0 * 3 + 2], 21.0f);  // c[1,0,2] = p[1,0,2] = t[0,2,1]
}

TEST(Tensor, RejectsWrongTypeAndOutOfBufferStrides) {
  Tensor t(DType::f64, {4});
  EXPECT_THROW((void)t.data<float>(), Error);
  EXPECT_THROW((void)(t.view<double, 2>()), Error);
  EXPECT_THROW(Tensor::strided(DType::f32, {4, 4}, {5, 1}, 0, 18), Error);  // last element at 3*5+3 = 18
  EXPECT_NO_THROW(Tensor::strided(DType::f32, {4, 4}, {5, 1}, 0, 19));
  EXPECT_THROW(shape_numel({1LL << 40, 1LL << 40}), Error);
  // Empty, so the element count is 0, but the strides of the other extents overflow (fuzz_npy).
  EXPECT_THROW(Tensor(DType::f32, {0, 1LL << 40, 1LL << 40, 1LL << 40}), Error);
  EXPECT_THROW(Tensor(DType::f32, {1LL << 40, 1LL << 40, 1LL << 40, 0}), Error);  // any order
  try {
    Tensor(DType::f32, {1, -(1LL << 40), 1LL << 40, 1LL << 40});
    ADD_FAILURE() << "negative extent accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("negative extent"), std::string::npos) << e.what();
  }
  EXPECT_NO_THROW(Tensor(DType::f32, {0, 1LL << 20, 1LL << 20}));
}

}  // namespace
}  // namespace attest
