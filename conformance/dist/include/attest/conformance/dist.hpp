#pragma once
/// A CPU stand-in for sequence-parallel attention (issue 10): N ranks, each a std::thread with its
/// own buffers, exchanging tensors only through mailboxes, the way one process per GPU exchanges
/// them over NCCL. What it checks is the split, the exchange and the LSE merge; the attention of
/// each piece is a caller-supplied function of a plain `Problem` (the FP64 reference in the tests,
/// any registered kernel otherwise), so this library never includes reference/.
///
/// - ring_attention: rank r holds query shard r and K/V block r; the K/V blocks travel once around
///   the ring; each rank computes a partial (out, lse) of its shard against every block and merges
///   them through the LSE in ascending block order (fixed, so the result does not depend on which
///   block arrives first: bitwise equal to merge_partials of the same partials).
/// - ulysses_attention: all-to-all from sequence shards to head shards, full attention per head
///   shard, all-to-all back. Each output row depends only on its own head, so the result is bitwise
///   the single run of the same attention function.
///
/// Shards are given as boundaries [0 = b_0 <= b_1 <= ... <= b_N = length] (N = ranks; uneven and
/// empty shards allowed). Inputs: q [B,S,H,D], k [B,T,Hkv,D], v [B,T,Hkv,Dv], f32 or f64, any
/// strides; results are f64, out [B,S,H,Dv], lse [B,H,S] (natural log), like the reference.
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "attest/core/problem.hpp"
#include "attest/core/tensor.hpp"

namespace attest::conformance::dist {

/// An attention result: out [B,S,H,Dv] and lse [B,H,S], both f64. A row that sees no key has
/// out = 0 and lse = -inf (the reference's convention).
struct Partial {
  Tensor out;
  Tensor lse;
};

/// Attention of one piece: a valid, non-ragged Problem (mask none, causal_tl or causal_br) and
/// its q, k, v (f64, contiguous bshd). Called concurrently from several rank threads.
using AttentionFn = std::function<Partial(const Problem&, const Tensor& q, const Tensor& k, const Tensor& v)>;

/// Boundaries of `ranks` shards of `length` rows, as even as possible (the first length % ranks
/// shards get one row more). Throws attest::Error when ranks < 1.
std::vector<std::int64_t> even_split(std::int64_t length, std::int64_t ranks);

/// Contiguous f64 copy of the range [begin, end) of dimension `dim` of t (f32 or f64, any strides).
Tensor slice(const Tensor& t, int dim, std::int64_t begin, std::int64_t end);

/// What one rank computes per ring step: attention of the global problem p's query rows
/// [q0, q0 + q.dim(1)) against its keys [k0, k0 + k.dim(1)), p's mask taken in global positions,
/// through at most two calls of `attention` on plain Problems (a causal_br piece and an unmasked
/// piece). Rows that see no key of the block get out = 0, lse = -inf without a call. q, k, v:
/// contiguous f64 [B,S',H,D], [B,T',Hkv,D], [B,T',Hkv,Dv] (as slice makes).
Partial block_attention(const Problem& p, const Tensor& q, const Tensor& k, const Tensor& v, std::int64_t q0,
                        std::int64_t k0, const AttentionFn& attention);

/// Merges partials over disjoint key sets of the same query rows, in the order given:
///   lse = m + log(sum_i exp(lse_i - m)),  m = max_i lse_i
///   out = sum_i exp(lse_i - lse) * out_i
/// A partial with lse = -inf (no visible key) takes no part in either sum, so it contributes
/// nothing and no inf - inf arises; a row whose partials are all -inf gets out = 0, lse = -inf.
/// A NaN lse in any partial makes that row's out and lse NaN. Throws attest::Error on an empty
/// list or shapes that differ.
Partial merge_partials(std::span<const Partial> parts);

/// Ring attention over q_bounds.size() - 1 ranks (kv_bounds the same count). Throws
/// attest::Error naming the defect for: fewer than 1 rank, bounds that do not run from 0 to the
/// length or decrease, a ragged problem, tensors not of the problem's shapes or not f32/f64.
Partial ring_attention(const Problem& p, const Tensor& q, const Tensor& k, const Tensor& v,
                       std::span<const std::int64_t> q_bounds, std::span<const std::int64_t> kv_bounds,
                       const AttentionFn& attention);

/// Ulysses attention over q_bounds.size() - 1 ranks; the same refusals as ring_attention plus
/// heads_q or heads_kv not divisible by the rank count.
Partial ulysses_attention(const Problem& p, const Tensor& q, const Tensor& k, const Tensor& v,
                          std::span<const std::int64_t> q_bounds, std::span<const std::int64_t> kv_bounds,
                          const AttentionFn& attention);

}  // namespace attest::conformance::dist
