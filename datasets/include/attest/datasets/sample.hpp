#pragma once
/// The element function behind sample() (distributions.hpp), header-only and host/device
/// (ATTEST_HD) so that a device port compiles this very code: the device generator
/// (kernels/gpu/generate_qkv.hip) and the CPU must give the same bits for every element, and
/// gpu_tests asserts it for every distribution. Only correctly rounded IEEE operations and the
/// in-house polynomials of exact_math.hpp; device code must be compiled without FMA contraction
/// (nvcc --fmad=false, clang -ffp-contract=off), as the host code is (-ffp-contract=off).
#include <cstdint>
#include <limits>

#include "attest/core/philox.hpp"
#include "attest/core/problem.hpp"
#include "attest/datasets/distributions.hpp"
#include "attest/datasets/exact_math.hpp"

namespace attest::datasets {

/// The parts of a Problem the element function reads (a plain struct a kernel can take by value).
struct SampleShape {
  std::int64_t seqlen_q, seqlen_kv, heads_q, heads_kv, head_dim, head_dim_v;
  double scale;  ///< Problem::scale()
};

inline SampleShape sample_shape(const Problem& p) {
  return {p.seqlen_q, p.seqlen_kv, p.heads_q, p.heads_kv, p.head_dim, p.head_dim_v, p.scale()};
}

namespace element {

constexpr std::uint32_t kChannelStream = 0x100, kTokenStream = 0x200, kSharedStream = 0x300,
                        kHeadStream = 0x400;

using Words = Philox4x32::Counter;

struct Dims {
  std::int64_t smax, heads, dim;
};

ATTEST_HD inline Dims dims_of(Role r, const SampleShape& p) {
  switch (r) {
    case Role::q: return {p.seqlen_q, p.heads_q, p.head_dim};
    case Role::k: return {p.seqlen_kv, p.heads_kv, p.head_dim};
    case Role::v: return {p.seqlen_kv, p.heads_kv, p.head_dim_v};
  }
  return {p.seqlen_q, p.heads_q, p.head_dim};
}

ATTEST_HD inline std::uint32_t id(Role r) { return static_cast<std::uint32_t>(r); }
ATTEST_HD inline std::uint64_t u64(std::int64_t i) { return static_cast<std::uint64_t>(i); }

ATTEST_HD inline double unit32(std::uint32_t w) { return static_cast<double>(w) * 0x1p-32; }         // [0, 1)
ATTEST_HD inline double unit32_open(std::uint32_t w) { return (static_cast<double>(w) + 0.5) * 0x1p-32; }  // (0, 1)

ATTEST_HD inline double unit_open0(std::uint32_t w0, std::uint32_t w1) {
  const std::uint64_t m = (static_cast<std::uint64_t>(w0) << 21) | (w1 >> 11);
  return static_cast<double>(m + 1) * 0x1p-53;
}

ATTEST_HD inline double box_muller(std::uint32_t w0, std::uint32_t w1, std::uint32_t w2) {
  const double rad = std::sqrt(-2.0 * poly_log(unit_open0(w0, w1)));
  return rad * poly_sincos_2pi(unit32(w2)).cos + 0.0;  // + 0.0: never -0 (u1 = 1 gives rad = -0)
}

ATTEST_HD inline float uniform_pm1(std::uint32_t w) {
  // (2k + 1 - 2^24) * 2^-24 for k in [0, 2^24): every value is exact in f32, and the set is
  // symmetric about 0, so the mean is exactly 0.
  const auto k = static_cast<std::int32_t>(w >> 8);
  return static_cast<float>(2 * k + 1 - (1 << 24)) * 0x1p-24f;
}

// N(0,1) from two words (32-bit radius: tails cut at 6.6 sigma), for auxiliary draws that do
// not get a full Philox block of their own.
ATTEST_HD inline double box_muller32(std::uint32_t w0, std::uint32_t w1) {
  const double rad = std::sqrt(-2.0 * poly_log(unit32_open(w0)));
  return rad * poly_sincos_2pi(unit32(w1)).cos;
}

// Sign pattern and channel weight shared by q and k of one kv head: queries and keys built on
// them have q.k = sum_d |q_d| * w_d * (key factor), whose sign and ordering are known exactly.
struct Shared {
  double sign, weight;
};
ATTEST_HD inline Shared shared_channel(std::uint64_t seed, const SampleShape& p, std::int64_t hkv, std::int64_t d) {
  const Words w = philox_words(seed, kSharedStream, u64(hkv * p.head_dim + d));
  return {(w[0] >> 31) != 0 ? -1.0 : 1.0, 0.5 + unit32(w[1])};  // weight in [0.5, 1.5)
}

ATTEST_HD inline std::int64_t kv_head(Role r, const SampleShape& p, std::int64_t h) { return r == Role::q ? h / (p.heads_q / p.heads_kv) : h; }

// Aligned query: q_d = sign_d * (1 + u), |q_d| in [1, 2), E|q_d| = 1.5.
ATTEST_HD inline double aligned_query(const Shared& sh, const Words& w) { return sh.sign * (1.0 + unit32(w[0])); }

// Scale that turns a key factor c into a logit of about c: logit = scale * c * sum_d |q_d| w_d,
// and E[sum_d |q_d| w_d] = 1.5 * D.
ATTEST_HD inline double logit_unit(const SampleShape& p) { return 1.0 / (p.scale * 1.5 * static_cast<double>(p.head_dim)); }

ATTEST_HD inline float sink_like(Role r, std::uint64_t seed, const SampleShape& p, std::int64_t b, std::int64_t s, std::int64_t h,
                std::int64_t d, const Words& w, std::int64_t sink_token) {
  // The sink key is 4 * sign_d, other keys are in (-1, 1): for every query
  // q.k_sink = 4 sum|q_d| > sum|q_d| > |q.k_j|, so token `sink_token` is the strict argmax and
  // its scaled logit exceeds every other by at least 3 * scale * D (34 at D=128, default scale).
  if (r == Role::v) return static_cast<float>(box_muller(w[0], w[1], w[2]));
  const Shared sh = shared_channel(seed, p, kv_head(r, p, h), d);
  if (r == Role::q) return static_cast<float>(aligned_query(sh, w));
  if (s == sink_token) return static_cast<float>(4.0 * sh.sign);
  return uniform_pm1(w[0]);
}

ATTEST_HD inline float diffusion(Role r, std::uint64_t seed, const SampleShape& p, std::int64_t b, std::int64_t s, std::int64_t h,
                std::int64_t d, const Dims& dm, const Words& w) {
  const double z = box_muller32(w[0], w[1]);
  if (r == Role::v) {
    // Student-t with 4 degrees of freedom scaled to unit variance: t4 = z / sqrt(chi2_4 / 4),
    // chi2_4 = -2 log(u3 u4), Var(t4) = 2, so t4 / sqrt(2) = z / sqrt(-log(u3 u4)).
    // u3, u4 in (0, 1) strictly, so the log is < 0.
    return static_cast<float>(z / std::sqrt(-poly_log(unit32_open(w[2]) * unit32_open(w[3]))));
  }
  const Words cw = philox_words(seed, kChannelStream | id(r), u64(h * dm.dim + d));
  const double bias = box_muller32(cw[0], cw[1]);
  if (r == Role::q) return static_cast<float>(z + 0.5 * bias);
  // K: per-channel bias N(0, 2^2) (what SageAttention's K smoothing removes), two outlier
  // channels per head at 10x, and ~1/128 of tokens at 6x (massive activations).
  const Words hw = philox_words(seed, kHeadStream | id(r), u64(h));
  const std::int64_t c1 = static_cast<std::int64_t>(hw[0] % static_cast<std::uint32_t>(dm.dim));
  const std::int64_t c2 = static_cast<std::int64_t>(hw[1] % static_cast<std::uint32_t>(dm.dim));
  const Words tw = philox_words(seed, kTokenStream | id(r), u64(b * dm.smax + s));
  const double channel_gain = (d == c1 || d == c2) ? 10.0 : 1.0;
  const double token_gain = tw[0] < (1u << 25) ? 6.0 : 1.0;
  return static_cast<float>(channel_gain * token_gain * (z + 2.0 * bias));
}


/// sample() for one element: len_kv_b is Problem::len_kv(b). An invalid `dist` gives NaN.
ATTEST_HD inline float sample_element(Distribution dist, Role r, std::uint64_t seed, const SampleShape& p, std::int64_t len_kv_b,
                                       std::int64_t b, std::int64_t s,
             std::int64_t h, std::int64_t d) {
  const Dims dm = dims_of(r, p);
  const Words w = philox_words(seed, id(r), u64(((b * dm.smax + s) * dm.heads + h) * dm.dim + d));
  switch (dist) {
    case Distribution::normal: return static_cast<float>(box_muller(w[0], w[1], w[2]));
    case Distribution::uniform: return uniform_pm1(w[0]);
    case Distribution::exact_int:
      // Integers: |q_d k_d| <= 9, so every partial sum of q.k is an integer of magnitude
      // <= 9 D <= 2^24 for D <= 1.8e6: exact in f32 and f64 in any order. Every partial sum of
      // v over tokens is an integer <= 8 T: exact in f64 (and in f32 for T <= 2^21).
      // All values are exact in bf16, f16, fp8 e4m3/e5m2, int8; q/k also in fp6 and fp4 e2m1.
      // Density 1/2 for q/k keeps Var(scale * q.k) = D * (4/2)^2 / D = 4 at the default scale:
      // logits of std 2, neither one-hot nor flat.
      if (r == Role::v) return static_cast<float>(static_cast<int>(w[0] % 17u) - 8);
      return (w[1] & 1u) != 0 ? static_cast<float>(static_cast<int>(w[0] % 7u) - 3) : 0.0f;
    case Distribution::diffusion: return diffusion(r, seed, p, b, s, h, d, dm, w);
    case Distribution::sink: return sink_like(r, seed, p, b, s, h, d, w, 0);
    case Distribution::latesink: return sink_like(r, seed, p, b, s, h, d, w, len_kv_b - 1);
    case Distribution::maxstair: {
      // k_j = sign_d * w_d * c_j with c_j strictly increasing in j, so for every query
      // q.k_j = c_j * sum_d |q_d| w_d strictly increases token by token (f32 rounding of k is
      // monotone, and consecutive c_j differ by far more than an f32 ulp). The step is about
      // 1/32 logit per token, 2 logits per 64-key tile.
      if (r == Role::v) return static_cast<float>(box_muller(w[0], w[1], w[2]));
      const Shared sh = shared_channel(seed, p, kv_head(r, p, h), d);
      if (r == Role::q) return static_cast<float>(aligned_query(sh, w));
      const double center = 0.5 * static_cast<double>(len_kv_b - 1);
      const double c = (static_cast<double>(s) - center) * (logit_unit(p) / 32.0);
      return static_cast<float>(sh.sign * (sh.weight * c));
    }
    case Distribution::underflow: {
      // k_j = sign_d * w_d * a_j with a_j uniform per token: logits ~ U(-1000, 1000) (scaled by
      // sum|q_d| w_d / 1.5D ~ 1); exp(x) is 0 in f32 below x = -103.98, so for every query only
      // the ~5% of keys within 104 of the row max survive.
      if (r == Role::v) return static_cast<float>(box_muller(w[0], w[1], w[2]));
      const Shared sh = shared_channel(seed, p, kv_head(r, p, h), d);
      if (r == Role::q) return static_cast<float>(aligned_query(sh, w));
      const Words tw = philox_words(seed, kTokenStream | id(r), u64(b * dm.smax + s));
      const double a = 1000.0 * (2.0 * unit32(tw[0]) - 1.0) * logit_unit(p);
      return static_cast<float>(sh.sign * (sh.weight * a));
    }
    case Distribution::outlier:
      if (r != Role::q && (w[3] < (1u << 22) || (s == 0 && d == 0))) {
        const double mag = 500.0 + 1500.0 * unit32(w[0]);  // [500, 2000): beyond e4m3's 448
        return static_cast<float>((w[1] & 1u) != 0 ? -mag : mag);
      }
      return static_cast<float>(box_muller(w[0], w[1], w[2]));
    case Distribution::constant:
      if (r == Role::k) {
        // Every key token takes the values of token 0: identical rows, constant logits.
        const Words w0 = philox_words(seed, id(r), u64(((b * dm.smax) * dm.heads + h) * dm.dim + d));
        return static_cast<float>(box_muller(w0[0], w0[1], w0[2]));
      }
      return static_cast<float>(box_muller(w[0], w[1], w[2]));
  }
  return std::numeric_limits<float>::quiet_NaN();  // not a Distribution: sample() refuses it first
}

}  // namespace element

using element::sample_element;

}  // namespace attest::datasets
