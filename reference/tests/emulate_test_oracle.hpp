#pragma once
// Independent truth for the exp2 tests, from Boost.Multiprecision: 2^x in quad precision
// (float128, 113-bit significand, libquadmath's exp2q, error below 1 ulp), escalated to 332-bit
// cpp_bin_float_100 whenever the quad value lies within 2^-100 (relative) of a float rounding
// boundary. Rounding to float is an explicit integer-significand rule written here, not the
// library's midpoint walk.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include <boost/math/constants/constants.hpp>
#include <boost/multiprecision/cpp_bin_float.hpp>
#include <boost/multiprecision/float128.hpp>

namespace attest::ref::test {

using Mp100 = boost::multiprecision::cpp_bin_float_100;
using Quad = boost::multiprecision::float128;

/// v > 0 as n * 2^q with q the float quantum of v's binade (2^-149 for subnormals): returns the
/// integer part r of n, the fraction n - r, and q.
template <class T>
void split(const T& v, T& r, T& frac, int& q) {
  using std::floor, std::frexp, std::ldexp;
  using boost::multiprecision::floor, boost::multiprecision::frexp, boost::multiprecision::ldexp;
  int e = 0;
  (void)frexp(v, &e);  // v = f 2^e, f in [1/2, 1)
  q = std::max(e - 1, -126) - 23;
  const T n = ldexp(v, -q);  // exact
  r = floor(n);
  frac = n - r;
}

/// v > 0 rounded to the nearest float, ties to even.
template <class T>
float round_exact(const T& v) {
  T r, frac;
  int q = 0;
  split(v, r, frac, q);
  const auto ri = static_cast<std::int64_t>(r);  // < 2^24
  const bool up = frac > T(0.5) || (frac == T(0.5) && (ri & 1) != 0);
  return std::ldexp(static_cast<float>(ri + (up ? 1 : 0)), q);
}

/// Correctly rounded 2^x for x in [-150, 128).
inline float exp2_oracle(float x) {
  if (x <= -150.0f) return 0.0f;
  const Quad v = boost::multiprecision::exp2(Quad(x));
  Quad r, frac;
  int q = 0;
  split(v, r, frac, q);
  // The quad error (< 2^-112 relative) is far below this guard: outside it, the quad value and
  // the true value round alike.
  const Quad guard = boost::multiprecision::ldexp(Quad(1), -100) * boost::multiprecision::ldexp(v, -q);
  if (boost::multiprecision::abs(frac - Quad(0.5)) > guard) return round_exact(v);
  return round_exact(boost::multiprecision::exp(Mp100(x) * boost::math::constants::ln_two<Mp100>()));
}

/// Deterministic inputs in [-150, 0]: half uniform in value, a quarter uniform in bit pattern
/// (dense near 0, where 2^x is close to 1), a quarter uniform in [-1, 0].
inline std::vector<float> sample_exp2_inputs(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> wide(-150.0f, 0.0f), unit(-1.0f, 0.0f);
  const std::uint32_t lo = 0x80000000u, hi = std::bit_cast<std::uint32_t>(-150.0f);
  std::vector<float> xs(n);
  for (std::size_t i = 0; i < n; ++i) {
    switch (i % 4) {
      case 0:
      case 1: xs[i] = wide(rng); break;
      case 2: xs[i] = std::bit_cast<float>(static_cast<std::uint32_t>(lo + rng() % (hi - lo + 1))); break;
      default: xs[i] = unit(rng); break;
    }
  }
  return xs;
}

}  // namespace attest::ref::test
