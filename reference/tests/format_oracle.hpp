#pragma once
// Independent slow encoder for the format tests: the representable magnitudes of each format
// are enumerated as exact rationals (Boost.Multiprecision cpp_rational) from the field layout of
// /work/shared/FORMATS.md, and an input (converted exactly to a rational) goes to the nearest
// one with the tie rule. It shares no code with reference/src/formats.cpp: no bit tricks, no
// frexp/ldexp rounding, special codes written out from the spec table.
//
// A second, faster path (`encode_dbl`) does the same search over the same table converted to
// doubles; the conversion is checked exact at construction (every value and every midpoint of
// these formats has at most 13 significant bits), so comparisons of double inputs against it
// are exact too. The unit tests check both paths agree; the slow sweeps use the double path.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <boost/multiprecision/cpp_int.hpp>

#include "attest/reference/formats.hpp"

namespace attest::ref::test {

using Rational = boost::multiprecision::cpp_rational;
using BigInt = boost::multiprecision::cpp_int;

inline Rational pow2(int e) {
  BigInt one = 1;
  return e >= 0 ? Rational(BigInt(one << e)) : Rational(BigInt(1), BigInt(one << -e));
}

/// Exact rational value of a finite double (x = mantissa * 2^exp, mantissa a 53-bit integer).
inline Rational to_rational(double x) {
  if (x == 0.0) return Rational(0);
  int e = 0;
  const double f = std::frexp(std::fabs(x), &e);
  const auto m = static_cast<std::int64_t>(std::ldexp(f, 53));
  Rational r = Rational(BigInt(m)) * pow2(e - 53);
  return x < 0 ? Rational(-r) : r;
}

/// Layout of a format, written from the FORMATS.md table (not from formats.cpp).
struct Layout {
  enum Kind { fp, e8m0, integer } kind;
  int bits, exp_bits, man_bits, bias;
};
inline Layout layout(FormatId f) {
  switch (f) {
    case FormatId::bf16: return {Layout::fp, 16, 8, 7, 127};
    case FormatId::fp16: return {Layout::fp, 16, 5, 10, 15};
    case FormatId::fp8_e4m3fn: return {Layout::fp, 8, 4, 3, 7};
    case FormatId::fp8_e5m2: return {Layout::fp, 8, 5, 2, 15};
    case FormatId::fp8_e4m3fnuz: return {Layout::fp, 8, 4, 3, 8};
    case FormatId::fp8_e5m2fnuz: return {Layout::fp, 8, 5, 2, 16};
    case FormatId::fp6_e2m3fn: return {Layout::fp, 6, 2, 3, 1};
    case FormatId::fp6_e3m2fn: return {Layout::fp, 6, 3, 2, 3};
    case FormatId::fp4_e2m1fn: return {Layout::fp, 4, 2, 1, 1};
    case FormatId::e8m0fnu: return {Layout::e8m0, 8, 8, 0, 127};
    case FormatId::int8: return {Layout::integer, 8, 0, 0, 0};
    case FormatId::f32: break;  // no codec
  }
  throw std::logic_error("layout");
}

/// What a magnitude code (sign clear) means, per the FORMATS.md table.
enum class CodeKind { finite, inf, nan };
inline CodeKind code_kind(FormatId f, std::uint32_t mag_code) {
  const Layout l = layout(f);
  const std::uint32_t emax_field = (1u << l.exp_bits) - 1;
  const std::uint32_t e = mag_code >> l.man_bits, m = mag_code & ((1u << l.man_bits) - 1);
  switch (f) {
    case FormatId::bf16:
    case FormatId::fp16:
    case FormatId::fp8_e5m2:  // IEEE-like: all-ones exponent is Inf (m == 0) or NaN
      return e != emax_field ? CodeKind::finite : (m == 0 ? CodeKind::inf : CodeKind::nan);
    case FormatId::fp8_e4m3fn: return mag_code == 0x7F ? CodeKind::nan : CodeKind::finite;
    case FormatId::e8m0fnu: return mag_code == 0xFF ? CodeKind::nan : CodeKind::finite;
    default: return CodeKind::finite;  // FNUZ NaN is 0x80 (a sign-bit code), fp6/fp4 have none
  }
}

/// Exact value of a finite magnitude code.
inline Rational code_value(FormatId f, std::uint32_t mag_code) {
  const Layout l = layout(f);
  if (l.kind == Layout::integer) return Rational(static_cast<int>(mag_code));
  if (l.kind == Layout::e8m0) return pow2(static_cast<int>(mag_code) - 127);
  const int e = static_cast<int>(mag_code >> l.man_bits);
  const int m = static_cast<int>(mag_code & ((1u << l.man_bits) - 1));
  if (e == 0) return Rational(m) * pow2(1 - l.bias - l.man_bits);  // subnormal
  return Rational(m + (1 << l.man_bits)) * pow2(e - l.bias - l.man_bits);
}

struct OracleEntry {
  Rational value;
  std::uint32_t code;  // magnitude code; for the virtual entry one past the last
  bool is_virtual;     // the first value beyond max (with unbounded exponent): overflow
};

class FormatOracle {
 public:
  explicit FormatOracle(FormatId f) : f_(f), l_(layout(f)) {
    if (l_.kind == Layout::integer) {
      for (std::uint32_t c = 0; c <= 128; ++c) table_.push_back({Rational(static_cast<int>(c)), c, false});
      table_.push_back({Rational(129), 129, true});
    } else {
      const std::uint32_t n_mag = l_.kind == Layout::e8m0 ? 256u : (1u << (l_.bits - 1));
      std::uint32_t last = 0;
      for (std::uint32_t c = 0; c < n_mag; ++c) {
        if (code_kind(f, c) != CodeKind::finite) continue;
        table_.push_back({code_value(f, c), c, false});
        last = c;
      }
      // Next value past max: max + one ulp of max's binade (for e8m0: 2 * max).
      const Rational ulp = l_.kind == Layout::e8m0 ? table_.back().value
                                                   : pow2(static_cast<int>(last >> l_.man_bits) - l_.bias - l_.man_bits);
      table_.push_back({table_.back().value + ulp, last + 1, true});
    }
    for (std::size_t i = 0; i < table_.size(); ++i) {
      const double d = table_[i].value.convert_to<double>();
      if (to_rational(d) != table_[i].value) throw std::logic_error("oracle value not a double");
      dbl_.push_back(d);
      if (i + 1 < table_.size()) {
        const Rational mid = (table_[i].value + table_[i + 1].value) / 2;
        const double md = mid.convert_to<double>();
        if (to_rational(md) != mid) throw std::logic_error("oracle midpoint not a double");
        mid_.push_back(md);
      }
    }
  }

