#pragma once
// Scalar arithmetic of the device quantizers (quantize.hip), host/device (ATTEST_HD), written from
// docs/quantizer-schemes.md and FORMATS.md (kernels/ never includes reference/). Header-only so
// that a CPU test (kernels/gpu/tests/test_quantize_math.cpp, label unit, runs in CI) checks the
// very functions the device runs against the reference quantizers bit for bit.
//
// Element casts work on the float's bits with integer arithmetic only (no float rounding mode,
// no libm): |x| = m * 2^e exactly (m the 24-bit significand), the format's quantum 2^q is fixed by
// max(floor(log2 |x|), emin) - man, and m >> (q - e) with the remainder compared against half a
// quantum gives the rounded magnitude under any tie rule. The only float operations are the
// scheme's own (x / s, x * mult, x + 0.5f, FWHT additions), each one IEEE operation; device code
// is compiled without FMA contraction (--fmad=false / -ffp-contract=off), so the rounding order is
// the source order on both sides.
#include <bit>
#include <cstdint>

#include "attest/core/format.hpp"
#include "attest/core/philox.hpp"  // ATTEST_HD
#include "attest/core/scheme.hpp"

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

/// Sign/exponent/mantissa description of a float element format.
struct FmtInfo {
  int man, bias;          ///< mantissa bits, exponent bias (emin = 1 - bias)
  std::uint32_t maxc;     ///< largest finite magnitude code
  std::uint32_t sign;     ///< sign bit of the code
  std::uint32_t max_bits; ///< float bits of the largest finite value
  bool fnuz, has_inf, has_nan;
  int emax;               ///< MX emax of the element (0 n/a)
};

ATTEST_HD inline FmtInfo fmt_info(FormatId f) {
  switch (f) {
    case FormatId::bf16: return {7, 127, 0x7F7Fu, 0x8000u, 0x7F7F0000u, false, true, true, 0};
    case FormatId::fp16: return {10, 15, 0x7BFFu, 0x8000u, 0x477FE000u, false, true, true, 0};
    case FormatId::fp8_e4m3fn: return {3, 7, 0x7Eu, 0x80u, 0x43E00000u, false, false, true, 8};
    case FormatId::fp8_e5m2: return {2, 15, 0x7Bu, 0x80u, 0x47600000u, false, true, true, 15};
    case FormatId::fp8_e4m3fnuz: return {3, 8, 0x7Fu, 0x80u, 0x43700000u, true, false, true, 0};
    case FormatId::fp8_e5m2fnuz: return {2, 16, 0x7Fu, 0x80u, 0x47600000u, true, false, true, 0};
    case FormatId::fp6_e2m3fn: return {3, 1, 0x1Fu, 0x20u, 0x40F00000u, false, false, false, 2};
    case FormatId::fp6_e3m2fn: return {2, 3, 0x1Fu, 0x20u, 0x41E00000u, false, false, false, 4};
    case FormatId::fp4_e2m1fn: return {1, 1, 0x7u, 0x8u, 0x40C00000u, false, false, false, 2};
    case FormatId::int8: return {0, 0, 0x7Fu, 0x80u, 0x42FE0000u, false, false, false, 0};
    case FormatId::e8m0fnu:
    case FormatId::f32: break;  // no device codec
  }
  return {0, 0, 0, 0, 0, false, false, false, 0};
}

/// Code of a NaN input (FORMATS.md / formats.hpp conventions).
ATTEST_HD inline std::uint32_t nan_code(FormatId f, Overflow o, bool neg) {
  const bool cuda = o == Overflow::sat_cuda;
  switch (f) {
    case FormatId::bf16: return cuda ? 0x7FFFu : (neg ? 0xFFC0u : 0x7FC0u);
    case FormatId::fp16: return cuda ? 0x7FFFu : (neg ? 0xFE00u : 0x7E00u);
    case FormatId::fp8_e4m3fn: return cuda ? 0x7Fu : (neg ? 0xFFu : 0x7Fu);
    case FormatId::fp8_e5m2: return cuda ? 0x7Fu : (neg ? 0xFEu : 0x7Eu);
    case FormatId::fp8_e4m3fnuz:
    case FormatId::fp8_e5m2fnuz: return 0x80u;
    case FormatId::fp6_e2m3fn:
    case FormatId::fp6_e3m2fn: return o != Overflow::ieee ? 0x00u : (neg ? 0x00u : 0x20u);  // ml_dtypes flips the sign
    case FormatId::fp4_e2m1fn: return o != Overflow::ieee ? 0x0u : (neg ? 0x0u : 0x8u);
    case FormatId::int8: return 0u;
    case FormatId::e8m0fnu:
    case FormatId::f32: break;  // no device codec
  }
  return 0u;
}
/// Code of a finite value whose rounded magnitude exceeds the format's maximum.
ATTEST_HD inline std::uint32_t overflow_code(FormatId f, Overflow o, bool neg) {
  const FmtInfo fi = fmt_info(f);
  const std::uint32_t s = neg ? fi.sign : 0u;
  if (o != Overflow::ieee) return fi.maxc | s;
  switch (f) {
    case FormatId::bf16: return 0x7F80u | s;
    case FormatId::fp16: return 0x7C00u | s;
    case FormatId::fp8_e4m3fn: return 0x7Fu | s;
    case FormatId::fp8_e5m2: return 0x7Cu | s;
    case FormatId::fp8_e4m3fnuz:
    case FormatId::fp8_e5m2fnuz: return 0x80u;
    default: return fi.maxc | s;
  }
}

