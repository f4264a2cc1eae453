#pragma once
// Definitions of the tiled engine (attn_fwd_tiled.hpp). Included by attn_fwd_tiled.cpp (the
// production instantiation) and by the mutants; nowhere else.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <numbers>

#include "cpu/attn_fwd_tiled.hpp"
#include "cpu/cpu_io.hpp"

namespace attest::kernels::cpu {
namespace tiled {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

/// One quantized operand (Q, K or V) packed per slab (batch element, head): element values
/// `val` [slab][token][channel] and, where the scheme has scales, one scale per token (`row`)
/// or per channel (`col`).
struct Operand {
  std::int64_t C = 0;                      ///< channels
  std::vector<std::int64_t> tok_off;       ///< first token of each slab in the packed order
  std::vector<float> val, row, col;
  [[nodiscard]] const float* at(std::int64_t slab, std::int64_t t) const {
    return val.data() + (tok_off[static_cast<std::size_t>(slab)] + t) * C;
  }
};

/// Element cast of a plain-cast scheme.
inline float cast_elem(const Scheme& s, float x) {
  if (s.kind == Scheme::Kind::f32) return x;
  return round_to(s.elem, x, s.tie, s.sat);
}

/// Format of P and O as a rounding function.
inline float round_elem(ElemFormat f, float x) {
  switch (f) {
    case ElemFormat::f32: return x;
    case ElemFormat::bf16: return round_to(kBf16, x);
    case ElemFormat::fp16: return round_to(kFp16, x);
    case ElemFormat::fp8_e4m3fn: return round_to(kE4m3, x, Tie::even, Sat::satfinite);
    case ElemFormat::fp8_e4m3fnuz: return round_to(kE4m3fnuz, x, Tie::even, Sat::satfinite);
    case ElemFormat::fp8_e5m2: return round_to(kE5m2, x, Tie::even, Sat::satfinite);
    case ElemFormat::fp4_e2m1fn: return round_to(kE2m1, x, Tie::even, Sat::satfinite);
  }
  return x;
}

/// Reads one operand of the problem and quantizes it into packed slabs. `kv` picks K/V token
/// counts; `heads` is H or Hkv.
template <Bug B>
Operand prepare(const Tensor& x, const Problem& p, bool kv, std::int64_t heads, std::int64_t C, const Scheme& s) {
  TokenView<const float> in = token_view<const float>(x, p, kv);
  if constexpr (B == Bug::contiguous_assumed) {
    // The planted bug: the strides of a contiguous bshd tensor of this shape, whatever the real
    // ones are. Kept inside the buffer so that the bug shows as wrong values, not a crash.
    const auto& sh = x.shape();
    const std::int64_t need = sh[0] * sh[1] * sh[2] * sh[3];
    const auto* base = reinterpret_cast<const std::byte*>(in.data);
    const std::byte* end = x.storage().data() + x.storage().size();
    if (base + need * 4 <= end) in.sd = 1, in.sh = C, in.ss = heads * C, in.sb = sh[1] * heads * C;
  }
  Operand op;
  op.C = C;
  const std::int64_t slabs = p.batch * heads;
  op.tok_off.resize(static_cast<std::size_t>(slabs) + 1);
  for (std::int64_t sl = 0; sl < slabs; ++sl) {
    const std::int64_t b = sl / heads;
    op.tok_off[static_cast<std::size_t>(sl) + 1] = op.tok_off[static_cast<std::size_t>(sl)] + (kv ? p.len_kv(b) : p.len_q(b));
  }
  op.val.resize(static_cast<std::size_t>(op.tok_off.back() * C));
#pragma omp parallel for schedule(static)
  for (std::int64_t sl = 0; sl < slabs; ++sl) {
    const std::int64_t b = sl / heads, h = sl % heads;
    const std::int64_t n = op.tok_off[static_cast<std::size_t>(sl) + 1] - op.tok_off[static_cast<std::size_t>(sl)];
    for (std::int64_t t = 0; t < n; ++t) {
      const float* src = in.row(b, t, h);
      float* dst = op.val.data() + (op.tok_off[static_cast<std::size_t>(sl)] + t) * C;
      for (std::int64_t c = 0; c < C; ++c) dst[c] = cast_elem(s, src[c * in.sd]);
    }
  }
  return op;
}

/// Online-softmax state of one query row. Invariants: `m` is the largest logit seen (in units
/// of the raw dot product), `l` the sum of the unrounded P values relative to m, `acc` the sum
/// of rounded-P times V relative to m; both were rescaled by exp2((m_old - m) * scale_log2)
/// every time m grew.
struct RowState {
  float m = kNegInf;
  float l = 0;
  bool nan = false;
};

struct Params {
  float scale_log2 = 0;  ///< fl(softmax_scale * log2(e)), product in double
  std::int64_t Dv = 0;
  ElemFormat pfmt = ElemFormat::bf16;
  Exp2Policy exp2 = Exp2Policy::cr;
};

inline float exp2_of(Exp2Policy e, float x) { return e == Exp2Policy::fa4 ? exp2_fa4(x) : exp2_cr(x); }

template <Bug B>
inline float flush(float x) {
  if constexpr (B == Bug::ftz_acc) {
    if (x != 0 && std::fabs(x) < std::numeric_limits<float>::min()) return std::copysign(0.0f, x);
  }
  return x;
}

/// Folds one KV tile (keys [0, n) of `s`, rows of `vrows`) into the row state.
template <Bug B>
void update(RowState& st, float* acc, const Params& pr, const float* s, std::int64_t n, const float* const* vrows,
            std::int64_t vsd, unsigned rotation) {
  float tile_max = kNegInf;
  for (std::int64_t j = 0; j < n; ++j) {
    if (std::isnan(s[j])) st.nan = true;
    tile_max = std::max(tile_max, s[j]);
  }
  const float m_new = std::max(st.m, tile_max);
  if (m_new == kNegInf) return;  // every logit so far is -inf: nothing to add
  const float ms_new = m_new * pr.scale_log2;
  if (m_new != st.m) {
    float alpha = st.m == kNegInf ? 0.0f : exp2_of(pr.exp2, st.m * pr.scale_log2 - ms_new);
    if constexpr (B == Bug::no_rescale) alpha = st.m == kNegInf ? 0.0f : 1.0f;
    st.l = st.l * alpha;
    for (std::int64_t d = 0; d < pr.Dv; ++d) acc[d] = flush<B>(acc[d] * alpha);
    st.m = m_new;
  }
  float pv[1024];  // tile_kv <= 1024 (checked in plan_unsupported)
  for (std::int64_t j = 0; j < n; ++j) {
    const float pj = exp2_of(pr.exp2, std::fma(s[j], pr.scale_log2, -ms_new));
    st.l = st.l + pj;
    if constexpr (B == Bug::p_e5m2) pv[j] = round_to(kE5m2, pj, Tie::even, Sat::satfinite);
    else pv[j] = round_elem(pr.pfmt, pj);
  }
  for (std::int64_t jj = 0; jj < n; ++jj) {
    std::int64_t j = jj;
    if constexpr (B == Bug::nondeterministic) j = (jj + rotation) % n;
    const float* vj = vrows[j];
    for (std::int64_t d = 0; d < pr.Dv; ++d) acc[d] = flush<B>(acc[d] + pv[j] * vj[d * vsd]);
  }
}

}  // namespace tiled

template <Bug B>
void run_tiled(const Args& a, const Plan& plan) {
  using namespace tiled;
  const Problem& p = a.problem;
  const Recipe& r = plan.recipe;
  check_args(p, a.q, a.k, a.v, a.out, a.lse);
  const bool wrapper = a.config == "path=wrapper";
  std::int64_t Br = r.tile_q;
  if (a.config == "qtile=16") Br = 16;
  else if (!a.config.empty() && !wrapper) throw Error("cpu.tiled: unknown config '" + std::string(a.config) + "' (valid: \"\", path=wrapper, qtile=16)");
  const std::int64_t Bc = r.tile_kv;
  const std::int64_t H = p.heads_q, Hkv = p.heads_kv, D = p.head_dim, Dv = p.head_dim_v, grp = p.group();

  // The wrapper path reads packed contiguous copies of the inputs (same values, other strides).
  Tensor qc, kc, vc;
  const Tensor* qt = &a.q;
  const Tensor* kt = &a.k;
  const Tensor* vt = &a.v;
  if (wrapper) qc = a.q.contiguous(), kc = a.k.contiguous(), vc = a.v.contiguous(), qt = &qc, kt = &kc, vt = &vc;
  const Operand Q = prepare<B>(*qt, p, false, H, D, plan.q);
  const Operand K = prepare<B>(*kt, p, true, Hkv, D, plan.k);
  const Operand V = prepare<B>(*vt, p, true, Hkv, Dv, plan.v);

  double scale = p.scale();
  if constexpr (B == Bug::scale_off_1pct) scale *= 1.01;
  Params pr;
  pr.scale_log2 = static_cast<float>(scale * std::numbers::log2e);
  pr.Dv = Dv;
  pr.pfmt = r.p;
  pr.exp2 = r.exp2;

  static std::atomic<unsigned> calls{0};
  const unsigned rotation = B == Bug::nondeterministic ? calls.fetch_add(1) : 0u;

  // Output: written directly, or (wrapper) into a contiguous staging tensor copied out at the end.
  Tensor staged;
  if (wrapper) staged = Tensor(DType::f32, a.out.shape());
  TokenView<float> o = token_view<float>(wrapper ? staged : a.out, p, false);
  if constexpr (B == Bug::contiguous_assumed) {
    const auto& sh = a.out.shape();
    const auto* base = reinterpret_cast<const std::byte*>(o.data);
    const std::byte* end = a.out.storage().data() + a.out.storage().size();
    if (!wrapper && base + sh[0] * sh[1] * sh[2] * sh[3] * 4 <= end) o.sd = 1, o.sh = Dv, o.ss = H * Dv, o.sb = sh[1] * H * Dv;
  }
  LseView lse;
  if (a.lse != nullptr) lse = lse_view(*a.lse, p);

  struct Item {
    std::int64_t b, h, r0, r1;
  };
  std::vector<Item> items;
  for (std::int64_t b = 0; b < p.batch; ++b)
    for (std::int64_t h = 0; h < H; ++h) {
      const std::int64_t S = p.len_q(b);
      for (std::int64_t r0 = 0; r0 < S; r0 += Br) {
        if constexpr (B == Bug::skip_last_q_tile) {
          if (r0 + Br > S && r0 > 0) continue;
        }
        items.push_back({b, h, r0, std::min(S, r0 + Br)});
      }
    }
  if (wrapper) std::reverse(items.begin(), items.end());

  const Mask mask = (B == Bug::causal_tl_for_br && p.mask == Mask::causal_br) ? Mask::causal_tl : p.mask;
  const std::int64_t n_items = static_cast<std::int64_t>(items.size());
#pragma omp parallel for schedule(dynamic)
  for (std::int64_t it = 0; it < n_items; ++it) {
    const Item w = items[static_cast<std::size_t>(it)];
    std::int64_t g = w.h / grp;
    if constexpr (B == Bug::gqa_wrong_head) g = w.h % Hkv;
    const std::int64_t T = p.len_kv(w.b), rows = w.r1 - w.r0;
    const std::int64_t qslab = w.b * H + w.h, kslab = w.b * Hkv + g;
    std::vector<RowState> st(static_cast<std::size_t>(rows));
    std::vector<float> acc(static_cast<std::size_t>(rows * Dv), 0.0f), s(static_cast<std::size_t>(Bc));
    std::vector<const float*> vrows(static_cast<std::size_t>(Bc));
    std::vector<std::int64_t> hi(static_cast<std::size_t>(rows));
    std::int64_t hi_max = 0;
    const std::int64_t S = p.len_q(w.b);
    for (std::int64_t i = 0; i < rows; ++i) {
      const std::int64_t row = w.r0 + i;
      const std::int64_t vis = mask == Mask::none ? T : mask == Mask::causal_tl ? row + 1 : row + 1 + T - S;
      hi[static_cast<std::size_t>(i)] = std::clamp<std::int64_t>(vis, 0, T);
      hi_max = std::max(hi_max, hi[static_cast<std::size_t>(i)]);
    }
    for (std::int64_t j0 = 0; j0 < hi_max; j0 += Bc) {
      for (std::int64_t i = 0; i < rows; ++i) {
        const std::int64_t j1 = std::min(j0 + Bc, hi[static_cast<std::size_t>(i)]);
        if (j1 <= j0) continue;
        if constexpr (B == Bug::skip_last_kv_tile) {
          if (j1 == hi[static_cast<std::size_t>(i)] && j1 - j0 < Bc) continue;
        }
        const float* qi = Q.at(qslab, w.r0 + i);
        for (std::int64_t j = j0; j < j1; ++j) {
          const float* kj = K.at(kslab, j);
          float dot = 0;
          for (std::int64_t d = 0; d < D; ++d) dot = dot + qi[d] * kj[d];
          s[static_cast<std::size_t>(j - j0)] = dot;
          vrows[static_cast<std::size_t>(j - j0)] = V.at(kslab, j);
        }
        update<B>(st[static_cast<std::size_t>(i)], acc.data() + i * Dv, pr, s.data(), j1 - j0, vrows.data(), 1,
                  rotation);
      }
    }
    for (std::int64_t i = 0; i < rows; ++i) {
      const RowState& rs = st[static_cast<std::size_t>(i)];
      float* oi = o.row(w.b, w.r0 + i, w.h);
      const float* ai = acc.data() + i * Dv;
      float row_lse = 0;
      if (rs.nan) {
        row_lse = std::numeric_limits<float>::quiet_NaN();
        for (std::int64_t d = 0; d < Dv; ++d) oi[d * o.sd] = row_lse;
      } else if (rs.l == 0) {
        row_lse = kNegInf;
        for (std::int64_t d = 0; d < Dv; ++d) oi[d * o.sd] = 0.0f;
      } else {
        for (std::int64_t d = 0; d < Dv; ++d) oi[d * o.sd] = round_elem(r.out, ai[d] / rs.l);
        // lse = ln(l) + m * scale, evaluated in double from the float state and rounded once.
        const double l2 = static_cast<double>(rs.m) * pr.scale_log2 + std::log2(static_cast<double>(rs.l));
        row_lse = static_cast<float>(B == Bug::lse_log2 ? l2 : l2 * std::numbers::ln2);
      }
      if (a.lse != nullptr) lse.at(w.b, w.h, w.r0 + i) = row_lse;
    }
  }

  if (wrapper) {
    const TokenView<const float> from = token_view<const float>(staged, p, false);
    const TokenView<float> to = token_view<float>(a.out, p, false);
    for (std::int64_t b = 0; b < p.batch; ++b)
      for (std::int64_t i = 0; i < p.len_q(b); ++i)
        for (std::int64_t h = 0; h < H; ++h)
          for (std::int64_t d = 0; d < Dv; ++d) to.at(b, i, h, d) = from.at(b, i, h, d);
  }
  if constexpr (B == Bug::oob_write) {
    // One element past the output's highest-addressed element, if the buffer has room there
    // (the canary check allocates guard zones; without slack the bug has nowhere to land).
    std::int64_t last = 0;
    for (int d = 0; d < 4; ++d) last += (a.out.shape()[static_cast<std::size_t>(d)] - 1) * a.out.strides()[static_cast<std::size_t>(d)];
    float* past = a.out.data<float>() + last + 1;
    const auto* end = reinterpret_cast<const float*>(a.out.storage().data() + a.out.storage().size());
    if (past < end) *past = 1.0f;
  }
}

}  // namespace attest::kernels::cpu
