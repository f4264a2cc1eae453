#pragma once
// Helpers of gpu_tests: the skip guard and an independent long-double attention oracle.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "attest/core/problem.hpp"
#include "attest/core/tensor.hpp"
#include "attest/kernels/gpu/device.hpp"

/// Every GPU test starts with this: no driver or no device means SKIP, never FAIL.
#define ATTEST_REQUIRE_GPU()                                                  \
  do {                                                                        \
    if (::attest::gpu::device_count() == 0) GTEST_SKIP() << "no GPU device or driver on this host"; \
  } while (0)

namespace attest::gpu::test {

/// Attention of one problem in long double (x87 80-bit: 64-bit significand), direct algorithm,
/// written for these tests only: the oracle the device kernels are compared with. Inputs are
/// logical [B|1, tokens, H, C] tensors of f32 (any strides). Outputs contiguous [B|1,tokens,H,Dv]
/// and [B|1,H,tokens]; fully masked rows give 0 and -inf.
struct Oracle {
  std::vector<long double> out, lse;
};

inline Oracle oracle(const Problem& p, const Tensor& q, const Tensor& k, const Tensor& v) {
  const bool rg = p.ragged();
  const std::int64_t tq = rg ? p.cu_seqlens_q.back() : p.seqlen_q;
  const std::int64_t B = rg ? 1 : p.batch, H = p.heads_q, D = p.head_dim, Dv = p.head_dim_v;
  Oracle o;
  o.out.assign(static_cast<std::size_t>(B * tq * H * Dv), 0.0L);
  o.lse.assign(static_cast<std::size_t>(B * H * tq), 0.0L);
  const long double scale = p.scale();
  for (std::int64_t b = 0; b < p.batch; ++b)
    for (std::int64_t h = 0; h < H; ++h)
      for (std::int64_t i = 0; i < p.len_q(b); ++i) {
        const std::int64_t g = h / p.group(), lk = p.len_kv(b);
        const std::int64_t hi = std::clamp<std::int64_t>(p.visible_keys(b, i), 0, lk);
        const std::int64_t bb = rg ? 0 : b;
        const std::int64_t iq = rg ? p.cu_seqlens_q[static_cast<std::size_t>(b)] + i : i;
        const std::int64_t k0 = rg ? p.cu_seqlens_kv[static_cast<std::size_t>(b)] : 0;
        std::vector<long double> s(static_cast<std::size_t>(hi));
        long double m = -std::numeric_limits<long double>::infinity();
        for (std::int64_t j = 0; j < hi; ++j) {
          long double dot = 0;
          for (std::int64_t d = 0; d < D; ++d) dot += static_cast<long double>(q.get({bb, iq, h, d})) * k.get({bb, k0 + j, g, d});
          s[static_cast<std::size_t>(j)] = scale * dot;
          m = std::max(m, s[static_cast<std::size_t>(j)]);
        }
        long double l = 0;
        std::vector<long double> acc(static_cast<std::size_t>(Dv), 0.0L);
        for (std::int64_t j = 0; j < hi; ++j) {
          const long double pj = std::exp(s[static_cast<std::size_t>(j)] - m);
          l += pj;
          for (std::int64_t d = 0; d < Dv; ++d) acc[static_cast<std::size_t>(d)] += pj * v.get({bb, k0 + j, g, d});
        }
        for (std::int64_t d = 0; d < Dv; ++d)
          o.out[static_cast<std::size_t>(((bb * tq + iq) * H + h) * Dv + d)] = l == 0 ? 0.0L : acc[static_cast<std::size_t>(d)] / l;
        o.lse[static_cast<std::size_t>((bb * H + h) * tq + iq)] =
            l == 0 ? -std::numeric_limits<long double>::infinity() : m + std::log(l);
      }
  return o;
}

}  // namespace attest::gpu::test
