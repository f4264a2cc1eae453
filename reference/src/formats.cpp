// Element format codecs. Two encoders live here and must agree bit for bit (the tests compare
// both against an independent exact-rational oracle):
//  - encode_generic: from double by frexp/ldexp (exact power-of-two scaling), every rounding
//    and overflow mode, every format; used for the double overload and the non-RNE modes;
//  - FastRne: float bits with round-to-nearest-even by integer add (normal range) and by one
//    float addition of a power of two (subnormal range), branch-free so loops vectorise.
#include "attest/reference/formats.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "attest/core/status.hpp"

namespace attest::ref {
namespace {

constexpr double p2(int e) { return e >= 0 ? double(1ull << e) : 1.0 / double(1ull << -e); }

// The format table of FORMATS.md (core/format.hpp), indexed by FormatId; kAll: the rows with a codec (all but f32).
constexpr const auto& kInfo = kFormatTable;
constexpr std::array<FormatId, 11> kAll{FormatId::bf16, FormatId::fp16, FormatId::fp8_e4m3fn, FormatId::fp8_e5m2,
                                      FormatId::fp8_e4m3fnuz, FormatId::fp8_e5m2fnuz, FormatId::fp6_e2m3fn,
                                      FormatId::fp6_e3m2fn, FormatId::fp4_e2m1fn, FormatId::e8m0fnu, FormatId::int8};

// Largest finite magnitude code (sign bit clear) of the sign/exponent/mantissa formats.
constexpr std::uint32_t max_code(FormatId f) {
  switch (f) {
    case FormatId::bf16: return 0x7F7F;
    case FormatId::fp16: return 0x7BFF;
    case FormatId::fp8_e4m3fn: return 0x7E;
    case FormatId::fp8_e5m2: return 0x7B;
    case FormatId::fp8_e4m3fnuz:
    case FormatId::fp8_e5m2fnuz: return 0x7F;
    case FormatId::fp6_e2m3fn:
    case FormatId::fp6_e3m2fn: return 0x1F;
    case FormatId::fp4_e2m1fn: return 0x7;
    case FormatId::e8m0fnu: return 0xFE;
    case FormatId::int8: return 0x7F;
    case FormatId::f32: break;
  }
  return 0;
}
constexpr std::uint32_t sign_bit(FormatId f) { return 1u << (kInfo[static_cast<int>(f)].bits - 1); }
constexpr bool is_fnuz(FormatId f) { return f == FormatId::fp8_e4m3fnuz || f == FormatId::fp8_e5m2fnuz; }

// Code of a NaN input.
constexpr std::uint32_t nan_code_for(FormatId f, Overflow o, bool neg) {
  const bool cuda = o == Overflow::sat_cuda;
  switch (f) {
    case FormatId::bf16: return cuda ? 0x7FFF : (neg ? 0xFFC0 : 0x7FC0);
    case FormatId::fp16: return cuda ? 0x7FFF : (neg ? 0xFE00 : 0x7E00);
    case FormatId::fp8_e4m3fn: return cuda ? 0x7F : (neg ? 0xFF : 0x7F);
    case FormatId::fp8_e5m2: return cuda ? 0x7F : (neg ? 0xFE : 0x7E);
    case FormatId::fp8_e4m3fnuz:
    case FormatId::fp8_e5m2fnuz: return 0x80;
    // ml_dtypes returns `sign ? -quiet_NaN : quiet_NaN` with quiet_NaN = -0, so the sign flips.
    case FormatId::fp6_e2m3fn:
    case FormatId::fp6_e3m2fn: return o != Overflow::ieee ? 0x00 : (neg ? 0x00 : 0x20);
    case FormatId::fp4_e2m1fn: return o != Overflow::ieee ? 0x0 : (neg ? 0x0 : 0x8);
    case FormatId::e8m0fnu: return 0xFF;
    case FormatId::int8: return 0;
    case FormatId::f32: break;
  }
  return 0;
}
// Code of a finite value whose rounded magnitude exceeds the format's max.
constexpr std::uint32_t overflow_code_for(FormatId f, Overflow o, bool neg) {
  const std::uint32_t s = neg ? sign_bit(f) : 0;
  if (o != Overflow::ieee) return max_code(f) | s;
  switch (f) {
    case FormatId::bf16: return 0x7F80 | s;
    case FormatId::fp16: return 0x7C00 | s;
    case FormatId::fp8_e4m3fn: return 0x7F | s;
    case FormatId::fp8_e5m2: return 0x7C | s;
    case FormatId::fp8_e4m3fnuz:
    case FormatId::fp8_e5m2fnuz: return 0x80;
    default: return max_code(f) | s;
  }
}
// Code of an infinite input: sat_cuda saturates it, ieee and sat_hip treat it as overflow.
constexpr std::uint32_t inf_code_for(FormatId f, Overflow o, bool neg) {
  return overflow_code_for(f, o == Overflow::sat_cuda ? o : Overflow::ieee, neg);
}

// Rounds n + frac (0 <= frac < 1, both exact) to an integer with the tie rule.
inline std::int64_t round_int(double n, double frac, Rounding r) {
  const auto i = static_cast<std::int64_t>(n);
  if (frac > 0.5) return i + 1;
  if (frac < 0.5) return i;
  switch (r) {
    case Rounding::rne: return i + (i & 1);
    case Rounding::away: return i + 1;
    case Rounding::smaller: return i;
  }
  return i;
}

// |a| rounded to the grid of a format with `man` mantissa bits and minimum normal exponent
// `emin`; returns the magnitude code (exponent field << man | mantissa), which may exceed the
// format's max (the caller decides overflow). Exact: ldexp scales by a power of two, and
// q < 2^(man+1) keeps q's fractional part exact in a double.
inline std::int64_t round_magnitude(double a, int man, int emin, Rounding r) {
  if (a == 0.0) return 0;
  int e2 = 0;
  std::frexp(a, &e2);  // a = f * 2^e2, f in [0.5, 1): floor(log2 a) = e2 - 1
  const int e = std::max(e2 - 1, emin);
  const double q = std::ldexp(a, man - e);
  const double n = std::floor(q);
  const std::int64_t m = round_int(n, q - n, r);
  // (e - emin) << man + m: a subnormal has m < 2^man at e == emin, a carry m == 2^(man+1) lands
  // in the next binade, both without special cases.
  return (static_cast<std::int64_t>(e - emin) << man) + m;
}

std::uint16_t encode_e8m0(double x, Rounding r, Overflow o) {
  if (std::isnan(x)) return 0xFF;
  if (std::isinf(x)) return o != Overflow::sat_cuda ? 0xFF : (x > 0 ? 0xFE : 0x00);
  if (x <= 0.0) return o == Overflow::ieee ? 0xFF : 0x00;  // no zero, no sign
  int e2 = 0;
  const double f = std::frexp(x, &e2);  // x = 2f * 2^(e2-1), 2f in [1, 2)
  int e = e2 - 1;
  const double g = 2.0 * f;
  // The tie 1.5 * 2^e goes up under `rne` as under `away`: ml_dtypes (checked on all 2^32 floats,
  // 0.7.0) rounds to nearest even with the implicit significand bit as the last kept bit, and that
  // bit is 1 for every E8M0 value, so every tie rounds up, the FP32-subnormal tie 1.5 * 2^-127 too.
  if (g > 1.5 || (g == 1.5 && r != Rounding::smaller)) ++e;
  // Below 2^-127 the nearest value is always 2^-127 (code 0): no zero exists.
  if (e < -127) return 0x00;
  if (e > 127) return o == Overflow::ieee ? 0xFF : 0xFE;
  return static_cast<std::uint16_t>(e + 127);
}

std::uint16_t encode_int8(double x, Rounding r) {
  if (std::isnan(x)) return 0;
  const bool neg = std::signbit(x);
  const double a = std::min(std::fabs(x), 1024.0);  // saturates below anyway
  const double n = std::floor(a);
  std::int64_t v = round_int(n, a - n, r);
  if (neg) v = -v;
  v = std::clamp<std::int64_t>(v, -128, 127);
  return static_cast<std::uint16_t>(static_cast<std::uint8_t>(static_cast<std::int8_t>(v)));
}

[[noreturn]] void no_codec(FormatId f) {
  throw Error("format " + std::string(name(f)) + " has no codec (valid: bf16, fp16, fp8_*, fp6_*, fp4_e2m1fn, e8m0fnu, int8)");
}

std::uint16_t encode_generic(FormatId f, double x, Rounding r, Overflow o) {
  if (f == FormatId::f32) no_codec(f);
  if (f == FormatId::e8m0fnu) return encode_e8m0(x, r, o);
  if (f == FormatId::int8) return encode_int8(x, r);
  const FormatSpec& fi = kInfo[static_cast<int>(f)];
  const bool neg = std::signbit(x);
  if (std::isnan(x)) return static_cast<std::uint16_t>(nan_code_for(f, o, neg));
  if (std::isinf(x)) return static_cast<std::uint16_t>(inf_code_for(f, o, neg));
  double a = std::fabs(x);
  if (o != Overflow::ieee && a > fi.max_finite) a = fi.max_finite;
  const std::int64_t mag = round_magnitude(a, fi.man_bits, 1 - fi.bias, r);
  if (mag > static_cast<std::int64_t>(max_code(f))) return static_cast<std::uint16_t>(overflow_code_for(f, o, neg));
  if (mag == 0 && is_fnuz(f)) return 0;
  return static_cast<std::uint16_t>(static_cast<std::uint32_t>(mag) | (neg ? sign_bit(f) : 0u));
}

// Round-to-nearest-even from float bits for a sign/exponent/mantissa format with M mantissa
// bits and bias B. Normal range: add (half ulp - 1 + lsb) and shift (the classic bf16 trick),
// then rebias. Subnormal range (|x| < 2^(1-B)): |x| + 2^(1-B-M+23) in float rounds |x| to a
// multiple of the format's smallest subnormal (the float ulp of that constant) with the FPU's
// RNE, and the integer difference of the bits is the subnormal code.
template <FormatId F>
struct FastRne {
  static constexpr int M = kInfo[static_cast<int>(F)].man_bits;
  static constexpr int B = kInfo[static_cast<int>(F)].bias;
  static constexpr int kShift = 23 - M;
  static constexpr std::uint32_t kRebias = static_cast<std::uint32_t>(127 - B) << M;
  static constexpr std::uint32_t kMinNormalBits = static_cast<std::uint32_t>(127 + 1 - B) << 23;
  static constexpr std::uint32_t kMagicBits = static_cast<std::uint32_t>(127 + 1 - B - M + 23) << 23;
  static constexpr std::uint32_t kMax = max_code(F);
  static constexpr std::uint32_t kSign = sign_bit(F);

