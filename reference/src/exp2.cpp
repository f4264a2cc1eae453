// exp2 policies of the recipe emulator and the portable log2 of its LSE.
//
// No libm transcendental is used anywhere here (DESIGN.md: libm's last bit differs between
// platforms). Only IEEE operations (add, mul, div, fma, conversions), frexp/ldexp/floor (exact)
// and, for the rare inputs where a double evaluation cannot decide the float rounding,
// Boost.Multiprecision (portable software arithmetic).
#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

#include <boost/math/constants/constants.hpp>
#include <boost/multiprecision/cpp_bin_float.hpp>

#include "attest/reference/emulate.hpp"

namespace attest::ref {
namespace {

using Mp = boost::multiprecision::cpp_bin_float_50;

// 2^f = exp(f ln2) = sum_k (ln2)^k / k! f^k on |f| <= 1/2. Terms beyond degree 15 are below
// 0.347^16/16! < 2^-66 relative, so truncation is negligible against the Horner rounding
// (about 2^-52). The coefficients are ln2^k/k! rounded once to double, computed in 166-bit
// arithmetic at first use (no hand-copied constants).
constexpr int kDegree = 15;
const std::array<double, kDegree + 1>& exp2_coefficients() {
  static const std::array<double, kDegree + 1> c = [] {
    std::array<double, kDegree + 1> r{};
    const Mp ln2 = boost::math::constants::ln_two<Mp>();
    Mp term = 1;
    for (int k = 0; k <= kDegree; ++k) {
      r[static_cast<std::size_t>(k)] = static_cast<double>(term);
      term = term * ln2 / (k + 1);
    }
    return r;
  }();
  return c;
}

// Relative half-width of the interval the double evaluation is trusted to lie in. The Horner
// evaluation's error is measured below 2^-51 (test_emulate_math.cpp prints the measured bound);
// 2^-46 leaves a factor 32 of margin. Inputs whose interval straddles a float rounding boundary
// (about one in 2^21 uniformly drawn inputs) are decided in 166-bit arithmetic.
constexpr double kTrust = 0x1p-46;

double exp2_double(double x, double& n) {
  n = std::floor(x + 0.5);  // x has at most 24 significant bits: x + 0.5 and floor are exact
  const double f = x - n;   // exact, |f| <= 1/2
  const auto& c = exp2_coefficients();
  double y = c[kDegree];
  for (int k = kDegree - 1; k >= 0; --k) y = std::fma(y, f, c[static_cast<std::size_t>(k)]);
  return y;
}

float round_to_float(const Mp& v) {
  // Start from a nearby float and step to the correctly rounded neighbour by comparing with the
  // exact midpoints (representable in Mp). Exact ties cannot occur for exp2 of a non-integer
  // float (the value is transcendental); for ties the even code is chosen.
  float a = static_cast<float>(static_cast<double>(v));
  for (int it = 0; it < 4; ++it) {
    const float up = std::nextafter(a, std::numeric_limits<float>::infinity());
    const float dn = std::nextafter(a, -std::numeric_limits<float>::infinity());
    const Mp mid_up = (Mp(a) + Mp(up)) / 2, mid_dn = (Mp(a) + Mp(dn)) / 2;
    const bool odd = (std::bit_cast<std::uint32_t>(a) & 1u) != 0;
    if (v > mid_up || (v == mid_up && odd)) a = up;
    else if (v < mid_dn || (v == mid_dn && odd)) a = dn;
    else return a;
  }
  return a;
}

}  // namespace

bool exp2_cr_fast_path_decides(float x) {
  if (!(x > -150.0f && x < 128.0f)) return true;
  double n = 0;
  const double y = exp2_double(x, n);  // sets n: sequenced before the ldexp below
  const double r = std::ldexp(y, static_cast<int>(n));
  return static_cast<float>(r * (1 - kTrust)) == static_cast<float>(r * (1 + kTrust));
}

float exp2_cr(float x) {
  if (std::isnan(x)) return x;
  if (x >= 128.0f) return std::numeric_limits<float>::infinity();
  // 2^-150 is the midpoint between 0 and the least subnormal 2^-149; the tie goes to even (0).
  if (x <= -150.0f) return 0.0f;
  double n = 0;
  const double y = exp2_double(x, n);  // sets n: sequenced before the ldexp below
  // ldexp by an integer in [-150, 128] is exact in double (2^-150 * [0.7, 1.5] is normal).
  const double r = std::ldexp(y, static_cast<int>(n));
  // The true value lies in [r(1-kTrust), r(1+kTrust)] (the two products round by < 2^-53
  // relative, inside the margin). Conversion to float is monotone, so when both ends round to
  // the same float, so does the true value.
  const float lo = static_cast<float>(r * (1 - kTrust));
  if (lo == static_cast<float>(r * (1 + kTrust))) return lo;
  return round_to_float(boost::multiprecision::exp(Mp(x) * boost::math::constants::ln_two<Mp>()));
}

float exp2_fa4(float x) {
  // FORMATS.md "FA4 exp2 emulation", step by step. fmaxf semantics: a NaN input yields -127.
  if (!(x >= -127.0f)) x = -127.0f;
  // xr = x + 1.5 * 2^23 rounded toward -inf. In [2^23, 2^24) floats are the integers, so the
  // directed rounding is 1.5 * 2^23 + floor(x). floor(x) is taken first: forming the sum in
  // double would round a tiny negative x (|x| < 2^-29) up to 1.5 * 2^23 before the floor.
  const float xr = 12582912.0f + std::floor(x);  // exact: an integer in [2^23, 2^24)
  const float n = xr - 12582912.0f;  // exact (Sterbenz)
  const float f = x - n;  // the kernel's float subtract: exact except tiny negative x (f rounds to 1)
  constexpr float c1 = std::bit_cast<float>(0x3F31F519u);
  constexpr float c2 = std::bit_cast<float>(0x3E6906A4u);
  constexpr float c3 = std::bit_cast<float>(0x3D9DF09Du);
  const float p = std::fma(std::fma(std::fma(c3, f, c2), f, c1), f, 1.0f);
  // Unsigned arithmetic wraps exactly as the kernel's 32-bit integer shift and add.
  const std::uint32_t bits = (std::bit_cast<std::uint32_t>(xr) << 23) + std::bit_cast<std::uint32_t>(p);
  return std::bit_cast<float>(bits);
}

double log2_portable(double x) {
  if (std::isnan(x) || x < 0) return std::numeric_limits<double>::quiet_NaN();
  if (x == 0) return -std::numeric_limits<double>::infinity();
  if (std::isinf(x)) return x;
  int e = 0;
  double m = std::frexp(x, &e);  // exact: x = m 2^e, m in [1/2, 1)
  if (m < 0.70710678118654752) {
    m *= 2;  // exact
    --e;
  }
  // m in [sqrt(1/2), sqrt(2)): ln m = 2 atanh(s) = 2 (s + s^3/3 + s^5/5 + ...), s = (m-1)/(m+1),
  // |s| <= 0.1716, s^2 <= 0.0295: 14 odd terms leave < 0.0295^14 / 29 < 2^-75 relative.
  const double s = (m - 1) / (m + 1);  // m - 1 exact (Sterbenz)
  const double z = s * s;
  double t = 1.0 / 29;
  for (int k = 13; k >= 0; --k) t = std::fma(t, z, 1.0 / (2 * k + 1));
  // log2 e rounded to double (0x1.71547652b82fep0), written in hex so no decimal parse rounds.
  constexpr double kLog2e = 0x1.71547652b82fep0;
  const double ln_m = 2 * s * t;
  return static_cast<double>(e) + ln_m * kLog2e;
}

}  // namespace attest::ref
