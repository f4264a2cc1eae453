#pragma once
/// Device port of attest::datasets::generate_qkv: the same element function
/// (datasets/include/attest/datasets/sample.hpp, compiled for the device), so every element has
/// the same bits as on the CPU (gpu_tests checks this for every distribution).
#include <cstdint>

#include "attest/core/problem.hpp"
#include "attest/datasets/distributions.hpp"

namespace attest::gpu {

/// Fills contiguous float32 device tensors in generate_qkv's layout: q [B,S,H,D], k [B,T,Hkv,D],
/// v [B,T,Hkv,Dv]; ragged problems packed [1,total,...]. `cu_q`/`cu_kv` are device copies of the
/// problem's cu_seqlens (nullptr unless ragged). Asynchronous on `stream` (a hipStream_t).
/// Throws attest::Error on an invalid problem or distribution.
void generate_qkv_device(const Problem& p, datasets::Distribution dist, std::uint64_t seed, float* q, float* k,
                         float* v, const std::int64_t* cu_q = nullptr, const std::int64_t* cu_kv = nullptr,
                         void* stream = nullptr);

}  // namespace attest::gpu
