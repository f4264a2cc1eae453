#pragma once
// Scalar arithmetic of the device quantizers (quantize.hip), host/device (ATTEST_HD), written from
// docs/quantizer-schemes.md and FORMATS.md (kernels/ never includes reference/). Header-only so
// that a CPU test (kernels/gpu/tests/test_quantize_math.cpp, label unit, runs in CI) checks the
// very functions the device runs against the reference quantizers bit for bit.
//
// Element casts work on the float's bits with integer arithmetic only (no float rounding mode,
// no libm, no loops or data-dependent branches): |x| = m * 2^e exactly (m the 24-bit significand),
// the format's quantum is a fixed number of float lsbs in its normal range and one more per binade
// below its emin, and (m + half - 1 + bump) >> shift rounds to it under any tie rule (round_mag).
// Format constants come from core's format table at compile time (Fmt<F>); the kernels are
// instantiated per element format, and the runtime-format functions dispatch to those
// instances (dispatch_format). The only float operations are the
// scheme's own (x / s, x * mult, x + 0.5f, FWHT additions), each one IEEE operation; device code
// is compiled without FMA contraction (--fmad=false / -ffp-contract=off), so the rounding order is
// the source order on both sides.
#include <bit>
#include <cstdint>
#include <type_traits>

#include "attest/core/format.hpp"
#include "attest/core/philox.hpp"  // ATTEST_HD
#include "attest/core/scheme.hpp"

// Full unrolling in device code (register arrays, constant Hadamard signs); nothing on the host,
// where GCC would warn about the unknown pragma.
#if defined(__CUDA_ARCH__) || defined(__HIP_DEVICE_COMPILE__)
#define ATTEST_QM_UNROLL _Pragma("unroll")
#else
#define ATTEST_QM_UNROLL
#endif

