#pragma once
/// The per-row arithmetic of gpu.emu.<recipe> (the emulator's emulate_row, step for step), shared
/// by the device kernel (attn_fwd_emu.hip) and a host simulation in gpu_emu_math_tests, which
/// runs these very functions on the CPU against the emulator in every build (no device needed).
/// Device compilers see __device__ functions; the host sees plain inline functions.
#include <cmath>
#include <cstdint>

#include "attest/kernels/gpu/attn_fwd_emu.hpp"
#include "attest/kernels/gpu/emu_math.hpp"

#if defined(__CUDACC__) || defined(__HIP__)
#define ATTEST_EMU_DEV __device__
#else
#define ATTEST_EMU_DEV
#endif

namespace attest::gpu::emu_impl {

using emu::finf;
using emu::qnan;

#if !defined(__CUDACC__) && !defined(__HIP__)
/// Host simulation only: rcp.approx.ftz.f32 of sm_90 from the measured table (the test links
/// kernels/cpu's model).
float rcp_sm90_host(float x);
#endif

using i64 = std::int64_t;

ATTEST_EMU_DEV inline float div_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fdiv_rn(a, b);
#else
  return a / b;  // HIP and host: fp32 division is correctly rounded
#endif
}

ATTEST_EMU_DEV inline float rcp_rn(float x) {
#if defined(__CUDA_ARCH__)
  return __frcp_rn(x);
#else
  return 1.0f / x;
#endif
}

// div=rcp_sm90: on sm_90 the hardware instruction is exactly what the emulator models from its
// measured table. Other targets never get here (emu_has_rcp_sm90() is false there and the
// registry entry refuses the recipe).
ATTEST_EMU_DEV inline float rcp_sm90(float x) {
#if defined(__CUDA_ARCH__)
  float r;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));
  return r;
#elif defined(__HIP_DEVICE_COMPILE__)
  return qnan();
#elif defined(__CUDACC__) || defined(__HIP__)
  return qnan();  // host pass of a device compiler: never executed
#else
  return rcp_sm90_host(x);  // host simulation (gpu_emu_math_tests): the measured-table model
#endif
}

ATTEST_EMU_DEV inline float exp2_of(const EmuParams& p, float x) {
  return p.exp2_fa4 ? emu::exp2_fa4(x) : emu::exp2_cr(x, p.exp2c, p.undecided);
}

// The logit x_j of query row `qrow` and key row `krow` (raw sum, scales factored out).
ATTEST_EMU_DEV inline float logit(const EmuParams& p, i64 qrow, i64 krow) {
  const i64 D = p.head_dim;
  if (p.logits == EmuLogits::int8) {
    const std::int8_t* qi = p.qi + qrow * D;
    const std::int8_t* ki = p.ki + krow * D;
    std::int32_t s = 0;  // exact: |s| <= D * 128^2 <= 2^24 (D <= 1024, checked)
    for (i64 d = 0; d < D; ++d) s += static_cast<std::int32_t>(qi[d]) * static_cast<std::int32_t>(ki[d]);
    return static_cast<float>(s);
  }
  const float* q = p.qv + qrow * D;
  const float* k = p.kv + krow * D;
  if (p.logits == EmuLogits::mx) {
    const i64 nb = (D + p.qk_block - 1) / p.qk_block;
    float x = 0.0f;
    for (i64 blk = 0; blk < nb; ++blk) {
      float part = 0.0f;
      const i64 d1 = (blk + 1) * p.qk_block < D ? (blk + 1) * p.qk_block : D;
      for (i64 d = blk * p.qk_block; d < d1; ++d) part = std::fma(q[d], k[d], part);
      const int eq = p.qexp[qrow * nb + blk], ek = p.kexp[krow * nb + blk];
      const float term = (eq == kEmuNanExp || ek == kEmuNanExp) ? qnan() : emu::scale_block(part, eq + ek);
      x = x + term;
    }
    return x;
  }
  float x = 0.0f;
  for (i64 d = 0; d < D; ++d) x = std::fma(q[d], k[d], x);
  return x;
}

ATTEST_EMU_DEV inline float round_p(const EmuParams& p, float v) {
  return p.p == EmuP::f32 ? v : emu::round_to(p.p_fmt, v, p.p_tie, p.p_sat);
}

// Accumulator of one row: registers (DV > 0, loops fully unrolled) or the thread's scratch.
template <int DV>
struct Acc {
  float r[DV > 0 ? DV : 1];
  float* g;
  i64 stride;
  ATTEST_EMU_DEV float& operator()(i64 d) {
    if constexpr (DV > 0) return r[d];
    else return g[d * stride];
  }
};

