// Hadamard rotations: exact integer examples against an explicit matrix product in double,
// H * H = n * I within float bounds, and the bf16 variants by hand.
#include <gtest/gtest.h>

#include <array>
#include <bit>
#include <cmath>
#include <random>
#include <vector>

#include "attest/reference/formats.hpp"
#include "attest/reference/hadamard.hpp"
#include "attest/reference/quantize.hpp"

namespace attest::ref {
namespace {

int sylvester(std::size_t i, std::size_t j) { return (std::popcount(i & j) & 1) != 0 ? -1 : 1; }

TEST(Hadamard, ConstantsAreTheRoundedValues) {
  EXPECT_EQ(kHadamard128Norm, static_cast<float>(1.0 / std::sqrt(128.0)));
  // bf16(1/sqrt(32)): 0.17677669 = 1.41421356 * 2^-3; 7 mantissa bits: 1.0110101b = 1.4140625
  // (error 1.5e-4) beats 1.0110110b = 1.421875 -> 1.4140625 / 8 = 0.1767578125.
  EXPECT_EQ(kHadamard32Bf16, round_to(FormatId::bf16, static_cast<float>(1.0 / std::sqrt(32.0))));
}

TEST(Hadamard, IntegerExampleEqualsMatrixProduct) {
  // Small integers: every partial sum is an integer below 2^24, so the FP32 butterflies are exact
  // and must equal sum_j H[i][j] x_j computed in double.
  std::array<float, 128> x{};
  for (std::size_t i = 0; i < 128; ++i) x[i] = static_cast<float>(static_cast<int>((i * 7) % 11) - 5);
  std::array<float, 128> y = x;
  fwht128(y);
  for (std::size_t i = 0; i < 128; ++i) {
    double want = 0;
    for (std::size_t j = 0; j < 128; ++j) want += sylvester(i, j) * static_cast<double>(x[j]);
    ASSERT_EQ(static_cast<double>(y[i]), want) << i;
  }
  // Normalised: one FP32 multiply of an exact integer, i.e. the double product rounded once.
  std::array<float, 128> z = x;
  hadamard128(z);
  for (std::size_t i = 0; i < 128; ++i)
    ASSERT_EQ(z[i], static_cast<float>(static_cast<double>(y[i]) * static_cast<double>(kHadamard128Norm))) << i;
}

TEST(Hadamard, TwiceIsScaledIdentity) {
  // H (H x) r^2 = 128 r^2 x. Error bound: each FWHT stage rounds once per element; with
  // |partial sums| <= 128 max|x| the first pass errs by <= 7 * 128 * u * max|x| before the
  // multiply by r, the second pass amplifies that by <= 128 r and adds its own; 2048 u max|x|
  // covers the sum with margin (u = 2^-24).
  std::mt19937 rng(1);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  const double k = 128.0 * static_cast<double>(kHadamard128Norm) * static_cast<double>(kHadamard128Norm);
  for (int trial = 0; trial < 100; ++trial) {
    std::array<float, 128> x{};
    double mx = 0;
    for (float& v : x) v = nd(rng), mx = std::max(mx, std::fabs(static_cast<double>(v)));
    std::array<float, 128> y = x;
    hadamard128(y);
    hadamard128(y);
    for (std::size_t i = 0; i < 128; ++i)
      ASSERT_NEAR(static_cast<double>(y[i]), k * x[i], 2048 * 0x1p-24 * mx) << trial << " " << i;
  }
}

TEST(Hadamard, Bf16VariantByHand) {
  // x = e_0: y = H column 0 = all ones; y * r = r = 0x3DB504F3 -> bf16: low half 0x04F3 < 0x8000
  // -> 0x3DB5 = 0.08837890625. mult 2: 2r -> 0x3E35 = 0.1767578125. mult 3: fl(3r) =
  // 8897462 * 2^-25 (mantissa 0x87C4B6) -> bf16 rounds 0x87|C4B6 up to 0x88 -> 136 * 2^-9 = 0.265625.
  for (const auto& [mult, want] : {std::pair{1.0f, 0.08837890625f}, {2.0f, 0.1767578125f}, {3.0f, 0.265625f}}) {
    std::array<float, 128> x{};
    x[0] = 1.0f;
    hadamard128_bf16(x, mult);
    for (float v : x) ASSERT_EQ(v, want) << mult;
  }
}

TEST(Hadamard, H32Bf16) {
  // e_3 -> row 3 of H_32 times 0.1767578125.
  std::vector<float> x(64, 0.0f);
  x[3] = 1.0f;
  hadamard32_bf16(x);
  for (std::size_t k = 0; k < 32; ++k) ASSERT_EQ(x[k], sylvester(3, k) * 0.1767578125f) << k;
  for (std::size_t k = 32; k < 64; ++k) ASSERT_EQ(x[k], 0.0f);
  // Integer input (bf16-exact): x_j * 0.1767578125 = x_j * 181 * 2^-10, and the 32-term sums of
  // such multiples stay below 2^24 units of 2^-10, so FP32 accumulation is exact: equal to the
  // explicit matrix product in double, per 32-channel block.
  std::vector<float> v(64), w;
  for (std::size_t j = 0; j < 64; ++j) v[j] = static_cast<float>(static_cast<int>((j * 5) % 9) - 4);
  w = v;
  hadamard32_bf16(w);
  for (std::size_t b = 0; b < 64; b += 32)
    for (std::size_t k = 0; k < 32; ++k) {
      double want = 0;
      for (std::size_t j = 0; j < 32; ++j) want += sylvester(j, k) * static_cast<double>(v[b + j]) * 0.1767578125;
      ASSERT_EQ(static_cast<double>(w[b + k]), want) << b + k;
    }
  // The input is rounded to bf16 first: 1 + 2^-8 + 2^-12 -> 1 + 2^-7 (above the tie).
  std::vector<float> u(32, 0.0f);
  u[0] = 1.0f + 0x1p-8f + 0x1p-12f;
  hadamard32_bf16(u);
  EXPECT_EQ(u[5], (1.0f + 0x1p-7f) * 0.1767578125f);
  std::vector<float> bad(40);
  EXPECT_THROW(hadamard32_bf16(bad), Error);
}

TEST(Hadamard, RotationInsideAScheme) {
  // mxfp4 with rotate=h128_bf16 and prescale: mult = sage_prescale(sm_scale) inside the rotation,
  // not applied a second time.
  std::vector<float> v(128, 0.0f);
  v[0] = 1.0f;
  Tensor x(DType::f32, {1, 128});
  std::copy(v.begin(), v.end(), x.data<float>());
  QuantInputs in;
  in.sm_scale = 2.0 / 1.44269504;  // factor fl32(2.0) = 2 exactly
  ASSERT_EQ(sage_prescale(in.sm_scale), 2.0f);
  const Tensor p = prepare(x, parse_scheme("mxfp4_e2m1fn:prescale=sm_log2e:rotate=h128_bf16"), in);
  for (std::int64_t i = 0; i < 128; ++i) ASSERT_EQ(p.data<float>()[i], 0.1767578125f);
  const Tensor q = prepare(x, parse_scheme("mxfp4_e2m1fn:prescale=sm_log2e:rotate=h128"), in);
  for (std::int64_t i = 0; i < 128; ++i) ASSERT_EQ(q.data<float>()[i], kHadamard128Norm * 2.0f);
}

}  // namespace
}  // namespace attest::ref