namespace attest::gpu::qm {

// The scheme is core's Scheme (attest/core/scheme.hpp: plain data, passed to the kernels by value)
// and formats are core's FormatId; these aliases name its enums here.
using Family = Scheme::Family;
using Granularity = Scheme::Granularity;
using Role = Scheme::Role;
using ScaleRule = Scheme::ScaleRule;
using E8M0Rule = Scheme::E8M0Rule;
using IntRounding = Scheme::IntRounding;
using Rounding = Scheme::Rounding;
using Overflow = Scheme::Overflow;
using ApplyOp = Scheme::ApplyOp;
using Smoothing = Scheme::Smoothing;
using Prescale = Scheme::Prescale;
using Rotation = Scheme::Rotation;

/// Sage warp height W of per_warp / per_thread: 32 (Q) / 64 (K) on sm89, 16 / 128 on sm90.
ATTEST_HD inline std::int64_t warp_rows(const Scheme& s) {
  const bool k = s.role == Role::k;
  return s.arch == Scheme::SageArch::sm90 ? (k ? 128 : 16) : (k ? 64 : 32);
}

inline constexpr float kSageEps = 1e-7f;
/// 1/sqrt(128) rounded to float (AITER's normalisation) and bf16(1/sqrt(32)) (AITER's H_32 entries).
inline constexpr float kH128Norm = 0.08838834764831845f;
inline constexpr float kH32Bf16 = 0.1767578125f;

ATTEST_HD inline std::uint32_t fbits(float x) { return std::bit_cast<std::uint32_t>(x); }
ATTEST_HD inline float ffrom(std::uint32_t u) { return std::bit_cast<float>(u); }
ATTEST_HD inline bool is_nan(float x) { return (fbits(x) & 0x7FFFFFFFu) > 0x7F800000u; }
ATTEST_HD inline bool is_finite(float x) { return (fbits(x) & 0x7F800000u) != 0x7F800000u; }
ATTEST_HD inline float fabs_(float x) { return ffrom(fbits(x) & 0x7FFFFFFFu); }
ATTEST_HD inline float quiet_nan() { return ffrom(0x7FC00000u); }

/// Constants of an element format, derived from core's format table (attest/core/format.hpp,
/// kFormatTable) at compile time: the device quantizers keep no copy of the table. Scalar
/// static constexpr members, so device code reads them as constants (no host object is named in
/// device code). For int8 (an integer in the table) only maxc, sign and max_bits are meaningful.
template <FormatId F>
struct Fmt {
  static constexpr const FormatSpec& spec() { return format_spec(F); }
  static constexpr int man = spec().man_bits;  ///< mantissa bits
  static constexpr int bias = spec().bias;     ///< exponent bias (emin = 1 - bias)
  static constexpr std::uint32_t sign = 1u << (spec().bits - 1);  ///< sign bit of the code
  /// Largest finite magnitude code: all magnitude bits set, less the Inf/NaN exponent (IEEE-like
  /// formats: exponent all ones is Inf/NaN) or the one NaN code S.1111.111 (e4m3fn); FNUZ, FP6,
  /// FP4 and int8 use every magnitude code.
  static constexpr std::uint32_t maxc = spec().has_inf                   ? (sign - 1u) - (1u << spec().man_bits)
                                        : (spec().has_nan && !spec().fnuz) ? (sign - 1u) - 1u
                                                                           : sign - 1u;
  /// Float bits of the largest finite value (exact: every max_finite is a float).
  static constexpr std::uint32_t max_bits = std::bit_cast<std::uint32_t>(static_cast<float>(spec().max_finite));
  static constexpr bool fnuz = spec().fnuz, has_inf = spec().has_inf, has_nan = spec().has_nan;
  static constexpr int emax = spec().emax_elem;  ///< MX emax of the element (0 n/a)
  /// Float exponent field of the format's smallest normal binade 2^(1 - bias): values below it
  /// are the format's subnormals.
  static constexpr std::uint32_t kmin = static_cast<std::uint32_t>(128 - spec().bias);
};

/// Sign/exponent/mantissa description of a float element format (runtime form of Fmt<F>).
struct FmtInfo {
  int man, bias;          ///< mantissa bits, exponent bias (emin = 1 - bias)
  std::uint32_t maxc;     ///< largest finite magnitude code
  std::uint32_t sign;     ///< sign bit of the code
  std::uint32_t max_bits; ///< float bits of the largest finite value
  bool fnuz, has_inf, has_nan;
  int emax;               ///< MX emax of the element (0 n/a)
};
template <FormatId F>
ATTEST_HD constexpr FmtInfo fmt_info_of() {
  using K = Fmt<F>;
  return {K::man, K::bias, K::maxc, K::sign, K::max_bits, K::fnuz, K::has_inf, K::has_nan, K::emax};
}

/// Calls f(std::integral_constant<FormatId, F>{}) for the runtime format `id` (the formats with a
/// device codec); returns `fallback` for e8m0fnu and f32.
template <class R, class Fn>
ATTEST_HD inline R dispatch_format(FormatId id, R fallback, Fn&& f) {
  switch (id) {
    case FormatId::bf16: return f(std::integral_constant<FormatId, FormatId::bf16>{});
    case FormatId::fp16: return f(std::integral_constant<FormatId, FormatId::fp16>{});
    case FormatId::fp8_e4m3fn: return f(std::integral_constant<FormatId, FormatId::fp8_e4m3fn>{});
    case FormatId::fp8_e5m2: return f(std::integral_constant<FormatId, FormatId::fp8_e5m2>{});
    case FormatId::fp8_e4m3fnuz: return f(std::integral_constant<FormatId, FormatId::fp8_e4m3fnuz>{});
    case FormatId::fp8_e5m2fnuz: return f(std::integral_constant<FormatId, FormatId::fp8_e5m2fnuz>{});
    case FormatId::fp6_e2m3fn: return f(std::integral_constant<FormatId, FormatId::fp6_e2m3fn>{});
    case FormatId::fp6_e3m2fn: return f(std::integral_constant<FormatId, FormatId::fp6_e3m2fn>{});
    case FormatId::fp4_e2m1fn: return f(std::integral_constant<FormatId, FormatId::fp4_e2m1fn>{});
    case FormatId::int8: return f(std::integral_constant<FormatId, FormatId::int8>{});
    case FormatId::e8m0fnu:
    case FormatId::f32: break;  // no device codec
  }
  return fallback;
}

ATTEST_HD inline FmtInfo fmt_info(FormatId f) {
  return dispatch_format(f, FmtInfo{0, 0, 0, 0, 0, false, false, false, 0},
                         [](auto c) { return fmt_info_of<decltype(c)::value>(); });
}

/// Code of a NaN input (FORMATS.md / formats.hpp conventions: CUDA's canonical NaN under
/// sat_cuda, the sign-keeping quiet NaN of ml_dtypes / PyTorch otherwise; FNUZ has one NaN;
/// FP6/FP4 have none: ml_dtypes maps NaN to -0, the saturating modes to +0).
template <FormatId F>
ATTEST_HD inline std::uint32_t nan_code_t(Overflow o, bool neg) {
  const bool cuda = o == Overflow::sat_cuda;
  if constexpr (F == FormatId::bf16) return cuda ? 0x7FFFu : (neg ? 0xFFC0u : 0x7FC0u);
  else if constexpr (F == FormatId::fp16) return cuda ? 0x7FFFu : (neg ? 0xFE00u : 0x7E00u);
  else if constexpr (F == FormatId::fp8_e4m3fn) return cuda ? 0x7Fu : (neg ? 0xFFu : 0x7Fu);
  else if constexpr (F == FormatId::fp8_e5m2) return cuda ? 0x7Fu : (neg ? 0xFEu : 0x7Eu);
  else if constexpr (Fmt<F>::fnuz) return 0x80u;
  else if constexpr (F == FormatId::int8) return 0u;
  else return o != Overflow::ieee ? 0x00u : (neg ? 0x00u : Fmt<F>::sign);  // FP6 / FP4 (ml_dtypes flips the sign)
}
ATTEST_HD inline std::uint32_t nan_code(FormatId f, Overflow o, bool neg) {
  return dispatch_format(f, 0u, [&](auto c) { return nan_code_t<decltype(c)::value>(o, neg); });
}

/// Code of a finite value whose rounded magnitude exceeds the format's maximum: the saturating
/// modes clamp; ieee gives Inf where the format has one, else its NaN (e4m3fn S.1111.111, FNUZ
/// 0x80), else (FP6, FP4, int8: no special values) the clamped maximum.
template <FormatId F>
ATTEST_HD inline std::uint32_t overflow_code_t(Overflow o, bool neg) {
  using K = Fmt<F>;
  const std::uint32_t s = neg ? K::sign : 0u;
  std::uint32_t ieee = K::maxc | s;
  if constexpr (K::has_inf) ieee = (K::sign - (1u << K::man)) | s;  // exponent all ones, mantissa 0
  else if constexpr (K::fnuz) ieee = 0x80u;
  else if constexpr (K::has_nan) ieee = (K::sign - 1u) | s;
  return o != Overflow::ieee ? (K::maxc | s) : ieee;
}
ATTEST_HD inline std::uint32_t overflow_code(FormatId f, Overflow o, bool neg) {
  return dispatch_format(f, 0u, [&](auto c) { return overflow_code_t<decltype(c)::value>(o, neg); });
}

/// |x| (float bits a, finite, possibly 0) rounded to the grid of a format whose quantum is
/// 2^(e - man) in the binade of e, never finer than 2^(1 - bias - man) (its subnormals): returns
/// the magnitude code (biased exponent << man | mantissa; a carry lands in the next binade).
/// Branch-free integer arithmetic, exact under every tie rule:
///   k = max(exponent field, 1) (float subnormals share field 1's scale), m the 24-bit significand
///   (implicit bit only for normal floats), |x| = m * 2^(k - 150);
///   the quantum is 2^sh float lsbs with sh = (23 - man) + max(0, kmin - k), kmin the field of the
///   format's emin; n = floor((m + 2^(sh-1) - 1 + bump) / 2^sh) is |x| / quantum rounded to
///   nearest with ties broken by bump: rne bump = n's would-be low bit ((m >> sh) & 1), away 1,
///   smaller (toward zero) 0. sh is capped at 25: m < 2^24 = half a quantum there, so every tie
///   rule gives 0, as for any larger shift.
///   The code adds the binades above kmin: ((k - kmin) << man) + n for k >= kmin, where n is in
///   [2^man, 2^(man+1)] (implicit bit included, so the exponent field is k - kmin + 1 = the
///   biased exponent), and n alone below it (format subnormals, n <= 2^man).
/// |x| = 0 gives 0 (m = 0, no bump reaches the quantum).
ATTEST_HD inline std::uint32_t round_mag(std::uint32_t a, int man, std::uint32_t kmin, Rounding tie) {
  const std::uint32_t ef = a >> 23;
  const std::uint32_t k = ef > 1u ? ef : 1u;
  const std::uint32_t m = (a & 0x7FFFFFu) | (ef != 0u ? 0x800000u : 0u);
  std::uint32_t sh = static_cast<std::uint32_t>(23 - man) + (k < kmin ? kmin - k : 0u);
  sh = sh > 25u ? 25u : sh;
  const std::uint32_t bump = tie == Rounding::rne ? (m >> sh) & 1u : (tie == Rounding::away ? 1u : 0u);
  const std::uint32_t n = (m + (1u << (sh - 1u)) - 1u + bump) >> sh;
  return ((k > kmin ? k - kmin : 0u) << man) + n;
}

/// INT8 code (two's complement byte) of x: nearest with the tie rule, saturated to [-128, 127],
/// NaN -> 0 (cvt.rni.sat.s8.f32 for Rounding::rne). |x| is clamped to 1024 first (saturates
/// anyway), so the integer quantum 2^0 is at shift 150 - k in [13, 25] (round_mag's arithmetic).
ATTEST_HD inline std::uint32_t encode_int8(float x, Rounding tie) {
  const std::uint32_t u = fbits(x);
  std::uint32_t a = u & 0x7FFFFFFFu;
  const bool nan = a > 0x7F800000u;
  a = a > 0x44800000u ? 0x44800000u : a;  // 1024 (Inf included)
  // The integer grid is round_mag's grid with man = 23 and kmin = 150: every |x| <= 1024 lies
  // below kmin (its "subnormal" range), so sh = 150 - k and the code is n itself.
  const auto n = static_cast<std::int32_t>(round_mag(a, 23, 150u, tie));
  std::int32_t v = (u >> 31) != 0u ? -n : n;
  v = v < -128 ? -128 : (v > 127 ? 127 : v);
  return nan ? 0u : static_cast<std::uint32_t>(v) & 0xFFu;
}

/// Element code of x in float format F (not int8) with tie rule and overflow mode.
template <FormatId F>
ATTEST_HD inline std::uint32_t encode_t(float x, Rounding tie, Overflow o) {
  if constexpr (F == FormatId::int8) {
    return encode_int8(x, tie);
  } else if constexpr (F == FormatId::fp4_e2m1fn) {
    // Eight magnitudes (0, .5, 1, 1.5, 2, 3, 4, 6): the code is the number of midpoints
    // (.25, .75, 1.25, 1.75, 2.5, 3.5, 5) that |x| passes, a midpoint itself counting when its
    // tie rounds up: always for away, never for smaller, for rne where the upper neighbour's code
    // is even (.75, 1.75, 3.5). On the bits of |x| (ordered like the values) "passes t" is
    // a >= bits(t) and "exceeds t" a >= bits(t) + 1, i.e. T = bits(t) or bits(t) + 1. Above 5 (Inf included) the code is 7, which
    // every overflow mode gives here (no Inf/NaN codes: saturation). Same codes as round_mag.
    const std::uint32_t u = fbits(x);
    const bool neg = (u >> 31) != 0u;
    const std::uint32_t a = u & 0x7FFFFFFFu;
    // a >= T is the sign bit of (T - 1) - a (both below 2^31): one subtraction and one shifted
    // add per midpoint. odd / even: the midpoints' T - 1 offsets for the tie rule.
    const std::uint32_t odd = tie == Rounding::smaller ? 0u : ~0u;  // .75, 1.75, 3.5
    const std::uint32_t even = tie == Rounding::away ? ~0u : 0u;    // .25, 1.25, 2.5, 5
    const std::uint32_t mag = ((0x3E800000u + even - a) >> 31) + ((0x3F400000u + odd - a) >> 31) +
                              ((0x3FA00000u + even - a) >> 31) + ((0x3FE00000u + odd - a) >> 31) +
                              ((0x40200000u + even - a) >> 31) + ((0x40600000u + odd - a) >> 31) +
                              ((0x40A00000u + even - a) >> 31);
    const std::uint32_t r = mag | (neg ? Fmt<F>::sign : 0u);
    return a > 0x7F800000u ? nan_code_t<F>(o, neg) : r;
  } else {
    using K = Fmt<F>;
    const std::uint32_t u = fbits(x);
    const bool neg = (u >> 31) != 0u;
    const std::uint32_t a = u & 0x7FFFFFFFu;
    // Saturating modes clamp finite values before rounding (Inf and NaN are replaced below).
    const std::uint32_t ac = o != Overflow::ieee && a > K::max_bits ? K::max_bits : a;
    const std::uint32_t mag = round_mag(ac, K::man, K::kmin, tie);
    std::uint32_t r = mag | (neg ? K::sign : 0u);
    if (K::fnuz && mag == 0u) r = 0u;  // no -0
    if (mag > K::maxc) r = overflow_code_t<F>(o, neg);
    if (a == 0x7F800000u) r = overflow_code_t<F>(o == Overflow::sat_cuda ? o : Overflow::ieee, neg);
    if (a > 0x7F800000u) r = nan_code_t<F>(o, neg);
    return r;
  }
}
/// encode_t for a runtime format.
ATTEST_HD inline std::uint32_t encode(FormatId f, float x, Rounding tie, Overflow o) {
  return dispatch_format(f, 0u, [&](auto c) { return encode_t<decltype(c)::value>(x, tie, o); });
}

/// Value of a code (exact), NaN for NaN codes; int8 codes are two's complement.
ATTEST_HD inline float decode(FormatId f, std::uint32_t code) {
  if (f == FormatId::int8) return static_cast<float>(static_cast<std::int8_t>(static_cast<std::uint8_t>(code & 0xFFu)));
  if (f == FormatId::bf16) {
    const float v = ffrom((code & 0xFFFFu) << 16);
    return v;
  }
  const FmtInfo fi = fmt_info(f);
  const int bits = f == FormatId::fp16 ? 16 : (f == FormatId::fp6_e2m3fn || f == FormatId::fp6_e3m2fn) ? 6 : f == FormatId::fp4_e2m1fn ? 4 : 8;
  code &= (1u << bits) - 1u;
  if (fi.fnuz && code == 0x80u) return quiet_nan();
  const bool neg = (code & fi.sign) != 0;
  const std::uint32_t mag = code & (fi.sign - 1u);
  const int ebits = bits - 1 - fi.man;
  const std::uint32_t emask = ((1u << ebits) - 1u) << fi.man;
  if (fi.has_nan && !fi.fnuz) {
    if (fi.has_inf && (mag & emask) == emask) return (mag & ((1u << fi.man) - 1u)) != 0 ? quiet_nan() : ffrom(neg ? 0xFF800000u : 0x7F800000u);
    if (!fi.has_inf && mag == ((1u << (bits - 1)) - 1u)) return quiet_nan();  // e4m3fn S.1111.111
  }
  const std::uint32_t ef = mag >> fi.man, mf = mag & ((1u << fi.man) - 1u);
  // value = (ef == 0 ? mf : mf + 2^man) * 2^(max(ef,1) - bias - man): an integer < 2^12 times a
  // power of two >= 2^-24, both exact in float, so the product is exact.
  const int scale_exp = (ef == 0 ? 1 : static_cast<int>(ef)) - fi.bias - fi.man;
  const float units = static_cast<float>(ef == 0 ? mf : mf + (1u << fi.man));
  const float p2 = scale_exp >= -126 ? ffrom(static_cast<std::uint32_t>(scale_exp + 127) << 23)
                                     : ffrom(1u << (scale_exp + 149));
  const float v = units * p2;
  return neg ? -v : v;
}

/// bf16 rounding (RNE, IEEE overflow) of a float, as a float: decode(encode(bf16, x, rne, ieee)).
/// bf16 is float's upper half, so RNE is an integer add at bit 16 (ties to even via bit 16; a
/// carry moves into the exponent, FLT_MAX's neighbourhood carries into Inf); float subnormals
/// round on the same grid. NaN becomes the sign-keeping quiet NaN (bf16 0x7FC0 / 0xFFC0).
ATTEST_HD inline float round_bf16(float x) {
  const std::uint32_t u = fbits(x);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return ffrom((u & 0x80000000u) | 0x7FC00000u);
  return ffrom((u + 0x7FFFu + ((u >> 16) & 1u)) & 0xFFFF0000u);
}

/// FP32 scale s of a group with absolute maximum a (ScaleRule).
ATTEST_HD inline float uniform_scale(float a, ScaleRule r, float qmax) {
  switch (r) {
    case ScaleRule::ieee: return a / qmax;
    case ScaleRule::rcp: return a * (1.0f / qmax);
    case ScaleRule::eps: return a / qmax + kSageEps;
    case ScaleRule::floor: return (a < kSageEps ? kSageEps : a) / qmax;
    case ScaleRule::ieee_one: return a == 0.0f ? 1.0f : a / qmax;
    case ScaleRule::none: return 1.0f;
  }
  return quiet_nan();
}
/// Multiplier of apply=mul: fl(qmax / a') (only ieee, rcp and floor are valid with mul).
ATTEST_HD inline float uniform_inverse(float a, ScaleRule r, float qmax) {
  return r == ScaleRule::floor ? qmax / (a < kSageEps ? kSageEps : a) : qmax / a;
}

/// FP32 -> int8 code: round=rne (cvt.rni.sat) or round=half (Sage Triton: +-0.5, truncate to int32
/// saturating with NaN -> 0, keep the low byte).
ATTEST_HD inline std::uint32_t to_int8(float q, bool half) {
  if (!half) return encode_int8(q, Rounding::rne);
  const float t = q + (q >= 0.0f ? 0.5f : -0.5f);
  std::int32_t i = 0;
  if (is_nan(t)) i = 0;
  else if (t >= 2147483648.0f) i = 2147483647;
  else if (t < -2147483648.0f) i = -2147483647 - 1;
  else i = static_cast<std::int32_t>(t);  // in range: truncation toward zero
  return static_cast<std::uint32_t>(i) & 0xFFu;
}

/// MX element maximum used by rceil: the format maximum; 127/64 for MXINT8.
template <FormatId F>
ATTEST_HD inline float mx_elem_max_t() { return F == FormatId::int8 ? 127.0f / 64.0f : ffrom(Fmt<F>::max_bits); }
ATTEST_HD inline float mx_elem_max(FormatId f) {
  return dispatch_format(f, 0.0f, [](auto c) { return mx_elem_max_t<decltype(c)::value>(); });
}

/// E8M0 code of a block with absolute maximum amax (docs/quantizer-schemes.md, "E8M0 scale
/// rules"); emax and elem_max are the element format's MX emax and mx_elem_max.
ATTEST_HD inline std::uint32_t e8m0_scale(float amax, E8M0Rule rule, int emax, float elem_max) {
  if (!is_finite(amax)) return 0xFFu;
  const float a = fabs_(amax);
  const std::uint32_t u = fbits(a);
  const int e = static_cast<int>(u >> 23);
  const std::uint32_t m = u & 0x7FFFFFu;
  auto clamp = [](int v, int lo, int hi) { return v < lo ? lo : (v > hi ? hi : v); };
  switch (rule) {
    case E8M0Rule::floor: return static_cast<std::uint32_t>(clamp(e - 127 - emax, -127, 127) + 127);
    case E8M0Rule::ceil: return static_cast<std::uint32_t>(clamp(e - 127 + (m != 0 ? 1 : 0) - emax, -127, 127) + 127);
    case E8M0Rule::rceil: {
      const float d = a * (1.0f / elem_max);
      if (!is_finite(d)) return 0xFFu;
      const std::uint32_t ud = fbits(d);
      const int ed = static_cast<int>(ud >> 23);
      const std::uint32_t md = ud & 0x7FFFFFu;
      const int code = ed == 0 ? (md > 0x400000u ? 1 : 0) : ed + (md != 0 ? 1 : 0);
      return static_cast<std::uint32_t>(code > 254 ? 254 : code);
    }
    case E8M0Rule::aiter_hip_fp4: return ((fbits(a / 6.0f) + 0x7FFFFFu) & 0x7F800000u) >> 23;
    case E8M0Rule::aiter_triton_v_fp4: {
      const std::uint32_t v = fbits(a < 1e-12f ? 1e-12f : a);
      return static_cast<std::uint32_t>(static_cast<int>(v >> 23) - 2 + ((v & 0x7FFFFFu) > 0x400000u ? 1 : 0)) & 0xFFu;
    }
    case E8M0Rule::aiter_triton_rne: {
      const bool up = m > 0x400000u || (m == 0x400000u && (e & 1) != 0);
      return static_cast<std::uint32_t>(clamp(e + (up ? 1 : 0) - 2, 0, 254));
    }
    case E8M0Rule::aiter_hip_fp8: {
      int c = static_cast<int>(((u + 0x200000u) & 0x7F800000u) >> 23) - 8;
      if (c < 0) c = 0;
      if (c == 255) c = 254;
      return static_cast<std::uint32_t>(c);
    }
    case E8M0Rule::aiter_hip_fp6: return a == 0.0f ? 127u : static_cast<std::uint32_t>(e - 2) & 0xFFu;
  }
  return 0xFFu;
}

ATTEST_HD inline std::uint32_t e8m0_scale(float amax, E8M0Rule rule, FormatId elem) {
  return e8m0_scale(amax, rule, fmt_info(elem).emax, mx_elem_max(elem));
}

/// What a block's elements are multiplied by: 2^(127 - code) (exact; 2^-127 is subnormal), or for
/// aiter_hip_fp8 the float with bits (254 - code) << 23; NaN for 0xFF.
ATTEST_HD inline float e8m0_multiplier(std::uint32_t code, E8M0Rule rule) {
  if (code == 0xFFu) return quiet_nan();
  if (rule == E8M0Rule::aiter_hip_fp8) return ffrom((254u - code) << 23);
  return code == 254u ? ffrom(0x00400000u) : ffrom((254u - code) << 23);
}

/// MX element code of v (already multiplied). MXINT8: round(v * 64) with the tie rule, clamped to
/// [-127, 127] (v * 64 is exact unless it overflows, which saturates anyway).
template <FormatId F>
ATTEST_HD inline std::uint32_t mx_element_code_t(float v, Rounding tie, Overflow o) {
  if constexpr (F == FormatId::int8) {
    const std::uint32_t c = encode_int8(v * 64.0f, tie);
    return c == 0x80u ? 0x81u : c;  // -128 -> -127
  } else {
    return encode_t<F>(v, tie, o);
  }
}
ATTEST_HD inline std::uint32_t mx_element_code(float v, FormatId elem, Rounding tie, Overflow o) {
  return dispatch_format(elem, 0u, [&](auto c) { return mx_element_code_t<decltype(c)::value>(v, tie, o); });
}

/// NaN-propagating running amax (torch.amax semantics) as float bits of |v|: the unsigned order of
/// the bits of non-negative floats is their numeric order and every NaN sorts above +Inf, so
/// max over bits is order-independent and lets a block combine partial results with atomicMax.
ATTEST_HD inline std::uint32_t amax_bits(float v) { return fbits(v) & 0x7FFFFFFFu; }

/// The unnormalised FWHT of 128 values in place, stages h = 1, 2, ..., 64 (the stage order fixes
/// every rounding; pairs inside a stage are independent).
ATTEST_HD inline void fwht128(float* x) {
  for (int h = 1; h < 128; h *= 2)
    for (int base = 0; base < 128; base += 2 * h)
      for (int i = base; i < base + h; ++i) {
        const float a = x[i], b = x[i + h];
        x[i] = a + b;
        x[i + h] = a - b;
      }
}

/// h32_bf16 on one block of 32 channels in place: inputs rounded to bf16, y_k = sum_j x_j * +-kH32Bf16
/// (sign (-1)^popcount(j & k)), accumulated in FP32 in index order from +0.
///
/// Computed as the reference's 32 sequential chains, with two exact rewrites:
///  - one product per input: x_j * (-c) = -(x_j * c) exactly (round to nearest is symmetric) and
///    acc + (-p) is acc - p by IEEE's definition of subtraction, so acc +- p_j with p_j = x_j * c
///    is acc + x_j * (+-c) bit for bit;
///  - shared prefixes: the signs of terms j < 2^m depend only on k mod 2^m (popcount(j & k) sees
///    k's low m bits), so all outputs k with equal k mod 2^m run through the same first 2^m
///    operations. Level m extends each of the 2^m prefix sums over terms [0, 2^m) by the terms
///    [2^m, 2^(m+1)) twice: for k's bit m clear (sign parity(j & r)) and set (the opposite sign,
///    since bit m of j is set there). Every output's chain is still ((0 + p_0) +- p_1) +- ... in
///    index order, each step the same IEEE operation on the same operands: 683 additions per
///    block instead of 1024.
/// Level M of hadamard32_bf16: the 2^M prefix sums over terms [0, 2^M) in acc[0, 2^M) become the
/// 2^(M+1) prefix sums over [0, 2^(M+1)). A template per level: constant loop bounds, so the
/// loops unroll and acc stays in registers.
template <int M>
ATTEST_HD inline void h32_level(float* acc, const float* p) {
  constexpr int h = 1 << M;
  ATTEST_QM_UNROLL
  for (int r = 0; r < h; ++r) {
    float lo = acc[r], hi = acc[r];
    ATTEST_QM_UNROLL
    for (int j = h; j < 2 * h; ++j) {
      const unsigned jr = static_cast<unsigned>(j & r);  // 5 bits: parity by a closed form (no loop)
      const bool minus = ((jr ^ (jr >> 1) ^ (jr >> 2) ^ (jr >> 3) ^ (jr >> 4)) & 1u) != 0;
      lo = minus ? lo - p[j] : lo + p[j];
      hi = minus ? hi + p[j] : hi - p[j];
    }
    acc[r] = lo;
    acc[r + h] = hi;
  }
}
ATTEST_HD inline void hadamard32_bf16(float* x) {
  float p[32];
  ATTEST_QM_UNROLL
  for (int j = 0; j < 32; ++j) p[j] = round_bf16(x[j]) * kH32Bf16;
  float acc[32];
  acc[0] = 0.0f + p[0];  // the one prefix over [0, 1); 0 + p, not p: -0 becomes +0 as in the reference
  h32_level<0>(acc, p);
  h32_level<1>(acc, p);
  h32_level<2>(acc, p);
  h32_level<3>(acc, p);
  h32_level<4>(acc, p);
  ATTEST_QM_UNROLL
  for (int k = 0; k < 32; ++k) x[k] = acc[k];
}

/// Rotation and prescale of one token row of C channels in place (smoothing already applied):
/// docs/quantizer-schemes.md "Pre-transforms". `factor` = fl32(sm_scale * 1.44269504).
ATTEST_HD inline void rotate_prescale_row(float* row, std::int64_t C, const Scheme& s, float factor) {
  switch (s.rotate) {
    case Rotation::none: break;
    case Rotation::h128:
      fwht128(row);
      for (int i = 0; i < 128; ++i) row[i] = row[i] * kH128Norm;
      break;
    case Rotation::h128_bf16:
      fwht128(row);
      for (int i = 0; i < 128; ++i) {
        const float scaled = row[i] * kH128Norm;
        row[i] = round_bf16(scaled * (s.prescale == Prescale::sm_log2e ? factor : 1.0f));
      }
      break;
    case Rotation::h32_bf16:
      for (std::int64_t b = 0; b + 32 <= C; b += 32) hadamard32_bf16(row + b);
      break;
  }
  if (s.prescale == Prescale::sm_log2e && s.rotate != Rotation::h128_bf16)
    for (std::int64_t c = 0; c < C; ++c) row[c] = row[c] * factor;
}

/// Smoothing of one value with its channel mean km.
ATTEST_HD inline float smooth_value(float x, float km, Smoothing sm) {
  const float d = x - km;
  return sm == Smoothing::bf16 ? round_bf16(d) : d;
}

/// Scale grid: groups per (slab): GT rows of GC columns; `rows` tokens per GT step.
struct Grid {
  bool global = false;
  std::int64_t GT = 1, GC = 1, rows = 1;
};
ATTEST_HD inline std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }
ATTEST_HD inline Grid grid_of(const Scheme& s, std::int64_t T, std::int64_t C) {
  Grid g;
  if (s.family == Family::cast) {
    g.global = true;
    return g;
  }
  if (s.family == Family::mx) {
    g.GT = T;
    g.GC = ceil_div(C, s.block);
    return g;
  }
  switch (s.granularity) {
    case Granularity::per_tensor: g.global = true; break;
    case Granularity::per_block: g.rows = s.block; g.GT = ceil_div(T, s.block); break;
    case Granularity::per_warp: g.rows = warp_rows(s); g.GT = ceil_div(T, g.rows); break;
    case Granularity::per_thread: g.rows = warp_rows(s); g.GT = ceil_div(T, g.rows); g.GC = s.role == Role::k ? 4 : 8; break;
    case Granularity::per_token: g.GT = T; break;
    case Granularity::per_channel: g.GC = C; break;
  }
  return g;
}
/// Scale index of element (slab, t, c).
ATTEST_HD inline std::int64_t group_index(const Scheme& s, const Grid& g, std::int64_t slab, std::int64_t t, std::int64_t c) {
  if (g.global) return 0;
  std::int64_t gt = 0, gc = 0;
  if (s.family == Family::mx) {
    gt = t;
    gc = c / s.block;
  } else {
    switch (s.granularity) {
      case Granularity::per_tensor: return 0;
      case Granularity::per_block:
      case Granularity::per_warp: gt = t / g.rows; break;
      // The warp height is a multiple of 8: t % 8 is the row's position in its 8-row MMA tile.
      case Granularity::per_thread: gt = t / g.rows; gc = s.role == Role::k ? (t % 8) / 2 : t % 8; break;
      case Granularity::per_token: gt = t; break;
      case Granularity::per_channel: gc = c; break;
    }
  }
  return (slab * g.GT + gt) * g.GC + gc;
}

