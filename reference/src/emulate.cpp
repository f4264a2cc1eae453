// The recipe emulator. Its arithmetic IS the definition of the Recipe fields (docs/recipes.md has
// the same contract in prose). Every FP32 expression below is one IEEE operation per operator
// (the build uses -ffp-contract=off; a fused multiply-add is written std::fma), so the source
// order is the rounding order.
//
// Contract, per output row (sequence b, query i, head h; KV head g = h / (H / Hkv)):
//  0. Quantization (reference/quantize), before anything else and independent of the row:
//     Q as [B,H,S,D] slabs, K as [B,Hkv,T,D], V as [B,Hkv,T,Dv] (int8 / fp8 / casts) or, for MX V,
//     as [B,Hkv,Dv,T] so that its 32-blocks run along tokens (the P.V reduction axis). A ragged
//     batch quantizes each sequence on its own (per_tensor then means per sequence), so a ragged
//     run equals the per-sequence runs bit for bit. Scheme "f32" leaves an operand as it is.
//  1. Logits. x_ij from the element values (scales factored out):
//     - int8 x int8: exact int32 sum, converted to float exactly (|sum| <= D * 128^2 <= 2^24 for
//       D <= 1024, which is enforced);
//     - float elements (casts, fp8, f32): FP32 sum over d ascending, x = fma(q_d, k_d, x). For
//       bf16/fp16/fp8 operands the product is exact in FP32 (at most 11+11 significant bits), so
//       this equals a sequential sum of exact products rounded once per addition; for f32 operands
//       it is the fma accumulation;
//     - MX x MX: per block of 32 channels an FP32 sum of the (exact) element products, then times
//       2^(Eq + Ek - 254) (a power of two: exact unless the result leaves FP32's range, then one
//       rounding), added to x block by block in ascending order. For fp4/fp6 elements the block
//       sums are exact too (at most 32 * 56.25 in steps of 2^-6, or 32 * 784 in steps of 2^-8,
//       both < 2^24 steps).
//     Scale in log2 units: sc_ij = fl(c * fl(qs_i * ks_j)), where qs, ks are the per-token scales
//     of Q and K (1 for casts, f32 and MX) and c = 1 if Q's scheme pre-scaled Q by
//     softmax_scale * log2e (prescale=sm_log2e), else c = fl(fl32(softmax_scale) * log2e) with
//     the product in double.
//  2. Online softmax over key tiles [t*Bc, (t+1)*Bc) of the visible keys [0, hi), tiles in
//     ascending order and keys ascending within a tile (reverse_kv: both descending, same tiles
//     and quantization). With off = log2 of the P scale (0, 8, 8.807f):
//       y_j    = fma(x_j, sc_j, -off)                  m_tile = max_j y_j (NaN if any is NaN)
//       always:      m_new = max(m, m_tile)
//       conditional: m_new = m if m > -inf and fl(m - m_tile) >= -threshold, else max(m, m_tile)
//       alpha  = exp2(fl(m - m_new)) (not applied when m_new == m); l = fl(l * alpha);
//       acc_d  = fl(acc_d * alpha)
//       P_j    = exp2(fma(x_j, sc_j, -m_new))          (FP32; the exp2 policy)
//       l      = fl(l + P_j), keys in processing order (the row sum is taken from FP32 P, before
//                P is rounded to its format)
//       Pc_j   = P_j rounded to the P format (bf16/fp16 RNE; fp8 RNE satfinite; MX per p_mx)
//       acc_d  = fma(Pc_j, V_jd, acc_d), keys in processing order (exact products); with MX P or
//                V the keys go in blocks of 32: block sum in FP32, times 2^(Ep + Ev - 254), added.
//     Keys beyond hi take no part in anything.
//  3. Normalisation: r = fl(1/l) (ieee_rcp) or rcp_sm90(l); o_d = fl(acc_d / l) or fl(acc_d * r);
//     V's scale vs_d (per channel / per tensor, 1 for casts): vscale=out o_d = fl(o_d * vs_d),
//     vscale=rcp o_d = fl(acc_d * fl(r * vs_d)). Then o_d rounded to the out format (RNE).
//  4. LSE (natural log) = fl32((double(m) + log2_portable(l)) * ln2) computed in double, m being
//     the final running max (it includes -off, so the P scale cancels). With K smoothing the
//     correction fl32(double(q_i . km) * softmax_scale) (products exact in double, sum in double
//     over d ascending) is added in FP32, unless EmulateOptions::smoothed_lse.
//  5. A row with no visible key (or whose running max stays -inf): out 0, LSE -inf.
// Each row's arithmetic is sequential and depends only on its own data, so results do not depend
// on the thread count or on the tiling of rows (tile_q only sets the work unit). emulate() is
// prepare() (step 0, once for the whole problem) followed by every row; emulate_rows() runs chosen
// rows against the same prepared operands, so its rows are emulate()'s bit for bit.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <exception>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "attest/core/status.hpp"
#include "attest/reference/attention.hpp"
#include "attest/reference/emulate.hpp"
#include "attest/reference/formats.hpp"
#include "attest/reference/quantize.hpp"