/// |x| (float bits a, finite, non-zero) rounded to multiples of 2^q: returns the integer count.
/// |x| = m * 2^e exactly; q >= e here for every format (its quantum is never finer than float's).
ATTEST_HD inline std::uint32_t round_units(std::uint32_t a, int q, Rounding tie) {
  const std::uint32_t ef = a >> 23;
  const std::uint32_t m = ef == 0 ? (a & 0x7FFFFFu) : ((a & 0x7FFFFFu) | 0x800000u);
  const int e = ef == 0 ? -149 : static_cast<int>(ef) - 150;
  const int sh = q - e;
  if (sh <= 0) return m << (-sh);  // not reached for the formats here; kept exact anyway
  if (sh > 25) return 0;           // m < 2^24 <= quantum / 4: rounds to 0 under every tie rule
  const std::uint32_t n = m >> sh, rem = m & ((1u << sh) - 1u), half = 1u << (sh - 1);
  bool up = rem > half;
  if (rem == half) up = tie == Rounding::away || (tie == Rounding::rne && (n & 1u) != 0);
  return n + (up ? 1u : 0u);
}

/// floor(log2 |x|) of non-zero finite float bits a.
ATTEST_HD inline int ilog2_bits(std::uint32_t a) {
  const std::uint32_t ef = a >> 23;
  if (ef != 0) return static_cast<int>(ef) - 127;
  int msb = 22;
  while (((a >> msb) & 1u) == 0) --msb;
  return msb - 149;
}

/// INT8 code (two's complement byte) of x: nearest with the tie rule, saturated to [-128, 127],
/// NaN -> 0 (cvt.rni.sat.s8.f32 for Rounding::rne). |x| is clamped to 1024 first (saturates anyway).
ATTEST_HD inline std::uint32_t encode_int8(float x, Rounding tie) {
  if (is_nan(x)) return 0u;
  const bool neg = (fbits(x) >> 31) != 0;
  std::uint32_t a = fbits(x) & 0x7FFFFFFFu;
  if (a > 0x44800000u) a = 0x44800000u;  // 1024
  std::int32_t v = a == 0 ? 0 : static_cast<std::int32_t>(round_units(a, 0, tie));
  if (neg) v = -v;
  if (v < -128) v = -128;
  if (v > 127) v = 127;
  return static_cast<std::uint32_t>(v) & 0xFFu;
}

