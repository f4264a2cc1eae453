#pragma once
/// Reference quantizers: bit-exact CPU models of the Q/K/V/P quantizers of SageAttention, AITER,
/// torchao/OCP MX and FlashAttention FP8 (/work/shared/FORMATS.md, "Quantizers in use" and
/// "E8M0 scale rules"). Every FP32 operation is explicit (one IEEE operation, one rounding);
/// std::fma appears nowhere because none of the modelled quantizers fuses a multiply-add.
///
/// A quantizer is described by core's Scheme (attest/core/scheme.hpp), the one scheme type of
/// reference/, the kernels and the recipe, with a string form that round-trips
/// (parse_scheme(to_string(s)) == s, only non-defaults printed). The names below are its enums,
/// and this header says what each value computes. E.g.
///   int8:per_block=128:round=half:prescale=sm_log2e        (Sage Triton Q)
///   int8:per_thread=sm90:role=k:scale=eps:round=half:smooth=bf16
///   fp8_e4m3fn:per_channel                                 (Sage V: x * (448 / amax), satfinite)
///   mxfp4_e2m1fn:scale=aiter_triton_rne:rotate=h32_bf16
/// The grammar is in docs/quantizer-schemes.md.
///
/// Data layout: a tensor of rank >= 2, float32, logically [lead..., T, C] with any strides: the
/// leading dims enumerate independent slabs (e.g. (batch, head)), T is tokens, C channels
/// (head_dim). A [B, S, H, D] bshd tensor is passed as x.permute({0, 2, 1, 3}).
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "attest/core/recipe.hpp"
#include "attest/core/scheme.hpp"
#include "attest/core/tensor.hpp"
#include "attest/reference/formats.hpp"

