#pragma once
// Addressing of the kernels' float32 tensors by (batch element, token, head, channel), for dense
// and ragged problems alike, through the tensors' own strides (layouts differ only in strides).
#include <cstdint>
#include <string>

#include "attest/core/problem.hpp"
#include "attest/core/status.hpp"
#include "attest/core/tensor.hpp"

namespace attest::kernels::cpu {

/// A rank-4 float32 tensor [B|1, tokens, heads, channels] seen per batch element: row(b, i, h)
/// points at channel 0 of token i of batch element b (ragged: token cu[b] + i of batch 0).
template <class T>
struct TokenView {
  T* data = nullptr;
  std::int64_t sb = 0, ss = 0, sh = 0, sd = 0;
  const std::vector<std::int64_t>* cu = nullptr;  ///< ragged cumulative starts, or nullptr

  [[nodiscard]] T* row(std::int64_t b, std::int64_t i, std::int64_t h) const {
    const std::int64_t bb = cu != nullptr ? 0 : b;
    const std::int64_t ii = cu != nullptr ? (*cu)[static_cast<std::size_t>(b)] + i : i;
    return data + bb * sb + ii * ss + h * sh;
  }
  [[nodiscard]] T& at(std::int64_t b, std::int64_t i, std::int64_t h, std::int64_t d) const {
    return row(b, i, h)[d * sd];
  }
};

/// The LSE tensor [B, H, S] (ragged [1, H, total_q]).
struct LseView {
  float* data = nullptr;
  std::int64_t sb = 0, sh = 0, ss = 0;
  const std::vector<std::int64_t>* cu = nullptr;
  [[nodiscard]] float& at(std::int64_t b, std::int64_t h, std::int64_t i) const {
    const std::int64_t bb = cu != nullptr ? 0 : b;
    const std::int64_t ii = cu != nullptr ? (*cu)[static_cast<std::size_t>(b)] + i : i;
    return data[bb * sb + h * sh + ii * ss];
  }
};

/// Checks dtype and logical shape; throws attest::Error naming the tensor.
inline void check_shape(const Tensor& t, const char* what, std::int64_t b, std::int64_t s, std::int64_t h,
                        std::int64_t d) {
  if (t.dtype() != DType::f32) throw Error(std::string(what) + ": expected f32, got " + std::string(dtype_name(t.dtype())));
  const Shape want{b, s, h, d};
  if (t.shape() != want)
    throw Error(std::string(what) + ": expected shape " + shape_string(want) + ", got " + shape_string(t.shape()));
}

template <class T>
TokenView<T> token_view(const Tensor& t, const Problem& p, bool kv) {
  TokenView<T> v;
  v.data = t.data<float>();
  v.sb = t.strides()[0];
  v.ss = t.strides()[1];
  v.sh = t.strides()[2];
  v.sd = t.strides()[3];
  if (p.ragged()) v.cu = kv ? &p.cu_seqlens_kv : &p.cu_seqlens_q;
  return v;
}

/// Validates the buffers of one call against the problem (shapes of q, k, v, out, lse).
inline void check_args(const Problem& p, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                       const Tensor* lse) {
  const bool rg = p.ragged();
  const std::int64_t bq = rg ? 1 : p.batch;
  const std::int64_t tq = rg ? p.cu_seqlens_q.back() : p.seqlen_q;
  const std::int64_t tk = rg ? p.cu_seqlens_kv.back() : p.seqlen_kv;
  check_shape(q, "q", bq, tq, p.heads_q, p.head_dim);
  check_shape(k, "k", bq, tk, p.heads_kv, p.head_dim);
  check_shape(v, "v", bq, tk, p.heads_kv, p.head_dim_v);
  check_shape(out, "out", bq, tq, p.heads_q, p.head_dim_v);
  if (lse != nullptr) {
    if (lse->dtype() != DType::f32) throw Error("lse: expected f32");
    const Shape want{bq, p.heads_q, tq};
    if (lse->shape() != want) throw Error("lse: expected shape " + shape_string(want) + ", got " + shape_string(lse->shape()));
  }
}

inline LseView lse_view(const Tensor& t, const Problem& p) {
  LseView v;
  v.data = t.data<float>();
  v.sb = t.strides()[0];
  v.sh = t.strides()[1];
  v.ss = t.strides()[2];
  if (p.ragged()) v.cu = &p.cu_seqlens_q;
  return v;
}

}  // namespace attest::kernels::cpu
