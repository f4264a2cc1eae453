#pragma once
/// Bit-exact element formats: encode (float32 / float64 -> code) and decode (code -> float32)
/// for the low-precision formats of /work/shared/FORMATS.md, with explicit rounding and
/// overflow rules. Every code is held in a std::uint16_t (bf16 and fp16 use 16 bits, all
/// others the low `bits` bits; int8 holds the two's complement byte, e.g. -1 -> 0x00FF).
///
/// Invariants:
/// - decode is exact: every code of every format is a float32 value (or NaN).
/// - encode(F, decode(F, c)) == c for every non-NaN code c, in every rounding and overflow mode
///   (except the Inf codes under sat_cuda, which saturates Inf to max).
/// - encode(double) rounds once from the double (no double rounding through float).
/// - Rounding applies to subnormals exactly like to normals (gradual underflow, no flush).
///
/// NaN codes emitted by encode (decode maps every NaN code to a quiet float NaN):
///   bf16 0x7FC0 / 0xFFC0 (sign of the input kept; CPU/PyTorch convention, CUDA emits 0x7FFF),
///   fp16 0x7E00 / 0xFE00, e4m3fn 0x7F / 0xFF, e5m2 0x7E / 0xFE (ml_dtypes; torch emits 0x7F),
///   FNUZ 0x80, e8m0fnu 0xFF. fp6/fp4 and int8 have no NaN: see Overflow below.
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "attest/core/format.hpp"
#include "attest/core/scheme.hpp"

