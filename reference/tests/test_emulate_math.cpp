// The emulator's scalar building blocks against independent truths: Boost.Multiprecision for the
// correctly rounded exp2 and the portable log2, step-by-step exact arithmetic for the FA4
// polynomial, the measured table's own invariants (FORMATS.md) for rcp_sm90.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <random>
#include <vector>

#include <boost/math/constants/constants.hpp>
#include <boost/multiprecision/cpp_bin_float.hpp>

#include "attest/reference/emulate.hpp"
#include "emulate_test_oracle.hpp"

namespace attest::ref {
namespace {

using test::exp2_oracle;
using test::sample_exp2_inputs;

std::uint32_t bits(float x) { return std::bit_cast<std::uint32_t>(x); }

TEST(Exp2Cr, MatchesMultiprecisionOnAMillionInputs) {
  const std::vector<float> xs = sample_exp2_inputs(1u << 20, 1234);
  std::int64_t mismatches = 0, undecided = 0;
#pragma omp parallel for reduction(+ : mismatches, undecided) schedule(static)
  for (std::size_t i = 0; i < xs.size(); ++i) {
    const float x = xs[i];
    if (bits(exp2_cr(x)) != bits(exp2_oracle(x))) ++mismatches;
    if (!exp2_cr_fast_path_decides(x)) ++undecided;
  }
  std::printf("exp2_cr: %zu inputs in [-150, 0], %lld mismatches, %lld decided in 166-bit arithmetic\n", xs.size(),
              static_cast<long long>(mismatches), static_cast<long long>(undecided));
  EXPECT_EQ(mismatches, 0);
  // The double evaluation is trusted to 2^-46 relative; a result lands that close to a float
  // rounding boundary for about 2 * 2^-46 / 2^-24 = 2^-21 of the inputs.
  EXPECT_LT(undecided, 20);
}

TEST(Exp2Cr, SpecialValuesAndExactPowers) {
  for (int n = -149; n <= 127; ++n) EXPECT_EQ(exp2_cr(static_cast<float>(n)), std::ldexp(1.0f, n)) << n;
  EXPECT_EQ(bits(exp2_cr(-150.0f)), 0u);  // 2^-150: the tie between 0 and 2^-149 goes to even
  EXPECT_EQ(exp2_cr(-149.5f), std::ldexp(1.0f, -149));  // 2^-149.5 > 2^-150: rounds up
  EXPECT_EQ(bits(exp2_cr(-1000.0f)), 0u);
  EXPECT_EQ(exp2_cr(-std::numeric_limits<float>::infinity()), 0.0f);
  EXPECT_EQ(exp2_cr(128.0f), std::numeric_limits<float>::infinity());
  EXPECT_EQ(exp2_cr(0.0f), 1.0f);
  EXPECT_EQ(exp2_cr(-0.0f), 1.0f);
  EXPECT_TRUE(std::isnan(exp2_cr(std::numeric_limits<float>::quiet_NaN())));
  // Just below 0 the result is the float below 1 or 1 itself: 2^-2^-26 = 1 - 1.03e-8 rounds to 1.
  EXPECT_EQ(exp2_cr(-0x1p-26f), 1.0f);
  // 2^-2^-23 = 1 - 8.3e-8 lies between the midpoint 1 - 2^-25 and 1 - 2^-24: rounds to 1 - 2^-24.
  EXPECT_EQ(exp2_cr(-0x1p-23f), 1.0f - 0x1p-24f);
}

TEST(Exp2Cr, PositiveArgumentsUpToTheConditionalRescaleRange) {
  // With an offset and conditional rescale the argument reaches 8.807 + threshold.
  std::mt19937_64 rng(99);
  std::uniform_real_distribution<float> u(0.0f, 24.0f);
  for (int i = 0; i < 20000; ++i) {
    const float x = u(rng);
    ASSERT_EQ(bits(exp2_cr(x)), bits(exp2_oracle(x))) << x;
  }
}

// Each fma step of the FA4 polynomial by hand: with f a power of two every product is exact, so
// RN(a * f + b) is the double sum (exact: operands within 2^29 of each other) rounded to float.
float fa4_by_hand(float f) {
  const float c1 = std::bit_cast<float>(0x3F31F519u), c2 = std::bit_cast<float>(0x3E6906A4u),
              c3 = std::bit_cast<float>(0x3D9DF09Du);
  const float t1 = static_cast<float>(static_cast<double>(c3) * f + c2);
  const float t2 = static_cast<float>(static_cast<double>(t1) * f + c1);
  return static_cast<float>(static_cast<double>(t2) * f + 1.0);
}

TEST(Exp2Fa4, EqualsTheFormulaOnHandPickedValues) {
  EXPECT_EQ(exp2_fa4(0.0f), 1.0f);      // n = 0, f = 0: p = 1
  EXPECT_EQ(exp2_fa4(-1.0f), 0.5f);     // n = -1, f = 0
  EXPECT_EQ(exp2_fa4(-17.0f), 0x1p-17f);
  EXPECT_EQ(exp2_fa4(3.0f), 8.0f);
  EXPECT_EQ(exp2_fa4(-0.5f), fa4_by_hand(0.5f) * 0.5f);     // n = -1, f = 1/2
  EXPECT_EQ(exp2_fa4(-0.75f), fa4_by_hand(0.25f) * 0.5f);   // n = -1, f = 1/4
  EXPECT_EQ(exp2_fa4(-2.25f), fa4_by_hand(0.75f) * 0.125f); // n = -3, f = 3/4 (0.75 = 2^-1 + 2^-2: products
                                                            // of the float steps by 0.75 are exact too)
  EXPECT_EQ(exp2_fa4(5.5f), fa4_by_hand(0.5f) * 32.0f);
  // n = -127 wraps the exponent: bits(p) + (-127 << 23) leaves p's mantissa field alone.
  EXPECT_EQ(bits(exp2_fa4(-126.5f)), bits(fa4_by_hand(0.5f)) & 0x7FFFFFu);
  // Inputs below -127 clamp to -127: p = 1, bits 0x3F800000 - (127 << 23) = 0.
  EXPECT_EQ(bits(exp2_fa4(-200.0f)), 0u);
  EXPECT_EQ(bits(exp2_fa4(-std::numeric_limits<float>::infinity())), 0u);
  EXPECT_EQ(bits(exp2_fa4(std::numeric_limits<float>::quiet_NaN())), 0u);  // fmaxf drops the NaN
  // Tiny negative x: x + 1.5 * 2^23 rounded toward -inf is 1.5 * 2^23 - 1, so n = -1 and
  // f = RN(x + 1) = 1 (regression: an earlier version rounded the sum to nearest first, giving 1.0).
  for (float x : {-0x1p-40f, -0x1.ffff42p-31f, -0x1p-30f, -std::numeric_limits<float>::denorm_min()})
    EXPECT_EQ(exp2_fa4(x), fa4_by_hand(1.0f) * 0.5f) << x;
  EXPECT_EQ(exp2_fa4(-0.0f), 1.0f);  // floor(-0) = -0: n = 0
}

TEST(Exp2Fa4, RelativeErrorWithinTheDocumentedBound) {
  // FORMATS.md: max relative error 8.8e-5 (its reduced argument f in [0, 1) is all that matters,
  // so a dense sweep of [-20, 0) covers every f many times).
  double worst = 0;
  for (std::uint32_t k = 0; k < (1u << 22); ++k) {
    const float x = -20.0f + static_cast<float>(k) * (20.0f / static_cast<float>(1u << 22));
    const double exact = std::exp2(static_cast<double>(x));
    worst = std::max(worst, std::fabs(static_cast<double>(exp2_fa4(x)) - exact) / exact);
  }
  std::printf("exp2_fa4: max relative error %.3e on [-20, 0)\n", worst);
  EXPECT_LE(worst, 8.8e-5);
  EXPECT_GT(worst, 1e-5);  // a cubic cannot do much better: the sweep did reach the polynomial's error
}

TEST(RcpSm90, TableInvariants) {
  const auto t = rcp_sm90_table();
  ASSERT_EQ(t.size(), std::size_t{1} << 23);
  std::int64_t counts[3] = {0, 0, 0};
  for (const std::int8_t e : t) {
    ASSERT_GE(e, -1);  // FORMATS.md: within +-1 ulp of RN(1/x)
    ASSERT_LE(e, 1);
    ++counts[e + 1];
  }
  std::printf("rcp_sm90 table: %lld entries -1, %lld exact, %lld +1; gz %zu bytes\n",
              static_cast<long long>(counts[0]), static_cast<long long>(counts[1]), static_cast<long long>(counts[2]),
              rcp_sm90_table_gz_size());
  EXPECT_EQ(rcp_sm90_table_gz_size(), 136842u);  // the size of shared/data/hw/rcp_sm90_ulpdiff.i8.gz
  EXPECT_GT(counts[1], counts[0] + counts[2]);    // an approximation that is mostly right
}

TEST(RcpSm90, EveryMantissaWithinOneUlpOfTheCorrectlyRoundedReciprocal) {
  std::int64_t worst = 0;
  for (std::uint32_t m = 0; m < (1u << 23); ++m) {
    const float x = std::bit_cast<float>(0x3F800000u | m);
    const double exact = 1.0 / static_cast<double>(x);  // exact to 2^-53: decides RN(1/x) here
    const float rn = static_cast<float>(exact);
    const auto d = static_cast<std::int64_t>(bits(rcp_sm90(x))) - static_cast<std::int64_t>(bits(rn));
    worst = std::max(worst, d < 0 ? -d : d);
  }
  EXPECT_LE(worst, 1);
}

TEST(RcpSm90, SignExponentAndSpecialValues) {
  EXPECT_EQ(rcp_sm90(1.0f), 1.0f);
  EXPECT_EQ(rcp_sm90(-1.0f), -1.0f);
  EXPECT_EQ(rcp_sm90(2.0f), 0.5f);
  EXPECT_EQ(rcp_sm90(0x1p-126f), 0x1p126f);
  EXPECT_EQ(rcp_sm90(0x1p126f), 0x1p-126f);
  EXPECT_EQ(bits(rcp_sm90(0x1.8p126f)), 0u);           // 1/x is subnormal: flushed
  EXPECT_EQ(bits(rcp_sm90(-0x1.8p127f)), 0x80000000u);  // sign kept
  EXPECT_EQ(rcp_sm90(0.0f), std::numeric_limits<float>::infinity());
  EXPECT_EQ(rcp_sm90(-0.0f), -std::numeric_limits<float>::infinity());
  EXPECT_EQ(rcp_sm90(0x1p-140f), std::numeric_limits<float>::infinity());  // subnormal input acts as 0
  EXPECT_EQ(bits(rcp_sm90(std::numeric_limits<float>::infinity())), 0u);
  EXPECT_EQ(bits(rcp_sm90(-std::numeric_limits<float>::infinity())), 0x80000000u);
  EXPECT_TRUE(std::isnan(rcp_sm90(std::numeric_limits<float>::quiet_NaN())));
  // The instruction depends on the mantissa alone: scaling x by 2^k scales the result by 2^-k.
  std::mt19937_64 rng(5);
  for (int i = 0; i < 100000; ++i) {
    const float x = std::bit_cast<float>(0x3F800000u | static_cast<std::uint32_t>(rng() & 0x7FFFFFu));
    const int k = static_cast<int>(rng() % 200) - 100;
    const float s = std::ldexp(x, k) * ((rng() & 1) ? -1.0f : 1.0f);
    ASSERT_EQ(rcp_sm90(s), std::copysign(std::ldexp(rcp_sm90(x), -k), s)) << x << " " << k;
  }
}

TEST(Log2Portable, MatchesQuadPrecision) {
  // Truth: Boost float128 log2 (113-bit significand, error < 1 ulp of quad = 2^-60 ulp of double).
  std::mt19937_64 rng(11);
  double worst_ulps = 0;
  for (int i = 0; i < 1000000; ++i) {
    // Row sums l are floats >= 1 (the row max contributes 2^0 or 2^offset); also cover below 1.
    const float l = std::bit_cast<float>(static_cast<std::uint32_t>(0x30000000u + rng() % 0x1F000000u));
    const double got = log2_portable(static_cast<double>(l));
    const test::Quad exact = boost::multiprecision::log2(test::Quad(l));
    const double ulp = std::ldexp(1.0, std::ilogb(static_cast<double>(exact)) - 52);
    worst_ulps = std::max(worst_ulps, static_cast<double>(boost::multiprecision::abs(test::Quad(got) - exact)) / ulp);
  }
  std::printf("log2_portable: max error %.2f ulp of double\n", worst_ulps);
  EXPECT_LT(worst_ulps, 4.0);
  for (int k = -140; k <= 127; ++k) EXPECT_EQ(log2_portable(std::ldexp(1.0, k)), k);
}

}  // namespace
}  // namespace attest::ref