  // Branch-free: every choice is a mask select, so the loop vectorises.
  static inline std::uint32_t mask(bool c) { return 0u - static_cast<std::uint32_t>(c); }
  static inline std::uint32_t sel(std::uint32_t m, std::uint32_t a, std::uint32_t b) { return (a & m) | (b & ~m); }

  template <Overflow O>
  static inline std::uint32_t run(std::uint32_t u) {
    const std::uint32_t a = u & 0x7FFFFFFFu;
    const std::uint32_t neg = mask((u >> 31) != 0);
    const std::uint32_t norm = ((a + ((1u << (kShift - 1)) - 1u) + ((a >> kShift) & 1u)) >> kShift) - kRebias;
    const float sum = std::bit_cast<float>(a) + std::bit_cast<float>(kMagicBits);
    const std::uint32_t sub = std::bit_cast<std::uint32_t>(sum) - kMagicBits;
    const std::uint32_t mag = sel(mask(a < kMinNormalBits), sub, norm);
    std::uint32_t code = mag | (kSign & neg);
    if constexpr (is_fnuz(F)) code &= ~mask(mag == 0);
    code = sel(mask(mag > kMax), sel(neg, overflow_code_for(F, O, true), overflow_code_for(F, O, false)), code);
    code = sel(mask(a == 0x7F800000u), sel(neg, inf_code_for(F, O, true), inf_code_for(F, O, false)), code);
    code = sel(mask(a > 0x7F800000u), sel(neg, nan_code_for(F, O, true), nan_code_for(F, O, false)), code);
    return code;
  }
};

// The fast path is valid where the format's normal range fits in float's (all but e8m0/int8)
// and the subnormal magic constant is a normal float.
template <FormatId F, Overflow O, class Out>
void encode_loop(const float* in, Out* out, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) {
    out[i] = static_cast<Out>(FastRne<F>::template run<O>(std::bit_cast<std::uint32_t>(in[i])));
  }
}

template <FormatId F, class Out>
void encode_loop_o(const float* in, Out* out, std::size_t n, Overflow o) {
  switch (o) {
    case Overflow::ieee: encode_loop<F, Overflow::ieee>(in, out, n); return;
    case Overflow::sat_cuda: encode_loop<F, Overflow::sat_cuda>(in, out, n); return;
    case Overflow::sat_hip: encode_loop<F, Overflow::sat_hip>(in, out, n); return;
  }
}

// e8m0fnu under rne + ieee (ml_dtypes' cast) from the float bits, branch-free. A positive normal
// 1.m * 2^(E-127) rounds to 2^(E-127) or 2^(E-126): code E + (m >= 0x400000) (the tie 1.5 * 2^e
// goes up, see encode_e8m0); a positive subnormal m * 2^-149 rounds to 2^-127 (code 0) below the
// tie 1.5 * 2^-127 = 0x600000 * 2^-149 and to 2^-126 (code 1) from it. Zero, negatives (the sign
// makes u >> 23 >= 256), Inf, NaN (E = 255) and a rounding past 2^127 (code 255) give 0xFF.
// Mask selects only, as in FastRne, so that the loop vectorises.
inline std::uint32_t e8m0_rne_ieee(std::uint32_t u) {
  const std::uint32_t e = u >> 23, m = u & 0x7FFFFFu;
  const std::uint32_t up_normal = (0x3FFFFFu - m) >> 31;     // m >= 0x400000
  const std::uint32_t up_subnormal = (0x5FFFFFu - m) >> 31;  // m >= 0x600000
  const std::uint32_t sub = 0u - static_cast<std::uint32_t>(e == 0);
  const std::uint32_t code = (up_subnormal & sub) | ((e + up_normal) & ~sub);
  const std::uint32_t bad = (0u - static_cast<std::uint32_t>(u == 0)) | (0u - static_cast<std::uint32_t>(code >= 0xFFu));
  return (code & ~bad) | (0xFFu & bad);
}

// int8 under rne (every overflow mode: saturate, NaN -> 0), branch-free: |x| clamped to 256, then
// (a + 2^23) - 2^23 rounds it to an integer with the FPU's RNE (exact: a < 2^23), then the sign
// and the two's complement range [-128, 127].
// Written with selects and integer ops only (no fmin / signbit calls) so that the loop vectorises.
inline std::uint32_t int8_rne(float x) {
  const std::uint32_t u = std::bit_cast<std::uint32_t>(x);
  const float a = std::bit_cast<float>(u & 0x7FFFFFFFu);
  const float c = a < 256.0f ? a : 256.0f;  // NaN -> 256, zeroed below
  const auto q = static_cast<std::int32_t>((c + 0x1p23f) - 0x1p23f);
  const auto neg = static_cast<std::int32_t>(u >> 31);
  const std::int32_t lim = 127 + neg;
  const std::int32_t m = q < lim ? q : lim;
  const std::int32_t v = (m ^ -neg) + neg;  // -m when negative
  return (u & 0x7FFFFFFFu) > 0x7F800000u ? 0u : static_cast<std::uint32_t>(v) & 0xFFu;
}

// Returns false if (f, r) has no fast path.
template <class Out>
bool encode_fast(FormatId f, const float* in, Out* out, std::size_t n, Rounding r, Overflow o) {
  if (r != Rounding::rne) return false;
  switch (f) {
    case FormatId::e8m0fnu:
      if (o != Overflow::ieee) return false;
      for (std::size_t i = 0; i < n; ++i) out[i] = static_cast<Out>(e8m0_rne_ieee(std::bit_cast<std::uint32_t>(in[i])));
      return true;
    case FormatId::int8:
      for (std::size_t i = 0; i < n; ++i) out[i] = static_cast<Out>(int8_rne(in[i]));
      return true;
    case FormatId::bf16: encode_loop_o<FormatId::bf16>(in, out, n, o); return true;
    case FormatId::fp16: encode_loop_o<FormatId::fp16>(in, out, n, o); return true;
    case FormatId::fp8_e4m3fn: encode_loop_o<FormatId::fp8_e4m3fn>(in, out, n, o); return true;
    case FormatId::fp8_e5m2: encode_loop_o<FormatId::fp8_e5m2>(in, out, n, o); return true;
    case FormatId::fp8_e4m3fnuz: encode_loop_o<FormatId::fp8_e4m3fnuz>(in, out, n, o); return true;
    case FormatId::fp8_e5m2fnuz: encode_loop_o<FormatId::fp8_e5m2fnuz>(in, out, n, o); return true;
    case FormatId::fp6_e2m3fn: encode_loop_o<FormatId::fp6_e2m3fn>(in, out, n, o); return true;
    case FormatId::fp6_e3m2fn: encode_loop_o<FormatId::fp6_e3m2fn>(in, out, n, o); return true;
    case FormatId::fp4_e2m1fn: encode_loop_o<FormatId::fp4_e2m1fn>(in, out, n, o); return true;
    default: return false;
  }
}

float decode_formula(FormatId f, std::uint32_t code) {
  const FormatSpec& fi = kInfo[static_cast<int>(f)];
  code &= (1u << fi.bits) - 1u;
  if (f == FormatId::int8) return static_cast<float>(static_cast<std::int8_t>(static_cast<std::uint8_t>(code)));
  if (f == FormatId::e8m0fnu) {
    return code == 0xFF ? std::numeric_limits<float>::quiet_NaN() : std::ldexp(1.0f, static_cast<int>(code) - 127);
  }
  const bool neg = (code & sign_bit(f)) != 0;
  const std::uint32_t mag = code & (sign_bit(f) - 1u);
  float v = 0.0f;
  if (is_nan_code(f, static_cast<std::uint16_t>(code))) {
    v = std::numeric_limits<float>::quiet_NaN();
  } else if (fi.has_inf && mag == (((1u << fi.exp_bits) - 1u) << fi.man_bits)) {
    v = std::numeric_limits<float>::infinity();
  } else {
    const int ef = static_cast<int>(mag >> fi.man_bits);
    const auto m = static_cast<int>(mag & ((1u << fi.man_bits) - 1u));
    const int emin = 1 - fi.bias;
    v = ef == 0 ? std::ldexp(static_cast<float>(m), emin - fi.man_bits)
                : std::ldexp(static_cast<float>(m + (1 << fi.man_bits)), ef - fi.bias - fi.man_bits);
  }
  return neg ? -v : v;
}

// Decode tables for the formats of 8 bits or fewer (built once, from the formula).
const std::array<std::array<float, 256>, 11>& small_tables() {
  static const auto tables = [] {
    std::array<std::array<float, 256>, 11> t{};
    for (FormatId f : kAll) {
      if (kInfo[static_cast<int>(f)].bits > 8) continue;
      for (std::uint32_t c = 0; c < 256; ++c) t[static_cast<int>(f)][c] = decode_formula(f, c);
    }
    return t;
  }();
  return tables;
}

template <class E, std::size_t N>
std::string name_list(const std::array<E, N>& items) {
  std::string s;
  for (const auto& it : items) s += (s.empty() ? "" : ", ") + std::string(it);
  return s;
}

}  // namespace