namespace attest::ref {

/// Element formats are core's FormatId (attest/core/format.hpp); every row but f32 has a codec
/// here (f32 is float itself). Names (format_name) are the table's names.

/// How a value between two representable neighbours is rounded (all modes round to nearest;
/// they differ only on exact ties).
///   rne     ties to the neighbour with an even last code bit (IEEE, ml_dtypes, PyTorch, CUDA);
///   away    ties away from zero (microxcaling "nearest", AITER _compute_mx_quant_and_scale_rne);
///   smaller ties toward the smaller magnitude (AITER native fp4 pack).
/// For int8 "even" means an even integer; for e8m0fnu the tie is 1.5 * 2^e (between 2^e and
/// 2^(e+1)) and `rne` rounds it up, like `away`: ml_dtypes' RNE keeps the implicit significand
/// bit, which is 1 for every E8M0 value (equal to ml_dtypes 0.7.0 on all 2^32 floats; docs/formats.md).
using Rounding = Scheme::Rounding;  // { rne, away, smaller }

/// What happens to values beyond the format's range, to Inf and to NaN.
///   ieee     = ml_dtypes / PyTorch eager casts:
///              e4m3fn: overflow and +-Inf -> NaN (0x7F / 0xFF, sign kept);
///              e5m2 / bf16 / fp16: overflow -> +-Inf (a value that rounds down to max stays max);
///              FNUZ: overflow, +-Inf and NaN -> 0x80; -0 -> 0x00;
///              fp6 / fp4: saturate to +-max (Inf too); NaN -> -0, -NaN -> +0 (ml_dtypes);
///              e8m0fnu: above 2^127 (after rounding), Inf, NaN, zero, negative -> 0xFF;
///                       below 2^-127 -> 0x00 (2^-127 is the nearest value: there is no zero);
///              int8: saturate to [-128, 127], NaN -> 0 (cvt.rni.sat.s8.f32).
///   sat_cuda = cvt.rn.satfinite / __NV_SATFINITE: |x| > max -> +-max, +-Inf -> +-max,
///              NaN -> 0x7F for e4m3fn/e5m2, 0x7FFF for bf16/fp16 (CUDA canonical NaN), 0x80
///              for FNUZ; -0 kept (0x80) where the format has -0;
///              e8m0fnu: +Inf and values above 2^127 -> 0xFE, zero/negative/-Inf -> 0x00, NaN -> 0xFF.
///   sat_hip  = amd_hip_fp8.h saturating: finite values are clamped to +-max before RNE;
///              Inf and NaN convert as in `ieee` (Inf -> NaN for e4m3fn, Inf for e5m2);
///              e8m0fnu: finite values clamp to [2^-127, 2^127] (zero/negative -> 0x00).
/// For formats without Inf/NaN (fp6, fp4, int8) all three modes agree except NaN: sat_cuda and
/// sat_hip give +0 for fp6/fp4 NaN (ieee gives ml_dtypes' zero with the sign flipped:
/// +NaN -> -0, -NaN -> +0). What the hardware does with an fp4/fp6 NaN is UNVERIFIED.
using Overflow = Scheme::Overflow;  // { ieee, sat_cuda, sat_hip }

const FormatSpec& format_info(FormatId f);
/// Every format with a codec (all but f32), in enum order.
std::span<const FormatId> all_formats();

std::string_view format_name(FormatId f);
/// Inverse of format_name; throws attest::Error listing the valid names.
FormatId parse_format(std::string_view name);
// Rounding and Overflow names: core's name() / parse_rounding() / parse_overflow() (scheme.hpp).

/// float32 -> code.
std::uint16_t encode(FormatId f, float x, Rounding r = Rounding::rne, Overflow o = Overflow::ieee);
/// float64 -> code, rounded once from the double value.
std::uint16_t encode(FormatId f, double x, Rounding r = Rounding::rne, Overflow o = Overflow::ieee);
/// code -> float32, exact. Bits of `code` above the format's width are ignored.
float decode(FormatId f, std::uint16_t code);
/// decode(encode(x)): x rounded to the nearest value of the format (NaN where encode gives NaN).
float round_to(FormatId f, float x, Rounding r = Rounding::rne, Overflow o = Overflow::ieee);

/// True if `code` is a NaN code of `f`.
bool is_nan_code(FormatId f, std::uint16_t code);
/// Number of distinct codes: 2^bits.
std::uint32_t code_count(FormatId f);

/// Batch encode (same results as the scalar encode; the e4m3fn/e5m2/bf16 RNE paths are
/// vectorisable bit manipulation). `out.size()` must equal `in.size()` (attest::Error otherwise).
void encode_f32(FormatId f, std::span<const float> in, std::span<std::uint16_t> out,
                Rounding r = Rounding::rne, Overflow o = Overflow::ieee);
/// Batch encode to one byte per code; attest::Error for bf16 / fp16.
void encode_f32(FormatId f, std::span<const float> in, std::span<std::uint8_t> out,
                Rounding r = Rounding::rne, Overflow o = Overflow::ieee);
/// Batch decode.
void decode_f32(FormatId f, std::span<const std::uint16_t> in, std::span<float> out);
void decode_f32(FormatId f, std::span<const std::uint8_t> in, std::span<float> out);

/// Packing of sub-byte codes into a little-endian bit stream: code i occupies bits
/// [i*bits, (i+1)*bits) of the stream, where stream bit k is bit (k % 8) of byte k / 8.
///   fp4_e2m1fn: byte j = code[2j] | code[2j+1] << 4 (first code in the low nibble, as
///               torch.float4_e2m1fn_x2 and the OCP MX packing);
///   fp6_*:      four codes per three bytes: b0 = c0 | c1 << 6, b1 = c1 >> 2 | c2 << 4,
///               b2 = c2 >> 4 | c3 << 2.
/// The packed size is ceil(count * bits / 8) bytes; unused high bits of the last byte are 0.
/// pack throws attest::Error for other formats or for a code >= 2^bits.
std::vector<std::uint8_t> pack(FormatId f, std::span<const std::uint8_t> codes);
/// Inverse of pack; throws attest::Error for other formats or if packed.size() is not
/// ceil(count * bits / 8).
std::vector<std::uint8_t> unpack(FormatId f, std::span<const std::uint8_t> packed, std::size_t count);

}  // namespace attest::ref