// for d in [0, Dv): fully unrolled for a compile-time DV (register accumulators), else a loop.
template <int DV, class F>
ATTEST_EMU_DEV inline void for_d(i64 Dv, F&& f) {
  if constexpr (DV > 0) {
#if defined(__CUDACC__) || defined(__HIP__)
#pragma unroll
#endif
    for (int d = 0; d < DV; ++d) f(d);
  } else {
    for (i64 d = 0; d < Dv; ++d) f(d);
  }
}

// One query row: emulate_row of the emulator, step for step.
template <int DV>
ATTEST_EMU_DEV void emu_row(const EmuParams& p, const EmuBatch& bt, i64 h, i64 i, float* scr, i64 ns) {
  const i64 D = p.head_dim, Dv = DV > 0 ? DV : p.head_dim_v, Bc = p.tile_kv, H = p.heads_q;
  const i64 g = h / p.group;
  i64 hi = bt.len_kv;
  if (p.mask == 1) hi = i + 1;
  else if (p.mask == 2) hi = i + 1 + bt.len_kv - bt.len_q;
  hi = hi < bt.len_kv ? hi : bt.len_kv;
  hi = hi > 0 ? hi : 0;
  const i64 qrow = bt.q_row0 + h * bt.tq + i;
  const i64 krow0 = bt.k_row0 + g * bt.tk;
  const i64 kvslab = bt.kv_slab0 + g;
  const float qs = p.qts[qrow];
  float* X = scr;                 // slots [0, Bc): logits
  float* SC = scr + Bc * ns;      // [Bc, 2Bc): scales
  Acc<DV> acc;
  acc.g = scr + 3 * Bc * ns;
  acc.stride = ns;
  for_d<DV>(Dv, [&](i64 d) { acc(d) = 0.0f; });
  const bool blocked = DV == 0 && (p.p == EmuP::mx || p.vexp != nullptr);  // DV > 0: never (register_dv)

  float m = -finf(), l = 0.0f;
  bool started = false;
  const bool rev = p.reverse_kv;
  const i64 ntiles = hi > 0 ? (hi + Bc - 1) / Bc : 0;
  for (i64 ti = 0; ti < ntiles; ++ti) {
    const i64 t = rev ? ntiles - 1 - ti : ti;  // reverse_kv: tiles descending (emulate_row)
    const i64 j0 = t * Bc, n = (hi < j0 + Bc ? hi : j0 + Bc) - j0;
    // 1. logits, scales, tile max (NaN-propagating; keys ascending in both directions, as the
    // emulator's update_max).
    float m_tile = -finf();
    for (i64 jj = 0; jj < n; ++jj) {
      const i64 krow = krow0 + j0 + jj;
      const float x = logit(p, qrow, krow);
      const float sc = p.c * (qs * p.kts[krow]);
      X[jj * ns] = x;
      SC[jj * ns] = sc;
      const float y = std::fma(x, sc, -p.off);
      if (y != y || m_tile != m_tile) m_tile = qnan();
      else if (y > m_tile) m_tile = y;
    }
    // 2. running max (rescale policy).
    float m_new = m;
    if (m_tile != m_tile || m != m) m_new = qnan();
    else if (!(p.rescale_conditional && m > -finf() && m - m_tile >= p.neg_threshold))
      m_new = m < m_tile ? m_tile : m;  // std::max(m, m_tile)
    if (m_new == -finf()) continue;
    if (m_new != m) {
      const float alpha = exp2_of(p, m - m_new);
      l = l * alpha;
      for_d<DV>(Dv, [&](i64 d) { acc(d) = acc(d) * alpha; });
      m = m_new;
    }
    started = true;
    // 3./4. P, row sum in key order, P rounded, P.V in key order (reverse_kv: keys descending).
    // Without block scales the sum and the accumulators are independent sequences, so one pass
    // gives the emulator's bits.
    if (!blocked) {
      const i64 step = rev ? -1 : 1;
      for (i64 jj = rev ? n - 1 : 0; jj >= 0 && jj < n; jj += step) {
        const float pj = exp2_of(p, std::fma(X[jj * ns], SC[jj * ns], -m));
        l = l + pj;
        const float pc = round_p(p, pj);
        const float* vr = p.vv + (krow0 + j0 + jj) * Dv;
        for_d<DV>(Dv, [&](i64 d) { acc(d) = std::fma(pc, vr[d], acc(d)); });
      }
      continue;
    }
    if constexpr (DV == 0) {  // block-scaled P.V (MX P or MX V): generic path only
      float* P = scr + 2 * Bc * ns;  // slots [2Bc, 3Bc): FP32 P
      Acc<DV> bs;                    // slots [3Bc + Dv, 3Bc + 2Dv): block sums
      bs.g = scr + (3 * Bc + Dv) * ns;
      bs.stride = ns;
      for (i64 jj = 0; jj < n; ++jj) P[jj * ns] = exp2_of(p, std::fma(X[jj * ns], SC[jj * ns], -m));
      for (i64 s = 0; s < n; ++s) l = l + P[(rev ? n - 1 - s : s) * ns];  // emulator's exponentiate
      // Blocks of pb keys aligned to the tile start; reverse_kv: blocks descending, keys
      // descending within a block (the emulator's accumulate_pv / block_sum). A block's MX
      // exponent depends on its keys only, not on the order.
      const i64 pb = p.pv_block;
      const i64 nvb = (bt.tk + p.vblock - 1) / p.vblock;
      const i64 nblk = (n + pb - 1) / pb;
      for (i64 bi = 0; bi < nblk; ++bi) {
        const i64 b0 = (rev ? nblk - 1 - bi : bi) * pb;
        const i64 b1 = n < b0 + pb ? n : b0 + pb;
        int ep = 0;
        float mult = 1.0f;
        if (p.p == EmuP::mx) {
          float amax = 0.0f;
          for (i64 jj = b0; jj < b1; ++jj) {
            const float a = std::fabs(P[jj * ns]);
            if (a != a || a > amax) amax = a;
          }
          const std::uint32_t code = emu::e8m0_code(amax, p.p_e8m0, p.p_emax);
          mult = emu::e8m0_multiplier(code);
          ep = code == 0xFF ? kEmuNanExp : static_cast<int>(code) - 127;
        }
        for (i64 d = 0; d < Dv; ++d) bs(d) = 0.0f;
        for (i64 s = 0; s < b1 - b0; ++s) {
          const i64 jj = rev ? b1 - 1 - s : b0 + s;
          const float pv = P[jj * ns];
          const float pc = p.p == EmuP::mx ? emu::round_to(p.p_fmt, pv * mult, p.p_tie, p.p_sat) : round_p(p, pv);
          const float* vr = p.vv + (krow0 + j0 + jj) * Dv;
          for (i64 d = 0; d < Dv; ++d) bs(d) = std::fma(pc, vr[d], bs(d));
        }
        const i64 tb = (j0 + b0) / p.vblock;
        for (i64 d = 0; d < Dv; ++d) {
          const int ev = p.vexp != nullptr ? p.vexp[bt.vexp0 + (g * nvb + tb) * Dv + d] : 0;
          const float term = (ep == kEmuNanExp || ev == kEmuNanExp) ? qnan() : emu::scale_block(bs(d), ep + ev);
          acc(d) = acc(d) + term;
        }
      }
    }
  }

  // 5. normalisation, output rounding, LSE.
  const i64 orow = bt.out_row0 + i;
  float* o = p.out + (orow * H + h) * Dv;
  float lse = -finf();
  if (!started) {
    for (i64 d = 0; d < Dv; ++d) o[d] = 0.0f;
  } else {
    const float r = p.div == EmuDiv::ieee_rcp ? rcp_rn(l) : p.div == EmuDiv::rcp_sm90 ? rcp_sm90(l) : 0.0f;
    const float* vs = p.vcs + kvslab * Dv;
    for_d<DV>(Dv, [&](i64 d) {
      const float a = acc(d);
      float od = 0.0f;
      if (p.div == EmuDiv::ieee_div) od = div_rn(a, l) * vs[d];
      else if (p.vscale_rcp) od = a * (r * vs[d]);
      else od = (a * r) * vs[d];
      o[d] = p.out_round ? emu::round_to(p.out_fmt, od, emu::Rounding::rne, p.out_sat) : od;
    });
    lse = emu::lse_of(m, l);
    if (p.km != nullptr) {
      const float* km = p.km + kvslab * D;
      const float* q0 = p.qraw + qrow * D;
      double dot = 0;
      for (i64 d = 0; d < D; ++d) dot = dot + static_cast<double>(q0[d]) * static_cast<double>(km[d]);
      lse = lse + static_cast<float>(dot * p.sm_scale);
    }
  }
  p.lse[h * p.total_rows + orow] = lse;
}

}  // namespace attest::gpu::emu_impl
