#pragma once
// The kernels' own reading of quantizer scheme strings (grammar: docs/quantizer-schemes.md,
// e.g. `int8:per_block=128:prescale=sm_log2e:round=half`). reference/quantize.hpp mixes its
// parser with the quantizer arithmetic, and kernels/ never includes reference/, so this is a
// second, small parser of the same vocabulary. It accepts the grammar's keys; what the CPU
// kernels do not implement is refused by `unsupported_reason`.
#include <cstdint>
#include <string>
#include <string_view>

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

/// Parses a scheme string ("f32" is the identity); throws attest::Error naming the defect.
Scheme parse_scheme(std::string_view text);
/// Empty when the CPU kernels implement the scheme, else why not.
std::string unsupported_reason(const Scheme& s);

}  // namespace attest::kernels::cpu
