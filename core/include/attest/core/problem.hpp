#pragma once
/// The attention problem: shapes, masking, scale, layout, input dtype.
///
/// String form (round-trips: parse_problem(to_string(p)) == p), core dims always printed, the
/// rest only when not default:
///   b<B>h<H>[k<Hkv>]s<S>[t<T>]d<D>[v<Dv>][:mask=causal_tl|causal_br][:layout=bhsd|packed_qkv|
///   strided][:pad=N][:scale=X][:dtype=f16|f32|...][:cu_q=0,a,b,...][:cu_kv=0,c,d,...]
/// e.g. `b2h24k8s4096t4096d128:mask=causal_br`.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "attest/core/dtype.hpp"
#include "attest/core/status.hpp"

namespace attest {

/// Masking. Causal alignment matters when S != T:
/// causal_tl (top-left): query i sees keys j <= i.
/// causal_br (bottom-right, FlashAttention >= 2.1): query i sees keys j <= i + T - S.
enum class Mask : std::uint8_t { none, causal_tl, causal_br };

/// Memory layout of Q, K, V and O. Logical index order is always (b, s, h, d); layouts differ
/// only in strides. bshd: [B,S,H,D]; bhsd: [B,H,S,D]; packed_qkv: one [B,S,H+2Hkv,D] buffer
/// (needs D == Dv); strided: bshd with `pad` extra elements after each head row.
enum class Layout : std::uint8_t { bshd, bhsd, packed_qkv, strided };

std::string_view mask_name(Mask m);
Mask parse_mask(std::string_view s);      ///< throws attest::Error listing valid names
std::string_view layout_name(Layout l);
Layout parse_layout(std::string_view s);  ///< throws attest::Error listing valid names

struct Problem {
  std::int64_t batch = 1;
  std::int64_t heads_q = 1;
  std::int64_t heads_kv = 1;   ///< GQA/MQA when < heads_q; heads_q % heads_kv == 0
  std::int64_t seqlen_q = 1;   ///< max over the batch when ragged
  std::int64_t seqlen_kv = 1;  ///< max over the batch when ragged
  std::int64_t head_dim = 128;
  std::int64_t head_dim_v = 128;
  Mask mask = Mask::none;
  Layout layout = Layout::bshd;
  std::int64_t pad = 0;                 ///< extra elements per head row for Layout::strided
  std::optional<double> softmax_scale;  ///< default 1/sqrt(head_dim)
  DType dtype = DType::bf16;            ///< input dtype the kernel is fed
  /// Ragged batch (varlen): cumulative sequence starts, size batch+1, starting at 0.
  /// Empty means every batch element has seqlen_q / seqlen_kv tokens.
  std::vector<std::int64_t> cu_seqlens_q, cu_seqlens_kv;

  [[nodiscard]] double scale() const;
  [[nodiscard]] bool ragged() const { return !cu_seqlens_q.empty(); }
  [[nodiscard]] std::int64_t len_q(std::int64_t b) const;
  [[nodiscard]] std::int64_t len_kv(std::int64_t b) const;
  [[nodiscard]] std::int64_t group() const { return heads_q / heads_kv; }
  /// Key range [0, hi) visible to query row i of batch element b (hi may be <= 0: fully masked).
  [[nodiscard]] std::int64_t visible_keys(std::int64_t b, std::int64_t i) const;
  /// Multiply-add count of the forward pass, 2*(D+Dv) flops per visible (query, key) pair.
  [[nodiscard]] double flops() const;
  /// Status::ok() when the problem is well formed, else the first defect.
  [[nodiscard]] Status validate() const;

  bool operator==(const Problem&) const = default;
};

std::string to_string(const Problem& p);
/// Parses the string form; throws attest::Error naming the defect.
Problem parse_problem(std::string_view s);
/// Sets the sizes of a non-ragged problem from logical bshd extents q [B,S,H,D], k [B,T,Hkv,D],
/// v [B,T,Hkv,Dv] (B, H and D from q, T and Hkv from k, Dv from v; every other field is left as
/// it is, and validate() or the caller checks that the rest agrees).
void set_sizes_bshd(Problem& p, const std::vector<std::int64_t>& q, const std::vector<std::int64_t>& k,
                    const std::vector<std::int64_t>& v);

}  // namespace attest