const FormatSpec& format_info(FormatId f) { return kInfo.at(static_cast<std::size_t>(f)); }
std::span<const FormatId> all_formats() { return kAll; }
std::string_view format_name(FormatId f) { return format_info(f).name; }

FormatId parse_format(std::string_view name) {
  for (FormatId f : kAll)
    if (format_name(f) == name) return f;
  std::array<std::string_view, 11> names{};
  for (std::size_t i = 0; i < kAll.size(); ++i) names[i] = format_name(kAll[i]);
  throw Error("unknown format '" + std::string(name) + "' (valid: " + name_list(names) + ")");
}

std::uint16_t encode(FormatId f, float x, Rounding r, Overflow o) {
  std::uint16_t c = 0;
  if (encode_fast(f, &x, &c, 1, r, o)) return c;
  return encode_generic(f, static_cast<double>(x), r, o);
}
std::uint16_t encode(FormatId f, double x, Rounding r, Overflow o) { return encode_generic(f, x, r, o); }

float decode(FormatId f, std::uint16_t code) {
  switch (f) {
    case FormatId::bf16: {
      float v = std::bit_cast<float>(static_cast<std::uint32_t>(code) << 16);
      return std::isnan(v) ? std::copysign(std::numeric_limits<float>::quiet_NaN(), v) : v;
    }
    case FormatId::fp16: return decode_formula(f, code);
    case FormatId::f32: no_codec(f);
    default: return small_tables()[static_cast<int>(f)][code & 0xFFu];
  }
}