  FormatId format() const { return f_; }
  /// Finite magnitudes in increasing order, with the virtual overflow entry last.
  const std::vector<OracleEntry>& table() const { return table_; }
  /// The same magnitudes as doubles (exact) and the midpoints between neighbours (exact).
  const std::vector<double>& values_dbl() const { return dbl_; }
  const std::vector<double>& midpoints_dbl() const { return mid_; }

  /// Exact rational search.
  std::uint16_t encode(double x, Rounding r, Overflow o) const {
    if (std::isnan(x) || std::isinf(x)) return special(x, o);
    const bool neg = std::signbit(x);
    if (auto s = sign_domain(neg, x == 0.0, o)) return *s;
    Rational a = to_rational(std::fabs(x));
    const Rational& maxv = table_[table_.size() - 2 - (l_.kind == Layout::integer && !neg ? 1 : 0)].value;
    if (o != Overflow::ieee && a > maxv) a = maxv;
    const auto it = std::lower_bound(table_.begin(), table_.end(), a,
                                     [](const OracleEntry& e, const Rational& v) { return e.value < v; });
    const auto hi = static_cast<std::size_t>(it - table_.begin());
    std::size_t idx = 0;
    if (hi == table_.size()) {
      idx = table_.size() - 1;  // beyond the virtual value
    } else if (table_[hi].value == a || hi == 0) {
      idx = hi;
    } else {
      const Rational dlo = a - table_[hi - 1].value, dhi = table_[hi].value - a;
      idx = dlo < dhi ? hi - 1 : dhi < dlo ? hi : tie(hi - 1, hi, r);
    }
    return finish(idx, neg, o);
  }

  /// The same search on doubles (exact for the reasons above); binary search.
  std::uint16_t encode_dbl(double x, Rounding r, Overflow o) const {
    if (std::isnan(x) || std::isinf(x)) return special(x, o);
    const bool neg = std::signbit(x);
    if (auto s = sign_domain(neg, x == 0.0, o)) return *s;
    double a = std::fabs(x);
    const double maxv = dbl_[dbl_.size() - 2 - (l_.kind == Layout::integer && !neg ? 1 : 0)];
    if (o != Overflow::ieee && a > maxv) a = maxv;
    const auto it = std::lower_bound(dbl_.begin(), dbl_.end(), a);
    const auto hi = static_cast<std::size_t>(it - dbl_.begin());
    std::size_t idx = 0;
    if (hi == dbl_.size()) {
      idx = dbl_.size() - 1;
    } else if (dbl_[hi] == a || hi == 0) {
      idx = hi;
    } else {
      const double mid = mid_[hi - 1];
      idx = a < mid ? hi - 1 : a > mid ? hi : tie(hi - 1, hi, r);
    }
    return finish(idx, neg, o);
  }

