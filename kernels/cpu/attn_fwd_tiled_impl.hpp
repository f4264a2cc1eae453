#pragma once
// Definitions of the tiled engine (attn_fwd_tiled.hpp). Included by attn_fwd_tiled.cpp (the
// production instantiation) and by the mutants; nowhere else.
//
// Arithmetic contract (docs/recipes.md; the emulator's definition), per output row:
//   x_j  = logit from element values (INT8: exact integer sum; MX: per-32-channel FP32 block
//          sums times 2^(Eq+Ek), added block by block; otherwise x = fma(q_d, k_d, x), d ascending)
//   sc_j = fl(c * fl(qs * ks_j)), c = 1 when Q was pre-scaled, else fl(fl32(scale) * log2 e)
//   per KV tile [t*Bc, (t+1)*Bc) of the visible keys, keys ascending:
//     y_j = fma(x_j, sc_j, -off); m_new from max_j y_j (NaN-propagating) and the rescale policy;
//     when m grows: alpha = exp2(fl(m - m_new)), l *= alpha, acc *= alpha;
//     P_j = exp2(fma(x_j, sc_j, -m)); l += P_j (FP32 P, key order); Pc_j = P_j in the P format;
//     acc_d = fma(Pc_j, v_jd, acc_d) (MX P or V: 32-key block sums times 2^(Ep+Ev), added)
//   o_d = acc_d / l, or acc_d * r (r = fl(1/l) or rcp_sm90(l)), with V's scale; rounded to out
//   lse = fl32((double(m) + log2(l)) * ln 2) (+ K-smoothing correction); no key: 0 and -inf.
// The code is organised differently from the emulator: tile-major over query rows with one
// RowState per row, operands quantized once into packed slabs.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>

#include "cpu/attn_fwd_tiled.hpp"
#include "cpu/cpu_io.hpp"
#include "cpu/cpu_quantize.hpp"

