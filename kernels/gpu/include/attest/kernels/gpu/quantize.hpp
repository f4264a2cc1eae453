#pragma once
/// Device quantizers: every scheme of docs/quantizer-schemes.md (cast, int8, fp8, mx; every
/// granularity, scale rule, rounding, overflow mode, smoothing, rotation and prescale), with the
/// output convention of the reference quantizers (attest::ref::quantize), to which they are bitwise
/// equal (gpu_tests `DeviceQuantize.*`; the scalar arithmetic is also checked on the CPU by
/// `gpu_quantize_math_tests`). Plain C++ header: no device headers.
///
/// Input: float32 logically [lead0, lead1, T, C] (rank 2..4: absent leading dims have extent 1)
/// with any element strides. Outputs are contiguous, in reference order:
///   codes  [lead..., T, C]: one byte per element (int8 / mxint8 two's complement, FP8 and MX
///          element codes in the low bits), two bytes for bf16 / fp16 casts
///   scales the reference's scales shape, f32 (cast / int8 / fp8) or u8 E8M0 codes (mx)
///   mean   f32 [lead..., 1, C] when the scheme smooths (the km subtracted), else unused
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "attest/core/format.hpp"
#include "attest/core/scheme.hpp"
#include "attest/kernels/gpu/quantize_math.hpp"

namespace attest::gpu {

/// Schemes are core's Scheme (attest/core/scheme.hpp; parse_scheme reads the string), which the
/// kernels take by value. Throws attest::Error for the identity f32, which the grammar accepts
/// for recipes but which has nothing to quantize; every function below calls it.
void require_device_quantizer(const Scheme& s);

struct QuantizeArgs {
  const float* x = nullptr;        ///< device input
  std::int64_t lead0 = 1, lead1 = 1, T = 0, C = 0;
  std::int64_t stride[4] = {0, 0, 0, 0};  ///< element strides of (lead0, lead1, T, C)
  double sm_scale = 0;             ///< prescale=sm_log2e: finite, > 0
  const float* mean_in = nullptr;  ///< smoothing km supplied (device f32 [lead..., 1, C]); nullptr: computed
  void* codes = nullptr;           ///< device output (see above)
  void* scales = nullptr;          ///< device output
  float* mean_out = nullptr;       ///< device f32 [lead..., 1, C] (smoothing only; may be nullptr)
  void* workspace = nullptr;       ///< device scratch of quantize_workspace_bytes() bytes
  /// false: always the generic kernels (64-bit indices, any strides), never the vectorised fast
  /// path (quantize_fast.hpp); the device tests run both paths on the same inputs.
  bool allow_fast = true;
};

/// Bytes of codes / scales / workspace for these shapes (scales: the reference's scales shape).
std::size_t quantize_codes_bytes(const Scheme& s, std::int64_t n_elements);
std::int64_t quantize_scales_count(const Scheme& s, std::int64_t slabs, std::int64_t T, std::int64_t C);
std::size_t quantize_scales_bytes(const Scheme& s, std::int64_t slabs, std::int64_t T, std::int64_t C);
std::size_t quantize_workspace_bytes(const Scheme& s, std::int64_t slabs, std::int64_t T, std::int64_t C);

/// Enqueues the quantization on `stream` (a hipStream_t; nullptr = default stream). No
/// allocation, no synchronisation, so it can be captured into a graph. Throws attest::Error on
/// bad shapes (h128 needs C == 128, h32_bf16 C % 32 == 0; prescale needs sm_scale > 0) or a
/// missing workspace.
void quantize_device(const Scheme& s, const QuantizeArgs& a, void* stream = nullptr);

/// Device-to-device copy of `bytes` on `stream` (the bandwidth baseline of the benchmark).
void copy_device(void* dst, const void* src, std::size_t bytes, void* stream = nullptr);

}  // namespace attest::gpu
