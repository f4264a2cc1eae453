#pragma once
/// gpu.ref64: fused FP64 attention forward with LSE on the device (online softmax; the S x T
/// logit matrix never exists in memory). Device-pointer entry point for benchmarks and other
/// device code; the registry entry `gpu.ref64` (ref64_kernel.cpp) wraps it for host Tensors.
///
/// Arithmetic contract for output row (b, i, h), g = h / (H / Hkv), [0, hi) its visible keys:
///   s_j = scale * dot(q_i, k_j)   in double (inputs f32 or f64, converted exactly to double)
///   m = max_j s_j, p_j = exp(s_j - m), l = sum_j p_j, out = (sum_j p_j v_j) / l, lse = m + log(l)
/// computed tile by tile with a running max (rows whose running max is still -inf shift by 0).
/// Special values follow the CPU reference (reference/attention.hpp): a row with no visible key
/// or whose visible logits are all -inf gives out = 0, lse = -inf; a NaN visible logit or V row
/// (or a +inf logit) makes the row NaN; masked keys' K and V never reach the arithmetic.
/// Summation order differs from the CPU reference (tiles, tensor-core dot products), so the two
/// agree to rounding (about 1e-15 relative on benign data), not bitwise; run to run the result
/// is bitwise deterministic (fixed order, no atomics).
#include <cstdint>

#include "attest/core/problem.hpp"
#include "attest/core/tensor_ref.hpp"

namespace attest::gpu {

/// Tensors are attest::TensorRef (the one tensor reference of host and device memory) with
/// device = true and dtype f32 or f64; their extents are Ref64Args' (shape is not read). Logical
/// index order (b, s, h, d) for q/k/v/out and (b, h, s) for lse (stride[3] unused). For ragged
/// problems b's stride is unused and the token index is cu_seqlens[b] + s, as in the host Tensor
/// convention ([1, total, H, D]). out and lse are written through their data pointers.

struct Ref64Args {
  std::int64_t batch = 1, heads_q = 1, heads_kv = 1, seqlen_q = 1, seqlen_kv = 1, head_dim = 128, head_dim_v = 128;
  Mask mask = Mask::none;
  double scale = 0;                      ///< softmax scale (the caller resolves the default)
  const std::int64_t* cu_q = nullptr;    ///< device array of batch+1 entries, or nullptr
  const std::int64_t* cu_kv = nullptr;   ///< device array of batch+1 entries, or nullptr
  TensorRef q, k, v;                     ///< inputs, f32 or f64 (all three the same type)
  TensorRef out;                         ///< f32 or f64, every in-range element written
  TensorRef lse;                         ///< f32 or f64, natural log; data == nullptr: not written
};

/// Which implementation runs. `portable`: one block per query row, scalar FP64, any shape, every
/// target (AMD included). `mma`: tiled FP64 tensor-core kernel (mma.sync m16n8k8 f64, sm_90
/// only), head_dim == head_dim_v in {64, 128}. `automatic`: mma when available, else portable.
enum class Ref64Path : std::uint8_t { automatic, portable, mma };
const char* path_name(Ref64Path p);

/// Ref64Args for a Problem (shapes, mask, scale), tensors left empty.
Ref64Args ref64_args(const Problem& p);

/// The path `requested` resolves to for these arguments on the current device; throws
/// attest::Error if `mma` is requested but unavailable (the message says why).
Ref64Path ref64_resolve(const Ref64Args& a, Ref64Path requested);

/// Launches on `stream` (a hipStream_t; nullptr = default stream). Asynchronous; launch errors
/// throw attest::Error. Throws attest::Error on inconsistent arguments.
void attn_fwd_ref64(const Ref64Args& a, Ref64Path path = Ref64Path::automatic, void* stream = nullptr);

namespace detail {
/// Runs one mma.sync m16n8k8 f64 on the device: c (16x8, row-major) = a (16x8, row-major) *
/// b (8x8, [k][n] row-major) + c. Returns false (c untouched) when the path is unavailable.
/// Exposed so gpu_tests can check the fragment layout in isolation.
bool mma_16x8x8_selftest(const double* a, const double* b, double* c);
}  // namespace detail

}  // namespace attest::gpu
