#pragma once
/// The reference attention: softmax(scale * Q K^T + mask) V and its log-sum-exp, in float, double
/// or 50-digit binary floating point (Boost.Multiprecision cpp_bin_float_50). It is the "truth"
/// every kernel's accuracy is measured against; it shares no code with kernels/.
///
/// Arithmetic contract, for each output row (b, i, h), with g = h / (H / Hkv) its KV head and
/// [0, hi) its visible keys (Problem::visible_keys, clamped to [0, T_b]):
///   s_j = fl(scale * fl(dot(q_i, k_j)))          logits, dot accumulated in T
///   m   = max_j s_j,  p_j = exp(s_j - m),  l = sum_j p_j
///   out = (sum_j p_j v_j) / l,  lse = m + log(l)   (natural log)
/// Every operation rounds to T; inputs (f32 or f64) and the scale are converted to T first (exact
/// for double and mp50; f64 inputs and the scale are rounded to float for the fp32 precision). Masked keys take no part in
/// any operation (their K and V values, NaN included, never reach the arithmetic).
///
/// Special values:
/// - A row with no visible key, or whose visible logits are all -inf (l == 0): out = 0 and
///   lse = -inf.
/// - NaN, logits: a NaN among a row's visible logits (from q_i, a visible k_j, or inf - inf in
///   the dot product) makes that whole output row and its lse NaN. A +inf logit does too
///   (exp(inf - inf)).
/// - NaN, values: a NaN in element d of a visible V row makes element d of the output row NaN
///   (it is multiplied by its weight like any value); the lse is unaffected.
/// - Rows that do not see a NaN (masked keys, other heads, other batch elements) are unaffected.
/// - Inf in a visible V row follows IEEE arithmetic (an underflowed weight times Inf is NaN); the
///   two algorithms may then differ.
///
/// Algorithms (they agree to rounding, not bitwise):
/// - direct: per row, materialise the T logits with sequential dot products, take the max,
///   exponentiate, sum and divide (plain loops).
/// - online: tiles of block_rows queries x block_cols keys with a running max and rescale
///   (FlashAttention's recurrence, O(S) extra memory); for float and double the tile products are
///   Eigen GEMMs. Rows whose running max is still -inf use 0 as the shift, so exp(-inf) = 0 and
///   no inf - inf arises.
/// Both are deterministic: a row's arithmetic depends only on its own data, its position within
/// its batch element and the tiling, never on the thread count, the tensors' strides or layout,
/// other heads, or other batch elements (the tests check this bitwise).
#include <cstdint>
#include <string_view>
#include <vector>

#include <boost/multiprecision/cpp_bin_float.hpp>

#include "attest/core/problem.hpp"
#include "attest/core/tensor.hpp"

namespace attest::ref {

/// Arithmetic of the reference. Names: "fp32", "fp64", "mp50".
enum class Precision : std::uint8_t { fp32, fp64, mp50 };
std::string_view precision_name(Precision p);
Precision parse_precision(std::string_view s);  ///< throws attest::Error listing valid names

/// Names: "direct", "online".
enum class Algorithm : std::uint8_t { direct, online };
std::string_view algorithm_name(Algorithm a);
Algorithm parse_algorithm(std::string_view s);  ///< throws attest::Error listing valid names

/// 50 significant decimal digits (166-bit significand); exact products of two doubles.
using Mp50 = boost::multiprecision::cpp_bin_float_50;

/// Tile sizes of the online algorithm (they change rounding, so they are part of the result's
/// identity; the defaults are what `attention` uses).
struct Tiling {
  std::int64_t block_rows = 256;  ///< queries per tile
  std::int64_t block_cols = 128;  ///< keys per tile
};

struct AttentionOutput {
  Tensor out;  ///< [B,S,H,Dv] (ragged [1,total_q,H,Dv]); f64, or f32 for Precision::fp32
  Tensor lse;  ///< [B,H,S] (ragged [1,H,total_q]), natural log; same dtype as out
};

/// The result in the arithmetic type itself, contiguous row-major.
template <class T>
struct AttentionResult {
  Shape out_shape;     ///< [B,S,H,Dv] (ragged [1,total_q,H,Dv])
  Shape lse_shape;     ///< [B,H,S] (ragged [1,H,total_q])
  std::vector<T> out;  ///< row-major in out_shape
  std::vector<T> lse;  ///< row-major in lse_shape
};

/// Throws attest::Error unless the problem is valid and q, k, v are f32 or f64 tensors of the
/// problem's logical shapes: q [B,S,H,D], k [B,T,Hkv,D], v [B,T,Hkv,Dv] (any strides); for a
/// ragged problem [1,total_q,H,D], [1,total_kv,Hkv,D], [1,total_kv,Hkv,Dv] with total_* the last
/// cu_seqlens entry. The message names the tensor and the expected and actual shapes.
void check_attention_inputs(const Problem& p, const Tensor& q, const Tensor& k, const Tensor& v);

/// Reference attention in arithmetic type T (float, double or Mp50; explicitly instantiated).
/// Parallel over (batch, head, row block) with OpenMP.
template <class T>
AttentionResult<T> attention_typed(const Problem& p, const Tensor& q, const Tensor& k, const Tensor& v,
                                   Algorithm algorithm = Algorithm::online, const Tiling& tiling = {});

extern template AttentionResult<float> attention_typed<float>(const Problem&, const Tensor&, const Tensor&,
                                                              const Tensor&, Algorithm, const Tiling&);
extern template AttentionResult<double> attention_typed<double>(const Problem&, const Tensor&, const Tensor&,
                                                                const Tensor&, Algorithm, const Tiling&);
extern template AttentionResult<Mp50> attention_typed<Mp50>(const Problem&, const Tensor&, const Tensor&,
                                                            const Tensor&, Algorithm, const Tiling&);

/// Reference attention as tensors: fp64 and mp50 give f64 (mp50 rounded to nearest double once,
/// at the end), fp32 gives f32.
AttentionOutput attention(const Problem& p, const Tensor& q, const Tensor& k, const Tensor& v, Precision precision,
                          Algorithm algorithm = Algorithm::online);

}  // namespace attest::ref