float round_to(FormatId f, float x, Rounding r, Overflow o) { return decode(f, encode(f, x, r, o)); }

bool is_nan_code(FormatId f, std::uint16_t code) {
  switch (f) {
    case FormatId::bf16: return (code & 0x7FFF) > 0x7F80;
    case FormatId::fp16: return (code & 0x7FFF) > 0x7C00;
    case FormatId::fp8_e4m3fn: return (code & 0x7F) == 0x7F;
    case FormatId::fp8_e5m2: return (code & 0x7F) > 0x7C;
    case FormatId::fp8_e4m3fnuz:
    case FormatId::fp8_e5m2fnuz: return (code & 0xFF) == 0x80;
    case FormatId::e8m0fnu: return (code & 0xFF) == 0xFF;
    default: return false;
  }
}
std::uint32_t code_count(FormatId f) {
  if (f == FormatId::f32) no_codec(f);
  return 1u << format_info(f).bits;
}

void encode_f32(FormatId f, std::span<const float> in, std::span<std::uint16_t> out, Rounding r, Overflow o) {
  if (in.size() != out.size())
    throw Error("encode_f32: output has " + std::to_string(out.size()) + " elements, input " + std::to_string(in.size()));
  if (encode_fast(f, in.data(), out.data(), in.size(), r, o)) return;
  for (std::size_t i = 0; i < in.size(); ++i) out[i] = encode_generic(f, static_cast<double>(in[i]), r, o);
}
void encode_f32(FormatId f, std::span<const float> in, std::span<std::uint8_t> out, Rounding r, Overflow o) {
  if (format_info(f).bits > 8)
    throw Error("encode_f32: format " + std::string(format_name(f)) + " has 16-bit codes, not bytes");
  if (in.size() != out.size())
    throw Error("encode_f32: output has " + std::to_string(out.size()) + " elements, input " + std::to_string(in.size()));
  if (encode_fast(f, in.data(), out.data(), in.size(), r, o)) return;
  for (std::size_t i = 0; i < in.size(); ++i)
    out[i] = static_cast<std::uint8_t>(encode_generic(f, static_cast<double>(in[i]), r, o));
}
void decode_f32(FormatId f, std::span<const std::uint16_t> in, std::span<float> out) {
  if (in.size() != out.size())
    throw Error("decode_f32: output has " + std::to_string(out.size()) + " elements, input " + std::to_string(in.size()));
  for (std::size_t i = 0; i < in.size(); ++i) out[i] = decode(f, in[i]);
}
void decode_f32(FormatId f, std::span<const std::uint8_t> in, std::span<float> out) {
  if (in.size() != out.size())
    throw Error("decode_f32: output has " + std::to_string(out.size()) + " elements, input " + std::to_string(in.size()));
  if (format_info(f).bits > 8)
    throw Error("decode_f32: format " + std::string(format_name(f)) + " has 16-bit codes, not bytes");
  const auto& t = small_tables()[static_cast<int>(f)];
  for (std::size_t i = 0; i < in.size(); ++i) out[i] = t[in[i]];
}