namespace attest::ref {
namespace {

constexpr double kLog2e = 0x1.71547652b82fep0;  // RN(log2 e)
constexpr double kLn2 = 0x1.62e42fefa39efp-1;   // RN(ln 2)
constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

enum class Kind : std::uint8_t { f32, cast, int8, fp8, mx };

// One operand of one quantization unit (the whole batch, or one sequence of a ragged batch),
// element values with the scales factored out.
struct Operand {
  Kind kind = Kind::f32;
  std::int64_t slabs = 0, T = 0, C = 0;
  std::int64_t block = 32;           // MX block (channels for Q/K, tokens for V)
  std::vector<float> val;            // element values; layout per use (see prepare_*); empty for int8
  std::vector<std::int8_t> ival;     // int8 codes (Kind::int8, instead of val), val's layout
  std::vector<float> tok_scale;      // [slab][t] (Q/K)
  std::vector<float> chan_scale;     // [slab][c] (V)
  std::vector<std::int16_t> mx_exp;  // E - 127, or kNoExp for a NaN scale
  std::vector<float> mean;           // K smoothing mean [slab][c] (empty without smoothing)
};
constexpr std::int16_t kNoExp = 0x7FFF;

// The identity f32 (a head of the shared grammar) leaves an operand as it is; the reference
// quantizers refuse it, so the emulator branches on it first.
bool is_f32(const Scheme& s) { return s.family == Scheme::Family::identity; }

Kind kind_of(const Scheme& s) {
  switch (s.family) {
    case Family::identity: return Kind::f32;
    case Family::cast: return Kind::cast;
    case Family::int8: return Kind::int8;
    case Family::fp8: return Kind::fp8;
    case Family::mx: return Kind::mx;
  }
  return Kind::f32;
}

float element_value(const Scheme& s, const Tensor& codes, std::int64_t o) {
  switch (s.family) {
    case Family::identity: break;
    case Family::cast: return decode(s.element, codes.data<std::uint16_t>()[o]);
    case Family::int8: return static_cast<float>(codes.data<std::int8_t>()[o]);
    case Family::fp8: return decode(s.element, codes.data<std::uint8_t>()[o]);
    case Family::mx: {
      const auto code = s.element == FormatId::int8 ? static_cast<std::uint8_t>(codes.data<std::int8_t>()[o])
                                                    : codes.data<std::uint8_t>()[o];
      return mx_element_value(code, s.element);
    }
  }
  return kNaN;
}

std::int16_t mx_exponent(std::uint8_t code) {
  return code == 0xFF ? kNoExp : static_cast<std::int16_t>(static_cast<int>(code) - 127);
}

// The per-token scale of a uniform-scale scheme (the grid of quantize.hpp's Quantized::scales).
float token_scale(const Scheme& s, const float* scales, std::int64_t slab, std::int64_t T, std::int64_t t) {
  switch (s.granularity) {
    case Granularity::per_tensor: return scales[0];
    case Granularity::per_block: return scales[slab * ((T + s.block - 1) / s.block) + t / s.block];
    case Granularity::per_warp: {
      const std::int64_t w = sage_warp_rows(s.arch, s.role);
      return scales[slab * ((T + w - 1) / w) + t / w];
    }
    case Granularity::per_thread: {
      const std::int64_t w = sage_warp_rows(s.arch, s.role), g = sage_thread_groups(s.role);
      const std::int64_t group = s.role == Role::q ? t % 8 : (t % 8) / 2;
      return scales[(slab * ((T + w - 1) / w) + t / w) * g + group];
    }
    case Granularity::per_token: return scales[slab * T + t];
    case Granularity::per_channel: break;
  }
  return kNaN;
}

// x: f32 [n, T, H, D] logical (any strides). Q/K operand with values [slab][t][c] where
// slab = b * H + h; for K also transposed to [slab][c][t] (kT) for the vectorised dot.
Operand prepare_qk(const Tensor& x, const Scheme& s, double sm_scale, bool transpose) {
  const Tensor xt = x.permute({0, 2, 1, 3});  // [n, H, T, D]
  Operand o;
  o.kind = kind_of(s);
  o.slabs = xt.dim(0) * xt.dim(1);
  o.T = xt.dim(2);
  o.C = xt.dim(3);
  const auto n = static_cast<std::size_t>(o.slabs * o.T * o.C);
  o.tok_scale.assign(static_cast<std::size_t>(o.slabs * o.T), 1.0f);
  auto dst = [&](std::int64_t sl, std::int64_t t, std::int64_t c) {
    return static_cast<std::size_t>(transpose ? (sl * o.C + c) * o.T + t : (sl * o.T + t) * o.C + c);
  };
  if (is_f32(s)) {
    o.val.assign(n, 0.0f);
    const Tensor xc = xt.contiguous();
    const float* src = o.val.empty() ? nullptr : xc.data<float>();
    for (std::int64_t sl = 0; sl < o.slabs; ++sl)
      for (std::int64_t t = 0; t < o.T; ++t)
        for (std::int64_t c = 0; c < o.C; ++c) o.val[dst(sl, t, c)] = src[(sl * o.T + t) * o.C + c];
    return o;
  }
  QuantInputs in;
  in.sm_scale = sm_scale;
  const Quantized qz = quantize(xt, s, in);
  // int8 logits are integer dot products of the codes (score_tile): the codes alone are kept.
  if (o.kind == Kind::int8) o.ival.assign(n, 0);
  else o.val.assign(n, 0.0f);
  if (o.kind == Kind::mx) {
    o.block = s.block;
    o.mx_exp.assign(static_cast<std::size_t>(o.slabs * o.T * ((o.C + o.block - 1) / o.block)), 0);
    const auto* e = qz.scales.data<std::uint8_t>();
    for (std::size_t i = 0; i < o.mx_exp.size(); ++i) o.mx_exp[i] = mx_exponent(e[i]);
  }
  for (std::int64_t sl = 0; sl < o.slabs; ++sl)
    for (std::int64_t t = 0; t < o.T; ++t) {
      if (o.kind == Kind::int8 || o.kind == Kind::fp8)
        o.tok_scale[static_cast<std::size_t>(sl * o.T + t)] = token_scale(s, qz.scales.data<float>(), sl, o.T, t);
      for (std::int64_t c = 0; c < o.C; ++c) {
        const std::int64_t src = (sl * o.T + t) * o.C + c;
        if (o.kind == Kind::int8) o.ival[dst(sl, t, c)] = qz.codes.data<std::int8_t>()[src];
        else o.val[dst(sl, t, c)] = element_value(s, qz.codes, src);
      }
    }
  if (!qz.mean.empty()) o.mean.assign(qz.mean.data<float>(), qz.mean.data<float>() + o.slabs * o.C);
  return o;
}

// x: f32 [n, T, H, Dv]. V operand with values [slab][t][c], channel scales [slab][c] and, for
// MX, block exponents [slab][t / block][c] (blocks along tokens).
Operand prepare_v(const Tensor& x, const Scheme& s) {
  const Tensor xt = x.permute({0, 2, 1, 3});  // [n, H, T, Dv]
  Operand o;
  o.kind = kind_of(s);
  o.slabs = xt.dim(0) * xt.dim(1);
  o.T = xt.dim(2);
  o.C = xt.dim(3);
  o.val.assign(static_cast<std::size_t>(o.slabs * o.T * o.C), 0.0f);
  o.chan_scale.assign(static_cast<std::size_t>(o.slabs * o.C), 1.0f);
  if (is_f32(s)) {
    const Tensor xc = xt.contiguous();
    if (!o.val.empty()) std::copy_n(xc.data<float>(), o.val.size(), o.val.begin());
    return o;
  }
  if (o.kind == Kind::mx) {
    o.block = s.block;
    const std::int64_t nb = (o.T + o.block - 1) / o.block;
    const Quantized qz = quantize(xt.permute({0, 1, 3, 2}), s);  // [n, H, Dv, T]
    o.mx_exp.assign(static_cast<std::size_t>(o.slabs * nb * o.C), 0);
    const auto* e = qz.scales.data<std::uint8_t>();  // [slab][c][tb]
    for (std::int64_t sl = 0; sl < o.slabs; ++sl)
      for (std::int64_t c = 0; c < o.C; ++c) {
        for (std::int64_t tb = 0; tb < nb; ++tb)
          o.mx_exp[static_cast<std::size_t>((sl * nb + tb) * o.C + c)] = mx_exponent(e[(sl * o.C + c) * nb + tb]);
        for (std::int64_t t = 0; t < o.T; ++t)
          o.val[static_cast<std::size_t>((sl * o.T + t) * o.C + c)] = element_value(s, qz.codes, (sl * o.C + c) * o.T + t);
      }
    return o;
  }
  if (o.kind == Kind::int8 || o.kind == Kind::fp8) {
    if (s.granularity != Granularity::per_tensor && s.granularity != Granularity::per_channel)
      throw Error("emulate: v scheme '" + to_string(s) +
                  "': V's scale must be per_tensor or per_channel (a per-token scale cannot be factored out of P.V)");
    if (s.smooth != Smoothing::none || s.prescale != Prescale::none || s.rotate != Rotation::none)
      throw Error("emulate: v scheme '" + to_string(s) + "': smoothing, prescale and rotation of V are not modelled");
  }
  const Quantized qz = quantize(xt, s);
  for (std::int64_t sl = 0; sl < o.slabs; ++sl)
    for (std::int64_t c = 0; c < o.C; ++c) {
      if (o.kind == Kind::int8 || o.kind == Kind::fp8) {
        const float* sc = qz.scales.data<float>();
        o.chan_scale[static_cast<std::size_t>(sl * o.C + c)] =
            s.granularity == Granularity::per_tensor ? sc[0] : sc[sl * o.C + c];
      }
      for (std::int64_t t = 0; t < o.T; ++t)
        o.val[static_cast<std::size_t>((sl * o.T + t) * o.C + c)] = element_value(s, qz.codes, (sl * o.T + t) * o.C + c);
    }
  return o;
}

// Contiguous copy of tokens [start, start + len) of a [1, total, H, D] tensor as [1, len, H, D].
Tensor token_slice(const Tensor& x, std::int64_t start, std::int64_t len) {
  const auto vx = x.view<float, 4>();
  Tensor out(DType::f32, {1, len, x.dim(2), x.dim(3)});
  auto vo = out.view<float, 4>();
  for (std::int64_t t = 0; t < len; ++t)
    for (std::int64_t h = 0; h < x.dim(2); ++h)
      for (std::int64_t d = 0; d < x.dim(3); ++d) vo(0, t, h, d) = vx(0, start + t, h, d);
  return out;
}

// Everything the rows of one quantization unit read.
struct Unit {
  Operand q, k, v;
  std::vector<float> qraw;  // the input q as [slab][t][c], kept for the smoothing LSE correction
};

struct Plan {
  const Problem* p = nullptr;
  Recipe r;
  Scheme sq, sk, sv;
  bool p_mx = false;
  Scheme pmx;
  FormatId p_fmt = FormatId::bf16;
  bool p_round = false;  // P is rounded to p_fmt (element cast)
  FormatId out_fmt = FormatId::bf16;
  bool out_round = false;
  bool out_sat = false;  ///< FP8/FP4 out formats saturate
  float off = 0;
  float c = 1;  // logit factor to log2 units
  float (*exp2)(float) = nullptr;
  std::int64_t pv_block = 32;  // keys per P.V block when P or V is block scaled
  bool pv_fp16 = false;        // pv_acc=fp16: FP16 partial sums per tile
  bool reverse = false;
  bool smoothed_lse = false;
  double sm_scale = 0;
};

// P and O formats other than f32 are rounded to (recipe formats: kRecipeElemFormats).
bool elem_format(FormatId e, FormatId& f) {
  if (e == FormatId::f32) return false;
  f = e;
  return true;
}

// fl(s * 2^e) for a block sum s and a combined block exponent e (kNoExp: NaN scale). The product
// is formed in double (exact) and rounded once to float.
float scale_block(float s, int e) {
  return static_cast<float>(static_cast<double>(s) * std::ldexp(1.0, e));
}

struct RowScratch {
  std::vector<float> x, sc, P, Pc, acc, bs, part;
  std::vector<std::int32_t> ix;
  std::vector<std::int16_t> pexp;
};

// Sizes the scratch for rows of Dv outputs and KV tiles of Bc keys (a no-op after the first row
// of a thread: no allocation per row), and zeroes the accumulator.
void prepare_scratch(const Plan& pl, std::int64_t Dv, RowScratch& w) {
  const std::int64_t Bc = pl.r.tile_kv;
  w.acc.assign(static_cast<std::size_t>(Dv), 0.0f);
  w.x.resize(static_cast<std::size_t>(Bc));
  w.sc.resize(static_cast<std::size_t>(Bc));
  w.P.resize(static_cast<std::size_t>(Bc));
  w.Pc.resize(static_cast<std::size_t>(Bc));
  w.ix.resize(static_cast<std::size_t>(Bc));
  w.bs.resize(static_cast<std::size_t>(std::max(Dv, Bc)));
  w.part.resize(static_cast<std::size_t>(Dv));
  const std::int64_t npb = (Bc + pl.pv_block - 1) / pl.pv_block + 1;
  w.pexp.resize(static_cast<std::size_t>(npb));
}

// The query row an emulated output row reads: Q slab and token, K/V slab.
struct RowAt {
  std::int64_t slab_q, slab_kv, i;
};

// Step 1, the score tile: logits w.x (raw sums, contract 1) and scales w.sc in log2 units of keys
// j0 + jj, jj < n.
void score_tile(const Plan& pl, const Unit& u, const RowAt& at, std::int64_t j0, std::int64_t n, RowScratch& w) {
  const std::int64_t D = u.q.C, Tq = u.q.T, Tk = u.k.T, slab_q = at.slab_q, slab_kv = at.slab_kv, i = at.i;
  float* x = w.x.data();
  if (u.q.kind == Kind::int8) {
    std::int32_t* ix = w.ix.data();
    std::fill_n(ix, n, 0);
    const std::int8_t* qi = u.q.ival.data() + (slab_q * Tq + i) * D;
    for (std::int64_t d = 0; d < D; ++d) {
      const std::int8_t* kt = u.k.ival.data() + (slab_kv * D + d) * Tk + j0;
      const std::int32_t a = qi[d];
      for (std::int64_t jj = 0; jj < n; ++jj) ix[jj] += a * kt[jj];
    }
    for (std::int64_t jj = 0; jj < n; ++jj) x[jj] = static_cast<float>(ix[jj]);  // exact, |ix| <= 2^24
  } else if (u.q.kind == Kind::mx) {
    const float* qrow = u.q.val.data() + (slab_q * Tq + i) * D;
    const std::int64_t nb = (D + u.q.block - 1) / u.q.block;
    float* bs = w.bs.data();
    std::fill_n(x, n, 0.0f);
    for (std::int64_t blk = 0; blk < nb; ++blk) {
      std::fill_n(bs, n, 0.0f);
      for (std::int64_t d = blk * u.q.block; d < std::min(D, (blk + 1) * u.q.block); ++d) {
        const float* kt = u.k.val.data() + (slab_kv * D + d) * Tk + j0;
        const float a = qrow[d];
        for (std::int64_t jj = 0; jj < n; ++jj) bs[jj] = std::fma(a, kt[jj], bs[jj]);
      }
      const int eq = u.q.mx_exp[static_cast<std::size_t>((slab_q * Tq + i) * nb + blk)];
      for (std::int64_t jj = 0; jj < n; ++jj) {
        const int ek = u.k.mx_exp[static_cast<std::size_t>((slab_kv * Tk + j0 + jj) * nb + blk)];
        const float term = (eq == kNoExp || ek == kNoExp) ? kNaN : scale_block(bs[jj], eq + ek);
        x[jj] = x[jj] + term;
      }
    }
  } else {
    const float* qrow = u.q.val.data() + (slab_q * Tq + i) * D;
    std::fill_n(x, n, 0.0f);
    for (std::int64_t d = 0; d < D; ++d) {
      const float* kt = u.k.val.data() + (slab_kv * D + d) * Tk + j0;
      const float a = qrow[d];
      for (std::int64_t jj = 0; jj < n; ++jj) x[jj] = std::fma(a, kt[jj], x[jj]);
    }
  }
  const float qs = u.q.tok_scale[static_cast<std::size_t>(slab_q * Tq + i)];
  float* sc = w.sc.data();
  for (std::int64_t jj = 0; jj < n; ++jj)
    sc[jj] = pl.c * (qs * u.k.tok_scale[static_cast<std::size_t>(slab_kv * Tk + j0 + jj)]);
}

// The online-softmax state of the row: running max m (log2 units, -off included), running sum l
// of FP32 P, both relative to m as the accumulator w.acc is.
struct RowState {
  float m = -kInf, l = 0.0f;
  bool started = false;  // a finite max was seen
  std::int32_t rescales = 0;
};

// Step 2, the running max: the tile's max folded in under the rescale policy; when the max grows,
// l and the accumulator are rescaled by alpha = exp2(fl(m - m_new)). False when every logit so far
// is -inf (P = 0: the tile changes nothing).
bool update_max(const Plan& pl, std::int64_t n, RowState& st, RowScratch& w) {
  const Recipe& r = pl.r;
  const float* x = w.x.data();
  const float* sc = w.sc.data();
  float m_tile = -kInf;
  for (std::int64_t jj = 0; jj < n; ++jj) {
    const float y = std::fma(x[jj], sc[jj], -pl.off);
    if (std::isnan(y) || std::isnan(m_tile)) m_tile = kNaN;
    else if (y > m_tile) m_tile = y;
  }
  float m_new = st.m;
  if (std::isnan(m_tile) || std::isnan(st.m)) m_new = kNaN;
  else if (!(r.rescale == RescalePolicy::conditional && st.m > -kInf &&
             st.m - m_tile >= static_cast<float>(-r.rescale_threshold)))
    m_new = std::max(st.m, m_tile);
  if (m_new == -kInf) return false;
  if (m_new != st.m) {
    if (st.started) ++st.rescales;
    const float alpha = pl.exp2(st.m - m_new);
    st.l = st.l * alpha;
    for (float& a : w.acc) a *= alpha;
    st.m = m_new;
  }
  st.started = true;
  return true;
}

// Step 3, P: P_j = exp2(fma(x_j, sc_j, -m)) in FP32, added to the row sum l in processing order
// (before P is rounded); then Pc, P in its format (MX: per block of pv_block keys, with the block
// exponents in w.pexp).
void exponentiate(const Plan& pl, std::int64_t n, RowState& st, RowScratch& w) {
  const float* x = w.x.data();
  const float* sc = w.sc.data();
  float* P = w.P.data();
  float* Pc = w.Pc.data();
  for (std::int64_t jj = 0; jj < n; ++jj) P[jj] = pl.exp2(std::fma(x[jj], sc[jj], -st.m));
  for (std::int64_t s = 0; s < n; ++s) st.l = st.l + P[pl.reverse ? n - 1 - s : s];
  const std::int64_t pb = pl.pv_block;
  if (pl.p_mx) {
    for (std::int64_t b0 = 0; b0 < n; b0 += pb) {
      const std::int64_t b1 = std::min(n, b0 + pb);
      float amax = 0.0f;
      for (std::int64_t jj = b0; jj < b1; ++jj) {
        const float a = std::fabs(P[jj]);
        if (std::isnan(a) || a > amax) amax = a;
      }
      const std::uint8_t code = e8m0_scale(amax, pl.pmx.e8m0, pl.pmx.element);
      const float mult = e8m0_element_multiplier(code, pl.pmx.e8m0);
      w.pexp[static_cast<std::size_t>(b0 / pb)] = mx_exponent(code);
      for (std::int64_t jj = b0; jj < b1; ++jj)
        Pc[jj] = mx_element_value(mx_element_code(P[jj] * mult, pl.pmx.element, pl.pmx.elem_round, pl.pmx.overflow),
                                  pl.pmx.element);
    }
  } else if (pl.p_round) {
    const bool fp8 = pl.p_fmt != FormatId::bf16 && pl.p_fmt != FormatId::fp16;
    for (std::int64_t jj = 0; jj < n; ++jj)
      Pc[jj] = fp8 ? decode(pl.p_fmt, quantize_p(P[jj], pl.p_fmt)) : round_to(pl.p_fmt, P[jj]);
  } else {
    std::copy_n(P, n, Pc);
  }
}

// Sum of Pc_j * v_j over the tile's keys [b0, b1) into sum[0, Dv), from zero, keys in processing
// order (reversed for the floor twin): the block partial of MX P.V and the 16-key step of
// pv_acc=fp16. vt: V row of the tile's first key.
void block_sum(const Plan& pl, const float* Pc, const float* vt, std::int64_t Dv, std::int64_t b0, std::int64_t b1,
               float* sum) {
  std::fill_n(sum, Dv, 0.0f);
  for (std::int64_t s = 0; s < b1 - b0; ++s) {
    const std::int64_t jj = pl.reverse ? b1 - 1 - s : b0 + s;
    const float* vr = vt + jj * Dv;
    for (std::int64_t d = 0; d < Dv; ++d) sum[d] = std::fma(Pc[jj], vr[d], sum[d]);
  }
}

// Step 4, P.V: the tile's Pc times V added into the accumulator w.acc (contract 2: key by key;
// MX P or V: block sums times 2^(Ep + Ev); pv_acc=fp16: an FP16 tile partial).
void accumulate_pv(const Plan& pl, const Unit& u, std::int64_t slab_kv, std::int64_t j0, std::int64_t n,
                   RowScratch& w) {
  const std::int64_t Dv = u.v.C, Tk = u.k.T;
  const float* Pc = w.Pc.data();
  const float* vt = u.v.val.data() + (slab_kv * Tk + j0) * Dv;
  float* acc = w.acc.data();
  if (pl.pv_fp16) {
    // pv_acc=fp16 (plan() admits it only with element-cast P and V): steps of 16 keys summed in
    // FP32, each added into an FP16 tile partial (RNE), the partial added to the FP32 accumulator
    // at the tile's end. A model of an FP16-accumulating MMA, not a bitwise one.
    constexpr std::int64_t kStep = 16;
    float* part = w.part.data();
    float* cs = w.bs.data();
    std::fill_n(part, Dv, 0.0f);
    const std::int64_t nst = (n + kStep - 1) / kStep;
    for (std::int64_t si = 0; si < nst; ++si) {
      const std::int64_t st = pl.reverse ? nst - 1 - si : si;
      const std::int64_t b0 = st * kStep;
      block_sum(pl, Pc, vt, Dv, b0, std::min(n, b0 + kStep), cs);
      for (std::int64_t d = 0; d < Dv; ++d) part[d] = round_to(FormatId::fp16, part[d] + cs[d]);
    }
    for (std::int64_t d = 0; d < Dv; ++d) acc[d] = acc[d] + part[d];
  } else if (!pl.p_mx && u.v.kind != Kind::mx) {
    for (std::int64_t s = 0; s < n; ++s) {
      const std::int64_t jj = pl.reverse ? n - 1 - s : s;
      const float pj = Pc[jj];
      const float* vr = vt + jj * Dv;
      for (std::int64_t d = 0; d < Dv; ++d) acc[d] = std::fma(pj, vr[d], acc[d]);
    }
  } else {
    // Key blocks of `pb` keys aligned to the tile start (a multiple of pb: checked in plan).
    const std::int64_t pb = pl.pv_block;
    const std::int64_t vb = u.v.block;
    const std::int64_t nvb = (Tk + vb - 1) / vb;
    const std::int64_t nblk = (n + pb - 1) / pb;
    float* bs = w.bs.data();
    for (std::int64_t bi = 0; bi < nblk; ++bi) {
      const std::int64_t b = pl.reverse ? nblk - 1 - bi : bi;
      const std::int64_t b0 = b * pb;
      block_sum(pl, Pc, vt, Dv, b0, std::min(n, b0 + pb), bs);
      const int ep = pl.p_mx ? w.pexp[static_cast<std::size_t>(b)] : 0;
      const std::int64_t tb = (j0 + b0) / vb;
      for (std::int64_t d = 0; d < Dv; ++d) {
        const int ev = u.v.kind == Kind::mx ? u.v.mx_exp[static_cast<std::size_t>((slab_kv * nvb + tb) * Dv + d)] : 0;
        const float term = (ep == kNoExp || ev == kNoExp) ? kNaN : scale_block(bs[d], ep + ev);
        acc[d] = acc[d] + term;
      }
    }
  }
}

// Step 5, normalisation (contract 3): o_d from acc_d and l with V's channel scale vs, written
// unrounded and rounded to the out format.
void normalise(const Plan& pl, const float* acc, float l, const float* vs, std::int64_t Dv, float* out,
               float* out_unrounded, std::int64_t out_stride) {
  const Recipe& r = pl.r;
  float rcp = 0.0f;
  if (r.div == DivisionOp::ieee_rcp) rcp = 1.0f / l;
  else if (r.div == DivisionOp::rcp_sm90) rcp = rcp_sm90(l);
  for (std::int64_t d = 0; d < Dv; ++d) {
    const float a = acc[d];
    float o = 0.0f;
    if (r.div == DivisionOp::ieee_div) o = (a / l) * vs[d];
    else if (r.vscale == VScaleAt::rcp) o = a * (rcp * vs[d]);
    else o = (a * rcp) * vs[d];
    out_unrounded[d * out_stride] = o;
    // FP8/FP4 outputs saturate as the kernels' cvt.rn.satfinite does (and as P's cast does); wider
    // formats round IEEE-style (overflow to inf).
    out[d * out_stride] = !pl.out_round ? o
                          : pl.out_sat  ? round_to(pl.out_fmt, o, Rounding::rne, Overflow::sat_cuda)
                                        : round_to(pl.out_fmt, o);
  }
}

// Step 6, the LSE (contract 4) of a row that saw a key, with the K-smoothing correction.
float row_lse(const Plan& pl, const Unit& u, const RowAt& at, const RowState& st) {
  const std::int64_t D = u.q.C, Tq = u.q.T;
  float lse = static_cast<float>((static_cast<double>(st.m) + log2_portable(static_cast<double>(st.l))) * kLn2);
  if (!u.k.mean.empty() && !pl.smoothed_lse) {
    // Smoothing subtracted q.km * softmax_scale (natural units) from every logit of the row.
    const float* km = u.k.mean.data() + at.slab_kv * D;
    const float* q0 = u.qraw.data() + (at.slab_q * Tq + at.i) * D;
    double dot = 0;
    for (std::int64_t d = 0; d < D; ++d) dot += static_cast<double>(q0[d]) * static_cast<double>(km[d]);  // exact products
    lse = lse + static_cast<float>(dot * pl.sm_scale);
  }
  return lse;
}

// One output row: the KV tiles of the visible keys [0, hi) in processing order, each through
// steps 1-4, then steps 5 and 6 (contract 5 for a row that saw no key). Writes Dv outputs,
// returns (lse, rescales).
void emulate_row(const Plan& pl, const Unit& u, std::int64_t slab_q, std::int64_t slab_kv, std::int64_t i,
                 std::int64_t hi, float* out, float* out_unrounded, std::int64_t out_stride, float& lse, std::int32_t& rescales,
                 RowScratch& w) {
  const std::int64_t Dv = u.v.C, Bc = pl.r.tile_kv;
  const RowAt at{slab_q, slab_kv, i};
  prepare_scratch(pl, Dv, w);
  RowState st;
  const std::int64_t ntiles = hi > 0 ? (hi + Bc - 1) / Bc : 0;
  for (std::int64_t ti = 0; ti < ntiles; ++ti) {
    const std::int64_t tile = pl.reverse ? ntiles - 1 - ti : ti;
    const std::int64_t j0 = tile * Bc, j1 = std::min(hi, j0 + Bc), n = j1 - j0;
    score_tile(pl, u, at, j0, n, w);
    if (!update_max(pl, n, st, w)) continue;
    exponentiate(pl, n, st, w);
    accumulate_pv(pl, u, slab_kv, j0, n, w);
  }
  rescales = st.rescales;
  if (!st.started) {
    for (std::int64_t d = 0; d < Dv; ++d) out[d * out_stride] = out_unrounded[d * out_stride] = 0.0f;
    lse = -kInf;
    return;
  }
  normalise(pl, w.acc.data(), st.l, u.v.chan_scale.data() + slab_kv * Dv, Dv, out, out_unrounded, out_stride);
  lse = row_lse(pl, u, at, st);
}

void require(bool ok, const std::string& why) {
  if (!ok) throw Error("emulate: " + why);
}

Plan make_plan(const Problem& p, const Recipe& r, const EmulateOptions& opt) {
  Plan pl;
  pl.p = &p;
  pl.r = r;
  pl.sq = r.q;
  pl.sk = r.k;
  pl.sv = r.v;
  pl.reverse = opt.reverse_kv;
  pl.smoothed_lse = opt.smoothed_lse;
  pl.sm_scale = p.scale();
  require(r.exp2 != Exp2Policy::hw,
          "exp2=hw has no bitwise model (ex2.approx is not tabulated); use exp2=cr or exp2=fa4");
  pl.exp2 = r.exp2 == Exp2Policy::cr ? &exp2_cr : &exp2_fa4;
  require(r.tile_q >= 1 && r.tile_kv >= 1, "tile sizes must be >= 1");
  require(r.rescale != RescalePolicy::conditional || (std::isfinite(r.rescale_threshold) && r.rescale_threshold >= 0),
          "rescale_threshold must be finite and >= 0");
  require(!(r.vscale == VScaleAt::rcp && r.div == DivisionOp::ieee_div), "vscale=rcp needs div=ieee_rcp or rcp_sm90");

  const Kind kq = kind_of(pl.sq), kk = kind_of(pl.sk), kv = kind_of(pl.sv);
  auto floaty = [](Kind k) { return k == Kind::f32 || k == Kind::cast || k == Kind::fp8; };
  require((kq == Kind::int8 && kk == Kind::int8) || (kq == Kind::mx && kk == Kind::mx) || (floaty(kq) && floaty(kk)),
          "q '" + to_string(r.q) + "' and k '" + to_string(r.k) + "' cannot meet in one product (int8 pairs with int8, MX with MX, casts and fp8 "
          "with each other)");
  if (kq == Kind::int8)
    require(p.head_dim <= 1024, "int8 Q.K needs head_dim <= 1024 (so the int32 sum converts to float exactly), got " +
                                    std::to_string(p.head_dim));
  if (kq == Kind::mx) require(pl.sq.block == pl.sk.block, "MX q and k need the same block size");
  if (!is_f32(pl.sq)) require(pl.sq.smooth == Smoothing::none, "Q smoothing is not modelled (q '" + to_string(r.q) + "')");
  if (!is_f32(pl.sk)) require(pl.sk.prescale == Prescale::none, "K prescale is not modelled (k '" + to_string(r.k) + "')");
  const Rotation rq = is_f32(pl.sq) ? Rotation::none : pl.sq.rotate, rk = is_f32(pl.sk) ? Rotation::none : pl.sk.rotate;
  require(rq == rk, "q and k must use the same rotation (a rotation preserves Q.K only when both sides take it)");
  pl.c = (!is_f32(pl.sq) && pl.sq.prescale == Prescale::sm_log2e)
             ? 1.0f
             : static_cast<float>(static_cast<double>(static_cast<float>(p.scale())) * kLog2e);

  pl.off = p_offset(r.pscale);
  pl.p_round = elem_format(r.p, pl.p_fmt);
  if (r.p_mx) {
    pl.pmx = *r.p_mx;
    require(pl.pmx.family == Family::mx && pl.pmx.element == pl.p_fmt && pl.p_round,
            "p_mx '" + to_string(*r.p_mx) + "' must be an MX scheme of the P format " + std::string(name(r.p)));
    require(pl.pmx.smooth == Smoothing::none && pl.pmx.prescale == Prescale::none && pl.pmx.rotate == Rotation::none,
            "p_mx '" + to_string(*r.p_mx) + "': P has no smoothing, prescale or rotation");
    pl.p_mx = true;
    pl.p_round = false;
    pl.pv_block = pl.pmx.block;
  } else {
    require(r.p != FormatId::fp4_e2m1fn, "p=fp4_e2m1fn needs p_mx (the MX scheme of P along keys)");
  }
  if (kv == Kind::mx) {
    if (pl.p_mx) require(pl.sv.block == pl.pmx.block, "MX P and V need the same block size");
    pl.pv_block = pl.sv.block;
  }
  if (pl.p_mx || kv == Kind::mx)
    require(r.tile_kv % pl.pv_block == 0, "tile_kv " + std::to_string(r.tile_kv) +
                                              " must be a multiple of the P.V block " + std::to_string(pl.pv_block));
  pl.pv_fp16 = r.pv_acc == FormatId::fp16;
  if (pl.pv_fp16) require(!pl.p_mx && kv != Kind::mx, "pv_acc=fp16 is modelled for element-cast P and V only (not MX)");
  pl.out_round = elem_format(r.out, pl.out_fmt);
  pl.out_sat = pl.out_round && pl.out_fmt != FormatId::bf16 && pl.out_fmt != FormatId::fp16;
  require(opt.tile_kv_divisor >= 1, "tile_kv_divisor must be >= 1");
  if (const int t = r.tile_kv / opt.tile_kv_divisor;
      opt.tile_kv_divisor > 1 && t >= 1 && (!(pl.p_mx || kv == Kind::mx) || t % pl.pv_block == 0))
    pl.r.tile_kv = t;
  return pl;
}

void check_inputs(const Problem& p, const Tensor& q, const Tensor& k, const Tensor& v) {
  const Status st = p.validate();
  if (!st) throw Error("emulate: invalid problem " + to_string(p) + ": " + st.reason());
  for (const auto& [t, n] : {std::pair<const Tensor*, const char*>{&q, "q"}, {&k, "k"}, {&v, "v"}})
    if (t->dtype() != DType::f32)
      throw Error(std::string("emulate: ") + n + " has dtype " + std::string(dtype_name(t->dtype())) + ", need f32");
  check_attention_inputs(p, q, k, v);
}

// The operands are independent of each other (each quantizer reads its own input only), so they
// are prepared concurrently; an error is rethrown in the order q, k, v, as a serial run gives it.
Unit make_unit(const Plan& pl, const Tensor& q, const Tensor& k, const Tensor& v) {
  Unit u;
  std::exception_ptr err[4];
  const bool smooth = !is_f32(pl.sk) && pl.sk.smooth != Smoothing::none;
  const auto guard = [&](int i, auto&& f) {
    try {
      f();
    } catch (...) {
      err[i] = std::current_exception();
    }
  };
#pragma omp parallel sections
  {
#pragma omp section
    guard(0, [&] { u.q = prepare_qk(q, pl.sq, pl.sm_scale, false); });
#pragma omp section
    guard(1, [&] { u.k = prepare_qk(k, pl.sk, pl.sm_scale, true); });
#pragma omp section
    guard(2, [&] { u.v = prepare_v(v, pl.sv); });
#pragma omp section
    guard(3, [&] {
      if (smooth) u.qraw = prepare_qk(q, default_scheme("f32"), 0, false).val;
    });
  }
  for (const auto& e : err)
    if (e) std::rethrow_exception(e);
  return u;
}

template <class T>
std::int64_t vec_bytes(const std::vector<T>& x) {
  return static_cast<std::int64_t>(x.size() * sizeof(T));
}

std::int64_t operand_bytes(const Operand& o) {
  return vec_bytes(o.val) + vec_bytes(o.ival) + vec_bytes(o.tok_scale) + vec_bytes(o.chan_scale) + vec_bytes(o.mx_exp) +
         vec_bytes(o.mean);
}

// What prepare_qk / prepare_v / make_unit allocate for a unit of `slabs` heads, T tokens (Q/K)
// or Tk tokens (V): prepared_bytes' arithmetic, kept beside operand_bytes so that the two agree.
std::int64_t unit_bytes(const Plan& pl, std::int64_t hq, std::int64_t hkv, std::int64_t Tq, std::int64_t Tk,
                        std::int64_t D, std::int64_t Dv) {
  const auto qk = [](const Scheme& s, std::int64_t slabs, std::int64_t T, std::int64_t C) {
    const Kind kd = kind_of(s);
    std::int64_t b = slabs * T * C * (kd == Kind::int8 ? 1 : 4) + slabs * T * 4;  // values or codes, token scales
    if (kd == Kind::mx) b += slabs * T * ((C + s.block - 1) / s.block) * 2;
    if (!is_f32(s) && s.smooth != Smoothing::none) b += slabs * C * 4;
    return b;
  };
  std::int64_t b = qk(pl.sq, hq, Tq, D) + qk(pl.sk, hkv, Tk, D);
  b += hkv * Tk * Dv * 4 + hkv * Dv * 4;  // V values, channel scales
  if (kind_of(pl.sv) == Kind::mx) b += hkv * ((Tk + pl.sv.block - 1) / pl.sv.block) * Dv * 2;
  if (!is_f32(pl.sk) && pl.sk.smooth != Smoothing::none) b += hq * Tq * D * 4;  // qraw
  return b;
}

// One work unit of rows [i0, i1) of (b, h): where row i0's outputs go (out index of its first
// element, elements between consecutive rows' outputs) and its LSE (consecutive rows adjacent).
struct Work {
  std::int64_t b, h, i0, i1, out0, out_step, lse0;
};

}  // namespace

struct Prepared::Impl {
  Problem p;
  Recipe r;
  std::vector<Unit> units;  // the whole batch, or one per sequence of a ragged batch
};

Prepared::Prepared(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Prepared::Prepared(Prepared&&) noexcept = default;
Prepared& Prepared::operator=(Prepared&&) noexcept = default;
Prepared::~Prepared() = default;
const Problem& Prepared::problem() const { return impl_->p; }
const Recipe& Prepared::recipe() const { return impl_->r; }
std::int64_t Prepared::bytes() const {
  std::int64_t b = 0;
  for (const Unit& u : impl_->units)
    b += operand_bytes(u.q) + operand_bytes(u.k) + operand_bytes(u.v) + vec_bytes(u.qraw);
  return b;
}

Prepared prepare(const Problem& p, const Recipe& r, const Tensor& q, const Tensor& k, const Tensor& v) {
  check_inputs(p, q, k, v);
  auto impl = std::make_unique<Prepared::Impl>();
  impl->p = p;
  impl->r = r;
  const Plan pl = make_plan(impl->p, r, {});                  // refuses an unmodelled recipe before quantizing
  if (r.div == DivisionOp::rcp_sm90) (void)rcp_sm90_table();  // inflate (and verify) before any threads start
  if (p.ragged()) {
    for (std::int64_t b = 0; b < p.batch; ++b)
      impl->units.push_back(make_unit(pl, token_slice(q, p.cu_seqlens_q[static_cast<std::size_t>(b)], p.len_q(b)),
                                      token_slice(k, p.cu_seqlens_kv[static_cast<std::size_t>(b)], p.len_kv(b)),
                                      token_slice(v, p.cu_seqlens_kv[static_cast<std::size_t>(b)], p.len_kv(b))));
  } else {
    impl->units.push_back(make_unit(pl, q, k, v));
  }
  return Prepared(std::move(impl));
}

namespace {

// Every row of `work` through emulate_row into res (allocated by the caller), rows in parallel:
// each row's arithmetic is its own, so neither the thread count nor the work units matter.
void run_rows(const Prepared::Impl& pr, const Plan& pl, const std::vector<Work>& work, EmulatorOutput& res) {
  const Problem& p = pr.p;
  const bool ragged = p.ragged();
  const std::int64_t H = p.heads_q, G = p.group();
  float* outp = res.out.numel() > 0 ? res.out.data<float>() : nullptr;
  float* outu = res.out_unrounded.numel() > 0 ? res.out_unrounded.data<float>() : nullptr;
  float* lsep = res.lse.numel() > 0 ? res.lse.data<float>() : nullptr;
  auto* rsp = res.rescales.numel() > 0 ? res.rescales.data<std::int32_t>() : nullptr;
  const auto nwork = static_cast<std::int64_t>(work.size());
#pragma omp parallel
  {
    RowScratch scratch;
#pragma omp for schedule(dynamic, 1)
    for (std::int64_t wi = 0; wi < nwork; ++wi) {
      const Work& wk = work[static_cast<std::size_t>(wi)];
      const Unit& u = pr.units[ragged ? static_cast<std::size_t>(wk.b) : 0];
      const std::int64_t slab_q = (ragged ? 0 : wk.b * H) + wk.h;
      const std::int64_t slab_kv = (ragged ? 0 : wk.b * p.heads_kv) + wk.h / G;
      for (std::int64_t i = wk.i0; i < wk.i1; ++i) {
        const std::int64_t hi = std::clamp<std::int64_t>(p.visible_keys(wk.b, i), 0, p.len_kv(wk.b));
        const std::int64_t oi = wk.out0 + (i - wk.i0) * wk.out_step, li = wk.lse0 + (i - wk.i0);
        emulate_row(pl, u, slab_q, slab_kv, i, hi, outp + oi, outu + oi, 1, lsep[li], rsp[li], scratch);
      }
    }
  }
}

}  // namespace

EmulatorOutput emulate(const Problem& p, const Recipe& r, const Tensor& q, const Tensor& k, const Tensor& v,
                       const EmulateOptions& opt) {
  const Prepared prepared = prepare(p, r, q, k, v);
  const Prepared::Impl& pr = *prepared.impl_;
  const Plan pl = make_plan(pr.p, r, opt);

  const std::int64_t B = p.batch, H = p.heads_q, Dv = p.head_dim_v;
  const bool ragged = p.ragged();
  const std::int64_t rows = ragged ? p.cu_seqlens_q.back() : p.seqlen_q;
  EmulatorOutput res;
  res.out = ragged ? Tensor(DType::f32, {1, rows, H, Dv}) : Tensor(DType::f32, {B, rows, H, Dv});
  res.out_unrounded = Tensor(DType::f32, res.out.shape());
  res.lse = ragged ? Tensor(DType::f32, {1, H, rows}) : Tensor(DType::f32, {B, H, rows});
  res.rescales = Tensor(DType::i32, res.lse.shape());

  // Work units of tile_q rows of one (b, h), written in place in [B,S,H,Dv] / [B,H,S].
  std::vector<Work> work;
  for (std::int64_t b = 0; b < B; ++b) {
    const std::int64_t row0 = ragged ? p.cu_seqlens_q[static_cast<std::size_t>(b)] : 0, bo = ragged ? 0 : b;
    for (std::int64_t h = 0; h < H; ++h)
      for (std::int64_t i0 = 0; i0 < p.len_q(b); i0 += r.tile_q)
        work.push_back({b, h, i0, std::min(p.len_q(b), i0 + r.tile_q), ((bo * rows + row0 + i0) * H + h) * Dv, H * Dv,
                        (bo * H + h) * rows + row0 + i0});
  }
  run_rows(pr, pl, work, res);
  return res;
}

EmulatorOutput emulate_rows(const Prepared& prepared, const std::vector<RowBlock>& blocks, const EmulateOptions& opt) {
  const Prepared::Impl& pr = *prepared.impl_;
  const Problem& p = pr.p;
  const Plan pl = make_plan(p, pr.r, opt);
  // Work units of at most kRows rows: a block of 64 rows alone would keep one core busy.
  constexpr std::int64_t kRows = 8;
  const std::int64_t Dv = p.head_dim_v;
  std::vector<Work> work;
  std::int64_t n = 0;
  for (const RowBlock& bl : blocks) {
    if (bl.b < 0 || bl.b >= p.batch || bl.h < 0 || bl.h >= p.heads_q || bl.r0 < 0 || bl.r0 > bl.r1 ||
        bl.r1 > p.len_q(bl.b))
      throw Error("emulate_rows: block (b " + std::to_string(bl.b) + ", h " + std::to_string(bl.h) + ", rows " +
                  std::to_string(bl.r0) + "-" + std::to_string(bl.r1) + ") is outside the problem " + to_string(p));
    for (std::int64_t i0 = bl.r0; i0 < bl.r1; i0 += kRows) {
      const std::int64_t at = n + (i0 - bl.r0);
      work.push_back({bl.b, bl.h, i0, std::min(bl.r1, i0 + kRows), at * Dv, Dv, at});
    }
    n += bl.r1 - bl.r0;
  }
  EmulatorOutput res;
  res.out = Tensor(DType::f32, {1, n, 1, Dv});
  res.out_unrounded = Tensor(DType::f32, res.out.shape());
  res.lse = Tensor(DType::f32, {1, 1, n});
  res.rescales = Tensor(DType::i32, res.lse.shape());
  run_rows(pr, pl, work, res);
  return res;
}

std::int64_t prepared_bytes(const Problem& p, const Recipe& r) {
  const Plan pl = make_plan(p, r, {});
  const std::int64_t H = p.heads_q, Hkv = p.heads_kv, D = p.head_dim, Dv = p.head_dim_v;
  if (!p.ragged()) return unit_bytes(pl, p.batch * H, p.batch * Hkv, p.seqlen_q, p.seqlen_kv, D, Dv);
  std::int64_t b = 0;
  for (std::int64_t i = 0; i < p.batch; ++i) b += unit_bytes(pl, H, Hkv, p.len_q(i), p.len_kv(i), D, Dv);
  return b;
}

std::string emulate_refusal(const Problem& p, const Recipe& r) {
  try {
    if (const Status st = p.validate(); !st) return "emulate: invalid problem " + to_string(p) + ": " + st.reason();
    (void)make_plan(p, r, {});
    // One token of one head through the quantizers (the V scheme checks and their own refusals).
    Problem one = p;
    one.batch = one.heads_q = one.heads_kv = one.seqlen_q = one.seqlen_kv = 1;
    one.cu_seqlens_q.clear();
    one.cu_seqlens_kv.clear();
    one.mask = Mask::none;
    one.layout = Layout::bshd;
    one.pad = 0;
    one.softmax_scale = p.scale();
    Tensor q(DType::f32, {1, 1, 1, p.head_dim}), k(DType::f32, {1, 1, 1, p.head_dim}),
        v(DType::f32, {1, 1, 1, p.head_dim_v});
    for (Tensor* t : {&q, &k, &v}) std::fill_n(t->data<float>(), t->numel(), 0.5f);
    (void)prepare(one, r, q, k, v);
  } catch (const Error& e) {
    return e.what();
  }
  return {};
}

}  // namespace attest::ref
