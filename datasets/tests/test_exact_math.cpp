// Error of the in-house polynomials (exact_math.hpp) against libm and long double.
// The asserted bound is 4 ulp (double); the measured maxima are printed (RecordProperty and
// stdout) so a regression of the coefficients shows up as a number, not only as a failure.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <random>

#include "attest/datasets/exact_math.hpp"

namespace attest::datasets {
namespace {

// Distance in units in the last place between two finite doubles of any sign.
double ulp_diff(double a, double b) {
  auto key = [](double x) {
    const auto i = std::bit_cast<std::int64_t>(x);
    return i < 0 ? std::numeric_limits<std::int64_t>::min() - i : i;  // monotone in x
  };
  const auto ka = key(a), kb = key(b);
  return ka > kb ? static_cast<double>(ka - kb) : static_cast<double>(kb - ka);
}

// Error of `got` in ulp of the double nearest to the long double reference.
double ulp_vs_long(double got, long double ref) { return ulp_diff(got, static_cast<double>(ref)); }

TEST(ExactMath, LogWithin4UlpOfStdLogAndLongDouble) {
  std::mt19937_64 rng(12345);
  double max_std = 0, max_long = 0, worst_x = 0;
  auto check = [&](double x) {
    const double got = poly_log(x);
    const double e1 = ulp_diff(got, std::log(x));
    const double e2 = ulp_vs_long(got, std::log(static_cast<long double>(x)));
    if (e1 > max_std) max_std = e1, worst_x = x;
    max_long = std::max(max_long, e2);
  };
  // The generator's domain: (m + 1) 2^-53 for 53-bit m, i.e. (0, 1].
  for (int i = 0; i < 400000; ++i) check(static_cast<double>((rng() >> 11) + 1) * 0x1p-53);
  // Log-uniform over the whole positive range, subnormals included.
  std::uniform_real_distribution<double> expo(-1074.0, 1023.0);
  for (int i = 0; i < 200000; ++i) check(std::ldexp(1.0 + std::ldexp(static_cast<double>(rng() >> 12), -52), static_cast<int>(expo(rng))));
  // Next to 1, where log(x) ~ x - 1 and cancellation would show.
  for (int k = 1; k < 20000; ++k) {
    check(1.0 + k * 0x1p-52);
    check(1.0 - k * 0x1p-53);
  }
  for (int e = -1074; e <= 1023; ++e) check(std::ldexp(1.0, e));
  EXPECT_EQ(poly_log(1.0), 0.0);
  std::printf("poly_log: max %.0f ulp vs std::log (at %a), %.0f ulp vs long double logl\n", max_std, worst_x, max_long);
  RecordProperty("log_max_ulp_vs_std", static_cast<int>(max_std));
  EXPECT_LT(max_std, 4.0);
  EXPECT_LT(max_long, 4.0);
}

TEST(ExactMath, SinCosKernelsWithin4UlpOnQuarterPi) {
  std::mt19937_64 rng(6789);
  std::uniform_real_distribution<double> x_of(-M_PI / 4, M_PI / 4);
  double max_sin = 0, max_cos = 0;
  for (int i = 0; i < 400000; ++i) {
    double x = x_of(rng);
    if (i % 4 == 0) x = std::ldexp(x, -static_cast<int>(rng() % 40));  // small arguments too
    max_sin = std::max(max_sin, ulp_diff(kernel_sin(x), std::sin(x)));
    max_cos = std::max(max_cos, ulp_diff(kernel_cos(x), std::cos(x)));
    max_sin = std::max(max_sin, ulp_vs_long(kernel_sin(x), std::sin(static_cast<long double>(x))));
    max_cos = std::max(max_cos, ulp_vs_long(kernel_cos(x), std::cos(static_cast<long double>(x))));
  }
  std::printf("kernel_sin: max %.0f ulp, kernel_cos: max %.0f ulp (vs std:: and long double)\n", max_sin, max_cos);
  EXPECT_LT(max_sin, 4.0);
  EXPECT_LT(max_cos, 4.0);
}

TEST(ExactMath, SinCos2PiWithin4UlpOfLongDouble) {
  // u = k 2^-32 as in the generator. Reference 1: sinl/cosl(2 pi u) in long double, compared
  // where |value| >= 1/16 (there its argument error, < 2^-61 absolute, is < 0.1 ulp of the
  // result); this also checks the quadrant mapping. Reference 2, near the zeros: the reduced
  // argument r = u - n/4 (exact) so the long double reference keeps its relative accuracy.
  constexpr long double k2Pi = 6.283185307179586476925286766559005768L;
  std::mt19937_64 rng(4242);
  double max_err = 0;
  for (int i = 0; i < 400000; ++i) {
    const double u = static_cast<double>(static_cast<std::uint32_t>(rng())) * 0x1p-32;
    const SinCos got = poly_sincos_2pi(u);
    const long double a = k2Pi * static_cast<long double>(u);
    const long double s = std::sin(a), c = std::cos(a);
    if (std::fabs(s) >= 1.0L / 16) max_err = std::max(max_err, ulp_vs_long(got.sin, s));
    if (std::fabs(c) >= 1.0L / 16) max_err = std::max(max_err, ulp_vs_long(got.cos, c));
  }
  for (int n = 0; n < 4; ++n) {  // u = n/4 + r near the zeros of sin and cos
    for (int k = -2000; k <= 2000; ++k) {
      const long double r = static_cast<long double>(k) * 0x1p-32L;
      const double u = static_cast<double>(0.25L * n + r + (n == 0 && k < 0 ? 1.0L : 0.0L));
      const SinCos got = poly_sincos_2pi(u);
      const long double sr = std::sin(k2Pi * r), cr = std::cos(k2Pi * r);
      // sin(n pi/2 + x), cos(n pi/2 + x) by quadrant.
      const long double sin_ref[4] = {sr, cr, -sr, -cr}, cos_ref[4] = {cr, -sr, -cr, sr};
      if (k == 0 && (n == 0 || n == 2)) {
        EXPECT_EQ(got.sin, 0.0);
      } else if (k == 0) {
        EXPECT_EQ(got.cos, 0.0);
      }
      if (k != 0 || n % 2 == 1) max_err = std::max(max_err, ulp_vs_long(got.sin, sin_ref[n]));
      if (k != 0 || n % 2 == 0) max_err = std::max(max_err, ulp_vs_long(got.cos, cos_ref[n]));
    }
  }
  std::printf("poly_sincos_2pi: max %.0f ulp vs long double\n", max_err);
  EXPECT_LT(max_err, 4.0);
}

}  // namespace
}  // namespace attest::datasets
