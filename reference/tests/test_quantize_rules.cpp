// Scalar building blocks of the reference quantizers, checked against examples worked out by
// hand (the arithmetic is in the comments) and, where one exists, against an independent
// formulation (exact products in double, the e8m0 codec of reference/formats).
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>

#include "attest/reference/formats.hpp"
#include "attest/reference/quantize.hpp"

namespace attest::ref {
namespace {

float from_bits(std::uint32_t u) { return std::bit_cast<float>(u); }
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// ---------------------------------------------------------------------------------------------
// E8M0 scale rules. Notation: amax = 1.m * 2^(e - 127), e = exponent field, m = mantissa field.

TEST(E8M0Rules, Floor) {
  // fp4 (emax 2). amax 5.0 = 1.25 * 2^2: e = 129, m = 0x200000; 129 - 127 - 2 = 0 -> code 127, X = 1.
  EXPECT_EQ(e8m0_scale(5.0f, E8M0Rule::floor, FormatId::fp4_e2m1fn), 127);
  // amax 7.99 = 1.997 * 2^2: floor keeps code 127, so 7.99 saturates to 6 (the OCP clipping).
  EXPECT_EQ(e8m0_scale(7.99f, E8M0Rule::floor, FormatId::fp4_e2m1fn), 127);
  // e4m3 (emax 8): 448 = 1.75 * 2^8: e = 135 -> 135 - 127 - 8 = 0 -> 127.
  EXPECT_EQ(e8m0_scale(448.0f, E8M0Rule::floor, FormatId::fp8_e4m3fn), 127);
  // e5m2 (emax 15): 1.0 -> 0 - 15 = -15 -> 112.
  EXPECT_EQ(e8m0_scale(1.0f, E8M0Rule::floor, FormatId::fp8_e5m2), 112);
  // 2^-120 with emax 8: -128 clamps to -127 -> code 0. Subnormal amax (e = 0) and 0 -> 0.
  EXPECT_EQ(e8m0_scale(0x1p-120f, E8M0Rule::floor, FormatId::fp8_e4m3fn), 0);
  EXPECT_EQ(e8m0_scale(1e-40f, E8M0Rule::floor, FormatId::fp4_e2m1fn), 0);
  EXPECT_EQ(e8m0_scale(0.0f, E8M0Rule::floor, FormatId::fp4_e2m1fn), 0);
  // 1.5 * 2^127 (e = 254) with emax 2: 127 - 2 = 125 -> 252.
  EXPECT_EQ(e8m0_scale(0x1.8p127f, E8M0Rule::floor, FormatId::fp4_e2m1fn), 252);
  // MXINT8 (emax 0): 1.5 -> 0 -> 127.
  EXPECT_EQ(e8m0_scale(1.5f, E8M0Rule::floor, FormatId::int8), 127);
  // Non-finite amax -> NaN scale 0xFF (our convention for every rule).
  EXPECT_EQ(e8m0_scale(kNaN, E8M0Rule::floor, FormatId::fp4_e2m1fn), 0xFF);
  EXPECT_EQ(e8m0_scale(INFINITY, E8M0Rule::floor, FormatId::fp4_e2m1fn), 0xFF);
}

TEST(E8M0Rules, Ceil) {
  // fp4: 5.0 has m != 0 -> 2 + 1 - 2 = 1 -> code 128 (X = 2); 4.0 has m = 0 -> code 127.
  EXPECT_EQ(e8m0_scale(5.0f, E8M0Rule::ceil, FormatId::fp4_e2m1fn), 128);
  EXPECT_EQ(e8m0_scale(4.0f, E8M0Rule::ceil, FormatId::fp4_e2m1fn), 127);
  // e4m3: 449 = 1.75390625 * 2^8 -> 8 + 1 - 8 = 1 -> 128.
  EXPECT_EQ(e8m0_scale(449.0f, E8M0Rule::ceil, FormatId::fp8_e4m3fn), 128);
  EXPECT_EQ(e8m0_scale(0.0f, E8M0Rule::ceil, FormatId::fp4_e2m1fn), 0);
}

TEST(E8M0Rules, Rceil) {
  // fp4: fl(1/6) = 0x3E2AAAAB = 11184811 * 2^-26. 6 * that = 67108866 * 2^-26 = 1 + 2^-25, which
  // rounds to 1.0 (a quarter ulp above 1): d = 1.0, e = 127, m = 0 -> code 127.
  EXPECT_EQ(from_bits(0x3E2AAAABu), 1.0f / 6.0f);
  EXPECT_EQ(e8m0_scale(6.0f, E8M0Rule::rceil, FormatId::fp4_e2m1fn), 127);
  // Next float above 6 (6 + 2^-21): d = (6 + 2^-21) * 11184811 * 2^-26 = 1 + 2^-25 + 11184811 * 2^-47
  // ~ 1 + 1.09e-7, above the half ulp 5.96e-8 -> d = 1 + 2^-23, m = 1 -> code 128.
  EXPECT_EQ(e8m0_scale(std::nextafter(6.0f, 7.0f), E8M0Rule::rceil, FormatId::fp4_e2m1fn), 128);
  // 3.0: d = 3 * 11184811 * 2^-26 = 0.5 + 2^-26 -> rounds to 0.5 (e = 126, m = 0) -> 126.
  EXPECT_EQ(e8m0_scale(3.0f, E8M0Rule::rceil, FormatId::fp4_e2m1fn), 126);
  // Subnormal d, e4m3: fl(1/448) = 9586981 * 2^-32 (8/7 * 2^23 = 9586980.57 rounds up).
  // amax 2^-118: d = 2^-118 * 9586981 * 2^-32 = 9586981 * 2^-150 -> mantissa field
  // 9586981 / 2 = 4793490.5 -> RNE 4793490 > 0x400000 = 4194304 -> code 1.
  // amax 2^-119: field 2396745.25 -> 2396745 <= 0x400000 -> code 0.
  EXPECT_EQ(e8m0_scale(0x1p-118f, E8M0Rule::rceil, FormatId::fp8_e4m3fn), 1);
  EXPECT_EQ(e8m0_scale(0x1p-119f, E8M0Rule::rceil, FormatId::fp8_e4m3fn), 0);
  EXPECT_EQ(e8m0_scale(0.0f, E8M0Rule::rceil, FormatId::fp8_e4m3fn), 0);
  // MXINT8 maximum 127/64: 1.984375 * fl(64/127) rounds to 1.0 -> code 127.
  EXPECT_EQ(e8m0_scale(127.0f / 64.0f, E8M0Rule::rceil, FormatId::int8), 127);
  EXPECT_EQ(e8m0_scale(INFINITY, E8M0Rule::rceil, FormatId::fp8_e4m3fn), 0xFF);
}

TEST(E8M0Rules, AiterHipFp4) {
  // 6/6 = 1.0 = 0x3F800000; + 0x7FFFFF = 0x3FFFFFFF; & 0x7F800000 = 0x3F800000 -> 127.
  EXPECT_EQ(e8m0_scale(6.0f, E8M0Rule::aiter_hip_fp4, FormatId::fp4_e2m1fn), 127);
  // 7/6 = 1.1666666 = 0x3F955555 -> 0x40155554 & mask = 0x40000000 -> 128 (ceil to 2).
  EXPECT_EQ(e8m0_scale(7.0f, E8M0Rule::aiter_hip_fp4, FormatId::fp4_e2m1fn), 128);
  // 3/6 = 0.5 -> 126; 0 -> 0; a subnormal quotient (1e-40 / 6) has e = 0, m != 0 -> 1.
  EXPECT_EQ(e8m0_scale(3.0f, E8M0Rule::aiter_hip_fp4, FormatId::fp4_e2m1fn), 126);
  EXPECT_EQ(e8m0_scale(0.0f, E8M0Rule::aiter_hip_fp4, FormatId::fp4_e2m1fn), 0);
  EXPECT_EQ(e8m0_scale(1e-40f, E8M0Rule::aiter_hip_fp4, FormatId::fp4_e2m1fn), 1);
}

TEST(E8M0Rules, AiterTritonVFp4) {
  // 6.0 = 1.5 * 2^2: e = 129, m = 0x400000 (not > 0x400000) -> 129 - 2 = 127.
  EXPECT_EQ(e8m0_scale(6.0f, E8M0Rule::aiter_triton_v_fp4, FormatId::fp4_e2m1fn), 127);
  // 6.5 = 1.625 * 2^2: m = 0x500000 > 0x400000 -> 128. 5.0: m = 0x200000 -> 127.
  EXPECT_EQ(e8m0_scale(6.5f, E8M0Rule::aiter_triton_v_fp4, FormatId::fp4_e2m1fn), 128);
  EXPECT_EQ(e8m0_scale(5.0f, E8M0Rule::aiter_triton_v_fp4, FormatId::fp4_e2m1fn), 127);
  // 0 -> 1e-12f = 1.0995 * 2^-40: e = 87, m = 0x0CBCCC < 0x400000 -> 85.
  EXPECT_EQ(e8m0_scale(0.0f, E8M0Rule::aiter_triton_v_fp4, FormatId::fp4_e2m1fn), 85);
}

TEST(E8M0Rules, AiterTritonRne) {
  // 6.0 = 1.5 * 2^2 is a tie between 2^2 (code 129, odd) and 2^3 (code 130, even) -> 130;
  // minus 2 -> 128.
  EXPECT_EQ(e8m0_scale(6.0f, E8M0Rule::aiter_triton_rne, FormatId::fp4_e2m1fn), 128);
  // 12.0 = 1.5 * 2^3: tie between codes 130 (even) and 131 -> 130 -> 128.
  EXPECT_EQ(e8m0_scale(12.0f, E8M0Rule::aiter_triton_rne, FormatId::fp4_e2m1fn), 128);
  // 3.0 = 1.5 * 2^1: codes 128 (even) / 129 -> 128 -> 126.
  EXPECT_EQ(e8m0_scale(3.0f, E8M0Rule::aiter_triton_rne, FormatId::fp4_e2m1fn), 126);
  // 5.0 (1.25 * 4) rounds down -> 129 -> 127; 7.0 (1.75 * 4) rounds up -> 130 -> 128.
  EXPECT_EQ(e8m0_scale(5.0f, E8M0Rule::aiter_triton_rne, FormatId::fp4_e2m1fn), 127);
  EXPECT_EQ(e8m0_scale(7.0f, E8M0Rule::aiter_triton_rne, FormatId::fp4_e2m1fn), 128);
  EXPECT_EQ(e8m0_scale(0.0f, E8M0Rule::aiter_triton_rne, FormatId::fp4_e2m1fn), 0);
}

TEST(E8M0Rules, AiterTritonRneAgreesWithTiesToEvenExponent) {
  // Independent formulation: a normal float 2^e * 1.m lies between the powers 2^e and 2^(e+1);
  // the nearer one in linear distance wins, a tie (1.m = 1.5) goes to the even biased code; the
  // rule is that code minus 2, clamped to [0, 254]. (The e8m0fnu codec's default rne now rounds
  // ties up as ml_dtypes does, so it is no longer this oracle.)
  std::mt19937 rng(7);
  std::uniform_int_distribution<std::uint32_t> exp(2, 253), man(0, 0x7FFFFF), pick(0, 3);
  for (int i = 0; i < 200000; ++i) {
    std::uint32_t m = man(rng);
    if (pick(rng) == 0) m = 0x400000;  // force ties often
    const std::uint32_t e = exp(rng);
    const float a = from_bits(e << 23 | m);
    const double lo = std::ldexp(1.0, static_cast<int>(e) - 127), hi = 2 * lo;
    const double d_lo = static_cast<double>(a) - lo, d_hi = hi - static_cast<double>(a);
    const int code = d_lo < d_hi ? static_cast<int>(e) : d_hi < d_lo ? static_cast<int>(e) + 1
                                                                       : static_cast<int>(e % 2 == 0 ? e : e + 1);
    ASSERT_EQ(e8m0_scale(a, E8M0Rule::aiter_triton_rne, FormatId::fp4_e2m1fn), std::clamp(code - 2, 0, 254)) << a;
  }
}

TEST(E8M0Rules, AiterHipFp8) {
  // 448 = 0x43E00000 (e = 135, m = 0x600000); + 0x200000 = 0x44000000 -> 136 - 8 = 128.
  // Inverse scale bits (254 - 128) << 23 = 0x3F000000 = 0.5.
  EXPECT_EQ(e8m0_scale(448.0f, E8M0Rule::aiter_hip_fp8, FormatId::fp8_e4m3fn), 128);
  EXPECT_EQ(e8m0_element_multiplier(128, E8M0Rule::aiter_hip_fp8), 0.5f);
  // 400 = 1.5625 * 2^8: m = 0x480000, + 0x200000 = 0x680000 stays below the carry -> 127, x1.
  EXPECT_EQ(e8m0_scale(400.0f, E8M0Rule::aiter_hip_fp8, FormatId::fp8_e4m3fn), 127);
  EXPECT_EQ(e8m0_element_multiplier(127, E8M0Rule::aiter_hip_fp8), 1.0f);
  // 2^-126 (e = 1): 1 - 8 < 0 -> 0; multiplier bits 254 << 23 = 2^127.
  EXPECT_EQ(e8m0_scale(0x1p-126f, E8M0Rule::aiter_hip_fp8, FormatId::fp8_e4m3fn), 0);
  EXPECT_EQ(e8m0_element_multiplier(0, E8M0Rule::aiter_hip_fp8), 0x1p127f);
  // Code 254: bits 0 -> multiplier 0 (not 2^-127 as for the other rules).
  EXPECT_EQ(e8m0_element_multiplier(254, E8M0Rule::aiter_hip_fp8), 0.0f);
  EXPECT_EQ(e8m0_element_multiplier(254, E8M0Rule::floor), 0x1p-127f);
}

TEST(E8M0Rules, AiterHipFp6) {
  EXPECT_EQ(e8m0_scale(0.0f, E8M0Rule::aiter_hip_fp6, FormatId::fp6_e2m3fn), 127);
  // 7.5 = 1.875 * 2^2: e = 129 -> 127, X = 1.
  EXPECT_EQ(e8m0_scale(7.5f, E8M0Rule::aiter_hip_fp6, FormatId::fp6_e2m3fn), 127);
  // No clamp: a subnormal amax (e = 0) gives -2 -> 254; e = 1 gives -1 -> 255 (NaN scale).
  EXPECT_EQ(e8m0_scale(1e-40f, E8M0Rule::aiter_hip_fp6, FormatId::fp6_e2m3fn), 254);
  EXPECT_EQ(e8m0_scale(0x1p-126f, E8M0Rule::aiter_hip_fp6, FormatId::fp6_e2m3fn), 255);
}

TEST(MxElements, Fp4TiesPerRoundingMode) {
  // With X = 1: 5 lies between 4 (code 6) and 6 (code 7); 2.5 between 2 (4) and 3 (5);
  // 1.75 between 1.5 (3) and 2 (4); -0.3 rounds to -0.5 (0x9).
  EXPECT_EQ(mx_element_code(5.0f, FormatId::fp4_e2m1fn, Rounding::rne, Overflow::sat_cuda), 0x6);
  EXPECT_EQ(mx_element_code(5.0f, FormatId::fp4_e2m1fn, Rounding::away, Overflow::sat_cuda), 0x7);
  EXPECT_EQ(mx_element_code(5.0f, FormatId::fp4_e2m1fn, Rounding::smaller, Overflow::sat_cuda), 0x6);
  EXPECT_EQ(mx_element_code(2.5f, FormatId::fp4_e2m1fn, Rounding::rne, Overflow::sat_cuda), 0x4);
  EXPECT_EQ(mx_element_code(2.5f, FormatId::fp4_e2m1fn, Rounding::away, Overflow::sat_cuda), 0x5);
  EXPECT_EQ(mx_element_code(1.75f, FormatId::fp4_e2m1fn, Rounding::rne, Overflow::sat_cuda), 0x4);
  EXPECT_EQ(mx_element_code(1.75f, FormatId::fp4_e2m1fn, Rounding::smaller, Overflow::sat_cuda), 0x3);
  EXPECT_EQ(mx_element_code(-0.3f, FormatId::fp4_e2m1fn, Rounding::rne, Overflow::sat_cuda), 0x9);
  // Saturation: 7.99 -> 6 (0x7); -100 -> -6 (0xF).
  EXPECT_EQ(mx_element_code(7.99f, FormatId::fp4_e2m1fn, Rounding::rne, Overflow::sat_cuda), 0x7);
  EXPECT_EQ(mx_element_code(-100.0f, FormatId::fp4_e2m1fn, Rounding::rne, Overflow::sat_cuda), 0xF);
  // e2m3: 7.5 = 1.875 * 2^2 -> exponent field 3, mantissa 7 -> 0x1F.
  EXPECT_EQ(mx_element_code(7.5f, FormatId::fp6_e2m3fn, Rounding::rne, Overflow::sat_cuda), 0x1F);
  // e4m3: 224 = 1.75 * 2^7 -> 0 1110 110 = 0x76; 400 = 1.5625 * 2^8 ties to 1.5 -> 0 1111 100 = 0x7C.
  EXPECT_EQ(mx_element_code(224.0f, FormatId::fp8_e4m3fn, Rounding::rne, Overflow::sat_cuda), 0x76);
  EXPECT_EQ(mx_element_code(400.0f, FormatId::fp8_e4m3fn, Rounding::rne, Overflow::sat_cuda), 0x7C);
}

TEST(MxElements, Int8) {
  // MXINT8 element k means k / 64. 1.5 -> 96; -0.7 -> -44.8 -> -45 = 0xD3; 1.99 -> 127.36 -> 127;
  // -1.995 -> -127.68 -> -128 -> clamped to -127 = 0x81.
  EXPECT_EQ(mx_element_code(1.5f, FormatId::int8, Rounding::rne, Overflow::sat_cuda), 96);
  EXPECT_EQ(mx_element_code(-0.7f, FormatId::int8, Rounding::rne, Overflow::sat_cuda), 0xD3);
  EXPECT_EQ(mx_element_code(1.99f, FormatId::int8, Rounding::rne, Overflow::sat_cuda), 127);
  EXPECT_EQ(mx_element_code(-1.995f, FormatId::int8, Rounding::rne, Overflow::sat_cuda), 0x81);
  EXPECT_EQ(mx_element_value(0x81, FormatId::int8), -127.0f / 64.0f);
  // 2.5 / 64 * 64 = 2.5: rne -> 2, away -> 3.
  EXPECT_EQ(mx_element_code(2.5f / 64.0f, FormatId::int8, Rounding::rne, Overflow::sat_cuda), 2);
  EXPECT_EQ(mx_element_code(2.5f / 64.0f, FormatId::int8, Rounding::away, Overflow::sat_cuda), 3);
}

// ---------------------------------------------------------------------------------------------
// Uniform (FP32) scales and the int8 conversions.

TEST(UniformScale, Rules) {
  // ieee vs rcp, M = 448, amax 3: fl(1/448) = 9586981 * 2^-32. 3/448 = 14380470.857 * 2^-31
  // (in [2^23, 2^24) units of 2^-31) -> 14380471; 3 * fl(1/448) = 14380471.5 * 2^-31, a tie -> even
  // 14380472. So rcp is one ulp above ieee here.
  EXPECT_EQ(uniform_scale(3.0f, ScaleRule::ieee, 448.0f), std::ldexp(14380471.0f, -31));
  EXPECT_EQ(uniform_scale(3.0f, ScaleRule::rcp, 448.0f), std::ldexp(14380472.0f, -31));
  // eps: 127/127 + 1e-7f = 1 + 1.00000001e-7 rounds to 1 + 2^-23 (above half an ulp).
  EXPECT_EQ(uniform_scale(127.0f, ScaleRule::eps, 127.0f), 1.0f + 0x1p-23f);
  // floor: amax 0 -> 1e-7f / 127, never 0.
  EXPECT_EQ(uniform_scale(0.0f, ScaleRule::floor, 127.0f), 1e-7f / 127.0f);
  EXPECT_EQ(uniform_scale(0.0f, ScaleRule::ieee, 127.0f), 0.0f);
  EXPECT_EQ(uniform_scale(0.0f, ScaleRule::ieee_one, 127.0f), 1.0f);
  EXPECT_EQ(uniform_scale(5.0f, ScaleRule::none, 127.0f), 1.0f);
  EXPECT_EQ(uniform_inverse(3.5f, ScaleRule::ieee, 448.0f), 128.0f);
  EXPECT_EQ(uniform_inverse(0.0f, ScaleRule::floor, 127.0f), 127.0f / 1e-7f);
  EXPECT_THROW((void)uniform_inverse(1.0f, ScaleRule::eps, 127.0f), Error);
}

TEST(UniformScale, RcpDiffersFromDivisionInAboutHalfTheCasesFor448) {
  // FORMATS.md: torch's amax * fl(1/448) differs from amax / 448 in ~55% of cases. Each result is
  // checked against its exact definition (double product / quotient of floats, rounded once).
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> u(1.0f, 2.0f);
  const double r448 = static_cast<double>(1.0f / 448.0f);
  int differ = 0;
  const int n = 100000;
  for (int i = 0; i < n; ++i) {
    const float a = u(rng);
    const float ieee = uniform_scale(a, ScaleRule::ieee, 448.0f), rcp = uniform_scale(a, ScaleRule::rcp, 448.0f);
    ASSERT_EQ(ieee, static_cast<float>(static_cast<double>(a) / 448.0));
    ASSERT_EQ(rcp, static_cast<float>(static_cast<double>(a) * r448));
    differ += ieee != rcp;
  }
  EXPECT_GT(differ, n * 45 / 100);
  EXPECT_LT(differ, n * 65 / 100);
}

TEST(Int8Rounding, RneVersusHalf) {
  EXPECT_EQ(to_int8(2.5f, IntRounding::rne), 2);
  EXPECT_EQ(to_int8(2.5f, IntRounding::half), 3);
  EXPECT_EQ(to_int8(-2.5f, IntRounding::rne), -2);
  EXPECT_EQ(to_int8(-2.5f, IntRounding::half), -3);
  EXPECT_EQ(to_int8(3.5f, IntRounding::rne), 4);
  EXPECT_EQ(to_int8(0.5f, IntRounding::rne), 0);
  EXPECT_EQ(to_int8(0.5f, IntRounding::half), 1);
  EXPECT_EQ(to_int8(-0.0f, IntRounding::half), 0);  // -0 >= 0: +0.5, truncates to 0
  // q + 0.5 is an FP32 addition: 0.49999997 + 0.5 = 1 - 2^-25 rounds (tie, to even) to 1.0.
  EXPECT_EQ(to_int8(0.49999997f, IntRounding::half), 1);
  EXPECT_EQ(to_int8(0.49999997f, IntRounding::rne), 0);
}

TEST(Int8Rounding, SaturationVersusWrap) {
  // cvt.rni.sat saturates; Triton's .to(tl.int8) truncates and keeps the low byte:
  // 200.3 + 0.5 = 200.8 -> 200 = 0xC8 -> -56; -300.2 - 0.5 -> -300 = 0x...FED4 -> 0xD4 = -44.
  EXPECT_EQ(to_int8(200.3f, IntRounding::rne), 127);
  EXPECT_EQ(to_int8(200.3f, IntRounding::half), -56);
  EXPECT_EQ(to_int8(-300.2f, IntRounding::rne), -128);
  EXPECT_EQ(to_int8(-300.2f, IntRounding::half), -44);
  EXPECT_EQ(to_int8(127.4f, IntRounding::half), 127);
  EXPECT_EQ(to_int8(127.6f, IntRounding::half), -128);  // 128.1 -> 128 -> 0x80
  // NaN -> 0 in both; huge values saturate in the int32 step first (0x7FFFFFFF -> 0xFF = -1).
  EXPECT_EQ(to_int8(kNaN, IntRounding::rne), 0);
  EXPECT_EQ(to_int8(kNaN, IntRounding::half), 0);
  EXPECT_EQ(to_int8(1e20f, IntRounding::half), -1);
  EXPECT_EQ(to_int8(-1e20f, IntRounding::half), 0);  // 0x80000000 -> low byte 0
}

// ---------------------------------------------------------------------------------------------
// P quantization.

TEST(PQuant, OffsetsAndCodes) {
  EXPECT_EQ(p_offset(PScale::unit), 0.0f);
  EXPECT_EQ(p_offset(PScale::pow2_8), 8.0f);
  EXPECT_EQ(p_offset(PScale::offset_8807), 8.807f);
  // 2^8.807 = 447.9 < 448: the row maximum's P fits the e4m3 range without saturation.
  EXPECT_LT(std::exp2(8.807), 448.0);
  // P = 256 (pow2_8 row max) = 2^8 -> exponent field 15, mantissa 0 -> 0x78.
  EXPECT_EQ(quantize_p(256.0f), 0x78);
  // 447.9 rounds to 448 (0x7E); beyond the maximum saturates; NaN -> 0x7F.
  EXPECT_EQ(quantize_p(447.9f), 0x7E);
  EXPECT_EQ(quantize_p(1000.0f), 0x7E);
  EXPECT_EQ(quantize_p(kNaN), 0x7F);
  // P = 1 (unit) = 0x38; P of a probability 2^-10 (unit) is subnormal e4m3: 2^-10 is below
  // half the smallest subnormal 2^-9 -> tie at 2^-10 exactly -> even -> 0.
  EXPECT_EQ(quantize_p(1.0f), 0x38);
  EXPECT_EQ(quantize_p(0x1p-10f), 0x00);
  EXPECT_EQ(quantize_p(0x1.8p-10f), 0x01);
  EXPECT_EQ(dequantize_p(0x78, PScale::pow2_8), 1.0f);
  EXPECT_EQ(dequantize_p(0x38, PScale::unit), 1.0f);
  // The offset is the float 8.807f (8.80700016...), not the decimal 8.807: within half a float ulp.
  EXPECT_NEAR(dequantize_p(0x7E, PScale::offset_8807), 448.0 / std::exp2(static_cast<double>(8.807f)), 0x1p-24);
  // FNUZ P: 240 is the maximum (0x7F).
  EXPECT_EQ(quantize_p(300.0f, FormatId::fp8_e4m3fnuz), 0x7F);
}

}  // namespace
}  // namespace attest::ref
