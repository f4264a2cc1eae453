#pragma once
/// In-house log and sin/cos for the input generators, built only from correctly rounded IEEE
/// double operations (add, sub, mul, div, fma, and exact bit manipulation of the exponent).
///
/// Hand-written rather than std::log / std::cos because libm's last bit differs between glibc
/// versions, other C libraries and device intrinsics, and every generated input must have the
/// same bits on every host and on a device port. With -ffp-contract=off (attest_target_defaults)
/// and explicit std::fma, each function below is a fixed sequence of correctly rounded
/// operations, so its result is bit-identical everywhere.
///
/// The polynomials are the minimax approximations of FDLIBM (Sun Microsystems, 1993: e_log.c,
/// k_sin.c, k_cos.c), whose published error is below 1 ulp; datasets_tests measures the error
/// against std::log / std::sin / std::cos and long double and asserts < 4 ulp.
#include <bit>
#include <cmath>
#include <cstdint>

#include "attest/core/philox.hpp"  // ATTEST_HD

namespace attest::datasets {

/// Natural logarithm of a finite x > 0 (normal or subnormal). Not defined for x <= 0, inf, NaN.
ATTEST_HD inline double poly_log(double x) {
  constexpr double kLn2Hi = 6.93147180369123816490e-01;  // 0x3fe62e42fee00000: 32 bits, k*hi exact
  constexpr double kLn2Lo = 1.90821492927058770002e-10;  // 0x3dea39ef35793c76
  constexpr double kLg1 = 6.666666666666735130e-01, kLg2 = 3.999999999940941908e-01,
                   kLg3 = 2.857142874366239149e-01, kLg4 = 2.222219843214978396e-01,
                   kLg5 = 1.818357216161805012e-01, kLg6 = 1.531383769920937332e-01,
                   kLg7 = 1.479819860511658591e-01;
  std::int64_t k = 0;
  if (x < 0x1p-1022) {  // subnormal: scale into the normal range (exact)
    x *= 0x1p54;
    k -= 54;
  }
  const auto bits = std::bit_cast<std::uint64_t>(x);
  k += static_cast<std::int64_t>(bits >> 52) - 1023;
  // m in [1, 2): exponent field replaced by the bias.
  double m = std::bit_cast<double>((bits & 0x000FFFFFFFFFFFFFull) | 0x3FF0000000000000ull);
  if (m > 1.4142135623730951) {  // move m into [sqrt(2)/2, sqrt(2)] so |f| <= 0.4143
    m *= 0.5;
    ++k;
  }
  const double f = m - 1.0;  // exact (Sterbenz: m in [1/2, 2])
  const double dk = static_cast<double>(k);
  if (f == 0.0) return dk * kLn2Hi + dk * kLn2Lo;
  // log(1+f) = 2 atanh(s) with s = f/(2+f) = f - f^2/2 + s*(f^2/2 + R(s^2)).
  const double s = f / (2.0 + f);
  const double z = s * s;
  double r = kLg7;
  r = std::fma(r, z, kLg6);
  r = std::fma(r, z, kLg5);
  r = std::fma(r, z, kLg4);
  r = std::fma(r, z, kLg3);
  r = std::fma(r, z, kLg2);
  r = std::fma(r, z, kLg1);
  r *= z;
  const double hfsq = 0.5 * f * f;
  return dk * kLn2Hi - ((hfsq - (s * (hfsq + r) + dk * kLn2Lo)) - f);
}

/// sin(x) for |x| <= pi/4.
ATTEST_HD inline double kernel_sin(double x) {
  constexpr double kS1 = -1.66666666666666324348e-01, kS2 = 8.33333333332248946124e-03,
                   kS3 = -1.98412698298579493134e-04, kS4 = 2.75573137070700676789e-06,
                   kS5 = -2.50507602534068634195e-08, kS6 = 1.58969099521155010221e-10;
  const double z = x * x;
  const double v = z * x;
  double r = kS6;
  r = std::fma(r, z, kS5);
  r = std::fma(r, z, kS4);
  r = std::fma(r, z, kS3);
  r = std::fma(r, z, kS2);
  return x + v * std::fma(z, r, kS1);
}

/// cos(x) for |x| <= pi/4.
ATTEST_HD inline double kernel_cos(double x) {
  constexpr double kC1 = 4.16666666666666019037e-02, kC2 = -1.38888888888741095749e-03,
                   kC3 = 2.48015872894767294178e-05, kC4 = -2.75573143513906633035e-07,
                   kC5 = 2.08757232129817482790e-09, kC6 = -1.13596475577881948265e-11;
  const double z = x * x;
  double r = kC6;
  r = std::fma(r, z, kC5);
  r = std::fma(r, z, kC4);
  r = std::fma(r, z, kC3);
  r = std::fma(r, z, kC2);
  r = std::fma(r, z, kC1);
  r *= z;
  // cos = 1 - z/2 + z*r, with the rounding error of w = 1 - z/2 recovered exactly.
  const double hz = 0.5 * z;
  const double w = 1.0 - hz;
  return w + (((1.0 - w) - hz) + z * r);
}

struct SinCos {
  double sin, cos;
};

/// sin(2 pi u) and cos(2 pi u) for finite u with |u| < 2^50 (exact range reduction:
/// u = q/4 + r with integer q and |r| <= 1/8 exactly, then x = 2 pi r in double-double
/// precision, so |x| <= pi/4 carries < 1 ulp of error into the kernels).
ATTEST_HD inline SinCos poly_sincos_2pi(double u) {
  constexpr double k2PiHi = 6.28318530717958623200e+00;  // 0x401921fb54442d18
  constexpr double k2PiLo = 2.44929359829470635445e-16;  // 2 pi - k2PiHi
  // Round to nearest even under the default floating-point environment (never changed here).
  const double q = std::nearbyint(4.0 * u);              // exact: 4u is exact, rounding to integer is exact
  const double r = u - 0.25 * q;                          // exact: |r| <= 1/8 and r is a multiple of ulp(u)/4
  const double x = std::fma(r, k2PiHi, r * k2PiLo);
  const double s = kernel_sin(x), c = kernel_cos(x);
  const double quadrant = q - 4.0 * std::floor(0.25 * q);  // q mod 4, exact
  if (quadrant == 0.0) return {s, c};
  if (quadrant == 1.0) return {c, -s};
  if (quadrant == 2.0) return {-s, -c};
  return {-c, s};
}

}  // namespace attest::datasets