namespace attest::ref {

/// What kind of quantizer. The scheme string's first token names it together with the element
/// (the identity f32 quantizes nothing: quantize, prepare, dequantize and scales_shape refuse it):
///   cast  bf16 | fp16                 plain cast, no scale (scales are all 1)
///   int8  int8                        symmetric INT8 with FP32 scales
///   fp8   fp8_e4m3fn | fp8_e5m2 | fp8_e4m3fnuz | fp8_e5m2fnuz   FP8 with FP32 scales
///   mx    mxfp8_e4m3fn | mxfp8_e5m2 | mxfp6_e2m3fn | mxfp6_e3m2fn | mxfp4_e2m1fn | mxint8
///         E8M0 scale per block of `block` channels (32) along C
using Family = Scheme::Family;

/// Which elements share one scale (int8 and fp8 families). A slab is one [T, C] matrix.
///   per_tensor   the whole tensor, all slabs together
///   per_block    `block` consecutive tokens of one slab, all channels (Sage Triton: Q 128, K 64)
///   per_warp     Sage per-warp: W consecutive tokens, W = 32 (Q) / 64 (K) on sm89, 16 / 128 on sm90
///   per_thread   Sage per-thread: inside each warp of W tokens (as per_warp), the rows held by one
///                MMA thread: Q rows with equal t % 8 (8 groups), K rows with t % 8 in {2g, 2g+1}
///                (4 groups)
///   per_token    one token of one slab
///   per_channel  one channel of one slab over all its tokens (Sage V)
using Granularity = Scheme::Granularity;
using SageArch = Scheme::SageArch;
/// Operand role: decides the per_warp / per_thread geometry.
using Role = Scheme::Role;

/// FP32 scale s of a group with absolute maximum a, for a format maximum M (127 for int8,
/// scale_max for fp8):
///   ieee      s = a / M                              (Sage Triton, AITER per block)
///   rcp       s = a * fl(1 / M)                      (torch `amax / M` on a tensor, AITER V FP8)
///   eps       s = fl(a / M) + 1e-7f                  (Sage Triton per-thread / per-warp)
///   floor     s = max(a, 1e-7f) / M                  (Sage CUDA per block / warp)
///   ieee_one  s = a / M, and s = 1 when a == 0       (AITER INT8 per tensor)
///   none      s = 1                                  (values cast as they are)
/// a = 0 gives s = 0 under ieee / rcp: the quotients 0/0 are NaN, which int8 turns into 0 and
/// FP8 into its NaN code; the stored scale 0 then dequantizes a NaN code to NaN (Sage V, amax 0).
using ScaleRule = Scheme::ScaleRule;

/// E8M0 scale rules (FORMATS.md "E8M0 scale rules"). e, m: exponent and mantissa fields of the
/// FP32 block amax; emax: MX emax of the element format; code = biased E8M0 exponent,
/// X = 2^(code - 127). Every rule gives code 0xFF (NaN) for a NaN or Inf amax (our convention:
/// the AITER sources were not read for non-finite input; UNVERIFIED).
///   floor               code = clamp(e - 127 - emax, -127, 127) + 127   (OCP v1.0, torchao FLOOR)
///   ceil                code = clamp(e - 127 + (m != 0) - emax, -127, 127) + 127   (torchao CEIL)
///   rceil               d = a * fl(1 / max_elem); code = e(d) + (m(d) != 0); subnormal d:
///                       1 if m(d) > 0x400000 else 0; capped at 254 (satfinite)   (cuBLAS, torchao)
///   aiter_hip_fp4       code = ((bits(a / 6.0f) + 0x7FFFFF) & 0x7F800000) >> 23
///   aiter_triton_v_fp4  a = max(a, 1e-12f); code = e - 2 + (m > 0x400000)
///   aiter_triton_rne    a rounded to the nearest power of two 2^(r-127), a tie (m == 0x400000)
///                       going to the even code r; code = clamp(r - 2, 0, 254)
///   aiter_hip_fp8       c = (((bits(a) + 0x200000) & 0x7F800000) >> 23) - 8, clamped >= 0,
///                       255 -> 254; elements multiply by the float with bits (254 - c) << 23
///   aiter_hip_fp6       code = 127 if a == 0 else (e - 2) mod 256 (no clamp: e < 2 wraps)
/// The AITER rules keep their source's constants (6.0f, 2, 8) whatever the element format.
/// Elements: v = x * 2^(127 - code) (exact power of two; NaN for code 0xFF), then a saturating
/// conversion with the scheme's rounding. MXINT8 elements are round(v * 64) clamped to
/// [-127, 127], value code / 64.
using E8M0Rule = Scheme::E8M0Rule;

/// FP32 -> int8 for the int8 family.
///   rne   cvt.rni.sat.s8.f32: round to nearest even, saturate to [-128, 127], NaN -> 0
///   half  Sage Triton: t = q + (q >= 0 ? 0.5f : -0.5f) in FP32, then `.to(tl.int8)`: truncate
///         toward zero to int32 (saturating, NaN -> 0), keep the low 8 bits (200.3 -> -56)
using IntRounding = Scheme::IntRounding;
/// How the scale is applied to an element x:
///   div   q = x / s (IEEE division by the stored scale)
///   mul   q = x * fl(M / a') with a' = a (ieee, rcp) or max(a, 1e-7f) (floor): the CUDA paths
///         (the device computes M / a' with an approximate division; modelled as IEEE)
using ApplyOp = Scheme::ApplyOp;
/// K smoothing: k' = k - km per (slab, channel).
///   fp32  fl(k - km)                 (Sage CUDA)
///   bf16  bf16(fl(k - km))           (Sage Triton: torch subtracts two bf16 tensors, computing
///         in FP32 and rounding the result to bf16; inputs are assumed bf16-valued already)
/// km is supplied (QuantInputs::mean) or computed as the mean over the slab's tokens, summed in
/// double in token order, divided by T in double, rounded to float (and to bf16 for smooth=bf16,
/// as torch's mean of a bf16 tensor is bf16). A framework's own reduction order can differ in
/// the last bit: pass its km to model it exactly.
using Smoothing = Scheme::Smoothing;
/// Q pre-scaling before the amax: x * f in FP32 with f = sage_prescale(sm_scale).
using Prescale = Scheme::Prescale;
/// Rotation of each token's channels before everything except smoothing (hadamard.hpp):
///   h128       FWHT over 128 channels then x 0.08838834764831845f (AITER mha_v4)
///   h128_bf16  bf16((y * r) * mult), mult = sage_prescale(sm_scale) if prescale=sm_log2e else 1
///              (AITER MXFP6/MXFP4 Q/K; the prescale is consumed here, not applied again)
///   h32_bf16   x rounded to bf16, times bf16(H_32 / sqrt(32)) per 32-channel block
using Rotation = Scheme::Rotation;

/// Throws attest::Error "scheme '<s>': f32 is the identity operand of a recipe, not a quantizer"
/// for the identity; every quantizer entry point below calls it.
void require_quantizer(const Scheme& s);

/// fl32(sm_scale * 1.44269504) with the product in double: Sage computes it in Python and passes
/// an fp32 kernel argument.
float sage_prescale(double sm_scale);
/// Warp height W of per_warp / per_thread (32/64 on sm89, 16/128 on sm90 for Q/K).
std::int64_t sage_warp_rows(SageArch arch, Role role);
/// Number of scale groups per warp for per_thread (8 for Q, 4 for K); 1 otherwise.
std::int64_t sage_thread_groups(Role role);

/// Extra inputs of a quantization.
struct QuantInputs {
  double sm_scale = 0;           ///< for prescale=sm_log2e; must then be finite and > 0
  const Tensor* mean = nullptr;  ///< K mean for smoothing: f32 [lead..., 1, C]; computed if null
};

/// Result of quantize(). Shapes for x of shape [lead..., T, C]:
///   codes   [lead..., T, C]: i8 (int8, mxint8), u8 (fp8 and MX float elements: the element
///           code in the low bits, unpacked), u16 (bf16 / fp16 casts)
///   scales  rank of x; f32 for cast / int8 / fp8, u8 E8M0 codes for mx:
///             per_tensor [1, ..., 1]      per_block   [lead..., ceil(T/block), 1]
///             per_warp [lead..., ceil(T/W), 1]   per_thread [lead..., ceil(T/W), groups]
///             per_token [lead..., T, 1]   per_channel [lead..., 1, C]
///             mx [lead..., T, ceil(C/block)]     cast [1, ..., 1] (all 1)
///   mean    f32 [lead..., 1, C], the km subtracted (empty without smoothing)
struct Quantized {
  Tensor codes;
  Tensor scales;
  Tensor mean;
};

/// Quantizes x (f32, rank >= 2, any strides) with the scheme. Throws attest::Error on a bad
/// dtype, rank, channel count (h128: C == 128; h32_bf16: C % 32 == 0), mean shape or sm_scale.
Quantized quantize(const Tensor& x, const Scheme& s, const QuantInputs& in = {});
/// The values quantize() scales and rounds: x after smoothing, rotation and prescale, as f32
/// contiguous [lead..., T, C]; `mean` (if not null) receives the km used, f32 [lead..., 1, C].
Tensor prepare(const Tensor& x, const Scheme& s, const QuantInputs& in = {}, Tensor* mean = nullptr);
/// Values represented by codes and scales, f32 contiguous [lead..., T, C]: these are the
/// transformed values (prescaled, smoothed, rotated), not the original x.
///   int8 / fp8: fl(value(code) * s); mx: fl(value(code) * 2^(E - 127)) (NaN for E = 0xFF).
/// Throws attest::Error if dtypes or shapes do not match the scheme.
Tensor dequantize(const Tensor& codes, const Tensor& scales, const Scheme& s);
inline Tensor dequantize(const Quantized& q, const Scheme& s) { return dequantize(q.codes, q.scales, s); }

/// Shape of the scales tensor for an input shape (see Quantized).
Shape scales_shape(const Shape& x_shape, const Scheme& s);

// ---- scalar building blocks (exposed for the recipe emulator and for tests) ----

/// FP32 scale of a group with absolute maximum `amax` (ScaleRule), format maximum `qmax`.
float uniform_scale(float amax, ScaleRule rule, float qmax);
/// The multiplier of ApplyOp::mul: fl(qmax / a') (see ApplyOp).
float uniform_inverse(float amax, ScaleRule rule, float qmax);
/// FP32 -> int8 (IntRounding).
std::int8_t to_int8(float q, IntRounding r);
/// E8M0 code of a block with absolute maximum `amax` for the element format.
std::uint8_t e8m0_scale(float amax, E8M0Rule rule, FormatId element);
/// The FP32 factor the block's elements are multiplied by before the element cast:
/// 2^(127 - code), or for aiter_hip_fp8 the float with bits (254 - code) << 23; NaN for 0xFF.
float e8m0_element_multiplier(std::uint8_t code, E8M0Rule rule);
/// MX element code of v (already multiplied): element cast with rounding and overflow; MXINT8 as
/// documented above (two's complement byte).
std::uint8_t mx_element_code(float v, FormatId element, Rounding r, Overflow o);
/// Value of an MX element code (MXINT8: code / 64).
float mx_element_value(std::uint8_t code, FormatId element);
/// The element maximum used by rceil: format max, 127/64 for MXINT8.
float mx_element_max(FormatId element);

/// P quantization. The kernels fold the P scale into the exponent (P = exp2(s - (m - offset))),
/// so P arrives already scaled: quantize_p is the RNE satfinite cast of that value.
std::uint8_t quantize_p(float p_scaled, FormatId f = FormatId::fp8_e4m3fn);
/// log2 of the P scale: 8.807f (offset_8807, P max ~447.9), 8 (pow2_8, P max 256), 0 (unit).
float p_offset(PScale ps);
/// Probability in [0, 1] represented by a P code: decode(code) / 2^offset, rounded once to float.
float dequantize_p(std::uint8_t code, PScale ps, FormatId f = FormatId::fp8_e4m3fn);

}  // namespace attest::ref
