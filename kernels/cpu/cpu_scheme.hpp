#pragma once
// The CPU kernels' plan of a quantizer scheme. The string is read by core's grammar
// (attest/core/scheme.hpp, shared with reference/ and kernels/gpu); this is the plain form the
// CPU quantizers (cpu_quantize.cpp) compute from, with their own FloatFmt constants.
#include <cstdint>
#include <string>
#include <string_view>

#include "attest/core/format.hpp"
#include "cpu/cpu_numerics.hpp"

namespace attest::kernels::cpu {

struct Scheme {
  enum class Kind : std::uint8_t { f32, cast, int8, fp8, mx } kind = Kind::f32;
  enum class Gran : std::uint8_t { tensor, block, warp, thread, token, channel } gran = Gran::tensor;
  enum class Rule : std::uint8_t { ieee, rcp, eps, floor, ieee_one, none } rule = Rule::ieee;
  enum class Smooth : std::uint8_t { none, fp32, bf16 } smooth = Smooth::none;
  enum class Rotate : std::uint8_t { none, h128, h128_bf16, h32_bf16 } rotate = Rotate::none;

  std::string head;             ///< "bf16", "int8", "fp8_e4m3fn", "mxfp4_e2m1fn", ...
  FloatFmt elem = kBf16;        ///< element format (cast, fp8, mx float elements)
  bool mx_int8 = false;         ///< mxint8 elements
  std::int64_t block = 0;       ///< per_block tokens, or MX channels per scale
  bool sm90 = false;            ///< per_warp / per_thread geometry
  bool role_k = false;          ///< per_warp / per_thread: operand is K
  float scale_max = 127.0f;     ///< int8 127, fp8 the format maximum unless given
  std::string e8m0 = "floor";   ///< MX scale rule name
  IntRound int_round = IntRound::rne;
  Tie tie = Tie::even;
  Sat sat = Sat::ieee;
  bool apply_mul = false;       ///< q = x * fl(M / amax) instead of x / s
  bool prescale = false;        ///< Q multiplied by fl(sm_scale * 1.44269504) first
};

/// Parses a scheme string with core's parse_scheme ("f32" is the identity) and converts it;
/// throws attest::Error naming the defect.
Scheme parse_scheme(std::string_view text);
/// The CPU kernels' constants of a small float format; throws attest::Error for int8, e8m0fnu, f32.
const FloatFmt& float_fmt(FormatId f);
/// Empty when the CPU kernels implement the scheme, else why not.
std::string unsupported_reason(const Scheme& s);

}  // namespace attest::kernels::cpu
