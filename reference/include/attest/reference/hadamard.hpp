#pragma once
/// Hadamard rotations of Q/K channels as AITER applies them before MX quantization
/// (FORMATS.md "Hadamard"). All arithmetic FP32, one rounding per operation.
///
/// Sylvester matrix: H[i][j] = (-1)^popcount(i & j); H symmetric, H * H = n * I.
#include <span>

namespace attest::ref {

/// 1/sqrt(128) rounded to float: the normalisation AITER multiplies by.
inline constexpr float kHadamard128Norm = 0.08838834764831845f;
/// bf16(1/sqrt(32)) = 0x3E35 = 0.1767578125: the entries of AITER's bf16 H_32 / sqrt(32).
inline constexpr float kHadamard32Bf16 = 0.1767578125f;

/// Unnormalised in-place fast Walsh-Hadamard transform of 128 values, y = H_128 x. Butterflies
/// (a, b) -> (a + b, a - b) on pairs (i, i + h), stages h = 1, 2, 4, 8, 16, 32, 64 in that order
/// (AITER: 1..8 inside a thread, 16..64 across lanes). The stage order fixes every rounding; the
/// order of pairs inside a stage does not matter (each is independent).
void fwht128(std::span<float, 128> x);
/// fwht128 then x_i * 0.08838834764831845f (AITER mha_v4 MX Q/K, FP8 path).
void hadamard128(std::span<float, 128> x);
/// AITER MXFP6/MXFP4 variant: x_i <- bf16((y_i * 0.08838834764831845f) * mult) (two FP32
/// multiplies, then RNE to bf16; the result is a float holding a bf16 value).
void hadamard128_bf16(std::span<float, 128> x, float mult);
/// AITER Triton MXFP4 variant, per block of 32 channels: x_j <- bf16(x_j), then
/// y_k = sum_j x_j * Hb[j][k] with Hb = +-0.1767578125, accumulated in FP32 in index order
/// j = 0, 1, ..., 31 starting from +0 (products of two bf16 values are exact in FP32, so only the
/// 31 additions round; the MMA's real summation order is hardware-defined — UNVERIFIED).
/// x.size() must be a multiple of 32 (attest::Error otherwise).
void hadamard32_bf16(std::span<float> x);

}  // namespace attest::ref