namespace {
int packed_bits(FormatId f, const char* what) {
  if (f != FormatId::fp4_e2m1fn && f != FormatId::fp6_e2m3fn && f != FormatId::fp6_e3m2fn)
    throw Error(std::string(what) + ": format " + std::string(format_name(f)) + " is not packed (fp4/fp6 only)");
  return format_info(f).bits;
}
}  // namespace

std::vector<std::uint8_t> pack(FormatId f, std::span<const std::uint8_t> codes) {
  const int bits = packed_bits(f, "pack");
  std::vector<std::uint8_t> out((codes.size() * static_cast<std::size_t>(bits) + 7) / 8, 0);
  std::size_t pos = 0;  // stream bit position
  for (std::size_t i = 0; i < codes.size(); ++i, pos += static_cast<std::size_t>(bits)) {
    const std::uint32_t c = codes[i];
    if (c >> bits)
      throw Error("pack: code " + std::to_string(c) + " at index " + std::to_string(i) + " does not fit " +
                  std::to_string(bits) + " bits");
    const std::uint32_t shifted = c << (pos % 8);  // spans at most two bytes
    out[pos / 8] |= static_cast<std::uint8_t>(shifted & 0xFF);
    if ((shifted >> 8) != 0) out[pos / 8 + 1] |= static_cast<std::uint8_t>(shifted >> 8);
  }
  return out;
}

std::vector<std::uint8_t> unpack(FormatId f, std::span<const std::uint8_t> packed, std::size_t count) {
  const int bits = packed_bits(f, "unpack");
  const std::size_t want = (count * static_cast<std::size_t>(bits) + 7) / 8;
  if (packed.size() != want)
    throw Error("unpack: " + std::to_string(count) + " codes of " + std::string(format_name(f)) + " need " +
                std::to_string(want) + " bytes, got " + std::to_string(packed.size()));
  std::vector<std::uint8_t> out(count);
  std::size_t pos = 0;
  for (std::size_t i = 0; i < count; ++i, pos += static_cast<std::size_t>(bits)) {
    std::uint32_t w = packed[pos / 8];
    if (pos / 8 + 1 < packed.size()) w |= static_cast<std::uint32_t>(packed[pos / 8 + 1]) << 8;
    out[i] = static_cast<std::uint8_t>((w >> (pos % 8)) & ((1u << bits) - 1u));
  }
  return out;
}

}  // namespace attest::ref
