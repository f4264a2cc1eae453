// The named recipes: each a shorthand for one full recipe string (see recipe.hpp). Every field is
// defined by the emulator's arithmetic (docs/recipes.md); quantizer schemes follow
// docs/quantizer-schemes.md. Where a modelled kernel uses an operation without a bitwise model
// (ex2.approx), the recipe uses a correctly rounded stand-in (exp2=cr) and says so: its budget
// differs from the kernel's by < 2e-7 relative per probability.
#include <array>

#include "attest/core/recipe.hpp"

namespace attest {

namespace {

// Sage (SageAttention2, CUDA sm_90 qk_int8_sv_f8 kernel): P = exp2(S*scale - (max*scale - 8.807))
// cast to e4m3 satfinite, row sum from FP32 P, P.V in FP32, O = acc * rcp(d) * v_scale, bf16.
// V per channel to e4m3: x * (448 / amax), stored scale amax / 448. CTA 64 queries x 128 keys.
#define SAGE_PV "v=fp8_e4m3fn:per_channel;p=fp8_e4m3fn;pscale=offset_8807;div=rcp_sm90;tile_q=64;tile_kv=128"

// AITER mha_v4 (gfx950, MI355X), MX Q/K: E8M0 rules of the HIP quantizers (FORMATS.md rules 4
// and 8), fp4 ties toward the smaller magnitude (AITER native pack). P in [0, 1] (no offset),
// O = acc * (1 / l) * v_descale. Tiles 128 x 128. P/V formats after the underscore.
#define MXFP6_QK "q=mxfp6_e2m3fn:scale=aiter_hip_fp6;k=mxfp6_e2m3fn:scale=aiter_hip_fp6"
#define MXFP4_QK "q=mxfp4_e2m1fn:scale=aiter_hip_fp4:round=smaller;k=mxfp4_e2m1fn:scale=aiter_hip_fp4:round=smaller"
// With the mha_v4 Hadamard: FWHT over 128 channels, x 1/sqrt(128), then bf16((y*r)*mult) with
// mult = softmax_scale * log2e for Q (the logits arrive in log2 units), 1 for K. Needs D = 128.
#define MXFP6_QK_HAD                                                               \
  "q=mxfp6_e2m3fn:scale=aiter_hip_fp6:prescale=sm_log2e:rotate=h128_bf16;"         \
  "k=mxfp6_e2m3fn:scale=aiter_hip_fp6:rotate=h128_bf16"
#define MXFP4_QK_HAD                                                                            \
  "q=mxfp4_e2m1fn:scale=aiter_hip_fp4:round=smaller:prescale=sm_log2e:rotate=h128_bf16;"        \
  "k=mxfp4_e2m1fn:scale=aiter_hip_fp4:round=smaller:rotate=h128_bf16"
// P and V in FP8 (OCP e4m3fn on gfx950): V per channel, scale amax * fl(1/448) (torch).
#define AITER_PV_FP8 "v=fp8_e4m3fn:per_channel:scale=rcp;p=fp8_e4m3fn;div=ieee_rcp;tile_q=128;tile_kv=128"
// P and V in MXFP4: V blocks of 32 tokens per channel, P blocks of 32 keys per row.
#define AITER_PV_FP4                                                                  \
  "v=mxfp4_e2m1fn:scale=aiter_hip_fp4:round=smaller;p=fp4_e2m1fn;div=ieee_rcp;"       \
  "tile_q=128;tile_kv=128;p_mx=mxfp4_e2m1fn:scale=aiter_hip_fp4:round=smaller"

constexpr std::array<NamedRecipe, 18> kNamed{{
    {"bf16", "q=bf16;k=bf16;v=bf16;p=bf16;out=bf16",
     "bf16 inputs, P rounded to bf16 before P.V (FlashAttention-2/3, cuDNN, PyTorch SDPA; exp2 correctly rounded)"},
    {"fp16", "q=fp16;k=fp16;v=fp16;p=fp16;out=fp16",
     "fp16 inputs, P rounded to fp16 before P.V (FlashAttention-2/3, PyTorch SDPA; exp2 correctly rounded)"},
    {"bf16_fa4",
     "q=bf16;k=bf16;v=bf16;p=bf16;exp2=fa4;rescale=conditional;rescale_threshold=8;div=ieee_rcp;tile_q=128;"
     "tile_kv=128;out=bf16",
     "FlashAttention-4 bf16: polynomial exp2 emulation, old max kept while it grows <= 8 (log2), O = acc * (1/l)"},
    {"sage_int8_fp8_perblock",
     "q=int8:per_block=128:round=half:prescale=sm_log2e;k=int8:per_block=64:round=half:smooth=bf16;" SAGE_PV
     ";out=bf16",
     "SageAttention2 sm_90 INT8 QK / FP8 PV with the Triton per-block quantizer (Q 128 tokens pre-scaled, K 64, "
     "K smoothed in bf16)"},
    {"sage_int8_fp8_perwarp",
     "q=int8:per_warp=sm90:scale=floor:apply=mul;k=int8:per_warp=sm90:role=k:scale=floor:apply=mul:smooth=fp32;" SAGE_PV
     ";out=bf16",
     "SageAttention2 sm_90 INT8 QK / FP8 PV with the CUDA per-warp quantizer (Q warps 16 rows, K 128, K smoothed in "
     "fp32)"},
    {"sage_int8_fp8_perthread",
     "q=int8:per_thread=sm90:scale=eps:round=half:prescale=sm_log2e;"
     "k=int8:per_thread=sm90:role=k:scale=eps:round=half:smooth=bf16;" SAGE_PV ";out=bf16",
     "SageAttention2 sm_90 INT8 QK / FP8 PV with the Triton per-thread quantizer (its default on sm_90)"},
    {"fp8_fp8",
     "q=fp8_e4m3fn:per_tensor;k=fp8_e4m3fn:per_tensor;v=fp8_e4m3fn:per_tensor;p=fp8_e4m3fn;pscale=pow2_8;"
     "div=rcp_sm90;tile_q=128;tile_kv=128;out=bf16;vscale=rcp",
     "FlashAttention-3 FP8 on sm_90 (OCP e4m3fn, per-tensor descales, P in [0, 256], O *= (1/sum) * v_descale)"},
    // cuDNN FP8 SDPA forward on sm_90 (cudnn-frontend sdpa_fp8; what Transformer Engine calls): Q, K, V
    // E4M3 per tensor, x * fl(448 / amax) saturating, descale amax / 448; P = exp(S - max) in [0, 1]
    // times scale_s = 448 (cuDNN's documented bound for E4M3 without dropout) -> E4M3, row sum from
    // FP32 P; O to E4M3 with scale_o = 1 (sm_90 has no bf16 O for FP8). Modelled: pscale=offset_8807
    // (P max 447.9 for 448).
    // Not bitwise (cuDNN's exp, P rounding point and division are not published): accuracy only.
    {"cudnn_fp8_e4m3",
     "q=fp8_e4m3fn:per_tensor;k=fp8_e4m3fn:per_tensor;v=fp8_e4m3fn:per_tensor;p=fp8_e4m3fn;pscale=offset_8807;"
     "tile_q=128;tile_kv=128;out=fp8_e4m3fn",
     "cuDNN FP8 SDPA forward on sm_90 (E4M3 Q/K/V per tensor amax/448, P x 448 to E4M3, O to E4M3; accuracy "
     "contract)"},
    {"fp8_fp8_fnuz",
     "q=fp8_e4m3fnuz:per_tensor:overflow=sat_hip;k=fp8_e4m3fnuz:per_tensor:overflow=sat_hip;"
     "v=fp8_e4m3fnuz:per_tensor:overflow=sat_hip;p=fp8_e4m3fnuz;div=ieee_rcp;tile_q=128;tile_kv=128;out=bf16",
     "CK/AITER FP8 attention on gfx942 (MI300, e4m3fnuz max 240, P in [0, 1]: 2^8 would overflow 240; UNVERIFIED)"},
    {"mxfp6_fp8", MXFP6_QK ";" AITER_PV_FP8 ";out=bf16",
     "AITER mha_v4 on gfx950: MXFP6 (e2m3) Q/K without rotation, FP8 P and V"},
    {"mxfp4_fp8", MXFP4_QK ";" AITER_PV_FP8 ";out=bf16",
     "AITER mha_v4 on gfx950: MXFP4 Q/K without rotation, FP8 P and V"},
    {"mxfp6_fp4", MXFP6_QK ";" AITER_PV_FP4 ";out=bf16",
     "AITER mha_v4 on gfx950: MXFP6 (e2m3) Q/K without rotation, MXFP4 P and V"},
    {"mxfp4_fp4", MXFP4_QK ";" AITER_PV_FP4 ";out=bf16",
     "AITER mha_v4 on gfx950: MXFP4 Q/K without rotation, MXFP4 P and V"},
    {"mxfp6_fp8_had", MXFP6_QK_HAD ";" AITER_PV_FP8 ";out=bf16",
     "AITER mha_v4 on gfx950: Hadamard-rotated MXFP6 Q/K (head_dim 128), FP8 P and V"},
    {"mxfp4_fp8_had", MXFP4_QK_HAD ";" AITER_PV_FP8 ";out=bf16",
     "AITER mha_v4 on gfx950: Hadamard-rotated MXFP4 Q/K (head_dim 128), FP8 P and V"},
    {"mxfp6_fp4_had", MXFP6_QK_HAD ";" AITER_PV_FP4 ";out=bf16",
     "AITER mha_v4 on gfx950: Hadamard-rotated MXFP6 Q/K (head_dim 128), MXFP4 P and V"},
    {"mxfp4_fp4_had", MXFP4_QK_HAD ";" AITER_PV_FP4 ";out=bf16",
     "AITER mha_v4 on gfx950: Hadamard-rotated MXFP4 Q/K (head_dim 128), MXFP4 P and V"},
    {"f32", "q=f32;k=f32;v=f32;p=f32;out=f32",
     "float32 operands without rounding of P or O (fma accumulation): the emulator's unquantized baseline"},
}};

#undef SAGE_PV
#undef MXFP6_QK
#undef MXFP4_QK
#undef MXFP6_QK_HAD
#undef MXFP4_QK_HAD
#undef AITER_PV_FP8
#undef AITER_PV_FP4

}  // namespace

std::span<const NamedRecipe> named_recipes() { return kNamed; }

}  // namespace attest
