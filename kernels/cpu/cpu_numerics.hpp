#pragma once
// Scalar arithmetic of the CPU kernels: element-format rounding, INT8 conversion, E8M0 scales,
// exp2 and reciprocal policies. Written independently of reference/formats and
// reference/quantize (kernels/ never includes reference/): a value is rounded by dividing by the
// format's quantum (a power of two, exact), rounding with std::nearbyint / std::floor (exact
// operations) and multiplying back, instead of manipulating bit fields. Every function here is a
// pure function of its arguments; -ffp-contract=off keeps every a*b+c as two roundings.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "attest/core/format.hpp"
#include "attest/core/scheme.hpp"

namespace attest::kernels::cpu {

// Formats are rows of core's format table (attest/core/format.hpp), tie rules, overflow modes
// and INT8 rounding the enums of core's Scheme (attest/core/scheme.hpp); only the arithmetic
// below is the CPU kernels' own.
using Rounding = Scheme::Rounding;        ///< tie rule: rne, away from zero, toward the smaller magnitude
using Overflow = Scheme::Overflow;        ///< ieee (ml_dtypes), sat_cuda (satfinite), sat_hip
using IntRounding = Scheme::IntRounding;  ///< rne, half

/// x rounded to the nearest value of the float format `f` (as a float; every value of these formats
/// is a float): `man_bits` mantissa bits, smallest normal 2^emin(), largest finite `max_finite`;
/// fnuz formats have no -0 and one NaN (overflow -> NaN under ieee). Overflow modes:
///   ieee      ml_dtypes / PyTorch casts: overflow to Inf where the format has one, else to NaN
///             where it has one, else saturate (fp6/fp4);
///   sat_cuda  CUDA cvt.rn.satfinite: finite overflow and +-Inf go to +-max;
///   sat_hip   amd_hip_fp8.h: finite values clamped to +-max before rounding, Inf/NaN as ieee.
/// NaN stays NaN in formats with NaN; in fp6/fp4 it becomes -0 (ieee, ml_dtypes) or +0.
inline float round_to(const FormatSpec& f, float x, Rounding tie = Rounding::rne, Overflow sat = Overflow::ieee) {
  const float qnan = std::numeric_limits<float>::quiet_NaN();
  if (std::isnan(x)) {
    if (f.has_nan) return qnan;
    return sat == Overflow::ieee ? -0.0f : 0.0f;
  }
  const bool neg = std::signbit(x);
  double a = std::fabs(static_cast<double>(x));
  if (std::isinf(a)) {
    if (sat == Overflow::sat_cuda || (!f.has_inf && !f.has_nan)) return static_cast<float>(neg ? -f.max_finite : f.max_finite);
    if (f.has_inf) return neg ? -std::numeric_limits<float>::infinity() : std::numeric_limits<float>::infinity();
    return qnan;
  }
  if (sat == Overflow::sat_hip && a > f.max_finite) a = f.max_finite;
  double r = 0;
  if (a != 0) {
    // Quantum of the binade of a (subnormals share the quantum of the smallest normal binade):
    // a / quantum is exact in double and the rounding is one std::nearbyint (current mode: RNE).
    const int e = std::max(std::ilogb(a), f.emin());
    const double quantum = std::ldexp(1.0, e - f.man_bits);
    const double units = a / quantum;
    const double n = tie == Rounding::rne ? std::nearbyint(units) : tie == Rounding::away ? std::floor(units + 0.5) : std::ceil(units - 0.5);
    r = n * quantum;
  }
  if (r > f.max_finite) {
    if (sat != Overflow::ieee || (!f.has_inf && !f.has_nan)) r = f.max_finite;
    else if (f.has_inf) r = std::numeric_limits<double>::infinity();
    else return qnan;
  }
  if (r == 0 && f.fnuz) return 0.0f;
  return static_cast<float>(neg ? -r : r);
}

inline float to_bf16(float x) { return round_to(format_spec(FormatId::bf16), x); }
inline float to_fp16(float x) { return round_to(format_spec(FormatId::fp16), x); }

/// FP32 -> INT8 value (as a float holding an integer).
///   rne  cvt.rni.sat.s8.f32: nearest even, saturate to [-128, 127], NaN -> 0;
///   half Sage Triton: t = fl(x + copysign(0.5, x)) in FP32 (that addition itself rounds), then
///        truncation toward zero to int32 (NaN -> 0, saturating) and the low 8 bits kept.
inline float to_int8(float x, IntRounding r) {
  if (std::isnan(x)) return 0.0f;
  if (r == IntRounding::rne) return std::clamp(std::nearbyint(x), -128.0f, 127.0f);
  const float t = x + (std::signbit(x) ? -0.5f : 0.5f);
  const double tr = std::trunc(static_cast<double>(t));
  const std::int64_t i = tr >= 2147483647.0 ? 2147483647 : tr <= -2147483648.0 ? -2147483647 - 1 : static_cast<std::int64_t>(tr);
  return static_cast<float>(static_cast<std::int8_t>(static_cast<std::uint8_t>(i & 0xFF)));
}

inline std::uint32_t bits_of(float x) {
  std::uint32_t u;
  std::memcpy(&u, &x, 4);
  return u;
}
inline float from_bits(std::uint32_t u) {
  float x;
  std::memcpy(&x, &u, 4);
  return x;
}

/// Correctly rounded float exp2: evaluated in long double (x87, 64-bit significand: 40 bits
/// beyond float's 24, so the float rounding of the long double result is the correct rounding
/// unless the exact value lies within 2^-63 relative of a float midpoint).
inline float exp2_cr(float x) {
  if (x >= 128.0f) return std::numeric_limits<float>::infinity();
  return static_cast<float>(std::exp2(static_cast<long double>(x)));
}

/// FlashAttention-4 exp2 emulation (FORMATS.md): x clamped to >= -127, split into n = floor(x)
/// and f = x - n (both exact), a cubic in f by three fmas, and n added to the exponent bits.
inline float exp2_fa4(float x) {
  if (!(x >= -127.0f)) x = -127.0f;  // fmaxf(x, -127): a NaN input becomes -127 too
  const float n = std::floor(x);
  const float f = x - n;
  const float c1 = from_bits(0x3F31F519u), c2 = from_bits(0x3E6906A4u), c3 = from_bits(0x3D9DF09Du);
  const float p = std::fma(std::fma(std::fma(c3, f, c2), f, c1), f, 1.0f);
  const auto ni = static_cast<std::int32_t>(n);
  return from_bits(static_cast<std::uint32_t>(ni) * (1u << 23) + bits_of(p));
}

/// rcp.approx.ftz.f32 of sm_90, from the measured table (see rcp_sm90_table()).
float rcp_sm90(float x);

/// The E8M0 exponent field of a float's biased exponent and its mantissa field.
inline int exp_field(float x) { return static_cast<int>((bits_of(x) >> 23) & 0xFF); }
inline std::uint32_t man_field(float x) { return bits_of(x) & 0x7FFFFF; }

}  // namespace attest::kernels::cpu