 private:
  std::size_t tie(std::size_t lo, std::size_t hi, Rounding r) const {
    switch (r) {
      case Rounding::away: return hi;
      case Rounding::smaller: return lo;
      // E8M0's RNE keeps the implicit significand bit, odd for every value: a tie goes up.
      case Rounding::rne: return l_.kind != Layout::e8m0 && (table_[lo].code % 2 == 0) ? lo : hi;
    }
    return lo;
  }

  std::uint32_t sign_bit() const { return 1u << (l_.bits - 1); }
  std::uint32_t max_mag() const { return table_[table_.size() - 2].code; }

  // e8m0 has no sign and no zero; int8 has no -0; FNUZ has no -0 (handled in finish).
  std::optional<std::uint16_t> sign_domain(bool neg, bool zero, Overflow o) const {
    if (l_.kind == Layout::e8m0 && (neg || zero)) return std::uint16_t(o == Overflow::ieee ? 0xFF : 0x00);
    return std::nullopt;
  }

  std::uint16_t finish(std::size_t idx, bool neg, Overflow o) const {
    const OracleEntry& e = table_[idx];
    if (l_.kind == Layout::integer) {
      // Saturate to [-128, 127]; the table holds magnitudes up to 128 (virtual 129).
      int v = static_cast<int>(e.code);
      v = neg ? std::max(-v, -128) : std::min(v, 127);
      return static_cast<std::uint16_t>(static_cast<std::uint8_t>(static_cast<std::int8_t>(v)));
    }
    if (e.is_virtual) return overflow(neg, o);
    const bool fnuz = f_ == FormatId::fp8_e4m3fnuz || f_ == FormatId::fp8_e5m2fnuz;
    if (l_.kind == Layout::e8m0) return static_cast<std::uint16_t>(e.code);
    if (e.code == 0 && fnuz) return 0;
    return static_cast<std::uint16_t>(e.code | (neg ? sign_bit() : 0u));
  }

  // Outcomes beyond the range, written from FORMATS.md ("Non-saturating casts", "CUDA
  // saturating", "HIP saturating") and the header's documented choices.
  std::uint16_t overflow(bool neg, Overflow o) const {
    const std::uint32_t s = neg ? sign_bit() : 0u;
    if (o != Overflow::ieee) return static_cast<std::uint16_t>(l_.kind == Layout::e8m0 ? 0xFE : (max_mag() | s));
    switch (f_) {
      case FormatId::fp8_e4m3fn: return static_cast<std::uint16_t>(0x7F | s);
      case FormatId::fp8_e5m2: return static_cast<std::uint16_t>(0x7C | s);
      case FormatId::bf16: return static_cast<std::uint16_t>(0x7F80 | s);
      case FormatId::fp16: return static_cast<std::uint16_t>(0x7C00 | s);
      case FormatId::fp8_e4m3fnuz:
      case FormatId::fp8_e5m2fnuz: return 0x80;
      case FormatId::e8m0fnu: return 0xFF;
      default: return static_cast<std::uint16_t>(max_mag() | s);  // fp6/fp4 saturate
    }
  }

  std::uint16_t special(double x, Overflow o) const {
    const bool neg = std::signbit(x);
    const std::uint32_t s = neg ? sign_bit() : 0u;
    if (std::isinf(x)) {
      if (l_.kind == Layout::integer) return neg ? 0x80 : 0x7F;
      if (l_.kind == Layout::e8m0) return o == Overflow::sat_cuda ? (neg ? 0x00 : 0xFE) : 0xFF;
      if (o == Overflow::sat_cuda) return static_cast<std::uint16_t>(max_mag() | s);
      return overflow(neg, Overflow::ieee);
    }
    // NaN
    const bool cuda = o == Overflow::sat_cuda;
    switch (f_) {
      case FormatId::bf16: return cuda ? 0x7FFF : static_cast<std::uint16_t>(0x7FC0 | s);
      case FormatId::fp16: return cuda ? 0x7FFF : static_cast<std::uint16_t>(0x7E00 | s);
      case FormatId::fp8_e4m3fn: return cuda ? 0x7F : static_cast<std::uint16_t>(0x7F | s);
      case FormatId::fp8_e5m2: return cuda ? 0x7F : static_cast<std::uint16_t>(0x7E | s);
      case FormatId::fp8_e4m3fnuz:
      case FormatId::fp8_e5m2fnuz: return 0x80;
      case FormatId::e8m0fnu: return 0xFF;
      case FormatId::int8: return 0;
      default:  // fp6/fp4: ml_dtypes gives the zero of the opposite sign; sat modes +0
        return o != Overflow::ieee ? 0 : static_cast<std::uint16_t>(neg ? 0u : sign_bit());
    }
  }

  FormatId f_;
  Layout l_;
  std::vector<OracleEntry> table_;
  std::vector<double> dbl_, mid_;
};

}  // namespace attest::ref::test
