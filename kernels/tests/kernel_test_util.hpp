#pragma once
// Helpers of the kernels tests: inputs from attest::datasets, relayout into the problem's
// layout, NaN-poisoned outputs, one call of a registered kernel.
#include <gtest/gtest.h>

#include <cstring>
#include <limits>
#include <string>

#include "attest/core/problem.hpp"
#include "attest/core/recipe.hpp"
#include "attest/datasets/distributions.hpp"
#include "attest/kernels/kernel.hpp"

namespace attest::kernels::test {

/// A copy of the logical [B,S,H,C] tensor x with the memory layout `l` (bhsd: [B,H,S,C] memory
/// order; strided: each head row followed by `pad` unused elements, filled with NaN).
inline Tensor relayout(const Tensor& x, Layout l, std::int64_t pad, float fill = 0.0f) {
  const Shape sh = x.shape();
  const std::int64_t B = sh[0], S = sh[1], H = sh[2], C = sh[3];
  Tensor t;
  switch (l) {
    case Layout::bhsd: t = Tensor(DType::f32, {B, H, S, C}).permute({0, 2, 1, 3}); break;
    case Layout::strided: {
      const std::int64_t row = C + pad;
      t = Tensor::strided(DType::f32, sh, {S * H * row, H * row, row, 1}, 0, B * S * H * row);
      break;
    }
    default: t = Tensor(DType::f32, sh); break;
  }
  auto* all = reinterpret_cast<float*>(t.storage().data());
  for (std::size_t i = 0; i < t.storage().size() / 4; ++i) all[i] = fill;
  const auto src = x.view<float, 4>();
  const auto dst = t.view<float, 4>();
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t s = 0; s < S; ++s)
      for (std::int64_t h = 0; h < H; ++h)
        for (std::int64_t c = 0; c < C; ++c) dst(b, s, h, c) = src(b, s, h, c);
  return t;
}

struct Result {
  Tensor out, lse;  ///< contiguous copies
};

/// Runs kernel `name` on inputs of distribution `dist` laid out as the problem says, outputs
/// poisoned with NaN (so an unwritten element shows).
inline Result run_kernel(const std::string& name, const Problem& p, const Recipe& r, const datasets::Qkv& in,
                         std::string_view config = "") {
  Kernel* k = Registry::instance().find(name);
  if (k == nullptr) throw Error("no kernel " + name);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const Layout l = p.layout == Layout::packed_qkv ? Layout::bshd : p.layout;
  const Tensor q = relayout(in.q, l, p.pad, nan), kk = relayout(in.k, l, p.pad, nan), v = relayout(in.v, l, p.pad, nan);
  Shape osh = in.q.shape();
  osh[3] = p.head_dim_v;
  const Tensor out = relayout(Tensor(DType::f32, osh), l, p.pad, nan);
  auto* o = reinterpret_cast<float*>(out.storage().data());
  for (std::size_t i = 0; i < out.storage().size() / 4; ++i) o[i] = nan;
  Tensor lse(DType::f32, {osh[0], p.heads_q, osh[1]});
  auto* ls = lse.data<float>();
  for (std::int64_t i = 0; i < lse.numel(); ++i) ls[i] = nan;
  k->run(Args{p, r, q, kk, v, out, &lse, config});
  return {out.contiguous(), lse};
}

/// Index of the first element whose bits differ (NaN equal to NaN), or -1.
inline std::int64_t first_bit_mismatch(const Tensor& a, const Tensor& b) {
  const float* x = a.data<float>();
  const float* y = b.data<float>();
  for (std::int64_t i = 0; i < a.numel(); ++i) {
    if (std::isnan(x[i]) && std::isnan(y[i])) continue;
    if (std::memcmp(x + i, y + i, 4) != 0) return i;
  }
  return -1;
}

inline bool bitwise_equal(const Result& a, const Result& b) {
  return first_bit_mismatch(a.out, b.out) < 0 && first_bit_mismatch(a.lse, b.lse) < 0;
}

}  // namespace attest::kernels::test
