#pragma once
/// The `operands` check: the codes, scales and smoothing mean a kernel hands to its attention
/// stage, judged against the recipe's quantizer applied to the call's own inputs
/// (docs/checks.md "operands"). Accuracy sees a quantizer defect only through the output, where
/// a wrong block scale or smoothing mean can hide inside the recipe's own noise (issue 34: Sage's
/// smooth-K mean over one block, the last partial block's scale from the previous block); this
/// check sees it on the operand itself.
///
/// Not bit-exact by design: frameworks compute the smoothing mean with their own reduction order
/// and round k - km to the input dtype, and Triton's fp32 `/` is approximate (div.full.f32, 2 ulp),
/// so each figure is judged within the rounding bound those steps allow (below), derived from
/// the input dtype and T, not tuned. int8 schemes (Sage) and fp8 schemes (cuDNN / Transformer
/// Engine per tensor, per channel, per token); MX block scales and rotations are refused.
///
/// Bounds (u = unit roundoff: f32 2^-24, the input dtype's u_in for the smoothed subtraction):
///   mean   |km_c - mean_c| <= (T - 1) u mean|k_c| + ulp_in(mean_c)   (any fp32 summation order,
///          then one rounding to the input dtype), mean_c the FP64 mean of channel c
///   value  x' the reference's prepared value with the kernel's km (or FP64's, when the kernel
///          gives none: the mean bound is then added); e(x') = u_in |x'| + 2^-25 (smoothed
///          operands only) + 2 u |x'|
///   scale  |s - S(a)| <= max_group e / M + 4 u S(a), a = the group's amax of x', S the scheme's
///          scale rule, M its format maximum
///   code   |c - clamp(x' / s)| <= h + (e(x') + 4 u |x'|) / s, with the kernel's own s; int8:
///          h = 0.5, clamp to the code range; fp8: c the code's value, h = half the format's grid
///          step at |c|, clamp to +-max finite (a NaN code is always off). fp8 codes in another
///          format than the scheme's (e5m2 where it says e4m3) fail as such, unjudged further.
#include <cstdint>
#include <string>
#include <vector>

#include "attest/conformance/verdict.hpp"
#include "attest/core/recipe.hpp"
#include "attest/core/tensor.hpp"

namespace attest::conformance {

/// One quantized operand as the kernel computed it, with the input it came from.
struct KernelOperand {
  std::string role;  ///< "q", "k" or "v": picks the recipe's scheme
  Tensor input;      ///< the call's input values, f32 [B, H, T, C]
  DType input_dtype = DType::f32;  ///< the dtype the kernel got it in (f32, f16, bf16): sets u_in
  Tensor codes;      ///< [B, H, T, C]: i8 (int8 schemes); fp8_e4m3fn / fp8_e5m2 or u8 raw codes (fp8 schemes)
  Tensor scales;     ///< f32, the reference's scales_shape order (row-major), any shape of that size
  Tensor mean;       ///< smoothing km f32 [B, H, 1, C] the kernel subtracted; empty: not given
};

/// The verdict of check `operands` over all given operands: failed when any mean, scale or code
/// is outside its bound (the reason names the operand, the worst group or element and its
/// bound); unsupported for a scheme this check does not model. Throws attest::Error on shapes or
/// dtypes that do not match (an input error, not a kernel's defect).
Outcome judge_operands(const Recipe& recipe, double sm_scale, const std::vector<KernelOperand>& ops);

}  // namespace attest::conformance