namespace attest::kernels::cpu {
namespace tiled {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr double kLog2e = 0x1.71547652b82fep0;  // RN(log2 e)
constexpr double kLn2 = 0x1.62e42fefa39efp-1;   // RN(ln 2)

/// Format of P and O as a rounding function (RNE; FP8 saturating as the P cast of the kernels).
inline float round_elem(FormatId f, float x) {
  switch (f) {
    case FormatId::f32: return x;
    case FormatId::bf16:
    case FormatId::fp16: return round_to(format_spec(f), x);
    case FormatId::fp8_e4m3fn:
    case FormatId::fp8_e4m3fnuz:
    case FormatId::fp8_e5m2:
    case FormatId::fp4_e2m1fn: return round_to(format_spec(f), x, Rounding::rne, Overflow::sat_cuda);
    default: break;  // not a recipe's P / O format (kRecipeElemFormats)
  }
  return x;
}

inline float pow2_scaled(float s, int e) {
  return static_cast<float>(static_cast<double>(s) * std::ldexp(1.0, e));  // one rounding
}

/// Quantized operands of one unit (dense: the whole batch; ragged: one sequence), slab =
/// (batch element - first) * heads + head.
struct Unit {
  std::int64_t first = 0;
  QOperand q, k, v;
  std::vector<float> q_raw;  ///< unquantized Q (for the K-smoothing LSE correction)
};

template <class View>
std::vector<float> gather(const View& in, std::int64_t b0, std::int64_t b1, std::int64_t heads, std::int64_t C,
                          std::int64_t T, const Problem& p, bool kv) {
  std::vector<float> x(static_cast<std::size_t>((b1 - b0) * heads * T * C), 0.0f);
  for (std::int64_t b = b0; b < b1; ++b)
    for (std::int64_t h = 0; h < heads; ++h) {
      const std::int64_t n = kv ? p.len_kv(b) : p.len_q(b);
      for (std::int64_t t = 0; t < n; ++t) {
        const float* src = in.row(b, t, h);
        float* dst = x.data() + (((b - b0) * heads + h) * T + t) * C;
        for (std::int64_t c = 0; c < C; ++c) dst[c] = src[c * in.sd];
      }
    }
  return x;
}

/// The online-softmax state of one query row (FlashInfer's state type: running max m in log2
/// units including -off, running sum l of FP32 P, accumulator acc of rounded-P times V, all
/// relative to m; `started` once a finite max has been seen).
struct RowState {
  float m = kNegInf;
  float l = 0;
  bool started = false;
};

struct Params {
  Recipe r;
  float c = 1, off = 0;
  std::int64_t Dv = 0;
  Scheme pmx;
  bool p_mx = false;
};

/// exp2_fa4 with the planted split bug: n = trunc(x), so f = x - n lies in (-1, 0] for negative
/// x, outside [0, 1) where the cubic approximates 2^f.
inline float exp2_fa4_trunc(float x) {
  if (!(x >= -127.0f)) x = -127.0f;
  const float n = std::trunc(x);
  const float f = x - n;
  const float c1 = from_bits(0x3F31F519u), c2 = from_bits(0x3E6906A4u), c3 = from_bits(0x3D9DF09Du);
  const float p = std::fma(std::fma(std::fma(c3, f, c2), f, c1), f, 1.0f);
  const auto ni = static_cast<std::int32_t>(n);
  return from_bits(static_cast<std::uint32_t>(ni) * (1u << 23) + bits_of(p));
}

template <Bug B>
inline float exp2_of(Exp2Policy e, float x) {
  if constexpr (B == Bug::fa4_exp2_trunc) {
    if (e == Exp2Policy::fa4) return exp2_fa4_trunc(x);
  }
  return e == Exp2Policy::fa4 ? exp2_fa4(x) : exp2_cr(x);
}

template <Bug B>
inline float flush(float x) {
  if constexpr (B == Bug::ftz_acc) {
    if (x != 0 && std::fabs(x) < std::numeric_limits<float>::min()) return std::copysign(0.0f, x);
  }
  return x;
}

/// Folds one KV tile (n keys: logits x, scales sc, V rows, V block exponents) into a row.
template <Bug B>
void update(RowState& st, float* acc, const Params& pr, const float* x, const float* sc, std::int64_t n,
            const float* const* vrows, const std::int16_t* const* vexp, unsigned rotation, float* P, float* Pc,
            float* bs) {
  const Recipe& r = pr.r;
  float m_tile = kNegInf;
  for (std::int64_t j = 0; j < n; ++j) {
    const float y = std::fma(x[j], sc[j], -pr.off);
    if (std::isnan(y) || std::isnan(m_tile)) m_tile = kNaN;
    else m_tile = std::max(m_tile, y);
  }
  double threshold = r.rescale_threshold;
  if constexpr (B == Bug::fa4_threshold_ratio) threshold = std::exp2(threshold);
  float m_new = st.m;
  if (std::isnan(m_tile) || std::isnan(st.m)) m_new = kNaN;
  else if (!(r.rescale == RescalePolicy::conditional && st.m > kNegInf &&
             st.m - m_tile >= static_cast<float>(-threshold)))
    m_new = std::max(st.m, m_tile);
  if (m_new == kNegInf) return;
  if constexpr (B == Bug::no_max_sub) {
    if (!std::isnan(m_new)) m_new = 0.0f;  // a finite tile was seen: the "max" is pinned at 0
  }
  if (!(m_new == st.m)) {
    float alpha = exp2_of<B>(r.exp2, st.m - m_new);
    if constexpr (B == Bug::no_rescale) alpha = st.started ? 1.0f : alpha;
    st.l = st.l * alpha;
    for (std::int64_t d = 0; d < pr.Dv; ++d) acc[d] = flush<B>(acc[d] * alpha);
    st.m = m_new;
  }
  st.started = true;
  for (std::int64_t j = 0; j < n; ++j) P[j] = exp2_of<B>(r.exp2, std::fma(x[j], sc[j], -st.m));
  for (std::int64_t jj = 0; jj < n; ++jj) {
    std::int64_t j = jj;
    if constexpr (B == Bug::nondeterministic) j = (jj + rotation) % n;
    st.l = st.l + P[j];
  }
  const std::int64_t pb = pr.p_mx ? pr.pmx.block : 32;
  std::int16_t pexp[64] = {};  // tile_kv / 32 blocks at most (tile_kv <= 1024, checked)
  if (pr.p_mx) {
    for (std::int64_t b0 = 0; b0 < n; b0 += pb) {
      const std::int64_t b1 = std::min(n, b0 + pb);
      float amax = 0;
      for (std::int64_t j = b0; j < b1; ++j) {
        const float a = std::fabs(P[j]);
        if (std::isnan(a) || a > amax) amax = a;
      }
      const std::uint8_t code = e8m0_code(amax, pr.pmx);
      const float mult = e8m0_multiplier(code, pr.pmx);
      pexp[b0 / pb] = static_cast<std::int16_t>(code == 0xFF ? kNanExp : code - 127);
      for (std::int64_t j = b0; j < b1; ++j) Pc[j] = mx_element(P[j] * mult, pr.pmx);
    }
  } else {
    for (std::int64_t j = 0; j < n; ++j) {
      if constexpr (B == Bug::p_e5m2) Pc[j] = round_to(format_spec(FormatId::fp8_e5m2), P[j], Rounding::rne, Overflow::sat_cuda);
      else Pc[j] = round_elem(r.p, P[j]);
    }
  }
  if (!pr.p_mx && vexp == nullptr) {
    for (std::int64_t jj = 0; jj < n; ++jj) {
      std::int64_t j = jj;
      if constexpr (B == Bug::nondeterministic) j = (jj + rotation) % n;
      const float* vj = vrows[j];
      for (std::int64_t d = 0; d < pr.Dv; ++d) acc[d] = flush<B>(std::fma(Pc[j], vj[d], acc[d]));
    }
    return;
  }
  for (std::int64_t b0 = 0; b0 < n; b0 += pb) {
    const std::int64_t b1 = std::min(n, b0 + pb);
    std::fill_n(bs, pr.Dv, 0.0f);
    for (std::int64_t j = b0; j < b1; ++j)
      for (std::int64_t d = 0; d < pr.Dv; ++d) bs[d] = std::fma(Pc[j], vrows[j][d], bs[d]);
    const int ep = pr.p_mx ? pexp[b0 / pb] : 0;
    for (std::int64_t d = 0; d < pr.Dv; ++d) {
      const int ev = vexp != nullptr ? vexp[b0][d] : 0;
      const float term = (ep == kNanExp || ev == kNanExp) ? kNaN : pow2_scaled(bs[d], ep + ev);
      acc[d] = flush<B>(acc[d] + term);
    }
  }
}

/// How one call runs, from Args::config: "" (the recipe's tiles), "path=wrapper" (packed copies
/// of the inputs, work items in reverse order, output staged and copied out) or "qtile=16".
struct Config {
  bool wrapper = false;
  std::int64_t Br = 0;  ///< query rows per work item
};

inline Config parse_config(std::string_view config, const Recipe& r) {
  Config c;
  c.wrapper = config == "path=wrapper";
  c.Br = r.tile_q;
  if (config == "qtile=16") c.Br = 16;
  else if (!config.empty() && !c.wrapper)
    throw Error("cpu.tiled: unknown config '" + std::string(config) + "' (valid: \"\", path=wrapper, qtile=16)");
  return c;
}

template <Bug B>
double softmax_scale(const Problem& p) {
  double scale = p.scale();
  if constexpr (B == Bug::scale_off_1pct) scale *= 1.01;
  if constexpr (B == Bug::scale_from_dv) {
    if (!p.softmax_scale) scale = 1.0 / std::sqrt(static_cast<double>(p.head_dim_v));
  }
  return scale;
}

/// Token view of input t (Q, or K / V with kv set; `heads` x C channels), with the planted
/// addressing bugs applied. is_v: t is the tensor read as V.
template <Bug B>
TokenView<const float> input_view(const Problem& p, const Tensor& t, bool kv, bool is_v, std::int64_t heads,
                                  std::int64_t C) {
  TokenView<const float> in = token_view<const float>(t, p, kv);
  if constexpr (B == Bug::contiguous_assumed) {
    // The planted bug: strides of a contiguous bshd tensor of this shape, whatever the real
    // ones are; kept inside the buffer so the bug shows as wrong values, not a crash.
    const auto& sh = t.shape();
    const auto* base = reinterpret_cast<const std::byte*>(in.data);
    if (base + sh[0] * sh[1] * sh[2] * sh[3] * 4 <= t.storage().data() + t.storage().size())
      in.sd = 1, in.sh = C, in.ss = heads * C, in.sb = sh[1] * heads * C;
  }
  if constexpr (B == Bug::ignores_v_strides) {
    // The planted bug: V (alone) addressed with the strides the problem's layout implies for a
    // dense tensor, as if q, k and v always shared it; kept inside the buffer like the above.
    if (kv && is_v) {
      const auto& sh = t.shape();
      const std::int64_t T = sh[1], pad = p.layout == Layout::strided ? p.pad : 0;
      const std::int64_t row = p.layout == Layout::packed_qkv ? (p.heads_q + 2 * p.heads_kv) * C : heads * (C + pad);
      const auto* base = reinterpret_cast<const std::byte*>(in.data);
      if (base + sh[0] * T * row * 4 <= t.storage().data() + t.storage().size()) {
        in.sd = 1;
        if (p.layout == Layout::bhsd) in.sh = T * C, in.ss = C, in.sb = heads * T * C;
        else in.sh = p.layout == Layout::packed_qkv ? C : C + pad, in.ss = row, in.sb = T * row;
      }
    }
  }
  return in;
}

/// The planted bugs that read K and V from the wrong place (kv_swapped, cu_kv_from_q). The views
/// then point into bad_cu, which must outlive them.
template <Bug B>
void plant_kv_bugs(const Problem& p, TokenView<const float>& kv, TokenView<const float>& vv,
                   std::vector<std::int64_t>& bad_cu) {
  if constexpr (B == Bug::kv_swapped) {
    if (p.head_dim == p.head_dim_v) std::swap(kv, vv);  // with D != Dv the swap would not even have the right shape
  }
  if constexpr (B == Bug::cu_kv_from_q) {
    // K/V rows of sequence b start at cu_q[b]; kept inside the buffer (clamped) so the bug
    // shows as wrong values, not a crash.
    if (p.ragged()) {
      const std::int64_t total = p.cu_seqlens_kv.back();
      for (std::int64_t b = 0; b <= p.batch; ++b)
        bad_cu.push_back(b == p.batch ? total : std::min(p.cu_seqlens_q[static_cast<std::size_t>(b)], total - p.len_kv(b)));
      kv.cu = vv.cu = &bad_cu;
    }
  }
}

/// Q, K and V quantized once per unit: the whole batch, or each sequence of a ragged batch on its
/// own (unit b of batch element b).
template <Bug B>
std::vector<Unit> quantize_units(const Problem& p, const Plan& plan, double scale, const TokenView<const float>& qv,
                                 const TokenView<const float>& kv, const TokenView<const float>& vv) {
  const std::int64_t H = p.heads_q, Hkv = p.heads_kv, D = p.head_dim, Dv = p.head_dim_v;
  QuantBugs qb;
  qb.int8_trunc = B == Bug::int8_trunc;
  qb.smooth_per_token = B == Bug::smooth_per_token;
  qb.v_nosat = B == Bug::fp8_v_nosat;
  qb.block_mismatch = B == Bug::qblock_mismatch;
  qb.e8m0_floor = B == Bug::e8m0_floor;
  qb.e8m0_bias = B == Bug::e8m0_bias;
  std::vector<Unit> units(p.ragged() ? static_cast<std::size_t>(p.batch) : 1);
#pragma omp parallel for schedule(dynamic)
  for (std::int64_t u = 0; u < static_cast<std::int64_t>(units.size()); ++u) {
    const std::int64_t b0 = p.ragged() ? u : 0, b1 = p.ragged() ? u + 1 : p.batch;
    const std::int64_t S = p.ragged() ? p.len_q(u) : p.seqlen_q, T = p.ragged() ? p.len_kv(u) : p.seqlen_kv;
    Unit& un = units[static_cast<std::size_t>(u)];
    un.first = b0;
    un.q_raw = gather(qv, b0, b1, H, D, S, p, false);
    un.q = quantize_operand(un.q_raw, (b1 - b0) * H, S, D, plan.q, false, scale, qb);
    un.k = quantize_operand(gather(kv, b0, b1, Hkv, D, T, p, true), (b1 - b0) * Hkv, T, D, plan.k, false, scale, qb);
    un.v = quantize_operand(gather(vv, b0, b1, Hkv, Dv, T, p, true), (b1 - b0) * Hkv, T, Dv, plan.v, true, scale, qb);
    if (un.k.km.empty()) un.q_raw.clear();
  }
  return units;
}

inline Params make_params(const Plan& plan, std::int64_t Dv, double scale) {
  const Recipe& r = plan.recipe;
  Params pr;
  pr.r = r;
  pr.Dv = Dv;
  pr.off = r.pscale == PScale::offset_8807 ? 8.807f : r.pscale == PScale::pow2_8 ? 8.0f : 0.0f;
  pr.c = plan.q.prescale == Scheme::Prescale::sm_log2e ? 1.0f : static_cast<float>(static_cast<double>(static_cast<float>(scale)) * kLog2e);
  pr.p_mx = r.p_mx.has_value();
  if (pr.p_mx) pr.pmx = *r.p_mx;
  return pr;
}

/// Token view of the output (`staged` on the wrapper path), with the contiguous_assumed bug.
template <Bug B>
TokenView<float> output_view(const Problem& p, const Tensor& out, const Tensor& staged, bool wrapper) {
  TokenView<float> o = token_view<float>(wrapper ? staged : out, p, false);
  if constexpr (B == Bug::contiguous_assumed) {
    const std::int64_t H = p.heads_q, Dv = p.head_dim_v;
    const auto& sh = out.shape();
    const auto* base = reinterpret_cast<const std::byte*>(o.data);
    if (!wrapper && base + sh[0] * sh[1] * sh[2] * sh[3] * 4 <= out.storage().data() + out.storage().size())
      o.sd = 1, o.sh = Dv, o.ss = H * Dv, o.sb = sh[1] * H * Dv;
  }
  return o;
}

/// A work item: query rows [r0, r1) of batch element b, head h.
struct Item {
  std::int64_t b, h, r0, r1;
};

/// Every query tile of every (batch element, head); reversed on the wrapper path (the bits
/// must not depend on the order).
template <Bug B>
std::vector<Item> work_items(const Problem& p, std::int64_t Br, bool wrapper) {
  std::vector<Item> items;
  for (std::int64_t b = 0; b < p.batch; ++b)
    for (std::int64_t h = 0; h < p.heads_q; ++h) {
      const std::int64_t S = p.len_q(b);
      for (std::int64_t r0 = 0; r0 < S; r0 += Br) {
        if constexpr (B == Bug::skip_last_q_tile) {
          if (r0 + Br > S && r0 > 0) continue;
        }
        items.push_back({b, h, r0, std::min(S, r0 + Br)});
      }
    }
  if (wrapper) std::reverse(items.begin(), items.end());
  return items;
}

/// What every work item of one call reads and writes.
struct Call {
  const Problem& p;
  const Params& pr;
  const std::vector<Unit>& units;  ///< unit of batch element b: units[b] (ragged) or units[0]
  TokenView<float> o;
  LseView lse;
  bool has_lse;
  Mask mask;          ///< the mask applied (causal_tl_for_br: another than p.mask)
  unsigned rotation;  ///< nondeterministic: the key the row sum and P.V start at (per call)
};

/// Per-thread buffers for one KV tile of one row (Bc keys; bs: Dv block sums), allocated once
/// per thread.
struct TileScratch {
  std::vector<float> x, sc, P, Pc, bs;
  std::vector<const float*> vrows;
  std::vector<const std::int16_t*> vexp;
  TileScratch(std::int64_t Bc, std::int64_t Dv)
      : x(static_cast<std::size_t>(Bc)), sc(static_cast<std::size_t>(Bc)), P(static_cast<std::size_t>(Bc)),
        Pc(static_cast<std::size_t>(Bc)), bs(static_cast<std::size_t>(Dv)), vrows(static_cast<std::size_t>(Bc)),
        vexp(static_cast<std::size_t>(Bc)) {}
};

/// Keys visible to query row `row` of a sequence of S queries and T keys, in [0, T].
template <Bug B>
inline std::int64_t visible_keys(Mask mask, std::int64_t row, std::int64_t S, std::int64_t T) {
  std::int64_t vis = mask == Mask::none ? T : mask == Mask::causal_tl ? row + 1 : row + 1 + T - S;
  if constexpr (B == Bug::causal_diag_off) {
    if (mask != Mask::none) vis -= 1;
  }
  return std::clamp<std::int64_t>(vis, 0, T);
}

/// The planted bugs that leave out one KV tile [j0, j1) of n keys of a row with hi visible keys.
template <Bug B>
inline bool tile_dropped(std::int64_t j0, std::int64_t j1, std::int64_t n, std::int64_t hi, std::int64_t Bc) {
  if constexpr (B == Bug::skip_last_kv_tile) return j1 == hi && n < Bc;
  if constexpr (B == Bug::drop_first_kv_tile) return j0 == 0 && hi > Bc;
  if constexpr (B == Bug::drop_middle_kv_tile) return j0 == Bc && hi > 2 * Bc;
  return false;
}

/// Logit x of Q row qrow and K row krow from element values (scales factored out): INT8 an exact
/// int32 sum; MX per-block FP32 sums times 2^(Eq+Ek), added block by block (nbq blocks); else
/// x = fma(q_d, k_d, x), d ascending.
inline float logit(const Unit& un, std::int64_t qrow, std::int64_t krow, std::int64_t D, std::int64_t nbq) {
  const float* qi = un.q.val.data() + qrow * D;
  const float* kj = un.k.val.data() + krow * D;
  float xv = 0;
  if (un.q.ival) {
    std::int32_t s32 = 0;  // exact: |sum| <= D * 128^2 < 2^24 for D <= 1024
    for (std::int64_t d = 0; d < D; ++d) s32 += static_cast<std::int32_t>(qi[d]) * static_cast<std::int32_t>(kj[d]);
    xv = static_cast<float>(s32);
  } else if (un.q.mx) {
    for (std::int64_t bk = 0; bk < nbq; ++bk) {
      float part = 0;
      for (std::int64_t d = bk * un.q.block; d < std::min(D, (bk + 1) * un.q.block); ++d) part = std::fma(qi[d], kj[d], part);
      const int eq = un.q.bexp[static_cast<std::size_t>(qrow * nbq + bk)];
      const int ek = un.k.bexp[static_cast<std::size_t>(krow * nbq + bk)];
      xv = xv + ((eq == kNanExp || ek == kNanExp) ? kNaN : pow2_scaled(part, eq + ek));
    }
  } else {
    for (std::int64_t d = 0; d < D; ++d) xv = std::fma(qi[d], kj[d], xv);
  }
  return xv;
}

/// Score tile: for keys j0 + jj, jj < n, of Q row qrow, the logits x and scales sc in log2 units
/// (sc = fl(c * fl(qs * ks))), and the V rows (and MX V block exponents) that P will weight.
inline void score_tile(const Unit& un, const Params& pr, std::int64_t qrow, std::int64_t kslab, std::int64_t vslab,
                       std::int64_t j0, std::int64_t n, std::int64_t D, TileScratch& s) {
  const std::int64_t Dv = pr.Dv, Tk = un.k.T;
  const std::int64_t nbq = (D + un.q.block - 1) / un.q.block, nbv = (Tk + un.v.block - 1) / un.v.block;
  for (std::int64_t jj = 0; jj < n; ++jj) {
    const std::int64_t krow = kslab * Tk + j0 + jj;
    s.x[static_cast<std::size_t>(jj)] = logit(un, qrow, krow, D, nbq);
    s.sc[static_cast<std::size_t>(jj)] =
        pr.c * (un.q.ts[static_cast<std::size_t>(qrow)] * un.k.ts[static_cast<std::size_t>(krow)]);
    s.vrows[static_cast<std::size_t>(jj)] = un.v.val.data() + (vslab * Tk + j0 + jj) * Dv;
    if (un.v.mx) s.vexp[static_cast<std::size_t>(jj)] = un.v.bexp.data() + (vslab * nbv + (j0 + jj) / un.v.block) * Dv;
  }
}

/// Normalisation of a row that saw a key: o_d = acc_d / l or acc_d * r with V's scale vs,
/// rounded to the out format, written to oi (stride osd).
template <Bug B>
inline void normalise_row(const Recipe& r, const RowState& rs, const float* ai, const float* vs, std::int64_t Dv,
                          float* oi, std::int64_t osd) {
  const float rc = r.div == DivisionOp::ieee_rcp ? 1.0f / rs.l : r.div == DivisionOp::rcp_sm90 ? rcp_sm90(rs.l) : 0.0f;
  for (std::int64_t d = 0; d < Dv; ++d) {
    float od = 0;
    if (r.div == DivisionOp::ieee_div) od = (ai[d] / rs.l) * vs[d];
    else if (r.vscale == VScaleAt::rcp) od = ai[d] * (rc * vs[d]);
    else od = (ai[d] * rc) * vs[d];
    if constexpr (B == Bug::v_descale_missing) od = r.div == DivisionOp::ieee_div ? ai[d] / rs.l : ai[d] * rc;
    if constexpr (B == Bug::v_descale_twice) od = od * vs[d];
    oi[d * osd] = round_elem(r.out, od);
  }
}

/// LSE of a row that saw a key, natural log: fl32((double(m) + log2(l)) * ln 2), plus the
/// K-smoothing correction (qrow, kslab: the row's Q row and K slab).
template <Bug B>
inline float row_lse(const Problem& p, const Unit& un, const RowState& rs, std::int64_t qrow, std::int64_t kslab) {
  const std::int64_t D = p.head_dim;
  const double l2 = static_cast<double>(rs.m) + std::log2(static_cast<double>(rs.l));
  float lse = static_cast<float>(B == Bug::lse_log2 ? l2 : l2 * kLn2);
  if (!un.k.km.empty() && B != Bug::sage_lse_no_smooth) {
    // Smoothing shifted each logit by q_i . km * scale; the LSE gets it back.
    const float* qr = un.q_raw.data() + qrow * D;
    const float* km = un.k.km.data() + kslab * D;
    double dot = 0;
    for (std::int64_t d = 0; d < D; ++d) dot += static_cast<double>(qr[d]) * static_cast<double>(km[d]);
    lse = lse + static_cast<float>(dot * p.scale());
  }
  return lse;
}

/// One work item: its rows walk the KV tiles in key order (score tile, then the online-softmax
/// update), then each row is normalised and its LSE written. No key visible: 0 and -inf.
template <Bug B>
void run_item(const Call& call, const Item& w, TileScratch& s) {
  const Problem& p = call.p;
  const Params& pr = call.pr;
  const std::int64_t H = p.heads_q, Hkv = p.heads_kv, D = p.head_dim, Dv = p.head_dim_v, Bc = pr.r.tile_kv;
  std::int64_t g = w.h / p.group(), gv = g;
  if constexpr (B == Bug::gqa_wrong_head) g = gv = w.h % Hkv;
  if constexpr (B == Bug::v_head_mixup) gv = w.h % Hkv;
  const Unit& un = call.units[static_cast<std::size_t>(p.ragged() ? w.b : 0)];
  const std::int64_t T = p.len_kv(w.b), S = p.len_q(w.b), rows = w.r1 - w.r0;
  const std::int64_t qslab = (w.b - un.first) * H + w.h, kslab = (w.b - un.first) * Hkv + g,
                     vslab = (w.b - un.first) * Hkv + gv;
  const std::int64_t Tq = un.q.T;
  std::vector<RowState> st(static_cast<std::size_t>(rows));
  std::vector<float> acc(static_cast<std::size_t>(rows * Dv), 0.0f);
  std::vector<std::int64_t> hi(static_cast<std::size_t>(rows));
  std::int64_t hi_max = 0;
  for (std::int64_t i = 0; i < rows; ++i) {
    hi[static_cast<std::size_t>(i)] = visible_keys<B>(call.mask, w.r0 + i, S, T);
    hi_max = std::max(hi_max, hi[static_cast<std::size_t>(i)]);
  }
  for (std::int64_t j0 = 0; j0 < hi_max; j0 += Bc) {
    for (std::int64_t i = 0; i < rows; ++i) {
      const std::int64_t j1 = std::min(j0 + Bc, hi[static_cast<std::size_t>(i)]), n = j1 - j0;
      if (n <= 0 || tile_dropped<B>(j0, j1, n, hi[static_cast<std::size_t>(i)], Bc)) continue;
      score_tile(un, pr, qslab * Tq + w.r0 + i, kslab, vslab, j0, n, D, s);
      update<B>(st[static_cast<std::size_t>(i)], acc.data() + i * Dv, pr, s.x.data(), s.sc.data(), n, s.vrows.data(),
                un.v.mx ? s.vexp.data() : nullptr, call.rotation, s.P.data(), s.Pc.data(), s.bs.data());
    }
  }
  const float* vs = un.v.cs.data() + vslab * Dv;
  for (std::int64_t i = 0; i < rows; ++i) {
    const RowState& rs = st[static_cast<std::size_t>(i)];
    float* oi = call.o.row(w.b, w.r0 + i, w.h);
    float lse = kNegInf;
    if (!rs.started) {
      for (std::int64_t d = 0; d < Dv; ++d) oi[d * call.o.sd] = 0.0f;
    } else {
      normalise_row<B>(pr.r, rs, acc.data() + i * Dv, vs, Dv, oi, call.o.sd);
      lse = row_lse<B>(p, un, rs, qslab * Tq + w.r0 + i, kslab);
    }
    if (call.has_lse) call.lse.at(w.b, w.h, w.r0 + i) = lse;
  }
}

/// The wrapper path's last step: the staged contiguous output copied into the caller's tensor.
inline void copy_out(const Problem& p, const Tensor& staged, const Tensor& out) {
  const TokenView<const float> from = token_view<const float>(staged, p, false);
  const TokenView<float> to = token_view<float>(out, p, false);
  for (std::int64_t b = 0; b < p.batch; ++b)
    for (std::int64_t i = 0; i < p.len_q(b); ++i)
      for (std::int64_t h = 0; h < p.heads_q; ++h)
        for (std::int64_t d = 0; d < p.head_dim_v; ++d) to.at(b, i, h, d) = from.at(b, i, h, d);
}

/// The oob_write bug: one element past the output's highest-addressed element, if the buffer has
/// room there (the canary check allocates guard zones; without slack the bug has nowhere to land).
inline void write_past_output(const Tensor& out) {
  std::int64_t last = 0;
  for (std::size_t d = 0; d < 4; ++d) last += (out.shape()[d] - 1) * out.strides()[d];
  float* past = out.data<float>() + last + 1;
  const auto* end = reinterpret_cast<const float*>(out.storage().data() + out.storage().size());
  if (past < end) *past = 1.0f;
}

}  // namespace tiled

template <Bug B>
void run_tiled(const Args& a, const Plan& plan) {
  using namespace tiled;
  const Problem& p = a.problem;
  check_args(p, a.q, a.k, a.v, a.out, a.lse);
  const Config cfg = parse_config(a.config, plan.recipe);
  const double scale = softmax_scale<B>(p);

  // The wrapper path reads packed contiguous copies of the inputs (same values, other strides).
  Tensor qc, kc, vc;
  const Tensor* qt = &a.q;
  const Tensor* kt = &a.k;
  const Tensor* vt = &a.v;
  if (cfg.wrapper) qc = a.q.contiguous(), kc = a.k.contiguous(), vc = a.v.contiguous(), qt = &qc, kt = &kc, vt = &vc;
  auto qv = input_view<B>(p, *qt, false, false, p.heads_q, p.head_dim);
  auto kv = input_view<B>(p, *kt, true, kt == vt, p.heads_kv, p.head_dim);
  auto vv = input_view<B>(p, *vt, true, true, p.heads_kv, p.head_dim_v);
  std::vector<std::int64_t> bad_cu;
  plant_kv_bugs<B>(p, kv, vv, bad_cu);
  const std::vector<Unit> units = quantize_units<B>(p, plan, scale, qv, kv, vv);
  const Params pr = make_params(plan, p.head_dim_v, scale);

  static std::atomic<unsigned> calls{0};
  const unsigned rotation = B == Bug::nondeterministic ? calls.fetch_add(1) : 0u;

  // Output: written directly, or (wrapper) into a contiguous staging tensor copied out at the end.
  Tensor staged;
  if (cfg.wrapper) staged = Tensor(DType::f32, a.out.shape());
  LseView lse;
  if (a.lse != nullptr) lse = lse_view(*a.lse, p);
  const Mask mask = (B == Bug::causal_tl_for_br && p.mask == Mask::causal_br) ? Mask::causal_tl : p.mask;
  const Call call{p, pr, units, output_view<B>(p, a.out, staged, cfg.wrapper), lse, a.lse != nullptr, mask, rotation};

  const std::vector<Item> items = work_items<B>(p, cfg.Br, cfg.wrapper);
  const std::int64_t n_items = static_cast<std::int64_t>(items.size());
#pragma omp parallel
  {
    TileScratch scratch(plan.recipe.tile_kv, p.head_dim_v);
#pragma omp for schedule(dynamic)
    for (std::int64_t it = 0; it < n_items; ++it) run_item<B>(call, items[static_cast<std::size_t>(it)], scratch);
  }

  if (cfg.wrapper) copy_out(p, staged, a.out);
  if constexpr (B == Bug::oob_write) write_past_output(a.out);
}

}  // namespace attest::kernels::cpu