/// Scale (f32 bits, or the E8M0 code for mx) and element multiplier of a group with amax a.
struct GroupScale {
  std::uint32_t stored;  ///< f32 bits (cast/int8/fp8) or E8M0 code (mx)
  float scale;           ///< the FP32 scale (apply=div)
  float mult;            ///< element multiplier (apply=mul, mx)
};
/// group_scale for a scheme whose element format is F (the kernels' compile-time format).
template <FormatId F>
ATTEST_HD inline GroupScale group_scale_t(float amax, const Scheme& s) {
  GroupScale g{fbits(1.0f), 1.0f, 1.0f};
  if (s.family == Family::cast) return g;
  if (s.family == Family::mx) {
    g.stored = e8m0_scale(amax, s.e8m0, Fmt<F>::emax, mx_elem_max_t<F>());
    g.mult = e8m0_multiplier(g.stored, s.e8m0);
    return g;
  }
  g.scale = uniform_scale(amax, s.scale, s.scale_max);
  g.stored = fbits(g.scale);
  if (s.apply == ApplyOp::mul) g.mult = uniform_inverse(amax, s.scale, s.scale_max);
  return g;
}
ATTEST_HD inline GroupScale group_scale(float amax, const Scheme& s) {
  return dispatch_format(s.element, GroupScale{fbits(1.0f), 1.0f, 1.0f},
                         [&](auto c) { return group_scale_t<decltype(c)::value>(amax, s); });
}