/// Element code of x in float format f (not int8) with tie rule and overflow mode.
ATTEST_HD inline std::uint32_t encode(FormatId f, float x, Rounding tie, Overflow o) {
  if (f == FormatId::int8) return encode_int8(x, tie);
  const FmtInfo fi = fmt_info(f);
  const std::uint32_t u = fbits(x);
  const bool neg = (u >> 31) != 0;
  std::uint32_t a = u & 0x7FFFFFFFu;
  if (a > 0x7F800000u) return nan_code(f, o, neg);
  if (a == 0x7F800000u) return overflow_code(f, o == Overflow::sat_cuda ? o : Overflow::ieee, neg);
  if (o != Overflow::ieee && a > fi.max_bits) a = fi.max_bits;  // saturating modes clamp before rounding
  std::uint32_t mag = 0;
  if (a != 0) {
    const int emin = 1 - fi.bias;
    int e = ilog2_bits(a);
    if (e < emin) e = emin;
    const std::uint32_t n = round_units(a, e - fi.man, tie);
    // (e - emin) << man + n: subnormals have n < 2^man at e == emin; a carry to 2^(man+1) lands
    // in the next binade.
    mag = (static_cast<std::uint32_t>(e - emin) << fi.man) + n;
  }
  if (mag > fi.maxc) return overflow_code(f, o, neg);
  if (mag == 0 && fi.fnuz) return 0u;
  return mag | (neg ? fi.sign : 0u);
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

/// bf16 rounding (RNE, IEEE overflow) of a float, as a float.
ATTEST_HD inline float round_bf16(float x) { return decode(FormatId::bf16, encode(FormatId::bf16, x, Rounding::rne, Overflow::ieee)); }

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
ATTEST_HD inline float mx_elem_max(FormatId f) { return f == FormatId::int8 ? 127.0f / 64.0f : ffrom(fmt_info(f).max_bits); }

/// E8M0 code of a block with absolute maximum amax (docs/quantizer-schemes.md, "E8M0 scale rules").
ATTEST_HD inline std::uint32_t e8m0_scale(float amax, E8M0Rule rule, FormatId elem) {
  if (!is_finite(amax)) return 0xFFu;
  const float a = fabs_(amax);
  const std::uint32_t u = fbits(a);
  const int e = static_cast<int>(u >> 23);
  const std::uint32_t m = u & 0x7FFFFFu;
  const int emax = fmt_info(elem).emax;
  auto clamp = [](int v, int lo, int hi) { return v < lo ? lo : (v > hi ? hi : v); };
  switch (rule) {
    case E8M0Rule::floor: return static_cast<std::uint32_t>(clamp(e - 127 - emax, -127, 127) + 127);
    case E8M0Rule::ceil: return static_cast<std::uint32_t>(clamp(e - 127 + (m != 0 ? 1 : 0) - emax, -127, 127) + 127);
    case E8M0Rule::rceil: {
      const float d = a * (1.0f / mx_elem_max(elem));
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

/// What a block's elements are multiplied by: 2^(127 - code) (exact; 2^-127 is subnormal), or for
/// aiter_hip_fp8 the float with bits (254 - code) << 23; NaN for 0xFF.
ATTEST_HD inline float e8m0_multiplier(std::uint32_t code, E8M0Rule rule) {
  if (code == 0xFFu) return quiet_nan();
  if (rule == E8M0Rule::aiter_hip_fp8) return ffrom((254u - code) << 23);
  return code == 254u ? ffrom(0x00400000u) : ffrom((254u - code) << 23);
}

/// MX element code of v (already multiplied). MXINT8: round(v * 64) with the tie rule, clamped to
/// [-127, 127] (v * 64 is exact unless it overflows, which saturates anyway).
ATTEST_HD inline std::uint32_t mx_element_code(float v, FormatId elem, Rounding tie, Overflow o) {
  if (elem == FormatId::int8) {
    std::uint32_t c = encode_int8(v * 64.0f, tie);
    if (c == 0x80u) c = 0x81u;  // -128 -> -127
    return c;
  }
  return encode(elem, v, tie, o);
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
ATTEST_HD inline void hadamard32_bf16(float* x) {
  float in[32];
  for (int j = 0; j < 32; ++j) in[j] = round_bf16(x[j]);
  for (int k = 0; k < 32; ++k) {
    float acc = 0.0f;
    for (int j = 0; j < 32; ++j) {
      unsigned jk = static_cast<unsigned>(j & k), par = 0;
      while (jk != 0) {
        par ^= jk & 1u;
        jk >>= 1;
      }
      acc = acc + in[j] * (par != 0 ? -kH32Bf16 : kH32Bf16);
    }
    x[k] = acc;
  }
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
ATTEST_HD inline GroupScale group_scale(float amax, const Scheme& s) {
  GroupScale g{fbits(1.0f), 1.0f, 1.0f};
  if (s.family == Family::cast) return g;
  if (s.family == Family::mx) {
    g.stored = e8m0_scale(amax, s.e8m0, s.element);
    g.mult = e8m0_multiplier(g.stored, s.e8m0);
    return g;
  }
  g.scale = uniform_scale(amax, s.scale, s.scale_max);
  g.stored = fbits(g.scale);
  if (s.apply == ApplyOp::mul) g.mult = uniform_inverse(amax, s.scale, s.scale_max);
  return g;
}

/// Element code of a prepared value v in a group.
ATTEST_HD inline std::uint32_t element_code(float v, const GroupScale& g, const Scheme& s) {
  switch (s.family) {
    case Family::cast: return encode(s.element, v, s.elem_round, s.overflow);
    case Family::int8: return to_int8(s.apply == ApplyOp::mul ? v * g.mult : v / g.scale, s.int_round == IntRounding::half);
    case Family::fp8: return encode(s.element, s.apply == ApplyOp::mul ? v * g.mult : v / g.scale, s.elem_round, s.overflow);
    case Family::mx: return mx_element_code(v * g.mult, s.element, s.elem_round, s.overflow);
    case Family::identity: break;  // refused on the host (require_device_quantizer)
  }
  return 0u;
}

}  // namespace attest::gpu::qm
