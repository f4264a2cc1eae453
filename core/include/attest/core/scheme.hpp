#pragma once
/// Quantizer scheme strings: the one grammar (docs/quantizer-schemes.md) that the reference
/// quantizers, kernels/cpu and kernels/gpu all read. Only the parsing is shared: each engine
/// converts a Scheme into its own plan and keeps its own arithmetic, since the independence of
/// that arithmetic is what the bitwise checks test.
///
/// A scheme string is `head{:item}` and round-trips (parse_scheme(to_string(s)) == s, only
/// non-defaults printed), e.g.
///   int8:per_block=128:round=half:prescale=sm_log2e        (Sage Triton Q)
///   int8:per_thread=sm90:role=k:scale=eps:round=half:smooth=bf16
///   fp8_e4m3fn:per_channel                                 (Sage V: x * (448 / amax), satfinite)
///   mxfp4_e2m1fn:scale=aiter_triton_rne:rotate=h32_bf16
///   f32                                                    (identity: the operand as it is)
/// The meaning of every field is in reference/quantize.hpp and docs/quantizer-schemes.md.
///
/// The head `f32` (Family::identity) is accepted here, by every engine's parser: recipes need it
/// (the named recipe `f32` is the emulator's unquantized baseline, cpu.tiled and the plugin
/// kernels declare it), so a grammar without it would force each engine to special-case the text
/// again, which is how the copies came to disagree. It takes no items. The quantizer front ends
/// (reference quantize, the device quantizers) refuse it where they are asked to produce codes
/// and scales, since the identity has neither.
#include <cstdint>
#include <string>
#include <string_view>

#include "attest/core/format.hpp"

namespace attest {

struct Scheme {
  /// The head names the family together with the element format:
  ///   identity  f32
  ///   cast      bf16 | fp16
  ///   int8      int8
  ///   fp8       fp8_e4m3fn | fp8_e5m2 | fp8_e4m3fnuz | fp8_e5m2fnuz
  ///   mx        mxfp8_e4m3fn | mxfp8_e5m2 | mxfp6_e2m3fn | mxfp6_e3m2fn | mxfp4_e2m1fn | mxint8
  enum class Family : std::uint8_t { identity, cast, int8, fp8, mx };
  enum class Granularity : std::uint8_t { per_tensor, per_block, per_warp, per_thread, per_token, per_channel };
  enum class SageArch : std::uint8_t { sm89, sm90 };
  enum class Role : std::uint8_t { q, k };
  enum class ScaleRule : std::uint8_t { ieee, rcp, eps, floor, ieee_one, none };
  enum class E8M0Rule : std::uint8_t {
    floor, ceil, rceil, aiter_hip_fp4, aiter_triton_v_fp4, aiter_triton_rne, aiter_hip_fp8, aiter_hip_fp6
  };
  enum class IntRounding : std::uint8_t { rne, half };
  /// Tie rule of an element cast (reference/formats.hpp Rounding).
  enum class Rounding : std::uint8_t { rne, away, smaller };
  /// Out-of-range / Inf / NaN behaviour of an element cast (reference/formats.hpp Overflow).
  enum class Overflow : std::uint8_t { ieee, sat_cuda, sat_hip };
  enum class ApplyOp : std::uint8_t { div, mul };
  enum class Smoothing : std::uint8_t { none, fp32, bf16 };
  enum class Prescale : std::uint8_t { none, sm_log2e };
  enum class Rotation : std::uint8_t { none, h128, h128_bf16, h32_bf16 };

  Family family = Family::int8;
  FormatId element = FormatId::int8;
  Granularity granularity = Granularity::per_tensor;  ///< int8 / fp8 only
  std::int64_t block = 0;                ///< per_block: tokens per scale; mx: channels per scale (32)
  SageArch arch = SageArch::sm89;        ///< per_warp / per_thread only
  Role role = Role::q;                   ///< per_warp / per_thread only
  ScaleRule scale = ScaleRule::ieee;     ///< int8 / fp8
  float scale_max = 127.0f;              ///< M: 127 for int8; fp8 default: format max
  E8M0Rule e8m0 = E8M0Rule::floor;       ///< mx
  IntRounding int_round = IntRounding::rne;  ///< int8
  Rounding elem_round = Rounding::rne;   ///< cast / fp8 / mx
  Overflow overflow = Overflow::sat_cuda;  ///< cast (default ieee) / fp8 / mx
  ApplyOp apply = ApplyOp::div;          ///< int8 (default div) / fp8 (default mul)
  Smoothing smooth = Smoothing::none;
  Prescale prescale = Prescale::none;
  Rotation rotate = Rotation::none;

  bool operator==(const Scheme&) const = default;
};

/// The scheme with every field at its default for the head ("int8", "fp8_e4m3fn", "mxint8",
/// "bf16", "f32", ...); granularity per_tensor for int8 / fp8. Throws attest::Error
/// "unknown quantizer scheme 'x' (valid heads: ...)".
Scheme default_scheme(std::string_view head);
/// "int8", "fp8_e4m3fnuz", "mxfp6_e2m3fn", "mxint8", "bf16", "f32", ...; "?" for a family and
/// element that name no head.
std::string scheme_head(const Scheme& s);
std::string to_string(const Scheme& s);
/// Throws attest::Error "scheme '<text>': <defect>" (unknown head, key or value — with the
/// valid ones —, duplicate key, missing granularity, a key that does not apply to the family, a
/// combination no kernel uses).
Scheme parse_scheme(std::string_view text);
/// The consistency checks of parse_scheme applied to a hand-built scheme.
void validate_scheme(const Scheme& s);

std::string_view name(Scheme::Family v);
std::string_view name(Scheme::Granularity v);
std::string_view name(Scheme::SageArch v);
std::string_view name(Scheme::Role v);
std::string_view name(Scheme::ScaleRule v);
std::string_view name(Scheme::E8M0Rule v);
std::string_view name(Scheme::IntRounding v);
std::string_view name(Scheme::Rounding v);
std::string_view name(Scheme::Overflow v);
std::string_view name(Scheme::ApplyOp v);
std::string_view name(Scheme::Smoothing v);
std::string_view name(Scheme::Prescale v);
std::string_view name(Scheme::Rotation v);
/// Name -> value; each throws attest::Error naming the value and listing the valid names.
Scheme::E8M0Rule parse_e8m0_rule(std::string_view name);  ///< "scheme 'x': unknown E8M0 scale rule 'x' (valid: ...)"
Scheme::Rounding parse_rounding(std::string_view name);   ///< "unknown rounding 'x' (valid: ...)"
Scheme::Overflow parse_overflow(std::string_view name);   ///< "unknown overflow mode 'x' (valid: ...)"

}  // namespace attest
