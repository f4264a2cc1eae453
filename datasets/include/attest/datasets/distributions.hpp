#pragma once
/// Deterministic input distributions for Q, K and V.
///
/// Every element is a pure function of (distribution, role, seed, problem, b, s, h, d): the
/// Philox4x32-10 words of a linear element index, pushed through correctly rounded IEEE
/// operations and the in-house polynomials of exact_math.hpp only. So any element can be
/// produced alone, in any order, by any number of threads, on the host or a device, with the
/// same bits.
///
/// Philox streams (tensor id, counter index); Smax/H/D are the role's max sequence length,
/// head count and head dim (q: seqlen_q, heads_q, head_dim; k: seqlen_kv, heads_kv, head_dim;
/// v: seqlen_kv, heads_kv, head_dim_v):
///   element      (role,          ((b*Smax + s)*H + h)*D + d)
///   per channel  (0x100 | role,  h*D + d)        parameters of one channel of one head
///   per token    (0x200 | role,  b*Smax + s)     parameters of one token
///   shared q/k   (0x300,         hkv*head_dim + d)  sign pattern and channel weights that q and
///                                                  k share; a q head h uses hkv = h / group
///   per head     (0x400 | role,  h)              choice of outlier channels
/// Because the index uses the maximum length Smax, a ragged (cu_seqlens) problem and its padded
/// equivalent produce the same value for the same (b, s, h, d).
#include <cstdint>
#include <span>
#include <string_view>

#include "attest/core/problem.hpp"
#include "attest/core/tensor.hpp"

namespace attest::datasets {

/// Fill families. Each says in one line what it stresses.
enum class Distribution : std::uint8_t {
  normal,     ///< N(0,1) for q, k, v: the realistic baseline.
  uniform,    ///< U(-1,1) (odd multiples of 2^-24, exact in f32): bounded, no tails.
  exact_int,  ///< small integers (q,k in [-3,3] at density 1/2, v in [-8,8]): every q.k partial
              ///< sum and every sum of v is an exact integer in any order (bitwise checks of QK^T).
  diffusion,  ///< DiT-like: per-channel bias in q/k, 2 outlier channels per K head, ~1/128
              ///< outlier tokens in K, Student-t(4) V: quantizer granularity and smoothing.
  sink,       ///< key 0 gets a huge logit from every query: attention concentrates on token 0.
  latesink,   ///< the sink is the LAST key: online softmax meets its maximum at the end.
  maxstair,   ///< logits increase token by token: the running max grows at every tile (rescale).
  underflow,  ///< logits spread over ~[-1000, 1000]: most exp(s - max) underflow to 0 in f32.
  outlier,    ///< N(0,1) plus ~1/1024 of K/V elements (and k/v[b,0,h,0]) at +-[500, 2000):
              ///< overflows FP8 e4m3 (448) unless the quantizer saturates or scales.
  constant,   ///< every key row of a head identical: constant logits, output = mean of V.
};

/// Roles double as the Philox tensor id of the element stream.
enum class Role : std::uint32_t { q = 0, k = 1, v = 2 };

std::string_view distribution_name(Distribution d);
/// Inverse of distribution_name; throws attest::Error listing the valid names.
Distribution parse_distribution(std::string_view name);
/// Every distribution, in declaration order.
std::span<const Distribution> all_distributions();

/// Element (b, s, h, d) of role r: b batch element, s token within that batch element, h head
/// (of heads_q for q, heads_kv for k/v), d channel. The caller keeps indices in range.
float sample(Distribution dist, Role r, std::uint64_t seed, const attest::Problem& p,
             std::int64_t b, std::int64_t s, std::int64_t h, std::int64_t d);

/// Float32, contiguous, logical bshd tensors.
struct Qkv {
  attest::Tensor q, k, v;
};

/// q [B,S,H,D], k [B,T,Hkv,D], v [B,T,Hkv,Dv]; for ragged problems packed varlen:
/// q [1,total_q,H,D], k/v [1,total_kv,Hkv,D(v)], token cu[b] + s holding (b, s).
/// Throws attest::Error if the problem is invalid. Uses every core (OpenMP).
Qkv generate_qkv(const attest::Problem& p, Distribution dist, std::uint64_t seed);

/// Building blocks, exposed for tests and device ports.
namespace detail {
/// (m + 1) * 2^-53 in (0, 1], m = the 53 high bits of (w0, w1).
double unit_open0(std::uint32_t w0, std::uint32_t w1);
/// Box-Muller: sqrt(-2 log u1) * cos(2 pi u2), u1 = unit_open0(w0, w1), u2 = w2 * 2^-32.
double box_muller(std::uint32_t w0, std::uint32_t w1, std::uint32_t w2);
/// Odd multiple of 2^-24 in (-1, 1) from the top 24 bits of w: uniform, symmetric, exact in f32.
float uniform_pm1(std::uint32_t w);
}  // namespace detail

}  // namespace attest::datasets
