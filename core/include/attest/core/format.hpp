#pragma once
/// The one table of element formats (FORMATS.md): name, widths, bias, range and special values.
/// FormatId is the one format enum: the recipe (P, O), the reference codecs, kernels/cpu, the
/// device quantizers and the device emulator all name formats by it and read their constants
/// (mantissa bits, emin, max, Inf/NaN/-0) from this table. Each engine keeps its own encode/decode
/// arithmetic (the independence the bitwise checks test); a new format is one row here plus
/// its codec in each engine. The table itself is
/// checked in core/tests against the closed forms and against ml_dtypes' decoding of every code
/// (reference/oracles/formats).
///
/// constexpr so that an engine can take its compile-time constants (mantissa bits, bias) from it.
#include <array>
#include <cstdint>
#include <span>
#include <string_view>

namespace attest {

/// Element formats. The order of the first eleven is the reference codecs' Format order
/// (reference/formats.hpp casts between the two); f32 is the unquantized operand of a recipe.
enum class FormatId : std::uint8_t {
  bf16, fp16, fp8_e4m3fn, fp8_e5m2, fp8_e4m3fnuz, fp8_e5m2fnuz,
  fp6_e2m3fn, fp6_e3m2fn, fp4_e2m1fn, e8m0fnu, int8, f32
};

/// Static description of a format. Sign/exponent/mantissa formats: value = (-1)^s 2^(e - bias)
/// (1 + m / 2^man_bits) for a non-zero exponent field, 2^(1 - bias) (m / 2^man_bits) for zero.
/// int8 is described as an integer (man_bits 7 magnitude bits, max 127); e8m0fnu as an exponent
/// only (no sign, no mantissa, 0xFF NaN).
struct FormatSpec {
  std::string_view name;
  int bits, exp_bits, man_bits, bias;
  double max_finite;
  double min_normal;
  double min_subnormal;  ///< smallest positive value (== min_normal where there are no subnormals)
  bool has_inf, has_nan, has_neg_zero;
  int emax_elem;  ///< MX emax of the element format (e4m3 8, e5m2 15, e2m3 2, e3m2 4, e2m1 2); 0 n/a
  bool fnuz;      ///< "finite, no unsigned zero": no -0, NaN is the code 0x80, bias one above IEEE's

  /// Exponent of the smallest normal binade, 1 - bias (min_normal = 2^emin; float formats only).
  constexpr int emin() const { return 1 - bias; }
};

inline constexpr std::array<FormatSpec, 12> kFormatTable{{
    {"bf16", 16, 8, 7, 127, 0x1.FEp127, 0x1p-126, 0x1p-133, true, true, true, 0, false},
    {"fp16", 16, 5, 10, 15, 65504.0, 0x1p-14, 0x1p-24, true, true, true, 0, false},
    {"fp8_e4m3fn", 8, 4, 3, 7, 448.0, 0x1p-6, 0x1p-9, false, true, true, 8, false},
    {"fp8_e5m2", 8, 5, 2, 15, 57344.0, 0x1p-14, 0x1p-16, true, true, true, 15, false},
    {"fp8_e4m3fnuz", 8, 4, 3, 8, 240.0, 0x1p-7, 0x1p-10, false, true, false, 0, true},
    {"fp8_e5m2fnuz", 8, 5, 2, 16, 57344.0, 0x1p-15, 0x1p-17, false, true, false, 0, true},
    {"fp6_e2m3fn", 6, 2, 3, 1, 7.5, 1.0, 0.125, false, false, true, 2, false},
    {"fp6_e3m2fn", 6, 3, 2, 3, 28.0, 0.25, 0.0625, false, false, true, 4, false},
    {"fp4_e2m1fn", 4, 2, 1, 1, 6.0, 1.0, 0.5, false, false, true, 2, false},
    {"e8m0fnu", 8, 8, 0, 127, 0x1p127, 0x1p-127, 0x1p-127, false, true, false, 0, false},
    {"int8", 8, 0, 7, 0, 127.0, 1.0, 1.0, false, false, false, 0, false},
    {"f32", 32, 8, 23, 127, 0x1.FFFFFEp127, 0x1p-126, 0x1p-149, true, true, true, 0, false},
}};

constexpr const FormatSpec& format_spec(FormatId f) { return kFormatTable[static_cast<std::size_t>(f)]; }
constexpr std::string_view name(FormatId f) { return format_spec(f).name; }
/// Every format, in enum order.
std::span<const FormatId> all_format_ids();
/// Inverse of name(FormatId); throws attest::Error "unknown format 'x' (valid: ...)".
FormatId parse_format_id(std::string_view name);

}  // namespace attest
