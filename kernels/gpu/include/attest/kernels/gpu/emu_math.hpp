#pragma once
/// Scalar arithmetic of the gpu.emu.<recipe> kernels, host and device (ATTEST_HD): element-format
/// rounding, the exp2 policies, the LSE's log2. Ports of the CPU emulator's definitions
/// (reference/src/exp2.cpp, docs/recipes.md) and of kernels/cpu/cpu_numerics.hpp's rounding,
/// written only with correctly rounded IEEE operations (+ - * /, fma, floor/rint, bit
/// manipulation), so host and device give the same bits. No contraction: device code is built
/// with --fmad=false / -ffp-contract=off, host code with -ffp-contract=off. Because the header
/// is host/device, gpu_emu_tests checks it against the emulator on the CPU (no device needed).
#include <bit>
#include <cmath>
#include <cstdint>

#include "attest/core/format.hpp"
#include "attest/core/philox.hpp"  // ATTEST_HD
#include "attest/core/scheme.hpp"

namespace attest::gpu::emu {

ATTEST_HD inline std::uint32_t fbits(float x) { return std::bit_cast<std::uint32_t>(x); }
ATTEST_HD inline float ffrom(std::uint32_t u) { return std::bit_cast<float>(u); }
ATTEST_HD inline float qnan() { return ffrom(0x7FC00000u); }
ATTEST_HD inline float finf() { return ffrom(0x7F800000u); }
ATTEST_HD inline bool isnanf_(float x) { return x != x; }
/// 2^k for k in [-1022, 1023], exact (built from the bits: no libm).
ATTEST_HD inline double pow2d(int k) { return std::bit_cast<double>(static_cast<std::uint64_t>(k + 1023) << 52); }

/// Formats are rows of core's format table (a FormatSpec is plain data: the host copies the row
/// into the launch parameters); tie rules, overflow modes and E8M0 rules are core Scheme's enums.
using Rounding = Scheme::Rounding;
using Overflow = Scheme::Overflow;
using E8M0Rule = Scheme::E8M0Rule;

/// x rounded to the nearest value of the float format `f` (kernels/cpu round_to, same steps):
/// `man_bits` mantissa bits, smallest normal 2^emin(), largest finite `max_finite`, fnuz: no -0.
/// The binade's quantum is a power of two, so units = a / quantum is exact and one
/// rint/floor/ceil rounds.
ATTEST_HD inline float round_to(const FormatSpec& f, float x, Rounding tie, Overflow sat) {
  if (isnanf_(x)) {
    if (f.has_nan) return qnan();
    return sat == Overflow::ieee ? -0.0f : 0.0f;
  }
  const bool neg = (fbits(x) >> 31) != 0;
  double a = static_cast<double>(neg ? -x : x);
  if (a == static_cast<double>(finf())) {
    if (sat == Overflow::sat_cuda || (!f.has_inf && !f.has_nan)) return static_cast<float>(neg ? -f.max_finite : f.max_finite);
    if (f.has_inf) return neg ? -finf() : finf();
    return qnan();
  }
  if (sat == Overflow::sat_hip && a > f.max_finite) a = f.max_finite;
  double r = 0;
  if (a != 0) {
    // ilogb of a normal double (every float is one) from its exponent bits.
    int e = static_cast<int>((std::bit_cast<std::uint64_t>(a) >> 52) & 0x7FF) - 1023;
    const int emin = 1 - f.bias;
    if (e < emin) e = emin;
    const double quantum = pow2d(e - f.man_bits);
    const double units = a * pow2d(f.man_bits - e);  // exact: a power-of-two scaling
    const double n = tie == Rounding::rne ? std::rint(units) : tie == Rounding::away ? std::floor(units + 0.5) : std::ceil(units - 0.5);
    r = n * quantum;
  }
  if (r > f.max_finite) {
    if (sat != Overflow::ieee || (!f.has_inf && !f.has_nan)) r = f.max_finite;
    else if (f.has_inf) r = static_cast<double>(finf());
    else return qnan();
  }
  if (r == 0 && f.fnuz) return 0.0f;
  return static_cast<float>(neg ? -r : r);
}

// ---- exp2=cr ----

/// Relative half-width of the interval the double evaluation is trusted to lie in (as the
/// emulator: reference/src/exp2.cpp kTrust).
inline constexpr double kExp2Trust = 0x1p-46;

/// Double-double pieces (Dekker / Knuth), each a fixed sequence of correctly rounded operations.
struct DD {
  double hi, lo;
};
ATTEST_HD inline DD dd_fast_two_sum(double a, double b) {
  const double s = a + b;
  return {s, b - (s - a)};
}
ATTEST_HD inline DD dd_add(DD a, DD b) {
  const double s = a.hi + b.hi;
  const double bb = s - a.hi;
  double e = (a.hi - (s - bb)) + (b.hi - bb);
  e = e + (a.lo + b.lo);
  return dd_fast_two_sum(s, e);
}
ATTEST_HD inline DD dd_mul(DD a, DD b) {
  const double p = a.hi * b.hi;
  double e = std::fma(a.hi, b.hi, -p);
  e = e + (a.hi * b.lo + a.lo * b.hi);
  return dd_fast_two_sum(p, e);
}
ATTEST_HD inline DD dd_div_int(DD a, double d) {
  const double q1 = a.hi / d;
  const double p = q1 * d;
  const double pe = std::fma(q1, d, -p);
  const double q2 = (((a.hi - p) - pe) + a.lo) / d;
  return dd_fast_two_sum(q1, q2);
}

/// 2^x correctly rounded to float in double-double arithmetic, for the inputs whose double
/// evaluation cannot decide the rounding (the emulator uses 166-bit Boost arithmetic there).
/// 2^f = exp(f ln2) by its Taylor series in double-double (|f ln2| <= 0.347: 27 terms leave
/// < 2^-120), error a few 2^-100 relative. The result is decided by comparing with the exact
/// float midpoints; if the value lies within 2^-90 relative of a midpoint (never seen: 2^x of a
/// non-integer float is transcendental and binary32's hardest cases are far from that close),
/// `*undecided` is set so the caller fails loudly instead of guessing.
ATTEST_HD inline float exp2_cr_dd(float x, unsigned* undecided) {
  const double xd = static_cast<double>(x);
  const double n = std::floor(xd + 0.5);
  const double f = xd - n;
  constexpr double kLn2Hi = 0x1.62e42fefa39efp-1, kLn2Lo = 0x1.abc9e3b39803fp-56;
  const double rh = f * kLn2Hi;
  DD r = dd_fast_two_sum(rh, std::fma(f, kLn2Hi, -rh) + f * kLn2Lo);
  DD term{1.0, 0.0}, sum{1.0, 0.0};
  for (int k = 1; k <= 27; ++k) {
    term = dd_div_int(dd_mul(term, r), static_cast<double>(k));
    sum = dd_add(sum, term);
  }
  const double sc = pow2d(static_cast<int>(n));  // exact scaling: n in [-150, 128]
  const double hi = sum.hi * sc, lo = sum.lo * sc;
  float a = static_cast<float>(hi);
  for (int it = 0; it < 4; ++it) {
    const float up = ffrom(fbits(a) + 1u);
    const float dn = a > 0.0f ? ffrom(fbits(a) - 1u) : 0.0f;
    const double mid_up = (static_cast<double>(a) + static_cast<double>(up)) * 0.5;  // exact
    const double mid_dn = (static_cast<double>(a) + static_cast<double>(dn)) * 0.5;
    const double du = (hi - mid_up) + lo;  // hi - mid exact (Sterbenz); the sign survives + lo
    const double dd = (hi - mid_dn) + lo;
    const double tol = mid_up * 0x1p-90;
    if ((du < 0 ? -du : du) < tol || (dd < 0 ? -dd : dd) < tol) {
      if (undecided != nullptr) *undecided = 1u;
      return a;
    }
    if (du > 0) a = up;
    else if (dd < 0) a = dn;
    else return a;
  }
  return a;
}

/// exp2=cr exactly as the emulator: x = n + f, degree-15 Horner in double with the emulator's
/// coefficients `c` (ln2^k/k! rounded once: attn_fwd_emu.hpp's exp2_cr_coefficients), scaled by
/// 2^n, rounded to float when the trust interval decides it, else the double-double path.
ATTEST_HD inline float exp2_cr(float x, const double* c, unsigned* undecided) {
  if (isnanf_(x)) return x;
  if (x >= 128.0f) return finf();
  if (x <= -150.0f) return 0.0f;
  const double xd = static_cast<double>(x);
  const double n = std::floor(xd + 0.5);
  const double f = xd - n;
  double y = c[15];
  for (int k = 14; k >= 0; --k) y = std::fma(y, f, c[k]);
  const double r = y * pow2d(static_cast<int>(n));
  const float lo = static_cast<float>(r * (1 - kExp2Trust));
  if (lo == static_cast<float>(r * (1 + kExp2Trust))) return lo;
  return exp2_cr_dd(x, undecided);
}

// ---- exp2=fa4 (FORMATS.md; reference/src/exp2.cpp exp2_fa4) ----
ATTEST_HD inline float exp2_fa4(float x) {
  if (!(x >= -127.0f)) x = -127.0f;  // fmaxf(x, -127): NaN -> -127
#if defined(__CUDA_ARCH__)
  const float xr = __fadd_rd(x, 12582912.0f);  // the kernel's add rounded toward -inf
#else
  // Equal to the add rounded toward -inf: in [2^23, 2^24) the floats are the integers.
  const float xr = 12582912.0f + std::floor(x);
#endif
  const float nn = xr - 12582912.0f;
  const float f = x - nn;
  const float c1 = ffrom(0x3F31F519u), c2 = ffrom(0x3E6906A4u), c3 = ffrom(0x3D9DF09Du);
  const float p = std::fma(std::fma(std::fma(c3, f, c2), f, c1), f, 1.0f);
  return ffrom((fbits(xr) << 23) + fbits(p));
}

// ---- log2 of the LSE (reference/src/exp2.cpp log2_portable) ----
ATTEST_HD inline double log2_portable(double x) {
  if (x != x || x < 0) return std::bit_cast<double>(0x7FF8000000000000ull);
  if (x == 0) return -std::bit_cast<double>(0x7FF0000000000000ull);
  if (x == std::bit_cast<double>(0x7FF0000000000000ull)) return x;
  // frexp of a normal double (x comes from a float: never subnormal in double): m in [1/2, 1).
  const auto bits = std::bit_cast<std::uint64_t>(x);
  int e = static_cast<int>((bits >> 52) & 0x7FF) - 1022;
  double m = std::bit_cast<double>((bits & 0x800FFFFFFFFFFFFFull) | 0x3FE0000000000000ull);
  if (m < 0.70710678118654752) {
    m *= 2;
    --e;
  }
  const double s = (m - 1) / (m + 1);
  const double z = s * s;
  double t = 1.0 / 29;
  for (int k = 13; k >= 0; --k) t = std::fma(t, z, 1.0 / (2 * k + 1));
  constexpr double kLog2e = 0x1.71547652b82fep0;
  const double ln_m = 2 * s * t;
  return static_cast<double>(e) + ln_m * kLog2e;
}

/// The LSE of a row from its final running max m (log2 units, including -off) and sum l.
ATTEST_HD inline float lse_of(float m, float l) {
  constexpr double kLn2 = 0x1.62e42fefa39efp-1;
  return static_cast<float>((static_cast<double>(m) + log2_portable(static_cast<double>(l))) * kLn2);
}

/// fl(s * 2^e) for an MX block sum (one rounding; the product is exact in double).
ATTEST_HD inline float scale_block(float s, int e) { return static_cast<float>(static_cast<double>(s) * pow2d(e)); }

// ---- E8M0 scale of a block-scaled P (kernels/cpu e8m0_code / e8m0_multiplier) ----
/// The rules the device implements: floor, ceil and (any other value) aiter_hip_fp4.
ATTEST_HD inline std::uint32_t e8m0_code(float amax, E8M0Rule rule, int emax) {
  if (isnanf_(amax) || amax == finf() || amax == -finf()) return 0xFF;
  const float a = amax < 0 ? -amax : amax;
  const int e = static_cast<int>((fbits(a) >> 23) & 0xFF);
  const std::uint32_t m = fbits(a) & 0x7FFFFF;
  auto clampi = [](int v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : v; };
  if (rule == E8M0Rule::floor) return static_cast<std::uint32_t>(clampi(e - 127 - emax, -127, 127) + 127);
  if (rule == E8M0Rule::ceil) return static_cast<std::uint32_t>(clampi(e - 127 + (m != 0 ? 1 : 0) - emax, -127, 127) + 127);
  return ((fbits(a / 6.0f) + 0x7FFFFFu) & 0x7F800000u) >> 23;  // aiter_hip_fp4
}
ATTEST_HD inline float e8m0_multiplier(std::uint32_t code) {
  if (code == 0xFF) return qnan();
  return static_cast<float>(pow2d(127 - static_cast<int>(code)));
}

}  // namespace attest::gpu::emu
