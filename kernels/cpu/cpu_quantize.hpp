#pragma once
// The CPU kernels' quantizers (Q, K, V and block-scaled P), written from docs/quantizer-schemes.md
// and FORMATS.md independently of reference/quantize. An operand is quantized per unit (the whole
// batch, or one sequence of a ragged batch) as slabs (batch element, head) of [tokens, channels];
// element values are kept as floats with the scales factored out.
#include <cstdint>
#include <vector>

#include "cpu/cpu_numerics.hpp"
#include "cpu/cpu_scheme.hpp"

namespace attest::kernels::cpu {

/// Sage's FP32 epsilon (1e-7f in both the Triton and CUDA sources).
inline constexpr float kSageEps = 1e-7f;
/// Marks a NaN E8M0 scale (code 0xFF) in a block exponent.
inline constexpr std::int16_t kNanExp = 0x7FFF;

/// A quantized operand. Values `val` [slab][t][c]; per-token scales `ts` [slab][t] (Q/K, int8
/// and fp8; 1 otherwise); per-channel scales `cs` [slab][c] (V, int8 and fp8; 1 otherwise);
/// MX block exponents E - 127: Q/K `bexp` [slab][t][c / block], V `bexp` [slab][t / block][c];
/// K smoothing means `km` [slab][c]; `ival` true when values are INT8 integers.
struct QOperand {
  std::int64_t slabs = 0, T = 0, C = 0, block = 32;
  bool mx = false, ival = false;
  std::vector<float> val, ts, cs, km;
  std::vector<std::int16_t> bexp;
};

/// Planted quantizer bugs of the mutants (none in production).
struct QuantBugs {
  bool int8_trunc = false;        ///< INT8 by truncation toward zero
  bool smooth_per_token = false;  ///< K minus each token's mean over channels
  bool v_nosat = false;           ///< FP8 cast with IEEE overflow (NaN) instead of saturation
  bool block_mismatch = false;    ///< per_block: scales per block/2 tokens, looked up per block
  bool e8m0_floor = false;        ///< MX: E8M0 scales by the OCP floor rule, whatever the scheme says
  bool e8m0_bias = false;         ///< MX: block exponents stored as code - 128 instead of code - 127
};

/// Quantizes `x` given as slab-major [slabs][T][C] floats. `as_v`: V's geometry (scales per
/// channel, MX blocks along tokens). `sm_scale` feeds prescale=sm_log2e.
QOperand quantize_operand(const std::vector<float>& x, std::int64_t slabs, std::int64_t T, std::int64_t C,
                          const Scheme& s, bool as_v, double sm_scale, const QuantBugs& bugs = {});

/// E8M0 code of a block with absolute maximum `amax` under the scheme's rule, for its element.
std::uint8_t e8m0_code(float amax, const Scheme& s);
/// What a block's elements are multiplied by before the element cast (NaN for code 0xFF).
float e8m0_multiplier(std::uint8_t code, const Scheme& s);
/// MX element value of v (already multiplied).
float mx_element(float v, const Scheme& s);

}  // namespace attest::kernels::cpu
