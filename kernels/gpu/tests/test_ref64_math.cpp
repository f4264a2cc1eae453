// gpu.ref64's exponential (ref64_math.hpp, the device code itself compiled for the host) against
// an independent oracle: Boost.Multiprecision's exp at 50 digits, rounded to double. Error
// bound 3 ulp over x in (-707, 0] (random, near the table's breakpoints and the range ends);
// special values and the flush-to-zero range exactly.
#include <gtest/gtest.h>

#include <boost/multiprecision/cpp_dec_float.hpp>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>

#include "attest/kernels/gpu/ref64_math.hpp"

namespace attest::gpu::ref64 {
namespace {

using Big = boost::multiprecision::cpp_dec_float_50;

double exact_exp(double x) { return static_cast<double>(boost::multiprecision::exp(Big(x))); }

// |a - b| in units of b's last place (b normal and positive).
double ulps(double a, double b) { return std::abs(a - b) / (std::nextafter(b, INFINITY) - b); }

TEST(Ref64Math, TableIsTwoToTheJOver64CorrectlyRounded) {
  for (int j = 0; j < kExpTable; ++j) {
    const double want = static_cast<double>(boost::multiprecision::pow(Big(2), Big(j) / 64));
    EXPECT_EQ(kExpTab[j], want) << "j = " << j;
  }
}

TEST(Ref64Math, ExpWithinThreeUlpOverTheRange) {
  std::mt19937_64 gen(7);
  std::uniform_real_distribution<double> wide(-707.0, 0.0), narrow(-1.0, 0.0);
  double worst = 0;
  auto check = [&](double x) {
    const double got = exp_nonpos(x, kExpTab), want = exact_exp(x);
    const double e = ulps(got, want);
    worst = std::max(worst, e);
    ASSERT_LE(e, 3.0) << "x = " << x << ": " << got << " vs " << want;
  };
  for (int i = 0; i < 20000; ++i) check(wide(gen));
  for (int i = 0; i < 20000; ++i) check(narrow(gen));
  // Near the breakpoints of the reduction (x = k ln2/64 +- ln2/128) and the range's ends.
  const double step = std::log(2.0) / 64;
  for (int k = -64 * 1020; k <= 0; k += 97)
    for (double d : {-0.5, -0.4999999, 0.0, 0.4999999, 0.5}) {
      const double x = (k + d) * step;
      if (x <= 0 && x > -707) check(x);
    }
  for (double x : {-0.0, -1e-300, -4.9e-324, -1e-17, -706.999, -700.0, -1.0, -0.5}) check(x);
  EXPECT_EQ(exp_nonpos(0.0, kExpTab), 1.0);
  EXPECT_EQ(exp_nonpos(-0.0, kExpTab), 1.0);
  std::printf("worst error %.3f ulp\n", worst);
}

TEST(Ref64Math, FlushesBelowMinus707AndKeepsNaN) {
  const double inf = std::numeric_limits<double>::infinity();
  for (double x : {-707.0, -707.5, -745.0, -1000.0, -1e300, -std::numeric_limits<double>::max(), -inf})
    EXPECT_EQ(exp_nonpos(x, kExpTab), 0.0) << "x = " << x;
  // Just above the cut the result is normal and close (e^-707 ~ 9.8e-308 > 2^-1022).
  EXPECT_LE(ulps(exp_nonpos(-706.9999, kExpTab), exact_exp(-706.9999)), 3.0);
  const double qnan = std::numeric_limits<double>::quiet_NaN();
  EXPECT_TRUE(std::isnan(exp_nonpos(qnan, kExpTab)));
  EXPECT_TRUE(std::isnan(exp_nonpos(-qnan, kExpTab)));
}

}  // namespace
}  // namespace attest::gpu::ref64
