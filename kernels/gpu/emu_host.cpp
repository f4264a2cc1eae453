// Host side of gpu.emu.<recipe>: stage 0 (quantization with kernels/cpu's quantizers, which
// cpu.tiled proves bitwise equal to the emulator's) and the operand arrays and parameters of
// one launch. Pure host code: the registry entry uploads the result (emu_kernel.cpp), and
// gpu_emu_math_tests runs the device's per-row code on it on the CPU (emu_row.hpp).
#include "attest/kernels/gpu/emu_host.hpp"

#include <algorithm>
#include <cmath>
#include <exception>
#include <string>
#include <vector>

#include "cpu/attn_fwd_tiled.hpp"
#include "cpu/cpu_io.hpp"
#include "cpu/cpu_quantize.hpp"

namespace attest::gpu {
namespace {

namespace cpu = attest::kernels::cpu;
using std::int64_t;

// The P / O rounding of an element format, as the CPU kernels' round_elem (bf16/fp16 IEEE,
// fp8/fp4 saturating like cvt.rn.satfinite). Returns false for f32 (no rounding).
bool elem_rounding(FormatId f, FormatSpec& fmt, emu::Overflow& sat) {
  sat = emu::Overflow::sat_cuda;
  if (f == FormatId::f32) return false;
  fmt = format_spec(f);
  if (f == FormatId::bf16 || f == FormatId::fp16) sat = emu::Overflow::ieee;
  return true;
}

// Unquantized floats of batch elements [b0, b1) as slab-major [slab][t][c] (slab = (b - b0) * heads + h).
std::vector<float> gather(const cpu::TokenView<const float>& in, int64_t b0, int64_t b1, int64_t heads, int64_t C,
                          int64_t T, const Problem& p, bool kv) {
  std::vector<float> x(static_cast<std::size_t>((b1 - b0) * heads * T * C), 0.0f);
  for (int64_t b = b0; b < b1; ++b)
    for (int64_t h = 0; h < heads; ++h) {
      const int64_t n = kv ? p.len_kv(b) : p.len_q(b);
      for (int64_t t = 0; t < n; ++t) {
        const float* src = in.row(b, t, h);
        float* dst = x.data() + (((b - b0) * heads + h) * T + t) * C;
        for (int64_t c = 0; c < C; ++c) dst[c] = src[c * in.sd];
      }
    }
  return x;
}

template <class T>
void append(std::vector<T>& dst, const std::vector<T>& src) {
  dst.insert(dst.end(), src.begin(), src.end());
}

}  // namespace

std::string emu_unsupported(const Problem& p, const Recipe& r) {
  const cpu::Plan plan = cpu::make_plan(r);
  if (auto why = cpu::plan_unsupported(plan); !why.empty()) return why;
  if (plan.q.family == Scheme::Family::int8 && p.head_dim > 1024) return "INT8 logits need head_dim <= 1024 (exact int32 sums)";
  for (const Scheme* s : {&plan.q, &plan.k}) {
    if ((s->rotate == Scheme::Rotation::h128 || s->rotate == Scheme::Rotation::h128_bf16) && p.head_dim != 128)
      return "the 128-channel Hadamard rotation needs head_dim 128";
    if (s->rotate == Scheme::Rotation::h32_bf16 && p.head_dim % 32 != 0) return "rotate=h32_bf16 needs head_dim % 32 == 0";
  }
  if (r.p_mx) {
    const Scheme& pm = *r.p_mx;
    if (cpu::is_mx_int8(pm)) return "MXINT8 P is not implemented on the device";
    using E8 = Scheme::E8M0Rule;
    if (pm.e8m0 != E8::floor && pm.e8m0 != E8::ceil && pm.e8m0 != E8::aiter_hip_fp4)
      return "MX P scale rule '" + std::string(name(pm.e8m0)) + "' is not implemented on the device (floor, ceil, aiter_hip_fp4)";
  }
  return {};
}

std::int64_t emu_tile_kv(const Recipe& r, int divisor) {
  // make_plan in reference/src/emulate.cpp: pv_block is V's MX block, else P's (equal if both).
  const bool mxv = r.v.family == Scheme::Family::mx, blocked = mxv || r.p_mx.has_value();
  const int64_t pv_block = mxv ? r.v.block : r.p_mx ? r.p_mx->block : 32;
  const int64_t t = divisor >= 1 ? r.tile_kv / divisor : 0;
  if (divisor > 1 && t >= 1 && (!blocked || t % pv_block == 0)) return t;
  return r.tile_kv;
}

std::int64_t twin_tile_kv(const Recipe& r) { return emu_tile_kv(r, 2); }

EmuHost emu_prepare_host(const Problem& p, const Recipe& r, const Tensor& tq, const Tensor& tk, const Tensor& tv) {
  if (auto why = emu_unsupported(p, r); !why.empty()) throw Error("gpu.emu: " + why);
  const cpu::Plan plan = cpu::make_plan(r);
  const int64_t H = p.heads_q, Hkv = p.heads_kv, D = p.head_dim, Dv = p.head_dim_v;
  const double scale = p.scale();
  const bool rg = p.ragged();
  const auto qv = cpu::token_view<const float>(tq, p, false);
  const auto kv = cpu::token_view<const float>(tk, p, true);
  const auto vv = cpu::token_view<const float>(tv, p, true);

  // Stage 0 per quantization unit (dense: the batch; ragged: each sequence), concatenated.
  EmuHost hs;
  auto &qval = hs.qval, &kval = hs.kval, &vval = hs.vval, &qts = hs.qts, &kts = hs.kts, &vcs = hs.vcs, &km = hs.km,
       &qraw = hs.qraw;
  auto &qi = hs.qi, &ki = hs.ki;
  auto &qexp = hs.qexp, &kexp = hs.kexp, &vexp = hs.vexp;
  std::vector<EmuBatch>& batches = hs.batches;
  batches.assign(static_cast<std::size_t>(p.batch), {});
  bool int8 = false, mxqk = false, mxv = false, smooth = false;
  int64_t qk_block = 32, vblock = 32;
  const int64_t units = rg ? p.batch : 1;
  for (int64_t u = 0; u < units; ++u) {
    const int64_t b0 = rg ? u : 0, b1 = rg ? u + 1 : p.batch;
    const int64_t S = rg ? p.len_q(u) : p.seqlen_q, T = rg ? p.len_kv(u) : p.seqlen_kv;
    std::vector<float> raw;
    cpu::QOperand q, k, v;
    // Q, K and V are independent: quantized side by side (the engine's device emulator runs this
    // stage on whole video-length problems; one thread took ~30 ns per element). An exception
    // leaves its section through the lambda's catch and is rethrown after the join.
    std::exception_ptr err[3];
    const auto guarded = [&](int i, auto&& f) {
      try {
        f();
      } catch (...) {
        err[i] = std::current_exception();
      }
    };
#pragma omp parallel sections num_threads(3)
    {
#pragma omp section
      guarded(0, [&] {
        raw = gather(qv, b0, b1, H, D, S, p, false);
        q = cpu::quantize_operand(raw, (b1 - b0) * H, S, D, plan.q, false, scale);
      });
#pragma omp section
      guarded(1, [&] {
        k = cpu::quantize_operand(gather(kv, b0, b1, Hkv, D, T, p, true), (b1 - b0) * Hkv, T, D, plan.k, false, scale);
      });
#pragma omp section
      guarded(2, [&] {
        v = cpu::quantize_operand(gather(vv, b0, b1, Hkv, Dv, T, p, true), (b1 - b0) * Hkv, T, Dv, plan.v, true, scale);
      });
    }
    for (const auto& e : err)
      if (e) std::rethrow_exception(e);
    int8 = q.ival, mxqk = q.mx, mxv = v.mx, smooth = !k.km.empty();
    qk_block = q.block, vblock = v.block;
    const int64_t q_row_base = static_cast<int64_t>(qts.size()), k_row_base = static_cast<int64_t>(kts.size());
    const int64_t slab_base = static_cast<int64_t>(vcs.size()) / Dv, vexp_base = static_cast<int64_t>(vexp.size());
    const int64_t nbv = (T + vblock - 1) / vblock;
    for (int64_t b = b0; b < b1; ++b) {
      EmuBatch& e = batches[static_cast<std::size_t>(b)];
      e.len_q = p.len_q(b), e.len_kv = p.len_kv(b), e.tq = S, e.tk = T;
      e.q_row0 = q_row_base + (b - b0) * H * S;
      e.k_row0 = k_row_base + (b - b0) * Hkv * T;
      e.kv_slab0 = slab_base + (b - b0) * Hkv;
      e.vexp0 = vexp_base + (b - b0) * Hkv * nbv * Dv;
      e.out_row0 = rg ? p.cu_seqlens_q[static_cast<std::size_t>(b)] : b * p.seqlen_q;
    }
    append(qval, q.val), append(kval, k.val), append(vval, v.val);
    append(qts, q.ts), append(kts, k.ts), append(vcs, v.cs);
    if (int8) {
      for (float x : q.val) qi.push_back(static_cast<std::int8_t>(x));  // integers in [-128, 127]
      for (float x : k.val) ki.push_back(static_cast<std::int8_t>(x));
    }
    if (mxqk) append(qexp, q.bexp), append(kexp, k.bexp);
    if (mxv) append(vexp, v.bexp);
    if (smooth) append(km, k.km), append(qraw, raw);
  }

  EmuParams& ep = hs.params;
  ep.heads_q = H, ep.heads_kv = Hkv, ep.head_dim = D, ep.head_dim_v = Dv, ep.group = p.group();
  ep.mask = p.mask == Mask::none ? 0 : p.mask == Mask::causal_tl ? 1 : 2;
  ep.tile_kv = r.tile_kv;
  ep.logits = int8 ? EmuLogits::int8 : mxqk ? EmuLogits::mx : EmuLogits::fp32;
  ep.qk_block = qk_block;
  ep.vblock = vblock;
  ep.sm_scale = scale;
  ep.c = plan.q.prescale == Scheme::Prescale::sm_log2e ? 1.0f : static_cast<float>(static_cast<double>(static_cast<float>(scale)) * 0x1.71547652b82fep0);
  ep.off = r.pscale == PScale::offset_8807 ? 8.807f : r.pscale == PScale::pow2_8 ? 8.0f : 0.0f;
  ep.rescale_conditional = r.rescale == RescalePolicy::conditional;
  ep.neg_threshold = static_cast<float>(-r.rescale_threshold);
  ep.exp2_fa4 = r.exp2 == Exp2Policy::fa4;
  std::copy_n(exp2_cr_coefficients(), 16, ep.exp2c);
  ep.pv_block = 32;
  if (r.p_mx) {
    const Scheme& pm = *r.p_mx;
    ep.p = EmuP::mx;
    ep.p_fmt = format_spec(pm.element);
    ep.p_tie = pm.elem_round;
    ep.p_sat = pm.overflow;
    ep.p_e8m0 = pm.e8m0;
    ep.p_emax = std::ilogb(ep.p_fmt.max_finite);
    ep.pv_block = pm.block;
  } else {
    emu::Overflow sat = emu::Overflow::sat_cuda;
    ep.p = elem_rounding(r.p, ep.p_fmt, sat) ? EmuP::elem : EmuP::f32;
    ep.p_tie = emu::Rounding::rne;
    ep.p_sat = sat;
  }
  if (mxv) ep.pv_block = vblock;
  ep.div = r.div == DivisionOp::ieee_div ? EmuDiv::ieee_div : r.div == DivisionOp::ieee_rcp ? EmuDiv::ieee_rcp : EmuDiv::rcp_sm90;
  ep.vscale_rcp = r.vscale == VScaleAt::rcp;
  ep.out_round = elem_rounding(r.out, ep.out_fmt, ep.out_sat);
  ep.total_rows = rg ? p.cu_seqlens_q.back() : p.batch * p.seqlen_q;

  // Work items: (b, h, query tile of tile_q rows).
  std::vector<EmuItem>& items = hs.items;
  for (int64_t b = 0; b < p.batch; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t r0 = 0; r0 < p.len_q(b); r0 += r.tile_q) items.push_back({b, h, r0, std::min(p.len_q(b), r0 + r.tile_q)});
  ep.n_items = static_cast<int64_t>(items.size());
  ep.block_threads = static_cast<int>(std::min<int64_t>(r.tile_q, 128));
  return hs;
}

}  // namespace attest::gpu