/// Element code of a prepared value v in a group, for family FAM and element format F (the
/// kernels' compile-time pair; s.family == FAM and s.element == F).
template <FormatId F, Family FAM>
ATTEST_HD inline std::uint32_t element_code_t(float v, const GroupScale& g, const Scheme& s) {
  if constexpr (FAM == Family::cast) return encode_t<F>(v, s.elem_round, s.overflow);
  else if constexpr (FAM == Family::int8)
    return to_int8(s.apply == ApplyOp::mul ? v * g.mult : v / g.scale, s.int_round == IntRounding::half);
  else if constexpr (FAM == Family::fp8)
    return encode_t<F>(s.apply == ApplyOp::mul ? v * g.mult : v / g.scale, s.elem_round, s.overflow);
  else if constexpr (FAM == Family::mx) return mx_element_code_t<F>(v * g.mult, s.elem_round, s.overflow);
  else return 0u;  // identity: refused on the host (require_device_quantizer)
}
/// element_code_t for a runtime family and format.
ATTEST_HD inline std::uint32_t element_code(float v, const GroupScale& g, const Scheme& s) {
  return dispatch_format(s.element, 0u, [&](auto c) -> std::uint32_t {
    constexpr FormatId F = decltype(c)::value;
    switch (s.family) {
      case Family::cast: return element_code_t<F, Family::cast>(v, g, s);
      case Family::int8: return element_code_t<F, Family::int8>(v, g, s);
      case Family::fp8: return element_code_t<F, Family::fp8>(v, g, s);
      case Family::mx: return element_code_t<F, Family::mx>(v, g, s);
      case Family::identity: break;
    }
    return 0u;
  });
}

}  // namespace attest::gpu::qm
